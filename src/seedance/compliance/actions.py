"""The cost actions a policy document may declare, and typed reads of the keys the rules share.

A policy lists its cost actions under ``actions`` (in ``spec`` or at the top level)::

    actions:
      - type: downgrade-cold-storage    # the whitepaper's "dynamic downgrade to cold storage"
        after_days: 30
      - type: delete-temp-nodes         # "automatic deletion of temporary compute nodes"
        idle_minutes: 15
        wipe: {method: gpu-memory-scrub, proof: sha256}

Each action type says whether it stores or moves data and whether it destroys nodes; the rules
decide from that which evidence the policy needs. Unknown types are bad input (a typo must not
turn a rule off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seedance.compliance.document import PolicyDocument
from seedance.core.errors import InputError


@dataclass(frozen=True, slots=True)
class ActionKind:
    """What a cost action does, as far as the rules care."""

    stores_data: bool
    deletes_nodes: bool
    summary: str


ACTION_KINDS: dict[str, ActionKind] = {
    "downgrade-cold-storage": ActionKind(True, False, "move data to a cheaper, colder storage class"),
    "offload-checkpoints": ActionKind(True, False, "move checkpoints to object storage"),
    "delete-temp-nodes": ActionKind(False, True, "delete idle temporary compute nodes"),
    "spot-migration": ActionKind(False, True, "move jobs to spot/preemptible nodes (reclaimed nodes are destroyed)"),
    "cpu-throttling": ActionKind(False, False, "lower CPU limits of low-priority work"),
    "mig-downsize": ActionKind(False, False, "give jobs a smaller MIG slice"),
    "lower-precision": ActionKind(False, False, "serve with a lower numeric precision"),
    "defer-flexible-jobs": ActionKind(False, False, "defer flexible jobs to cheaper hours"),
}


def actions(doc: PolicyDocument) -> list[tuple[int, dict[str, Any], ActionKind]]:
    """The document's actions with their index and kind (bad shapes are ``InputError``)."""
    raw = doc.get("actions")
    if raw is None:
        return []
    if not isinstance(raw, list):
        pos = doc.where("actions")
        raise InputError("must be a list of actions", source=doc.source, line=pos.line, field=doc.dotted("actions"))
    out = []
    for i, a in enumerate(raw):
        path = f"actions.{i}"
        if not isinstance(a, dict) or "type" not in a:
            pos = doc.where(path)
            raise InputError("each action is a mapping with a 'type'", source=doc.source, line=pos.line,
                             field=doc.dotted(path))
        kind = ACTION_KINDS.get(str(a["type"]))
        if kind is None:
            pos = doc.where(f"{path}.type")
            raise InputError(f"unknown action type {a['type']!r}; valid: {', '.join(ACTION_KINDS)}",
                             source=doc.source, line=pos.line, field=doc.dotted(f"{path}.type"))
        out.append((i, a, kind))
    return out


def touches_storage(doc: PolicyDocument) -> bool:
    """Whether the policy configures storage or has an action that stores or moves data."""
    return doc.has("storage") or any(k.stores_data for _, _, k in actions(doc))


def node_deleters(doc: PolicyDocument) -> list[str]:
    """Paths of what destroys nodes: node-deleting actions and an autoscaler that scales in by deletion."""
    out = [f"actions.{i}" for i, _, k in actions(doc) if k.deletes_nodes]
    if doc.get("autoscale.scale_in") == "delete-nodes":
        out.append("autoscale")
    return out


def number(doc: PolicyDocument, path: str, *, integer: bool = False, minimum: float | None = None) -> float | None:
    """The number at ``path`` (``None`` when absent); other types are ``InputError`` at that key."""
    if not doc.has(path):
        return None
    v = doc.get(path)
    ok = isinstance(v, int) if integer else isinstance(v, int | float)
    if isinstance(v, bool) or not ok or (minimum is not None and v < minimum):
        pos = doc.where(path)
        what = "an integer" if integer else "a number"
        bound = f" >= {minimum:g}" if minimum is not None else ""
        raise InputError(f"must be {what}{bound}, got {v!r}", source=doc.source, line=pos.line,
                         field=doc.dotted(path))
    return float(v)


def mapping(doc: PolicyDocument, path: str) -> dict[str, Any] | None:
    """The mapping at ``path`` (``None`` when absent); other types are ``InputError``."""
    if not doc.has(path):
        return None
    v = doc.get(path)
    if not isinstance(v, dict):
        pos = doc.where(path)
        raise InputError("must be a mapping", source=doc.source, line=pos.line, field=doc.dotted(path))
    return v


def boolean(doc: PolicyDocument, path: str) -> bool | None:
    """The boolean at ``path`` (``None`` when absent); other types are ``InputError``."""
    if not doc.has(path):
        return None
    v = doc.get(path)
    if not isinstance(v, bool):
        pos = doc.where(path)
        raise InputError(f"must be true or false, got {v!r}", source=doc.source, line=pos.line,
                         field=doc.dotted(path))
    return v
