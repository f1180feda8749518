"""Synthetic fleets: an Alibaba node list and pod list scaled by an integer factor ``k``.

NOTE(seedance): how a fleet is scaled (``seedancectl trace scale``).
  * Nodes: every node is kept and gets ``k - 1`` copies named ``<sn>-x<i>`` (``i = 1..k-1``), with
    the same CPU, memory, GPU count and GPU model code. The mix of node kinds is exactly the
    source's, times ``k`` (the 6,212-GPU default list becomes 99,392 GPUs at ``k = 16``).
  * Pods: every pod is kept and gets ``k - 1`` copies named ``<name>-x<i>`` with the same request
    (CPU, memory, GPU count, per-GPU milli, GPU-type constraint), QoS and phase, so the request
    distribution and the task-type mix are exactly the source's, times ``k``. A copy's creation,
    deletion and scheduled times are the original's shifted by one seeded offset, uniform in
    ``[-jitter_s, +jitter_s]`` whole seconds (clipped at 0, lifetime kept), so copies interleave
    instead of arriving all at once; ``k = 1`` returns the source unchanged.
  The same (source, ``k``, seed, jitter) always gives the same files. Copies keep the name order
  of the source (``openb-pod-0001`` < ``openb-pod-0001-x1`` < ``openb-pod-0002``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError
from seedance.traces.alibaba import NODE_COLUMNS
from seedance.traces.schema import PodTrace

POD_HEADER = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)
DEFAULT_JITTER_S = 600


@dataclass(frozen=True, slots=True)
class ScaledFleet:
    """A scaled node list and pod list, and how they were made."""

    nodes: ClusterSpec
    pods: PodTrace
    factor: int
    seed: int
    jitter_s: int


def _check_factor(factor: int) -> None:
    if factor < 1:
        raise InputError(f"must be an integer >= 1, got {factor}", source="--factor")


def scale_nodes(spec: ClusterSpec, factor: int) -> ClusterSpec:
    """``spec`` with every node followed by its ``factor - 1`` copies (same kind)."""
    _check_factor(factor)
    nodes: list[NodeSpec] = []
    for n in spec.nodes:
        nodes.append(n)
        nodes.extend(
            NodeSpec(
                name=f"{n.name}-x{i}", cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, gpu_count=n.gpu_count,
                gpu_model=n.gpu_model, labels=n.labels,
            )
            for i in range(1, factor)
        )
    return ClusterSpec(nodes=tuple(nodes), name=spec.name if factor == 1 else f"{spec.name}x{factor}")


def scale_pods(trace: PodTrace, factor: int, seed: int, jitter_s: int = DEFAULT_JITTER_S) -> PodTrace:
    """``trace`` with every pod followed by its ``factor - 1`` copies (same request, jittered times)."""
    _check_factor(factor)
    if jitter_s < 0:
        raise InputError(f"must be >= 0, got {jitter_s}", source="--jitter")
    if factor == 1:
        return trace
    n = len(trace)
    idx = np.repeat(np.arange(n, dtype=np.int64), factor)
    copy = np.tile(np.arange(factor, dtype=np.int64), n)
    out = trace.take(idx)
    rng = np.random.default_rng(seed)
    shift = rng.integers(-jitter_s, jitter_s + 1, size=idx.size).astype(np.float64)
    shift[copy == 0] = 0.0
    creation = out.creation + shift
    # clip at 0 (keeping the lifetime): a shift below -creation becomes -creation
    shift = np.where(creation < 0, -out.creation, shift)
    names = np.array(
        [str(nm) if c == 0 else f"{nm}-x{c}" for nm, c in zip(out.name.tolist(), copy.tolist(), strict=True)]
    )
    return PodTrace(
        source=trace.source,
        name=names,
        cpu_milli=out.cpu_milli,
        memory_mib=out.memory_mib,
        num_gpu=out.num_gpu,
        gpu_milli=out.gpu_milli,
        gpu_spec=out.gpu_spec,
        gpu_types=out.gpu_types,
        qos=out.qos,
        phase=out.phase,
        creation=out.creation + shift,
        deletion=out.deletion + shift,
        scheduled=out.scheduled + shift,
    )


def scale_fleet(
    spec: ClusterSpec, trace: PodTrace, factor: int, seed: int, jitter_s: int = DEFAULT_JITTER_S
) -> ScaledFleet:
    """Nodes and pods both scaled by ``factor``."""
    return ScaledFleet(scale_nodes(spec, factor), scale_pods(trace, factor, seed, jitter_s), factor, seed, jitter_s)


def _num(x: float) -> str:
    if math.isnan(x):
        return ""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def write_nodes(spec: ClusterSpec, path: Path) -> None:
    """Write ``spec`` as an Alibaba node list (``sn,cpu_milli,memory_mib,gpu,model``)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(NODE_COLUMNS)
        for n in spec.nodes:
            code = (n.labels.get("gpu.model") or n.gpu_model or "") if n.gpu_count else ""
            w.writerow((n.name, n.cpu_milli, n.memory_mib, n.gpu_count, code))


def write_pods(trace: PodTrace, path: Path) -> None:
    """Write ``trace`` as an Alibaba pod list (the 11 columns of the ``openb_pod_list_*`` files)."""
    cols = (
        trace.name.tolist(), trace.cpu_milli.tolist(), trace.memory_mib.tolist(), trace.num_gpu.tolist(),
        trace.gpu_milli.tolist(), trace.gpu_spec.tolist(), trace.qos.tolist(), trace.phase.tolist(),
        [_num(x) for x in trace.creation.tolist()], [_num(x) for x in trace.deletion.tolist()],
        [_num(x) for x in trace.scheduled.tolist()],
    )
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(POD_HEADER)
        w.writerows(zip(*cols, strict=True))


def write_fleet(fleet: ScaledFleet, out: Path, nodes_name: str, pods_name: str) -> tuple[Path, Path]:
    """Write the fleet's two files into folder ``out`` (created); returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    nodes_path, pods_path = out / nodes_name, out / pods_name
    write_nodes(fleet.nodes, nodes_path)
    write_pods(fleet.pods, pods_path)
    return nodes_path, pods_path
