"""TrainingJob → Pods, as pure functions of documents (the operator's reconcile logic).

For a TrainingJob ``j`` with ``spec.replicas = n`` the desired pods are ``j-0 .. j-(n-1)``, each
the job's pod template plus:

* the tier fragment (:func:`seedance.k8s.render.pod_spec_fragment`): required node affinity,
  tolerations, ``priorityClassName``, the ``seedance.ai/tier`` label, and the Seedance
  ``schedulerName``;
* GPUs: whole GPUs become an ``nvidia.com/gpu`` limit on the first container (unless a container
  already asks for some); a share (``gpu.milli < 1000``) becomes the ``seedance.ai/gpu-milli``
  annotation that the extender accounts (an exclusive tier takes a whole GPU instead); acceptable
  models go to ``seedance.ai/gpu-types``;
* cost tags (whitepaper §3.3): ``cost.seedance.ai/team`` from the pod template's ``team`` label
  (else the TrainingJob's), ``cost.seedance.ai/env`` from the namespace's ``env`` label, each
  ``unassigned`` when missing;
* the ``seedance.ai/cost_score`` annotation: an injectable ``CostScoreFn`` of the job and its
  ``CostPolicy``. :func:`costmodel_cost_score` wraps :func:`seedance.costmodel.cost_score` (needs
  price and carbon signals); the default, :func:`list_price_cost_score`, is a documented fallback
  for an operator without signals (see there);
* ``ownerReferences`` to the job (garbage collection), ``restartPolicy: Never`` unless set.

Status: phase ``Failed`` if any pod failed, ``Succeeded`` when all replicas succeeded, ``Running``
when any runs, else ``Pending``; counts, pod names, cost score and cost tags.
"""

from __future__ import annotations

import copy
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from seedance.core.catalog import CATALOG, PriceBook
from seedance.core.errors import InputError
from seedance.core.resources import MILLI_PER_GPU
from seedance.k8s import keys
from seedance.k8s.objects import labels_of, name_of
from seedance.k8s.render import merge_fragment, pod_spec_fragment, tier_spec
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

Obj = dict[str, Any]
TERMINAL = frozenset({"Succeeded", "Failed"})
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class CostInputs:
    """What a cost score may depend on.

    Attributes:
        tier: SLA tier.
        replicas: Pods.
        gpus_per_replica: GPUs per pod (a share counts as milli / 1000).
        gpu_types: Acceptable GPU models (canonical names; empty = any).
        duration_h: Estimated run time in hours.
        weights: ``price``, ``carbon``, ``delay`` weights (from the CostPolicy; price 1 otherwise).
        region: CostPolicy region, if any.
        deadline: RFC 3339 deadline, if any.
    """

    tier: str
    replicas: int
    gpus_per_replica: float
    gpu_types: tuple[str, ...]
    duration_h: float
    weights: Mapping[str, float] = field(default_factory=lambda: {"price": 1.0, "carbon": 0.0, "delay": 0.0})
    region: str | None = None
    deadline: str | None = None


CostScoreFn = Callable[[CostInputs], float]


def list_price_cost_score(inp: CostInputs, price_book: PriceBook | None = None) -> float:
    """Fallback ``cost_score``: ``w_price`` x GPU-hours x the cheapest acceptable list price (USD).

    The whitepaper's score is ``w_p*price(t) + w_c*carbon(t) + w_d*delay(t)`` over the job's run;
    without price and carbon signals this fallback keeps only the price term at catalog list
    prices (carbon and delay terms are 0). With no GPU-type constraint it uses the cheapest
    disclosed catalog model, so it is a lower bound of the job's GPU cost.
    """
    book = price_book or PriceBook()
    models = inp.gpu_types or tuple(m for m in CATALOG if not CATALOG[m].undisclosed)
    price = min(book.usd_per_gpu_hour(m) for m in models)
    usd = inp.replicas * inp.gpus_per_replica * inp.duration_h * price
    return round(float(inp.weights.get("price", 1.0)) * usd, 4)


