"""TrainingJob reconciliation on real object documents, and the kopf handlers called directly."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from seedance.core.catalog import CATALOG, PriceBook
from seedance.core.errors import InputError
from seedance.k8s.affinity import pod_fits_node
from seedance.k8s.controller import configure, pod_event, reconcile_trainingjob, register
from seedance.k8s.extender import Extender
from seedance.k8s.objects import pod_info
from seedance.k8s.trainingjob import (
    CostInputs,
    OperatorSettings,
    cost_inputs,
    costmodel_cost_score,
    desired_pods,
    job_status,
    label_value,
    list_price_cost_score,
)
from seedance.k8s.validation import object_errors
from seedance.scheduling import make_policy
from tests.k8s.k8s_docs import DEPLOY, make_node

EXAMPLES = DEPLOY / "examples"
log = logging.getLogger("test-operator")


def examples(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(Path(EXAMPLES / name).read_text()) if d]


def gold_job() -> dict[str, Any]:
    job = copy.deepcopy(examples("trainingjob.yaml")[0])
    job["metadata"].update(uid="0e9d-gold", generation=3)
    return job


def bronze_job() -> dict[str, Any]:
    job = copy.deepcopy(examples("trainingjob.yaml")[1])
    job["metadata"].update(uid="0e9d-bronze", generation=1)
    return job


POLICY = examples("costpolicy.yaml")[0]


def test_gold_job_renders_two_exclusive_pods() -> None:
    pods = desired_pods(gold_job(), {"env": "prod", "team": "ignored"}, OperatorSettings(), POLICY)
    assert [p["metadata"]["name"] for p in pods] == ["llama3-8b-finetune-0", "llama3-8b-finetune-1"]
    usd = 2 * 4 * 6 * PriceBook().usd_per_gpu_hour("A100-80GB")  # replicas x GPUs x hours x $/GPU-h, w_price 1
    for i, pod in enumerate(pods):
        assert object_errors(pod) == []
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["labels"] == {
            "app": "llama3-finetune", "team": "risk-models", "seedance.ai/job": "llama3-8b-finetune",
            "seedance.ai/replica-index": str(i), "cost.seedance.ai/team": "risk-models",
            "cost.seedance.ai/env": "prod", "seedance.ai/tier": "gold"}
        assert meta["annotations"] == {"seedance.ai/cost_score": f"{usd:.4f}", "seedance.ai/gpu-types": "A100-80GB"}
        assert meta["ownerReferences"] == [{"apiVersion": "seedance.ai/v1alpha1", "kind": "TrainingJob",
                                            "name": "llama3-8b-finetune", "uid": "0e9d-gold", "controller": True,
                                            "blockOwnerDeletion": True}]
        assert spec["schedulerName"] == "seedance-scheduler"
        assert spec["priorityClassName"] == "seedance-gold"
        assert spec["restartPolicy"] == "Never"
        assert spec["containers"][0]["resources"] == {"requests": {"cpu": "16", "memory": "128Gi"},
                                                       "limits": {"nvidia.com/gpu": "4"}}
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"] == [{"matchExpressions": [
                {"key": "gpu.sla.level", "operator": "In", "values": ["gold"]},
                {"key": "gpu.mode", "operator": "In", "values": ["exclusive"]}]}]
        assert pod_fits_node(spec, {"gpu.sla.level": "gold", "gpu.mode": "exclusive"})
        assert not pod_fits_node(spec, {"gpu.sla.level": "gold", "gpu.mode": "shared"})
        info = pod_info(pod)  # what the extender will read from it
        assert (info.tier, info.request.num_gpu, info.request.gpu_milli, info.request.gpu_types) == (
            "gold", 4, 1000, ("A100-80GB",))


def test_bronze_share_job_renders_the_share_annotation_and_borrowing() -> None:
    pods = desired_pods(bronze_job(), {})
    assert len(pods) == 1
    pod = pods[0]
    assert object_errors(pod) == []
    assert pod["metadata"]["annotations"]["seedance.ai/gpu-milli"] == "250"
    assert pod["metadata"]["annotations"]["seedance.ai/borrow"] == "true"
    assert "limits" not in pod["spec"]["containers"][0]["resources"]  # kube-scheduler must not count a device
    assert pod["metadata"]["labels"]["cost.seedance.ai/team"] == "unassigned"
    assert pod["metadata"]["labels"]["cost.seedance.ai/env"] == "unassigned"
    cheapest = min(m.price_usd_per_hour for m in CATALOG.values() if not m.undisclosed)  # no type constraint
    assert float(pod["metadata"]["annotations"]["seedance.ai/cost_score"]) == pytest.approx(
        0.25 * 0.5 * cheapest, abs=1e-4)
    # the extender admits it on its own bronze pool first, and borrows gold/silver nodes only when
    # no bronze candidate has room (the profile's stage order, as in the simulator)
    ext = Extender(make_policy("best-fit"))
    ext.set_nodes([make_node("b", labels={"gpu.sla.level": "bronze"}), make_node("g", labels={"gpu.sla.level": "gold"}),
                   make_node("x", labels={"gpu.sla.level": "none"})])
    assert ext.filter({"Pod": pod, "NodeNames": ["b", "g", "x"]})["NodeNames"] == ["b"]
    assert ext.filter({"Pod": pod, "NodeNames": ["g", "x"]})["NodeNames"] == ["g"]
    assert pod_info(pod).request.gpu_milli == 250


def test_gold_share_takes_a_whole_gpu() -> None:
    job = gold_job()
    job["spec"]["gpu"] = {"count": 1, "milli": 250}
    pod = desired_pods(job, {})[0]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "seedance.ai/gpu-milli" not in pod["metadata"]["annotations"]
    assert cost_inputs(job).gpus_per_replica == 1.0


def test_template_gpu_limit_is_kept_and_cost_score_is_injectable() -> None:
    job = gold_job()
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "2"}
    seen: list[CostInputs] = []

    def score(inp: CostInputs) -> float:
        seen.append(inp)
        return 42.0

    pod = desired_pods(job, {"env": "dev"}, OperatorSettings(cost_score=score), POLICY)[0]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod["metadata"]["annotations"]["seedance.ai/cost_score"] == "42.0000"
    assert seen[0] == CostInputs(tier="gold", replicas=2, gpus_per_replica=4.0, gpu_types=("A100-80GB",),
                                 duration_h=6.0, weights={"price": 1.0, "carbon": 0.5, "delay": 0.1},
                                 region="DE", deadline="2026-12-01T06:00:00Z")


def test_fallback_cost_score_uses_only_the_price_weight() -> None:
    inp = CostInputs(tier="bronze", replicas=3, gpus_per_replica=2.0, gpu_types=("T4", "H100-80GB"),
                     duration_h=10.0, weights={"price": 2.0, "carbon": 100.0, "delay": 100.0})
    assert list_price_cost_score(inp) == round(2.0 * 3 * 2 * 10 * PriceBook().usd_per_gpu_hour("T4"), 4)
    assert list_price_cost_score(inp, PriceBook(overrides={"T4": 0.1})) == 12.0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(gpu={"count": 2, "milli": 500}), "a GPU share (500 milli) is of one GPU, not 2"),
        (lambda s: s.update(gpu={"count": 1, "types": ["Voodoo5"]}), "unknown GPU model 'Voodoo5'"),
        (lambda s: s["template"]["spec"].update(containers=[]), "spec.template.spec.containers is empty"),
    ],
)
def test_bad_specs_raise_input_error(edit: Any, message: str) -> None:
    job = gold_job()
    edit(job["spec"])
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        desired_pods(job, {})


def test_label_values_are_always_valid() -> None:
    long = "x" * 80
    assert len(label_value(long)) == 63 and label_value(long) == label_value(long)
    assert label_value("team/ml platform") == "team-ml-platform"
    assert label_value("___") == "unassigned"


def _pod(name: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        ([], "Pending"),
        (["Pending", "Running"], "Running"),
        (["Succeeded", "Running"], "Running"),
        (["Succeeded", "Succeeded"], "Succeeded"),
        (["Succeeded", "Failed"], "Failed"),
    ],
)
def test_job_phase(phases: list[str], expected: str) -> None:
    status = job_status(gold_job(), [_pod(f"p{i}", ph) for i, ph in enumerate(phases)])
    assert status["phase"] == expected
    assert status["replicas"] == 2 and status["observedGeneration"] == 3


class FakeApi:
    """The operator's API surface, in memory."""

    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, str]] = {"ml-platform": {"env": "prod"}}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.policies = {"peak-aware": POLICY}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.status_patches: list[tuple[str, str, dict[str, Any]]] = []

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        return dict(self.namespaces.get(namespace, {}))

    def list_job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for (ns, _), p in sorted(self.pods.items())
                if ns == namespace and p["metadata"]["labels"].get("seedance.ai/job") == job]

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        key = (namespace, pod["metadata"]["name"])
        if key in self.pods:
            return False
        self.pods[key] = {**copy.deepcopy(pod), "status": {"phase": "Pending"}}
        return True

    def get_cost_policy(self, name: str) -> dict[str, Any] | None:
        return self.policies.get(name)

    def get_trainingjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.jobs.get((namespace, name))

    def patch_trainingjob_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.status_patches.append((namespace, name, status))


