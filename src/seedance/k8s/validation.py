"""Offline validation of Kubernetes documents (no API server).

* Built-in kinds: ``kubernetes-validate`` (the Kubernetes OpenAPI schemas converted to JSON
  Schema, bundled for 1.25-1.37), strict mode, so unknown fields are errors.
* Seedance custom resources: JSON Schema (Draft 7) of the CRD's ``openAPIV3Schema``, since
  kubernetes-validate only warns "Couldn't find schema" for custom kinds. ``x-kubernetes-*``
  extensions (CEL rules included) are not evaluated.
* ``KubeSchedulerConfiguration`` (not an API object, so not in those schemas): a JSON Schema
  written from k8s.io/kube-scheduler/config/v1 types.go (kubernetes/kubernetes,
  staging/src/k8s.io/kube-scheduler/config/v1/types.go; unknown fields rejected, as the
  scheduler's strict decoding does) plus the extender checks of kube-scheduler's
  ``validateExtenders`` (positive weight with a prioritize verb, at most one binder, unique
  managed resources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seedance.k8s import keys
from seedance.k8s.crds import all_crds, crd_schema

DEFAULT_KUBE_VERSION = "1.32.0"
Obj = dict[str, Any]

_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
_LEADER_ELECTION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "leaderElect": {"type": "boolean"},
        "leaseDuration": _DURATION,
        "renewDeadline": _DURATION,
        "retryPeriod": _DURATION,
        "resourceLock": {"type": "string", "enum": ["leases", "endpointsleases", "configmapsleases"]},
        "resourceName": {"type": "string"},
        "resourceNamespace": {"type": "string"},
    },
}
_EXTENDER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["urlPrefix"],
    "properties": {
        "urlPrefix": {"type": "string", "pattern": r"^https?://[^\s/]+"},
        "filterVerb": {"type": "string"},
        "preemptVerb": {"type": "string"},
        "prioritizeVerb": {"type": "string"},
        "weight": {"type": "integer"},
        "bindVerb": {"type": "string"},
        "enableHTTPS": {"type": "boolean"},
        "tlsConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: {"type": "boolean" if k == "insecure" else "string"}
                           for k in ("insecure", "serverName", "certFile", "keyFile", "caFile",
                                     "certData", "keyData", "caData")},
        },
        "httpTimeout": _DURATION,
        "nodeCacheCapable": {"type": "boolean"},
        "managedResources": {
            "type": "array",
            "items": {"type": "object", "additionalProperties": False, "required": ["name"],
                      "properties": {"name": {"type": "string"}, "ignoredByScheduler": {"type": "boolean"}}},
        },
        "ignorable": {"type": "boolean"},
    },
}
#: JSON Schema of kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration (the fields Seedance uses
#: are typed in full; plugins and pluginConfig are left open).
SCHEDULER_CONFIG_SCHEMA: Obj = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind"],
    "properties": {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "parallelism": {"type": "integer", "minimum": 1},
        "leaderElection": _LEADER_ELECTION,
        "clientConnection": {"type": "object"},
        "enableProfiling": {"type": "boolean"},
        "enableContentionProfiling": {"type": "boolean"},
        "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
        "percentageOfPlacementsToScore": {"type": "integer", "minimum": 0, "maximum": 100},
        "podInitialBackoffSeconds": {"type": "integer", "minimum": 1},
        "podMaxBackoffSeconds": {"type": "integer", "minimum": 1},
        "profiles": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "schedulerName": {"type": "string", "minLength": 1},
                    "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
                    "percentageOfPlacementsToScore": {"type": "integer", "minimum": 0, "maximum": 100},
                    "plugins": {"type": "object"},
                    "pluginConfig": {"type": "array", "items": {"type": "object", "required": ["name"]}},
                },
            },
        },
        "extenders": {"type": "array", "items": _EXTENDER},
        "delayCacheUntilActive": {"type": "boolean"},
    },
}


def _schema_errors(schema: Mapping[str, Any], doc: Any) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def scheduler_config_errors(doc: Mapping[str, Any]) -> list[str]:
    """Problems of a KubeSchedulerConfiguration (empty list when valid)."""
    errors = _schema_errors(SCHEDULER_CONFIG_SCHEMA, doc)
    if errors:
        return errors
    names = [p.get("schedulerName", "default-scheduler") for p in doc.get("profiles") or []]
    if len(set(names)) != len(names):
        errors.append("profiles: duplicate schedulerName")
    binders = 0
    for i, ext in enumerate(doc.get("extenders") or []):
        if ext.get("prioritizeVerb") and ext.get("weight", 0) <= 0:
            errors.append(f"extenders.{i}.weight: must be positive when prioritizeVerb is set")
        if ext.get("bindVerb"):
            binders += 1
        resources = [r["name"] for r in ext.get("managedResources") or []]
        if len(set(resources)) != len(resources):
            errors.append(f"extenders.{i}.managedResources: duplicate names")
    if binders > 1:
        errors.append("extenders: only one extender can implement bind")
    return errors


def custom_resource_errors(doc: Mapping[str, Any], crds: Iterable[Mapping[str, Any]] | None = None) -> list[str]:
    """Problems of a Seedance custom resource against its CRD schema."""
    api_version = str(doc.get("apiVersion", ""))
    kind = doc.get("kind")
    for crd in crds if crds is not None else all_crds():
        spec = crd["spec"]
        if spec["names"]["kind"] != kind:
            continue
        for v in spec["versions"]:
            if api_version == f"{spec['group']}/{v['name']}":
                return _schema_errors(crd_schema(dict(crd), v["name"]), doc)
        return [f"apiVersion {api_version!r} is not served for {kind}"]
    return [f"no CRD defines kind {kind!r}"]


def object_errors(doc: Mapping[str, Any], kube_version: str = DEFAULT_KUBE_VERSION,
                  crds: Iterable[Mapping[str, Any]] | None = None) -> list[str]:
    """Problems of any document Seedance ships or creates (empty list when valid)."""
    import kubernetes_validate

    if not isinstance(doc, Mapping) or "apiVersion" not in doc or "kind" not in doc:
        return ["<root>: not a Kubernetes object (apiVersion and kind are required)"]
    if doc["kind"] == "KubeSchedulerConfiguration":
        return scheduler_config_errors(doc)
    if str(doc["apiVersion"]).split("/")[0] == keys.GROUP:
        return custom_resource_errors(doc, crds)
    try:
        kubernetes_validate.validate(dict(doc), kube_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path) or "<root>"  # only the first error is reported
        return [f"{path}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"no schema: {exc}"]
    if doc["kind"] == "ConfigMap":
        return _embedded_errors(doc, kube_version, crds)
    return []


def _embedded_errors(cm: Mapping[str, Any], kube_version: str,
                     crds: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """Kubernetes-style documents stored in a ConfigMap's data (e.g. a KubeSchedulerConfiguration)."""
    from seedance.core.errors import InputError
    from seedance.core.yamldoc import compose

    errors = []
    for key, text in (cm.get("data") or {}).items():
        if not isinstance(text, str):
            continue
        try:
            _, inner = compose(text, source=f"data.{key}", what="document", allow_empty=True)
        except InputError as exc:  # e.g. "data.config.yaml:3: not valid YAML: ..." (line inside the value)
            if str(key).endswith((".yaml", ".yml")):
                errors.append(str(exc))
            continue
        if isinstance(inner, Mapping) and "apiVersion" in inner and "kind" in inner:
            errors += [f"data.{key}: {e}" for e in object_errors(inner, kube_version, crds)]
    return errors


