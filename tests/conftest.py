"""Shared builders: tiny hand-made clusters and traces, and paths to the real shared data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Placement
from seedance.traces.paths import data_dir
from seedance.traces.schema import PodTrace


def make_cluster(
    nodes: Sequence[tuple[int, int, int, str | None]] | None = None, **labels: str
) -> ClusterSpec:
    """Nodes given as ``(cpu_milli, memory_mib, gpus, model)``; names ``n0, n1, ...``."""
    nodes = nodes or [(32000, 65536, 2, "T4"), (64000, 131072, 4, "G2"), (16000, 32768, 1, "T4")]
    return ClusterSpec(
        nodes=tuple(
            NodeSpec(
                name=f"n{i}", cpu_milli=c, memory_mib=m, gpu_count=g, gpu_model=model, labels=dict(labels)
            )
            for i, (c, m, g, model) in enumerate(nodes)
        )
    )


def occupy(
    state: ClusterState, node: int, gpus: tuple[int, ...], milli: int, cpu: int = 1000, mem: int = 1024
) -> None:
    """Apply a placement by hand."""
    state.apply(Placement(node, gpus, milli, cpu, mem))


def make_trace(
    rows: Sequence[tuple[int, int, int, int]],
    *,
    times: Sequence[tuple[float, float]] | None = None,
    spec: str = "",
    qos: str = "LS",
) -> PodTrace:
    """Pods given as ``(cpu_milli, memory_mib, num_gpu, gpu_milli)``."""
    n = len(rows)
    arr = np.array(rows, dtype=np.int64).reshape(n, 4)
    t = np.array(times, dtype=np.float64) if times is not None else np.full((n, 2), np.nan)
    return PodTrace(
        source="hand-made",
        name=np.array([f"p{i:04d}" for i in range(n)]),
        cpu_milli=arr[:, 0].copy(),
        memory_mib=arr[:, 1].copy(),
        num_gpu=arr[:, 2].copy(),
        gpu_milli=arr[:, 3].copy(),
        gpu_spec=np.array([spec] * n, dtype=object),
        gpu_types={"": ()} if not spec else {"": (), spec: (spec,)},
        qos=np.array([qos] * n, dtype=object),
        phase=np.array(["Running"] * n, dtype=object),
        creation=t[:, 0].copy(),
        deletion=t[:, 1].copy(),
        scheduled=np.full(n, np.nan),
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (``../shared/data``); a missing folder fails loudly."""
    return data_dir()


@pytest.fixture(scope="session")
def alibaba(shared_data: Path) -> Path:
    """The Alibaba GPU trace folder."""
    return shared_data / "alibaba-gpu-v2023"
