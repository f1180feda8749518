"""Cost tags on every pod (whitepaper §3.3): the operator writes ``cost.seedance.ai/<tag>`` labels.

For each tag key the value comes from the pod's or the namespace's label of the same name, in the
whitepaper's order (its table: business line ``team`` ← ``pod.labels.team``, environment ``env`` ←
``namespace.labels.env``): :data:`SOURCES` gives the order per key (other keys: pod, then
namespace); a value that is not a valid label value is sanitised, a missing one becomes
``unassigned``. The node sampler reads these labels back (:meth:`seedance.telemetry.pods.PodMeta.tags`),
which is how a process's usage is joined to its team.

Handlers (plain functions, called directly by the tests, registered into an explicit kopf registry
by :func:`register`):

* ``tag_pod`` — on create, resume and label updates of any pod: merge-patch the missing or stale tags;
* ``mutate_pod`` — the same as a mutating admission webhook (``kopf.on.mutate``), so a pod is tagged
  before it is stored, when the operator runs with a webhook server;
* ``retag_namespace`` — when a namespace's labels change: re-tag its pods through ``memo.api``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from seedance.k8s import keys
from seedance.k8s.trainingjob import label_value

SOURCES: dict[str, tuple[str, ...]] = {"team": ("pod", "namespace"), "env": ("namespace", "pod")}


def tag_value(key: str, pod_labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> str:
    """The tag ``key`` of a pod: the first source label that has it, else ``unassigned``.

    >>> tag_value("env", {"env": "dev"}, {"env": "prod"}), tag_value("team", {"team": "nlp"}, {"team": "x"})
    ('prod', 'nlp')
    """
    for src in SOURCES.get(key, ("pod", "namespace")):
        v = (pod_labels if src == "pod" else namespace_labels).get(key)
        if v:
            return label_value(str(v))
    return keys.UNASSIGNED


def desired_tags(pod: Mapping[str, Any], namespace_labels: Mapping[str, str],
                 tag_keys: Sequence[str] = keys.COST_TAG_KEYS) -> dict[str, str]:
    """``{cost.seedance.ai/<k>: value}`` for a Pod document."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {keys.COST_TAG_PREFIX + k: tag_value(k, labels, namespace_labels) for k in tag_keys}


def missing_tags(pod: Mapping[str, Any], namespace_labels: Mapping[str, str],
                 tag_keys: Sequence[str] = keys.COST_TAG_KEYS) -> dict[str, str]:
    """The tag labels that must change (empty when the pod is up to date)."""
    have = (pod.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in desired_tags(pod, namespace_labels, tag_keys).items() if have.get(k) != v}


def _tag_keys(memo: Any) -> Sequence[str]:
    settings = getattr(memo, "settings", None)
    return tuple(getattr(settings, "cost_tag_keys", keys.COST_TAG_KEYS))


def tag_pod(body: Mapping[str, Any], namespace: str | None, memo: Any, patch: Any,
            logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any) -> dict[str, str]:
    """Write missing or stale cost tags into kopf's patch; returns what was written."""
    pod = dict(body)
    ns = namespace or str((pod.get("metadata") or {}).get("namespace") or "default")
    changes = missing_tags(pod, memo.api.namespace_labels(ns), _tag_keys(memo))
    if changes:
        patch.setdefault("metadata", {}).setdefault("labels", {}).update(changes)
        logger.info("cost tags for pod %s/%s: %s", ns, (pod.get("metadata") or {}).get("name"), changes)
    return changes


def mutate_pod(body: Mapping[str, Any], namespace: str | None, memo: Any, patch: Any,
               logger: logging.Logger | logging.LoggerAdapter[Any], **kw: Any) -> dict[str, str]:
    """Admission-time tagging (kopf ``on.mutate``): the same labels, before the pod is stored."""
    return tag_pod(body, namespace, memo, patch, logger, **kw)


def retag_namespace(name: str | None, memo: Any, logger: logging.Logger | logging.LoggerAdapter[Any],
                    **_: Any) -> int:
    """Re-tag every pod of namespace ``name`` after its labels changed; returns pods patched."""
    if not name:
        return 0
    api = memo.api
    ns_labels = api.namespace_labels(name)
    n = 0
    for pod in api.list_namespace_pods(name):
        changes = missing_tags(pod, ns_labels, _tag_keys(memo))
        if changes:
            api.patch_pod_labels(name, str((pod.get("metadata") or {}).get("name")), changes)
            n += 1
    if n:
        logger.info("re-tagged %d pod(s) of namespace %s", n, name)
    return n


def register(registry: Any) -> Any:
    """Register the cost-tag handlers into a kopf registry."""
    import kopf

    for deco in (kopf.on.create, kopf.on.resume):
        deco("", "v1", "pods", registry=registry, id="cost-tags")(tag_pod)
    kopf.on.update("", "v1", "pods", registry=registry, id="cost-tags", field="metadata.labels")(tag_pod)
    kopf.on.mutate("", "v1", "pods", registry=registry, id="cost-tags-admission",
                   operations={"CREATE"})(mutate_pod)
    kopf.on.field("", "v1", "namespaces", registry=registry, id="cost-tags-namespace",
                  field="metadata.labels")(retag_namespace)
    return registry
