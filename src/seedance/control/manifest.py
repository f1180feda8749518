"""Manifests for ``seedancectl submit -f``: YAML documents in the Kubernetes shape.

Each document has a ``kind``; ``metadata.name`` and ``metadata.labels`` map to the object's name
and labels, ``spec`` holds the same fields as the REST API's create models::

    apiVersion: seedance/v1
    kind: TrainingJob            # or InferenceService, Cluster, Node, SchedulingPolicy
    metadata: {name: llama-ft, labels: {team: nlp}}
    spec: {cluster: default, tier: silver, gpus: 4, gpu_types: [A100-80GB], duration_hours: 12}

A ``Cluster`` document lists its nodes under ``spec.nodes``; a ``SchedulingPolicy`` document is
stored verbatim as the policy's YAML. Errors name the file, the document and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from seedance.control.policydoc import MAX_YAML_BYTES
from seedance.control.schemas import ClusterCreate, JobCreate, NodeCreate, PolicyCreate
from seedance.control.yamlguard import check_yaml_shape
from seedance.core import yamldoc
from seedance.core.errors import InputError

JOB_KINDS = ("TrainingJob", "InferenceService")
KINDS = (*JOB_KINDS, "Cluster", "Node", "SchedulingPolicy")
MAX_MANIFEST_BYTES = 4 * MAX_YAML_BYTES * 32


@dataclass(frozen=True, slots=True)
class Manifest:
    """One validated document."""

    kind: str
    name: str | None
    payload: BaseModel
    nodes: tuple[NodeCreate, ...] = ()
    cluster: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_manifests(text: str, *, source: str) -> list[Manifest]:
    """Parse and validate every document of a manifest file."""
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise InputError(f"file larger than {MAX_MANIFEST_BYTES} bytes", source=source)
    check_yaml_shape(text, source=source)
    out = [_one(doc, source=source, line=node.start_mark.line + 1, text=text)
           for node, doc in yamldoc.compose_all(text, source=source) if doc is not None]
    if not out:
        raise InputError("no documents", source=source)
    return out


def _one(doc: Any, *, source: str, line: int, text: str) -> Manifest:
    if not isinstance(doc, dict):
        raise InputError("a document must be a mapping", source=source, line=line)
    kind = doc.get("kind", "TrainingJob" if "spec" not in doc and "kind" not in doc else None)
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}", source=source, line=line,
                         field="kind")
    meta = doc.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InputError("metadata must be a mapping", source=source, line=line, field="metadata")
    spec = doc.get("spec", {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")})
    if not isinstance(spec, dict):
        raise InputError("spec must be a mapping", source=source, line=line, field="spec")
    spec = dict(spec)
    name = meta.get("name", spec.pop("name", None))
    if kind in JOB_KINDS:
        body = {**spec, "kind": kind}
        if name is not None:
            body["name"] = name
        if "labels" in meta:
            body["labels"] = meta["labels"]
        return Manifest(kind, name, _validate(JobCreate, body, source, line))
    if kind == "Cluster":
        nodes_raw = spec.pop("nodes", []) or []
        if not isinstance(nodes_raw, list):
            raise InputError("spec.nodes must be a list", source=source, line=line, field="spec.nodes")
        cluster = _validate(ClusterCreate, {"name": name, **spec}, source, line)
        nodes = tuple(_validate(NodeCreate, n, source, line, prefix=f"spec.nodes[{i}].")
                      for i, n in enumerate(nodes_raw))
        return Manifest(kind, name, cluster, nodes=nodes)
    if kind == "Node":
        cluster_name = spec.pop("cluster", "default")
        body = {"name": name, **spec}
        if "labels" in meta:
            body["labels"] = meta["labels"]
        return Manifest(kind, name, _validate(NodeCreate, body, source, line), cluster=str(cluster_name))
    # SchedulingPolicy: the document itself is the policy's YAML
    body = {"name": name, "config_yaml": yaml.safe_dump(doc, sort_keys=False)}
    for key in ("cluster", "placement", "plugin", "region", "enabled"):
        if key in spec:
            body[key] = spec[key]
    if "queueOrder" in spec or "queue_order" in spec:
        body["queue_order"] = spec.get("queueOrder", spec.get("queue_order"))
    return Manifest(kind, name, _validate(PolicyCreate, body, source, line))


def _validate(model: type[BaseModel], body: Any, source: str, line: int, prefix: str = "spec.") -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(err["msg"], source=source, line=line, field=f"{prefix}{loc}" if loc else None) from None
