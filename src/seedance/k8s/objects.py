"""Kubernetes Node and Pod documents → Seedance's ``NodeSpec`` and ``ResourceRequest``.

Documents are the JSON objects of the Kubernetes API (``kubectl get -o json``, a watch event's
``object``, or the ``Pod`` / ``Nodes.items`` of a kube-scheduler ``ExtenderArgs``), as plain dicts.

* A node's GPUs are its ``status.allocatable["nvidia.com/gpu"]``; their model comes from the
  ``gpu.model`` label, else from GPU feature discovery's ``nvidia.com/gpu.product`` (e.g.
  ``NVIDIA-A100-SXM4-80GB`` → ``A100-80GB``). A model the catalog does not know keeps its label
  value: such a node serves requests that accept any GPU, never typed ones.
* A pod's request follows kube-scheduler's effective-request rule: the larger of the sum over
  containers (plus restartable "sidecar" init containers) and the largest one-shot init container,
  plus ``spec.overhead``. A container's request for a resource is its ``requests`` entry, else its
  ``limits`` entry (the API server defaults requests to limits).
* Whole GPUs come from ``nvidia.com/gpu``. A share of one GPU comes from the pod annotation
  ``seedance.ai/gpu-milli`` (1..1000), which kube-scheduler itself does not understand, so such
  a pod must not also ask for more than one ``nvidia.com/gpu``.
* An exclusive tier (Gold) never shares a GPU: its shares are rounded up to a whole GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.cluster import NodeSpec
from seedance.core.errors import InputError, UnknownNameError
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.k8s import keys
from seedance.k8s.quantity import cpu_milli, memory_mib, parse_quantity
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

Doc = Mapping[str, Any]
_MEM_TOKEN = re.compile(r"\d+GB")


def _meta(doc: Doc) -> Mapping[str, Any]:
    meta = doc.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def labels_of(doc: Doc) -> dict[str, str]:
    """``metadata.labels`` (empty when missing)."""
    return dict(_meta(doc).get("labels") or {})


def annotations_of(doc: Doc) -> dict[str, str]:
    """``metadata.annotations`` (empty when missing)."""
    return dict(_meta(doc).get("annotations") or {})


def name_of(doc: Doc) -> str:
    """``metadata.name``; raises :class:`InputError` when missing."""
    name = _meta(doc).get("name")
    if not isinstance(name, str) or not name:
        raise InputError("object has no metadata.name", field="metadata.name")
    return name


def gpu_model_of(labels: Mapping[str, str], catalog: GpuCatalog = CATALOG) -> str | None:
    """Canonical GPU model named by a node's labels, the raw label value if unknown, else ``None``.

    >>> gpu_model_of({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    'H100-80GB'
    >>> gpu_model_of({"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"})
    'V100-32GB'
    """
    raw = labels.get(keys.NODE_LABEL_GPU_MODEL) or labels.get(keys.NODE_LABEL_GPU_PRODUCT)
    if not raw:
        return None
    for cand in _model_candidates(raw):
        if cand in catalog:
            return catalog.resolve(cand).name
    return raw


def _model_candidates(raw: str) -> list[str]:
    s = raw.strip()
    for prefix in ("NVIDIA-", "TESLA-"):
        if s.upper().startswith(prefix):
            s = s[len(prefix):]
    tokens = s.split("-")
    out = [raw, s]
    out += [f"{tokens[0]}-{t}" for t in tokens[1:] if _MEM_TOKEN.fullmatch(t.upper())]
    out += ["-".join(tokens[:k]) for k in range(len(tokens) - 1, 0, -1)]
    return out


def node_spec(node: Doc, *, gpu_resource: str = keys.GPU_RESOURCE, catalog: GpuCatalog = CATALOG) -> NodeSpec:
    """The ``NodeSpec`` of a Node document (allocatable CPU, memory, GPUs; labels)."""
    name = name_of(node)
    alloc = (node.get("status") or {}).get("allocatable") or {}
    src = f"node {name}"
    try:
        cpu = cpu_milli(alloc.get("cpu", 0), field="status.allocatable.cpu")
        mem = memory_mib(alloc.get("memory", 0), field="status.allocatable.memory", round_up=False)
        gpus = int(parse_quantity(alloc.get(gpu_resource, 0), field=f"status.allocatable.{gpu_resource}"))
    except InputError as exc:
        raise InputError(exc.message, source=src, field=exc.field) from None
    labels = labels_of(node)
    model = gpu_model_of(labels, catalog) if gpus > 0 else None
    if gpus > 0 and model is None:
        model = "unknown"
    return NodeSpec(name=name, cpu_milli=max(cpu, 0), memory_mib=max(mem, 0), gpu_count=max(gpus, 0),
                    gpu_model=model, labels=labels)


def node_unschedulable(node: Doc) -> bool:
    """``spec.unschedulable`` (a cordoned node)."""
    return bool((node.get("spec") or {}).get("unschedulable", False))


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the extender needs to know about a pod.

    Attributes:
        uid: ``metadata.uid``.
        namespace: ``metadata.namespace``.
        name: ``metadata.name``.
        request: Effective resource request.
        tier: SLA tier name (``None`` when the pod names none).
        borrow: Whether the pod may use its tier's borrow labels.
        gpu_hint: GPU indices already chosen (``seedance.ai/gpu-index``), if any.
        node: ``spec.nodeName`` (empty when not bound).
        labels: ``metadata.labels`` (the trust stages read ``seedance.io/sensitive``).
    """

    uid: str
    namespace: str
    name: str
    request: ResourceRequest
    tier: str | None = None
    borrow: bool = False
    gpu_hint: tuple[int, ...] | None = None
    node: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


def _container_amounts(c: Doc, gpu_resource: str, where: str) -> tuple[int, int, int]:
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    lim = res.get("limits") or {}

    def get(key: str) -> str | int | float | None:
        v = req.get(key)
        return lim.get(key) if v is None else v

    cpu = get("cpu")
    mem = get("memory")
    gpu = get(gpu_resource)
    amounts = (
        cpu_milli(cpu, field=f"{where}.resources.cpu") if cpu is not None else 0,
        memory_mib(mem, field=f"{where}.resources.memory") if mem is not None else 0,
        int(parse_quantity(gpu, field=f"{where}.resources.{gpu_resource}")) if gpu is not None else 0,
    )
    if min(amounts) < 0:
        raise InputError("negative resource request", field=f"{where}.resources")
    return amounts


def _effective(spec: Doc, gpu_resource: str) -> tuple[int, int, int]:
    total = [0, 0, 0]
    for i, c in enumerate(spec.get("containers") or []):
        for k, v in enumerate(_container_amounts(c, gpu_resource, f"spec.containers[{i}]")):
            total[k] += v
    sidecars = [0, 0, 0]
    init_peak = [0, 0, 0]
    for i, c in enumerate(spec.get("initContainers") or []):
        amounts = _container_amounts(c, gpu_resource, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":  # a sidecar runs alongside everything after it
            for k, v in enumerate(amounts):
                sidecars[k] += v
        else:
            for k, v in enumerate(amounts):
                init_peak[k] = max(init_peak[k], v + sidecars[k])
    out = [max(total[k] + sidecars[k], init_peak[k]) for k in range(3)]
    overhead = spec.get("overhead") or {}
    if "cpu" in overhead:
        out[0] += cpu_milli(overhead["cpu"], field="spec.overhead.cpu")
    if "memory" in overhead:
        out[1] += memory_mib(overhead["memory"], field="spec.overhead.memory")
    return out[0], out[1], out[2]


def _tier_of(pod: Doc, tier_config: TierConfig) -> str | None:
    tier = labels_of(pod).get(keys.LABEL_TIER)
    if tier is not None:
        if tier not in tier_config.tiers:
            raise InputError(f"unknown tier {tier!r}; valid tiers: {', '.join(tier_config.names())}",
                             field=f"metadata.labels.{keys.LABEL_TIER}")
        return tier
    pc = (pod.get("spec") or {}).get("priorityClassName")
    if pc:
        for name, spec in tier_config.tiers.items():
            if spec.priority_class == pc:
                return name
    return None


def _int_list(text: str, field: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"not a comma-separated list of integers: {text!r}", field=field) from None
    if any(x < 0 for x in out):
        raise InputError("GPU indices must be >= 0", field=field)
    return out


def pod_info(
    pod: Doc,
    *,
    gpu_resource: str = keys.GPU_RESOURCE,
    catalog: GpuCatalog = CATALOG,
    tier_config: TierConfig = DEFAULT_TIER_CONFIG,
) -> PodInfo:
    """Parse a Pod document; bad resources or annotations raise :class:`InputError` naming the field."""
    meta = _meta(pod)
    ns = str(meta.get("namespace") or "default")
    name = name_of(pod)
    src = f"pod {ns}/{name}"
    try:
        return _pod_info(pod, meta, ns, name, gpu_resource, catalog, tier_config)
    except InputError as exc:
        raise InputError(exc.message, source=src, field=exc.field) from None
    except UnknownNameError as exc:
        raise InputError(str(exc), source=src, field=f"metadata.annotations.{keys.ANN_GPU_TYPES}") from None


def _pod_info(
    pod: Doc, meta: Mapping[str, Any], ns: str, name: str, gpu_resource: str, catalog: GpuCatalog,
    tier_config: TierConfig,
) -> PodInfo:
    spec = pod.get("spec") or {}
    ann = annotations_of(pod)
    cpu, mem, gpus = _effective(spec, gpu_resource)
    milli = MILLI_PER_GPU if gpus else 0
    raw_milli = ann.get(keys.ANN_GPU_MILLI)
    if raw_milli is not None:
        field = f"metadata.annotations.{keys.ANN_GPU_MILLI}"
        try:
            share = int(str(raw_milli).strip())
        except ValueError:
            raise InputError(f"not an integer: {raw_milli!r}", field=field) from None
        if not 1 <= share <= MILLI_PER_GPU:
            raise InputError(f"must be within 1..1000, got {share}", field=field)
        if share < MILLI_PER_GPU and gpus > 1:
            raise InputError(f"a GPU share ({share} milli) cannot span {gpus} {gpu_resource}", field=field)
        gpus = max(gpus, 1)
        milli = share
    types: tuple[str, ...] = ()
    raw_types = ann.get(keys.ANN_GPU_TYPES)
    if raw_types:
        types = tuple(sorted({catalog.resolve(t.strip()).name for t in raw_types.split(",") if t.strip()}))
    tier = _tier_of(pod, tier_config)  # the request stays as asked: the profile's tier stage rounds it
    req = ResourceRequest(cpu_milli=cpu, memory_mib=mem, num_gpu=gpus, gpu_milli=milli,
                          gpu_types=types if gpus else ())
    hint_raw = ann.get(keys.ANN_GPU_INDEX)
    hint = _int_list(hint_raw, f"metadata.annotations.{keys.ANN_GPU_INDEX}") if hint_raw else None
    return PodInfo(
        uid=str(meta.get("uid") or f"{ns}/{name}"),
        namespace=ns,
        name=name,
        request=req,
        tier=tier,
        borrow=ann.get(keys.ANN_BORROW, "").lower() == "true",
        gpu_hint=hint,
        node=str(spec.get("nodeName") or ""),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
    )
