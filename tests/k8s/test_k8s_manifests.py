"""Every shipped manifest and the rendered Helm chart validate offline against the Kubernetes schemas."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from seedance.cli.main import main
from seedance.k8s import keys
from seedance.k8s.crds import all_crds, crd_schema
from seedance.k8s.manifests import HELM_ONLY_LABELS, DeploySettings, deploy_files, scheduler_configuration
from seedance.k8s.validation import custom_resource_errors, object_errors, render_chart, scheduler_config_errors
from seedance.scheduling import PLACEMENT_POLICIES
from tests.k8s.k8s_docs import DEPLOY

CHART = DEPLOY / "helm" / "seedance"


def _shipped_documents() -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if CHART in path.parents:
            continue
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d):
            out.append((str(path.relative_to(DEPLOY)), i, doc))
    return out


SHIPPED = _shipped_documents()


def test_every_shipped_file_is_covered() -> None:
    files = {f for f, _, _ in SHIPPED}
    assert {"crds/seedance.ai_trainingjobs.yaml", "manifests/10-extender.yaml", "manifests/20-scheduler.yaml",
            "manifests/30-operator.yaml", "scheduler-config.yaml", "examples/trainingjob.yaml",
            "examples/costpolicy.yaml", "examples/inferenceservice.yaml", "examples/nodes.yaml"} <= files
    assert len(SHIPPED) >= 30


@pytest.mark.parametrize(("path", "index", "doc"), SHIPPED, ids=[f"{p}#{i}" for p, i, _ in SHIPPED])
def test_shipped_document_validates(path: str, index: int, doc: dict[str, Any]) -> None:
    assert object_errors(doc) == []


@pytest.mark.parametrize("kube_version", ["1.25.0", "1.29.0", "1.37.0"])
def test_plain_manifests_validate_across_kubernetes_versions(kube_version: str) -> None:
    for path, _, doc in SHIPPED:
        if path.startswith(("manifests/", "crds/")):
            assert object_errors(doc, kube_version) == [], path


def test_deploy_is_up_to_date_with_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "render", "--check", "--out", str(DEPLOY)]) == 0


def test_render_check_detects_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "render", "--out", str(tmp_path)]) == 0
    assert main(["k8s", "render", "--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "manifests" / "10-extender.yaml").write_text("# edited by hand\n")
    assert main(["k8s", "render", "--check", "--out", str(tmp_path)]) == 1
    assert "10-extender.yaml" in capsys.readouterr().err


# ---------------------------------------------------------------- Helm chart

RENDERED = render_chart(CHART)


@pytest.mark.parametrize(("template", "doc"), RENDERED, ids=[f"{t}:{d['kind']}/{d['metadata']['name']}"
                                                             for t, d in RENDERED])
def test_rendered_chart_document_validates(template: str, doc: dict[str, Any]) -> None:
    assert object_errors(doc) == []


def test_chart_lints_clean() -> None:
    from helm_python import chart as helm_chart

    report = helm_chart.lint(str(CHART), kube_version="v1.32.0", strict=True)
    assert report["errors"] == []
    assert all(m["severity"] <= 1 for m in report["messages"])  # INFO at most ("icon is recommended")


def _key(doc: dict[str, Any]) -> tuple[str, str | None, str]:
    return doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"]


def _normalise(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    metas = [doc["metadata"], ((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}]
    for meta in metas:
        for label in HELM_ONLY_LABELS:
            (meta.get("labels") or {}).pop(label, None)
    if doc["kind"] == "ConfigMap":
        doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
    return doc


def test_chart_renders_exactly_the_plain_manifests() -> None:
    helm = {_key(d): _normalise(d) for t, d in RENDERED if not t.startswith("crds/")}
    plain = {_key(d): _normalise(d) for rel, docs in deploy_files().items() if rel.startswith("manifests/")
             for d in docs if d["kind"] != "Namespace"}
    assert set(helm) == set(plain)
    for key, doc in plain.items():
        assert helm[key] == doc, key
    crds = [d for t, d in RENDERED if t.startswith("crds/")]
    assert sorted(crds, key=_key) == sorted(all_crds(), key=_key)
    assert all(_key(d) in helm for d in (d for t, d in RENDERED if t.endswith("priorityclasses.yaml")))


def test_chart_with_other_values_still_validates() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["extender"].update(policy="packing", port=9443, weight=3, nodeCacheCapable=False)
    values["scheduler"]["name"] = "gpu-scheduler"
    values["operator"]["enabled"] = False
    docs = render_chart(CHART, values, release="prod", namespace="gpu")
    assert all(object_errors(d) == [] for _, d in docs)
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in docs}
    assert ("Deployment", "prod-operator") not in kinds and ("Deployment", "prod-extender") in kinds
    cm = next(d for _, d in docs if d["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    assert cfg == scheduler_configuration(DeploySettings(release="prod", namespace="gpu", port=9443, weight=3,
                                                         node_cache_capable=False, scheduler_name="gpu-scheduler"))
    assert cfg["extenders"][0]["urlPrefix"] == "http://prod-extender.gpu.svc:9443"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extender": {"port": "http"}}, "port"),
        ({"extender": {"policy": "Best Fit"}}, "policy"),
        ({"extender": {"weight": 0}}, "weight"),
        ({"scheduler": {"name": "Bad_Name"}}, "name"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_values_schema_rejects_bad_values(change: dict[str, Any], message: str) -> None:
    from helm_python import chart as helm_chart
    from helm_python.errors import HelmError

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for section, patch in change.items():
        if isinstance(patch, dict):
            values[section].update(patch)
        else:
            values[section] = patch
    with pytest.raises(HelmError, match=message):
        helm_chart.Chart.load(str(CHART)).validate_schema(values)


def test_default_policy_is_registered() -> None:
    import seedance.scheduling.policies  # noqa: F401

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["extender"]["policy"] in PLACEMENT_POLICIES
    assert DeploySettings().policy == values["extender"]["policy"]


# ---------------------------------------------------------------- CRDs


def _structural_problems(schema: dict[str, Any], path: str = "", in_junctor: bool = False) -> list[str]:
    """The structural-schema rules of apiextensions (k8s docs, "Specifying a structural schema")."""
    problems = []
    if in_junctor:
        for banned in ("type", "default", "description", "additionalProperties", "nullable"):
            if banned in schema:
                problems.append(f"{path}: {banned} inside a logical junctor")
    elif "type" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields") \
            and not schema.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: no type")
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(schema.get(junctor) or []):
            problems += _structural_problems(sub, f"{path}.{junctor}[{i}]", True)
            for prop in (sub.get("properties") or {}):
                if prop not in (schema.get("properties") or {}):
                    problems.append(f"{path}.{junctor}[{i}]: property {prop} not specified outside")
    for name, sub in (schema.get("properties") or {}).items():
        problems += _structural_problems(sub, f"{path}.{name}", in_junctor)
    if isinstance(schema.get("items"), dict):
        problems += _structural_problems(schema["items"], f"{path}[]", in_junctor)
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _structural_problems(schema["additionalProperties"], f"{path}{{}}", in_junctor)
    return problems


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["metadata"]["name"])
def test_crd_schemas_are_structural(crd: dict[str, Any]) -> None:
    assert _structural_problems(crd_schema(crd)) == []
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{keys.GROUP}"


def test_structural_checker_catches_violations() -> None:
    bad = {"type": "object", "properties": {"a": {"properties": {}}, "b": {"type": "integer"}},
           "anyOf": [{"type": "object", "properties": {"c": {"minimum": 1}}}]}
    assert _structural_problems(bad) == [
        ".anyOf[0]: type inside a logical junctor",
        ".anyOf[0]: property c not specified outside",
        ".a: no type",
    ]


def _example(kind: str) -> dict[str, Any]:
    for path, _, doc in SHIPPED:
        if path.startswith("examples/") and doc.get("kind") == kind:
            return copy.deepcopy(doc)
    raise KeyError(kind)


@pytest.mark.parametrize(
    ("kind", "edit", "message"),
    [
        ("TrainingJob", lambda d: d["spec"].update(tier="platinum"), "'platinum' is not one of"),
        ("TrainingJob", lambda d: d["spec"].update(replicas=0), "0 is less than the minimum of 1"),
        ("TrainingJob", lambda d: d["spec"]["gpu"].update(count=2, milli=250), "is not valid under any"),
        ("TrainingJob", lambda d: d["spec"].pop("template"), "'template' is a required property"),
        ("TrainingJob", lambda d: d["spec"]["template"]["spec"].update(containers=[]), "should be non-empty"),
        ("TrainingJob", lambda d: d["spec"].update(costPolicy="Peak_Aware"), "does not match"),
        ("InferenceService", lambda d: d["spec"].pop("model"), "'model' is a required property"),
        ("CostPolicy", lambda d: d["spec"]["weights"].update(carbon=-1), "-1 is less than the minimum of 0"),
        ("CostPolicy", lambda d: d["spec"].update(deferrableTiers=["gold", "tin"]), "'tin' is not one of"),
    ],
)
def test_invalid_custom_resources_are_rejected(kind: str, edit: Any, message: str) -> None:
    doc = _example(kind)
    assert custom_resource_errors(doc) == []
    edit(doc)
    errors = custom_resource_errors(doc)
    assert len(errors) == 1 and message in errors[0], errors


def test_unknown_custom_kind_or_version() -> None:
    assert custom_resource_errors({"apiVersion": "seedance.ai/v1alpha1", "kind": "GpuPool"}) == [
        "no CRD defines kind 'GpuPool'"]
    assert custom_resource_errors({"apiVersion": "seedance.ai/v9", "kind": "CostPolicy"}) == [
        "apiVersion 'seedance.ai/v9' is not served for CostPolicy"]


# ---------------------------------------------------------------- KubeSchedulerConfiguration


def test_scheduler_configuration_wires_the_extender() -> None:
    cfg = scheduler_configuration()
    assert scheduler_config_errors(cfg) == []
    ext = cfg["extenders"][0]
    assert ext == {"urlPrefix": "http://seedance-extender.seedance-system.svc:8888", "filterVerb": "filter",
                   "prioritizeVerb": "prioritize", "bindVerb": "bind", "weight": 5, "enableHTTPS": False,
                   "nodeCacheCapable": True, "httpTimeout": "5s", "ignorable": False}
    assert cfg["profiles"] == [{"schedulerName": "seedance-scheduler", "percentageOfNodesToScore": 100}]
    shipped = yaml.safe_load((DEPLOY / "scheduler-config.yaml").read_text())
    assert shipped == cfg


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["extenders"][0].update(urlprefix="x"), "'urlprefix' was unexpected"),
        (lambda c: c["extenders"][0].update(weight=0), "weight: must be positive when prioritizeVerb is set"),
        (lambda c: c["extenders"].append(dict(c["extenders"][0])), "only one extender can implement bind"),
        (lambda c: c["extenders"][0].update(httpTimeout="5 seconds"), "does not match"),
        (lambda c: c.update(apiVersion="kubescheduler.config.k8s.io/v1beta3"), "was expected"),
        (lambda c: c["profiles"].append({"schedulerName": "seedance-scheduler"}), "duplicate schedulerName"),
    ],
)
def test_bad_scheduler_configurations_are_rejected(edit: Any, message: str) -> None:
    cfg = scheduler_configuration()
    edit(cfg)
    errors = scheduler_config_errors(cfg)
    assert any(message in e for e in errors), errors


def test_configmap_with_a_broken_embedded_configuration_is_rejected() -> None:
    cm = next(d for rel, docs in deploy_files().items() if rel == "manifests/20-scheduler.yaml"
              for d in docs if d["kind"] == "ConfigMap")
    assert object_errors(cm) == []
    cfg = scheduler_configuration()
    cfg["extenders"][0]["weight"] = -1
    cm["data"]["scheduler-config.yaml"] = yaml.safe_dump(cfg)
    assert object_errors(cm) == [
        "data.scheduler-config.yaml: extenders.0.weight: must be positive when prioritizeVerb is set"]


def test_configmap_with_unparsable_embedded_yaml_names_the_key_and_line() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
          "data": {"scheduler-config.yaml": "apiVersion: x\nkind: [1\n", "notes.txt": "a: [b"}}
    # the line is inside the value; a non-YAML key (notes.txt) is not parsed as a configuration
    assert object_errors(cm) == [
        "data.scheduler-config.yaml:3: not valid YAML: expected ',' or ']', but got '<stream end>'"]