def render_chart(chart_dir: str | Path, values: Mapping[str, Any] | None = None, *, release: str = "seedance",
                 namespace: str = "seedance-system") -> list[tuple[str, Obj]]:
    """Render a Helm chart offline (helm-python-sdk) → ``(template path, document)`` pairs.

    The chart's values are checked against its ``values.schema.json`` first; ``crds/`` files are
    included (Helm installs them verbatim); ``NOTES.txt`` and empty documents are dropped.
    """
    from helm_python import chart as helm_chart

    from seedance.core.yamldoc import compose_all

    chart = helm_chart.Chart.load(str(chart_dir))
    chart.validate_schema(dict(values) if values is not None else None)
    rendered = chart.render(dict(values) if values is not None else None, name=release, namespace=namespace)
    out: list[tuple[str, Obj]] = []
    for crd in chart.crds:
        out += [(crd["name"], d) for _, d in compose_all(crd["data"], source=str(crd["name"])) if d]
    for path in sorted(rendered):
        if path.endswith((".yaml", ".yml")):
            out += [(path, d) for _, d in compose_all(rendered[path], source=path) if d]
    return out


def pod_fragment_errors(fragment: Mapping[str, Any], kube_version: str = DEFAULT_KUBE_VERSION) -> list[str]:
    """Problems of a Pod fragment (``{"metadata", "spec"}``), validated inside a minimal Pod."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fragment-check", **dict(fragment.get("metadata") or {})},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **dict(fragment.get("spec") or {})},
    }
    return object_errors(pod, kube_version)
