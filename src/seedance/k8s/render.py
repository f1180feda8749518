"""Render an SLA tier as Kubernetes objects: the Pod fragment and the PriorityClasses.

``pod_spec_fragment(tier)`` returns what a Pod (or a pod template) of that tier must carry::

    {"metadata": {"labels": {"seedance.ai/tier": "gold"}},
     "spec": {"priorityClassName": "seedance-gold",
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                  {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "gpu.sla.level", "operator": "In", "values": ["gold"]},
                      {"key": "gpu.mode", "operator": "In", "values": ["exclusive"]}]}]}}},
              "tolerations": [{"key": "gpu.sla.level", "operator": "Equal", "value": "gold",
                               "effect": "NoSchedule"}, ...]}}

The required term is the tier's ``node_labels`` (whitepaper §2.2, exactly its YAML for Gold), one
``In`` expression per label key in the order the tier lists them. Tolerations mirror those labels:
nodes reserved for a tier carry ``NoSchedule`` taints equal to their tier labels, which only that
tier's pods tolerate. With ``borrow=True`` (tiers with ``borrow_labels``) a second term ORs in the
borrowed labels, the pod also tolerates their taints, a preferred term (weight 100) keeps it on
its own nodes when it can, and the ``seedance.ai/borrow`` annotation tells the extender.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from seedance.core.errors import UnknownNameError
from seedance.k8s import keys
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig, TierSpec

Obj = dict[str, Any]


def tier_spec(tier: str, tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> TierSpec:
    """The tier called ``tier``; unknown names list the valid ones."""
    spec = tier_config.tiers.get(tier)
    if spec is None:
        raise UnknownNameError(f"unknown tier {tier!r}; valid names: {', '.join(tier_config.names())}")
    return spec


def _term(labels: Mapping[str, tuple[str, ...]]) -> Obj:
    return {"matchExpressions": [{"key": k, "operator": "In", "values": list(v)} for k, v in labels.items()]}


def _tolerations(labels: Mapping[str, tuple[str, ...]]) -> list[Obj]:
    return [
        {"key": k, "operator": "Equal", "value": value, "effect": "NoSchedule"}
        for k, values in labels.items()
        for value in values
    ]


def pod_spec_fragment(
    tier: str,
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
    *,
    borrow: bool = False,
    scheduler_name: str | None = None,
) -> Obj:
    """The ``metadata`` and ``spec`` fields a Pod of ``tier`` must carry (see the module docstring).

    Args:
        tier: Tier name in ``tier_config``.
        tier_config: Tier definitions.
        borrow: Also admit the tier's ``borrow_labels`` nodes (ignored for tiers without any).
        scheduler_name: Set ``spec.schedulerName`` (e.g. ``seedance-scheduler``) when given.
    """
    spec = tier_spec(tier, tier_config)
    metadata: Obj = {"labels": {keys.LABEL_TIER: tier}}
    pod: Obj = {}
    if spec.priority_class:
        pod["priorityClassName"] = spec.priority_class
    borrow = borrow and bool(spec.borrow_labels)
    if spec.node_labels:
        terms = [_term(spec.node_labels)]
        tolerations = _tolerations(spec.node_labels)
        node_affinity: Obj = {}
        if borrow:
            terms.append(_term(spec.borrow_labels))
            tolerations += [t for t in _tolerations(spec.borrow_labels) if t not in tolerations]
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 100, "preference": _term(spec.node_labels)}
            ]
            metadata["annotations"] = {keys.ANN_BORROW: "true"}
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
        pod["affinity"] = {"nodeAffinity": node_affinity}
        pod["tolerations"] = tolerations
    if scheduler_name:
        pod["schedulerName"] = scheduler_name
    return {"metadata": metadata, "spec": pod}


def merge_fragment(pod: Mapping[str, Any], fragment: Mapping[str, Any]) -> Obj:
    """A copy of ``pod`` (a Pod or pod template) with a tier fragment applied.

    Labels and annotations are added (the fragment wins on conflicts); the priority class and
    scheduler name are set; tolerations are appended without duplicates; preferred terms are
    appended. Required node affinity is ANDed with the pod's own: every existing term is combined
    with every fragment term (terms are ORed, expressions inside a term ANDed).
    """
    out: Obj = copy.deepcopy(dict(pod))
    fmeta = fragment.get("metadata") or {}
    meta = out.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if fmeta.get(key):
            meta[key] = {**(meta.get(key) or {}), **fmeta[key]}
    fspec = fragment.get("spec") or {}
    spec = out.setdefault("spec", {})
    for key in ("priorityClassName", "schedulerName"):
        if key in fspec:
            spec[key] = fspec[key]
    if fspec.get("tolerations"):
        tol = list(spec.get("tolerations") or [])
        tol += [copy.deepcopy(t) for t in fspec["tolerations"] if t not in tol]
        spec["tolerations"] = tol
    fna = (fspec.get("affinity") or {}).get("nodeAffinity")
    if fna:
        na = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        if fna.get("preferredDuringSchedulingIgnoredDuringExecution"):
            pref = list(na.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
            pref += copy.deepcopy(fna["preferredDuringSchedulingIgnoredDuringExecution"])
            na["preferredDuringSchedulingIgnoredDuringExecution"] = pref
        freq = fna.get("requiredDuringSchedulingIgnoredDuringExecution")
        if freq:
            fterms = freq["nodeSelectorTerms"]
            own = (na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
            if own:
                terms = [
                    {
                        **copy.deepcopy(o),
                        "matchExpressions": [*(o.get("matchExpressions") or []),
                                             *copy.deepcopy(f.get("matchExpressions") or [])],
                    }
                    for o in own
                    for f in fterms
                ]
            else:
                terms = copy.deepcopy(fterms)
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    return out


def priority_classes(tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> list[Obj]:
    """One ``scheduling.k8s.io/v1`` PriorityClass per tier that names one.

    ``value`` is the tier's priority; tiers that may preempt nobody get ``preemptionPolicy: Never``.
    """
    out: list[Obj] = []
    for name, spec in tier_config.tiers.items():
        if not spec.priority_class:
            continue
        out.append({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": spec.priority_class, "labels": {"app.kubernetes.io/part-of": "seedance",
                                                                 keys.LABEL_TIER: name}},
            "value": spec.priority,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority" if spec.may_preempt else "Never",
            "description": (
                f"Seedance SLA tier {name}: target availability {spec.target_availability:.2%}"
                f"{', exclusive GPUs' if spec.exclusive else ''}"
            ),
        })
    return out
