"""Evaluate a Pod's node constraints against a node's labels, as kube-scheduler's NodeAffinity does.

Semantics (k8s.io/component-helpers/scheduling/corev1/nodeaffinity and the API reference of
``NodeSelectorRequirement``):

* ``nodeSelectorTerms`` are ORed; the requirements inside one term (``matchExpressions`` and
  ``matchFields``) are ANDed; a term with no requirements matches no node.
* ``In``: the label exists and its value is listed. ``NotIn``: the label is absent or its value is
  not listed. ``Exists`` / ``DoesNotExist``: presence. ``Gt`` / ``Lt``: the label and the single
  listed value parse as integers and compare strictly.
* ``matchFields`` supports ``metadata.name`` with ``In`` / ``NotIn`` only.
* ``spec.nodeSelector`` must match exactly, and is ANDed with the required node affinity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from seedance.core.errors import InputError

_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def requirement_matches(req: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One ``NodeSelectorRequirement`` against a label map."""
    key = req.get("key")
    op = req.get("operator")
    values = list(req.get("values") or [])
    if not isinstance(key, str) or op not in _OPERATORS:
        raise InputError(f"invalid node selector requirement {dict(req)!r}", field="matchExpressions")
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if len(values) != 1:
        raise InputError(f"operator {op} needs exactly one value", field="matchExpressions")
    try:
        bound = int(values[0])
    except ValueError:
        raise InputError(f"operator {op} needs an integer value", field="matchExpressions") from None
    if not present:
        return False
    try:
        actual = int(labels[key])
    except ValueError:
        return False
    return actual > bound if op == "Gt" else actual < bound


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], node_name: str | None = None) -> bool:
    """One ``NodeSelectorTerm``: all its requirements hold (an empty term matches nothing)."""
    exprs: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or []
    fields: Sequence[Mapping[str, Any]] = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(requirement_matches(e, labels) for e in exprs):
        return False
    for f in fields:
        if f.get("key") != "metadata.name" or f.get("operator") not in ("In", "NotIn"):
            raise InputError(f"unsupported matchFields requirement {dict(f)!r}", field="matchFields")
        if node_name is None or not requirement_matches(f, {"metadata.name": node_name}):
            return False
    return True


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str], node_name: str | None = None) -> bool:
    """A ``NodeSelector`` (``nodeSelectorTerms`` ORed)."""
    terms: Sequence[Mapping[str, Any]] = selector.get("nodeSelectorTerms") or []
    return any(term_matches(t, labels, node_name) for t in terms)


def pod_fits_node(pod_spec: Mapping[str, Any], labels: Mapping[str, str], node_name: str | None = None) -> bool:
    """Whether a PodSpec's ``nodeSelector`` and required ``nodeAffinity`` admit a node with ``labels``."""
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return required is None or selector_matches(required, labels, node_name)
