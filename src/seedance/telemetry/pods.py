"""The pod directory: which pod and container a cgroup container id belongs to, with requests and tags.

The sampler joins process → container id (cgroup path) → pod here. A :class:`PodMeta` carries what
the allocation needs: CPU and memory requests per container, the GPU claim (whole GPUs, a
Seedance share ``seedance.ai/gpu-milli`` on the GPUs of ``seedance.ai/gpu-index``, a MIG profile
``nvidia.com/mig-<profile>``, or time-sliced replicas) and the cost tags.

Cost tags (whitepaper §3.3): for each tag key (``team``, ``env``, ...) the value is the pod label
``cost.seedance.ai/<key>`` the operator wrote (:mod:`seedance.k8s.costtags`), else what the operator
would write (the pod's or the namespace's label, in :data:`seedance.k8s.costtags.SOURCES` order); a
missing tag stays absent and lands in OpenCost's ``__unallocated__`` bucket when the ledger is
aggregated by it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seedance.core.errors import InputError
from seedance.k8s import keys
from seedance.k8s.quantity import parse_quantity

_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-((?:(\d+)c\.)?(\d+)g\.\d+gb)$")


@dataclass(frozen=True, slots=True)
class ContainerMeta:
    """A container of a pod: name, runtime id and requests (cores, bytes)."""

    name: str
    container_id: str | None = None
    cpu_request: float = 0.0
    ram_request: float = 0.0


@dataclass(frozen=True, slots=True)
class GpuClaim:
    """What GPU a pod holds.

    Attributes:
        fraction: Share of one device per claimed device (1.0 whole, 0.25 for 250 milli, 1/7 for a
            1g MIG slice, 1/N for a time-sliced replica).
        devices: Number of devices (GPUs, or MIG slices) held.
        indices: GPU indices on the node, when known (Seedance's extender writes them).
        mig_profile: The MIG profile for MIG claims.
    """

    fraction: float = 1.0
    devices: int = 1
    indices: tuple[int, ...] = ()
    mig_profile: str | None = None

    @property
    def gpus(self) -> float:
        """GPUs requested in total (``fraction × devices``)."""
        return self.fraction * self.devices


@dataclass(frozen=True, slots=True)
class PodMeta:
    """A pod on the node."""

    uid: str
    namespace: str
    name: str
    node: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerMeta, ...] = ()
    gpu: GpuClaim | None = None
    controller: str = ""
    controller_kind: str = ""

    def tags(self, tag_keys: Sequence[str] = keys.COST_TAG_KEYS) -> dict[str, str]:
        """Cost tags: operator label, else pod label, else namespace label (missing ones absent)."""
        from seedance.k8s.costtags import tag_value

        out: dict[str, str] = {}
        for k in tag_keys:
            v = self.labels.get(keys.COST_TAG_PREFIX + k) or tag_value(k, self.labels, self.namespace_labels)
            if v and v != keys.UNASSIGNED:
                out[k] = v
        return out


def _q(value: Any, field_name: str) -> float:
    return float(parse_quantity(value, field=field_name))


def gpu_claim(pod: Mapping[str, Any], *, time_slice_replicas: int = 1,
              gpu_resource: str = keys.GPU_RESOURCE) -> GpuClaim | None:
    """The GPU claim of a Pod document (``None``: no GPU)."""
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    spec = pod.get("spec") or {}
    src = f"pod {meta.get('namespace', 'default')}/{meta.get('name', '?')}"
    whole = 0.0
    mig: tuple[str, int, float] | None = None
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for kind in ("limits", "requests"):
            for rname, val in (res.get(kind) or {}).items():
                if rname == gpu_resource:
                    whole = max(whole, _q(val, f"{kind}.{rname}")) if kind == "requests" else whole + _q(val, rname)
                m = _MIG_RESOURCE.match(rname)
                if m:
                    slices = int(m.group(2) or m.group(3))
                    n = int(_q(val, f"{kind}.{rname}"))
                    mig = (m.group(1), max(n, mig[1] if mig else 0), slices / 7.0)
    indices: tuple[int, ...] = ()
    raw_idx = ann.get(keys.ANN_GPU_INDEX)
    if raw_idx:
        try:
            indices = tuple(int(x) for x in str(raw_idx).split(",") if x.strip())
        except ValueError:
            raise InputError(f"not a list of GPU indices: {raw_idx!r}", source=src,
                             field=f"metadata.annotations.{keys.ANN_GPU_INDEX}") from None
    raw_milli = ann.get(keys.ANN_GPU_MILLI)
    if raw_milli is not None:
        try:
            milli = int(raw_milli)
        except ValueError:
            milli = -1
        if not 1 <= milli <= 1000:
            raise InputError(f"must be 1..1000, got {raw_milli!r}", source=src,
                             field=f"metadata.annotations.{keys.ANN_GPU_MILLI}")
        return GpuClaim(fraction=milli / 1000.0, devices=max(1, len(indices) or 1), indices=indices)
    if mig is not None:
        return GpuClaim(fraction=mig[2], devices=mig[1], indices=indices, mig_profile=mig[0])
    if whole > 0:
        n = int(whole)
        if time_slice_replicas > 1:
            return GpuClaim(fraction=1.0 / time_slice_replicas, devices=n, indices=indices)
        return GpuClaim(fraction=1.0, devices=n, indices=indices)
    return None


def pod_meta(pod: Mapping[str, Any], namespace_labels: Mapping[str, str] | None = None, *,
             time_slice_replicas: int = 1) -> PodMeta:
    """A :class:`PodMeta` from a Pod document (container ids from ``status.containerStatuses``)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ids = {}
    for cs in status.get("containerStatuses") or []:
        cid = str(cs.get("containerID") or "")
        if cid:
            ids[cs.get("name")] = cid.split("://", 1)[-1]
    containers = []
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        name = str(c.get("name") or "")
        containers.append(ContainerMeta(
            name=name, container_id=ids.get(name),
            cpu_request=_q(req["cpu"], "requests.cpu") if "cpu" in req else 0.0,
            ram_request=_q(req["memory"], "requests.memory") if "memory" in req else 0.0,
        ))
    owners = meta.get("ownerReferences") or []
    return PodMeta(
        uid=str(meta.get("uid") or ""), namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""), node=str(spec.get("nodeName") or ""),
        labels=dict(meta.get("labels") or {}), namespace_labels=dict(namespace_labels or {}),
        containers=tuple(containers), gpu=gpu_claim(pod, time_slice_replicas=time_slice_replicas),
        controller=str(owners[0].get("name", "")) if owners else "",
        controller_kind=str(owners[0].get("kind", "")) if owners else "",
    )


