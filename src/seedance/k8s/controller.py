"""The TrainingJob operator (kopf): handlers over :mod:`seedance.k8s.trainingjob`.

Handlers are plain functions registered into an explicit ``kopf.OperatorRegistry`` by
:func:`register` (no import-time registration into kopf's global registry). They reach the API
only through ``memo.api`` (a :class:`~seedance.k8s.kubeapi.KubernetesApi` in production, a fake in
tests) and read ``memo.settings`` (:class:`~seedance.k8s.trainingjob.OperatorSettings`).

* ``reconcile_trainingjob`` (create / resume / update, and a 60 s timer): render the desired pods,
  create the missing ones unless the job has finished, and write ``status`` through kopf's patch.
  A spec the pods cannot be built from is a ``kopf.PermanentError`` (no retries).
* ``pod_event``: any event of a pod labelled ``seedance.ai/job`` recomputes its owner's status.
* ``configure``: kopf keeps its bookkeeping in ``seedance.ai/*`` annotations, not in ``status``.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from seedance.core.errors import InputError
from seedance.k8s import costtags, keys
from seedance.k8s.objects import name_of
from seedance.k8s.trainingjob import TERMINAL, cost_inputs, cost_tags, desired_pods, job_status, label_value

PLURAL = "trainingjobs"


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Startup: store kopf's progress and diff-base in annotations; post only warnings as events."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=keys.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=keys.GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING


def reconcile_trainingjob(
    body: kopf.Body | dict[str, Any],
    namespace: str | None,
    name: str | None,
    memo: kopf.Memo,
    patch: kopf.Patch,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    **_: Any,
) -> dict[str, Any]:
    """Create the job's missing pods and set its status; returns the status written."""
    api = memo.api
    settings = memo.settings
    job = dict(body)
    ns = namespace or "default"
    spec = job.get("spec") or {}
    ns_labels = api.namespace_labels(ns)
    policy = None
    if spec.get("costPolicy"):
        policy = api.get_cost_policy(spec["costPolicy"])
        if policy is None:
            logger.warning("CostPolicy %s not found; default weights used", spec["costPolicy"])
    try:
        pods = desired_pods(job, ns_labels, settings, policy)
        score = settings.cost_score(cost_inputs(job, policy, settings.tier_config))
    except InputError as exc:
        raise kopf.PermanentError(str(exc)) from None
    existing = api.list_job_pods(ns, label_value(str(name)))
    have = {name_of(p) for p in existing}
    before = job_status(job, existing)
    created = []
    if before["phase"] not in TERMINAL:
        for pod in pods:
            if name_of(pod) not in have and api.create_pod(ns, pod):
                created.append(pod)
        if created:
            logger.info("created %d pod(s) for trainingjob %s/%s", len(created), ns, name)
    status = job_status(job, [*existing, *created], cost_score=score, tags=cost_tags(job, ns_labels))
    patch.status.update(status)
    return status


def pod_event(body: kopf.Body | dict[str, Any], namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    """Recompute the owning TrainingJob's status after any event of one of its pods."""
    pod = dict(body)
    owners = [o for o in (pod.get("metadata") or {}).get("ownerReferences") or []
              if o.get("kind") == "TrainingJob" and str(o.get("apiVersion", "")).startswith(keys.GROUP + "/")]
    if not owners or not namespace:
        return
    api = memo.api
    job = api.get_trainingjob(namespace, owners[0]["name"])
    if job is None:
        return
    pods = api.list_job_pods(namespace, label_value(owners[0]["name"]))
    api.patch_trainingjob_status(namespace, owners[0]["name"], job_status(job, pods))


def register(registry: kopf.OperatorRegistry) -> kopf.OperatorRegistry:
    """Register every handler into ``registry`` and return it."""
    res = (keys.GROUP, keys.VERSION, PLURAL)
    kopf.on.startup(registry=registry)(configure)
    for deco in (kopf.on.create, kopf.on.resume):
        deco(*res, registry=registry, id="reconcile")(reconcile_trainingjob)
    kopf.on.update(*res, registry=registry, id="reconcile", field="spec")(reconcile_trainingjob)
    kopf.timer(*res, registry=registry, id="resync", interval=60.0, idle=30.0)(reconcile_trainingjob)
    kopf.on.event("", "v1", "pods", registry=registry, labels={keys.LABEL_JOB: kopf.PRESENT})(pod_event)
    costtags.register(registry)  # cost tags on every pod (seedance.k8s.costtags)
    return registry


def run(api: Any, settings: Any, *, liveness_port: int | None = None, namespaces: tuple[str, ...] = ()) -> None:
    """Run the operator until interrupted (cluster-wide unless ``namespaces`` are given)."""
    registry = register(kopf.OperatorRegistry())
    kopf.run(
        registry=registry,
        memo=kopf.Memo(api=api, settings=settings),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=f"http://0.0.0.0:{liveness_port}/healthz" if liveness_port else None,
    )
