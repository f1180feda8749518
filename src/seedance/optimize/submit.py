"""A chosen deployment as an InferenceService for the control plane.

The control plane models an InferenceService as a job of kind ``InferenceService`` (one placement:
``gpus`` GPUs of the acceptable ``gpu_types``, in a tier), created from a manifest through the same
client the ``submit -f`` command uses. The deployment's model, precision, batch size, compile mode and
SLO travel as labels (``seedance.io/...``), the shape the Kubernetes InferenceService CRD's
``model`` / ``slo`` fields carry.
"""

from __future__ import annotations

import re
from typing import Any

from seedance.core.errors import InputError

PICKS = ("cheapest", "fastest", "accurate")
_LABEL = re.compile(r"[^A-Za-z0-9_.-]")


def pick(front: list[dict[str, Any]], how: str) -> dict[str, Any]:
    """The front point a rule chooses: lowest cost, lowest p95, or highest accuracy (ties by cost)."""
    if how not in PICKS:
        raise InputError(f"unknown pick {how!r}; valid: {', '.join(PICKS)}", source="--pick")
    if not front:
        raise InputError("the front is empty", source="--pick")
    if how == "cheapest":
        return min(front, key=lambda c: (c["cost"], c["p95_ms"], -c["accuracy"]))
    if how == "fastest":
        return min(front, key=lambda c: (c["p95_ms"], c["cost"], -c["accuracy"]))
    return min(front, key=lambda c: (-c["accuracy"], c["cost"], c["p95_ms"]))


def _value(v: object) -> str:
    return _LABEL.sub("-", str(v))[:63].strip("-._") or "x"


def _dns(v: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", v.lower()))[:63].strip("-") or "inference"


def inference_manifest(family: str, point: dict[str, Any], *, name: str | None, cluster: str, tier: str,
                       slo_ms: float | None) -> Any:
    """The validated InferenceService manifest of ``point`` (a :class:`~seedance.control.manifest.Manifest`)."""
    from seedance.control.manifest import load_manifests

    labels = {"seedance.io/family": _value(family), "seedance.io/model": _value(point["variant"]),
              "seedance.io/precision": _value(point["precision"]), "seedance.io/batch": _value(point["batch"]),
              "seedance.io/mode": _value(point["mode"])}
    if slo_ms is not None:
        labels["seedance.io/slo-p95-ms"] = _value(f"{slo_ms:g}")
    import yaml

    doc = {"apiVersion": "seedance/v1", "kind": "InferenceService",
           "metadata": {"name": name or _dns(f"{point['variant']}-{point['precision']}"), "labels": labels},
           "spec": {"cluster": cluster, "tier": tier, "gpus": int(point["count"]), "gpu_types": [point["gpu"]],
                    "cpu_milli": 4000, "memory_mib": 16384}}
    return load_manifests(yaml.safe_dump(doc, sort_keys=False), source="optimize --submit")[0]