def _call(job: dict[str, Any], api: FakeApi) -> tuple[dict[str, Any], kopf.Patch]:
    patch = kopf.Patch()
    out = reconcile_trainingjob(body=job, spec=job["spec"], meta=job["metadata"], status=job.get("status", {}),
                                namespace=job["metadata"]["namespace"], name=job["metadata"]["name"],
                                memo=kopf.Memo(api=api, settings=OperatorSettings()), patch=patch, logger=log,
                                diff=(), old=None, new=None, reason="create", retry=0)
    return out, patch


def test_reconcile_creates_missing_pods_and_writes_status() -> None:
    api = FakeApi()
    job = gold_job()
    status, patch = _call(job, api)
    assert sorted(api.pods) == [("ml-platform", "llama3-8b-finetune-0"), ("ml-platform", "llama3-8b-finetune-1")]
    usd = round(48 * PriceBook().usd_per_gpu_hour("A100-80GB"), 4)
    assert patch["status"] == status == {
        "phase": "Pending", "replicas": 2, "running": 0, "succeeded": 0, "failed": 0,
        "pods": ["llama3-8b-finetune-0", "llama3-8b-finetune-1"], "costScore": usd,
        "costTags": {"team": "risk-models", "env": "prod"}, "message": "0/2 running", "observedGeneration": 3}
    # a second pass creates nothing; a deleted pod is recreated
    _call(job, api)
    assert len(api.pods) == 2
    del api.pods[("ml-platform", "llama3-8b-finetune-1")]
    _call(job, api)
    assert len(api.pods) == 2