class PodDirectory:
    """Pods of one node, found by UID or by container id."""

    def __init__(self, pods: Iterable[PodMeta] = ()) -> None:
        self._by_uid: dict[str, PodMeta] = {}
        self._by_cid: dict[str, tuple[PodMeta, ContainerMeta]] = {}
        self.replace(pods)

    def replace(self, pods: Iterable[PodMeta]) -> None:
        """Swap in a new set of pods."""
        by_uid: dict[str, PodMeta] = {}
        by_cid: dict[str, tuple[PodMeta, ContainerMeta]] = {}
        for p in pods:
            by_uid[p.uid] = p
            for c in p.containers:
                if c.container_id:
                    by_cid[c.container_id] = (p, c)
        self._by_uid, self._by_cid = by_uid, by_cid

    def pods(self) -> list[PodMeta]:
        """Every pod."""
        return list(self._by_uid.values())

    def by_uid(self, uid: str) -> PodMeta | None:
        """The pod with ``uid``."""
        return self._by_uid.get(uid)

    def by_container(self, container_id: str) -> tuple[PodMeta, ContainerMeta] | None:
        """The pod and container running ``container_id``."""
        return self._by_cid.get(container_id)

    @classmethod
    def from_objects(cls, pods: Iterable[Mapping[str, Any]], namespace_labels: Callable[[str], Mapping[str, str]]
                     | Mapping[str, Mapping[str, str]], *, node: str | None = None,
                     time_slice_replicas: int = 1) -> PodDirectory:
        """From Pod documents (only those bound to ``node`` when given)."""
        lookup = namespace_labels if callable(namespace_labels) else (lambda ns: namespace_labels.get(ns, {}))
        metas = []
        for p in pods:
            if node is not None and ((p.get("spec") or {}).get("nodeName") or "") != node:
                continue
            ns = str((p.get("metadata") or {}).get("namespace") or "default")
            metas.append(pod_meta(p, lookup(ns), time_slice_replicas=time_slice_replicas))
        return cls(metas)


def from_kubernetes(api: Any, node: str) -> PodDirectory:
    """This node's pods from the API server (``api``: :class:`seedance.k8s.kubeapi.KubernetesApi` or a fake
    with ``list_pods()`` and ``namespace_labels(ns)``); namespace labels are read once per namespace."""
    items, _ = api.list_pods()
    cache: dict[str, Mapping[str, str]] = {}

    def ns_labels(ns: str) -> Mapping[str, str]:
        if ns not in cache:
            cache[ns] = api.namespace_labels(ns)
        return cache[ns]

    return PodDirectory.from_objects(items, ns_labels, node=node)