def costmodel_cost_score(
    signals: Callable[[], Any],
    *,
    clock: Callable[[], float] = time.time,
    default_model: str = "A100-80GB",
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
) -> CostScoreFn:
    """A ``CostScoreFn`` backed by :func:`seedance.costmodel.cost_score` (price + carbon + delay over the run).

    Args:
        signals: Returns the current ``seedance.costmodel.Signals`` (hourly price and carbon covering
            the job's run from now).
        clock: Epoch seconds of "now".
        default_model: GPU model priced when the job names no GPU type.
        tier_config: SLA tiers (which are deferrable).

    The job's weights come from its CostPolicy (``CostInputs.weights``); a CPU-only job scores 0.
    """

    def score(inp: CostInputs) -> float:
        from seedance.costmodel import JobFeatures, Weights, cost_score

        gpus = inp.replicas * inp.gpus_per_replica
        if gpus <= 0:
            return 0.0
        deadline = None
        if inp.deadline:
            deadline = datetime.fromisoformat(inp.deadline.replace("Z", "+00:00")).timestamp()
        job = JobFeatures(duration_s=inp.duration_h * 3600.0, gpu_model=(inp.gpu_types or (default_model,))[0],
                          gpus=gpus, deadline=deadline, tier=inp.tier)
        w = inp.weights
        weights = Weights(price=float(w.get("price", 1.0)), carbon=float(w.get("carbon", 0.0)),
                          delay=float(w.get("delay", 0.0)))
        return round(float(cost_score(job, signals(), weights, clock(), tiers=tier_config).score), 4)

    return score


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    """How the operator renders pods.

    Attributes:
        scheduler_name: ``spec.schedulerName`` of created pods (the kube-scheduler profile with the extender).
        tier_config: SLA tiers.
        gpu_resource: Extended resource of whole GPUs.
        cost_score: The cost score function (default :func:`list_price_cost_score`).
    """

    scheduler_name: str = keys.SCHEDULER_NAME
    tier_config: TierConfig = DEFAULT_TIER_CONFIG
    gpu_resource: str = keys.GPU_RESOURCE
    cost_score: CostScoreFn = list_price_cost_score


def label_value(text: str) -> str:
    """``text`` as a valid label value (<= 63 characters, alphanumeric ends); long ones get a hash suffix."""
    clean = re.sub(r"[^-A-Za-z0-9_.]", "-", text).strip("-_.")
    if len(clean) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        clean = clean[:52].rstrip("-_.") + "-" + digest
    return clean if clean and _LABEL_VALUE.match(clean) else keys.UNASSIGNED