def test_finished_jobs_get_no_new_pods() -> None:
    api = FakeApi()
    job = gold_job()
    _call(job, api)
    api.pods[("ml-platform", "llama3-8b-finetune-0")]["status"]["phase"] = "Failed"
    del api.pods[("ml-platform", "llama3-8b-finetune-1")]
    status, _ = _call(job, api)
    assert status["phase"] == "Failed" and len(api.pods) == 1


def test_bad_spec_is_a_permanent_error() -> None:
    job = gold_job()
    job["spec"]["gpu"] = {"count": 3, "milli": 100}
    with pytest.raises(kopf.PermanentError, match="is of one GPU, not 3"):
        _call(job, FakeApi())


def test_missing_cost_policy_falls_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.policies = {}
    with caplog.at_level(logging.WARNING, logger="test-operator"):
        status, _ = _call(gold_job(), api)
    assert "CostPolicy peak-aware not found" in caplog.text
    assert status["costScore"] == round(48 * PriceBook().usd_per_gpu_hour("A100-80GB"), 4)


def test_pod_events_update_the_owner_status() -> None:
    api = FakeApi()
    job = gold_job()
    _call(job, api)
    api.jobs[("ml-platform", "llama3-8b-finetune")] = {**job, "status": {"costScore": 1.5,
                                                                       "costTags": {"team": "t", "env": "e"}}}
    for pod in api.pods.values():
        pod["status"]["phase"] = "Running"
    pod = api.pods[("ml-platform", "llama3-8b-finetune-0")]
    pod_event(body=pod, namespace="ml-platform", memo=kopf.Memo(api=api), event={"type": "MODIFIED"}, logger=log)
    ns, name, status = api.status_patches[-1]
    assert (ns, name, status["phase"], status["running"], status["costScore"]) == (
        "ml-platform", "llama3-8b-finetune", "Running", 2, 1.5)
    orphan = {"metadata": {"name": "x", "labels": {"seedance.ai/job": "x"}}}
    pod_event(body=orphan, namespace="ml-platform", memo=kopf.Memo(api=api), event={"type": "ADDED"}, logger=log)
    assert len(api.status_patches) == 1  # no TrainingJob owner: nothing to do


def test_handlers_register_into_an_explicit_registry() -> None:
    registry = register(kopf.OperatorRegistry())
    changing = [(h.id, h.reason) for h in registry._changing.get_all_handlers()]
    assert ("reconcile", kopf.Reason.CREATE) in changing
    assert ("reconcile/spec", kopf.Reason.UPDATE) in changing
    assert [h.id for h in registry._spawning.get_all_handlers()] == ["resync"]
    assert [h.id for h in registry._watching.get_all_handlers()] == ["pod_event"]
    assert [h.id for h in registry._activities.get_all_handlers()] == ["configure"]
    assert kopf.get_default_registry() is not registry


def test_configure_keeps_kopf_state_in_annotations() -> None:
    settings = kopf.OperatorSettings()
    configure(settings=settings)
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert settings.persistence.progress_storage.prefix == "seedance.ai"
    assert settings.posting.level == logging.WARNING


def test_costmodel_backed_cost_score() -> None:
    from seedance.costmodel import EnergyModel, Signals

    now = 1_700_000_000 - 1_700_000_000 % 3600
    signals = Signals.constant(now, 48, price=100.0, carbon=400.0)  # 100 USD/MWh, flat
    score = costmodel_cost_score(lambda: signals, clock=lambda: float(now))
    inp = cost_inputs(gold_job(), POLICY)  # gold: not deferrable, so the score of starting now
    mwh = EnergyModel().job_power_kw("A100-80GB", 8) * 6 / 1000  # 2 replicas x 4 GPUs for 6 h
    assert score(inp) == round(1.0 * 100.0 * mwh, 4)  # w_price x energy cost; no carbon shadow price set
    pod = desired_pods(gold_job(), {}, OperatorSettings(cost_score=score), POLICY)[0]
    assert pod["metadata"]["annotations"]["seedance.ai/cost_score"] == f"{score(inp):.4f}"
    cpu_only = gold_job()
    cpu_only["spec"]["gpu"] = {"count": 0}
    assert score(cost_inputs(cpu_only)) == 0.0