def cost_tags(job: Mapping[str, Any], namespace_labels: Mapping[str, str]) -> dict[str, str]:
    """``{"team", "env"}``: team from the pod template's (else the job's) ``team`` label, env from the namespace."""
    template_labels = ((job.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
    team = template_labels.get("team") or labels_of(job).get("team")
    env = namespace_labels.get("env")
    return {"team": label_value(team) if team else keys.UNASSIGNED,
            "env": label_value(env) if env else keys.UNASSIGNED}


def _gpu(spec: Mapping[str, Any]) -> tuple[int, int, tuple[str, ...]]:
    gpu = spec.get("gpu") or {}
    count = int(gpu.get("count", 1))
    milli = int(gpu.get("milli", MILLI_PER_GPU))
    if count < 0 or not 1 <= milli <= MILLI_PER_GPU:
        raise InputError("gpu.count must be >= 0 and gpu.milli within 1..1000", field="spec.gpu")
    if milli < MILLI_PER_GPU and count > 1:
        raise InputError(f"a GPU share ({milli} milli) is of one GPU, not {count}", field="spec.gpu")
    try:
        types = tuple(sorted({CATALOG.resolve(t).name for t in gpu.get("types") or []}))
    except KeyError as exc:
        raise InputError(str(exc), field="spec.gpu.types") from None
    return count, milli, types


def cost_inputs(job: Mapping[str, Any], policy: Mapping[str, Any] | None = None,
                tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> CostInputs:
    """The inputs of the job's cost score (``policy``: its CostPolicy document, if any)."""
    spec = job.get("spec") or {}
    count, milli, types = _gpu(spec)
    tier = str(spec.get("tier") or tier_config.default_tier)
    if tier_spec(tier, tier_config).exclusive and count and milli < MILLI_PER_GPU:
        milli = MILLI_PER_GPU
    pspec = (policy or {}).get("spec") or {}
    w = pspec.get("weights") or {}
    weights = {"price": float(w.get("price", 1.0)), "carbon": float(w.get("carbon", 0.0)),
               "delay": float(w.get("delay", 0.0))}
    return CostInputs(
        tier=tier,
        replicas=int(spec.get("replicas", 1)),
        gpus_per_replica=count * milli / MILLI_PER_GPU if count else 0.0,
        gpu_types=types,
        duration_h=float(spec.get("durationHours", 1.0)),
        weights=weights,
        region=pspec.get("region"),
        deadline=spec.get("deadline"),
    )


def _asks_gpu(containers: Sequence[Mapping[str, Any]], resource: str) -> bool:
    for c in containers:
        res = c.get("resources") or {}
        if resource in (res.get("limits") or {}) or resource in (res.get("requests") or {}):
            return True
    return False


def desired_pods(
    job: Mapping[str, Any],
    namespace_labels: Mapping[str, str],
    settings: OperatorSettings = OperatorSettings(),
    policy: Mapping[str, Any] | None = None,
) -> list[Obj]:
    """The Pod documents a TrainingJob asks for (see the module docstring); bad specs raise InputError."""
    meta = job.get("metadata") or {}
    name = name_of(job)
    namespace = str(meta.get("namespace") or "default")
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    if not (template.get("spec") or {}).get("containers"):
        raise InputError("spec.template.spec.containers is empty", source=f"trainingjob {namespace}/{name}",
                         field="spec.template.spec.containers")
    cfg = settings.tier_config
    inputs = cost_inputs(job, policy, cfg)
    tier = inputs.tier
    count, milli, types = _gpu(spec)
    exclusive = tier_spec(tier, cfg).exclusive
    score = settings.cost_score(inputs)
    tags = cost_tags(job, namespace_labels)
    fragment = pod_spec_fragment(tier, cfg, borrow=bool(spec.get("borrow", False)),
                                 scheduler_name=settings.scheduler_name)
    tmeta = template.get("metadata") or {}
    owner = {"apiVersion": keys.API_VERSION, "kind": "TrainingJob", "name": name,
             "uid": str(meta.get("uid") or ""), "controller": True, "blockOwnerDeletion": True}
    pods = []
    for i in range(int(spec.get("replicas", 1))):
        annotations = {**(tmeta.get("annotations") or {}), keys.ANN_COST_SCORE: f"{score:.4f}"}
        labels = {
            **(tmeta.get("labels") or {}),
            keys.LABEL_JOB: label_value(name),
            keys.LABEL_REPLICA: str(i),
            keys.LABEL_COST_TEAM: tags["team"],
            keys.LABEL_COST_ENV: tags["env"],
        }
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": namespace, "labels": labels,
                         "annotations": annotations, "ownerReferences": [dict(owner)]},
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        pod = merge_fragment(pod, fragment)
        pspec = pod["spec"]
        pspec.setdefault("restartPolicy", "Never")
        if count:
            if milli < MILLI_PER_GPU and not exclusive:
                pod["metadata"]["annotations"][keys.ANN_GPU_MILLI] = str(milli)
            elif not _asks_gpu(pspec["containers"], settings.gpu_resource):
                res = pspec["containers"][0].setdefault("resources", {})
                res.setdefault("limits", {})[settings.gpu_resource] = str(count)
            if types:
                pod["metadata"]["annotations"][keys.ANN_GPU_TYPES] = ",".join(types)
        if not owner["uid"]:
            del pod["metadata"]["ownerReferences"]
        pods.append(pod)
    return pods


def job_status(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    *,
    cost_score: float | None = None,
    tags: Mapping[str, str] | None = None,
) -> Obj:
    """The ``status`` of a TrainingJob from its pods (cost score and tags kept from the old status if not given)."""
    spec = job.get("spec") or {}
    old = job.get("status") or {}
    replicas = int(spec.get("replicas", 1))
    phases = Counter(str((p.get("status") or {}).get("phase") or "Pending") for p in pods)
    if phases["Failed"]:
        phase = "Failed"
    elif phases["Succeeded"] >= replicas:
        phase = "Succeeded"
    elif phases["Running"]:
        phase = "Running"
    else:
        phase = "Pending"
    status: Obj = {
        "phase": phase,
        "replicas": replicas,
        "running": phases["Running"],
        "succeeded": phases["Succeeded"],
        "failed": phases["Failed"],
        "pods": sorted(name_of(p) for p in pods),
    }
    score = cost_score if cost_score is not None else old.get("costScore")
    if score is not None:
        status["costScore"] = score
    tag_map = dict(tags) if tags is not None else old.get("costTags")
    if tag_map:
        status["costTags"] = tag_map
        missing = [k for k, v in tag_map.items() if v == keys.UNASSIGNED]
        status["message"] = (f"cost tags unassigned: {', '.join(missing)}" if missing
                             else f"{status['running']}/{replicas} running")
    generation = (job.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = int(generation)
    return status
