"""Full decision sequences of simulator runs, as digests, for the hot-path equality test.

Every ``ClusterState.apply`` and ``release`` of a run is recorded in order (node, GPUs, milli, CPU,
memory), so two runs digest alike only when every decision of the run is the same, bit for bit.
The recording wraps the state's methods (never the scheduler), so the driver under test is the
simulator's own loop.

Record the golden file (from the code the test should keep equal to):
``python -m tests.sim.decisions --out tests/sim/golden_decisions.json``
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.decision import Placement
from seedance.traces.alibaba import load_nodes, load_pods
from seedance.traces.paths import ALIBABA, DEFAULT_NODES, DEFAULT_PODS, data_file
from seedance.traces.schema import PodTrace

POLICIES = ("random", "dot-product", "clustering", "packing", "best-fit", "fgd", "seedance")
SEEDS = (42, 43, 44)
#: the replay slice: the first pods of the default trace by creation time, on a quarter of the nodes
REPLAY_PODS = 1500
REPLAY_SCALE = 0.25
GOLDEN = Path(__file__).parent / "golden_decisions.json"


class Recorder:
    """Collects the placements applied and released, in order, and digests them."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.applied = 0
        self.released = 0

    def add(self, kind: str, p: Placement) -> None:
        if kind == "a":
            self.applied += 1
        else:
            self.released += 1
        gpus = ",".join(map(str, p.gpus))
        self.hash.update(f"{kind}{p.node}:{gpus}:{p.gpu_milli}:{p.cpu_milli}:{p.memory_mib};".encode())

    def summary(self) -> dict[str, Any]:
        return {"applied": self.applied, "released": self.released, "sha256": self.hash.hexdigest()}


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record every apply/release of every ``ClusterState`` while the block runs."""
    rec = Recorder()
    apply: Callable[[ClusterState, Placement], None] = ClusterState.apply
    release: Callable[[ClusterState, Placement], None] = ClusterState.release

    def rec_apply(self: ClusterState, p: Placement) -> None:
        apply(self, p)
        rec.add("a", p)

    def rec_release(self: ClusterState, p: Placement) -> None:
        release(self, p)
        rec.add("r", p)

    ClusterState.apply = rec_apply  # type: ignore[method-assign]
    ClusterState.release = rec_release  # type: ignore[method-assign]
    try:
        yield rec
    finally:
        ClusterState.apply = apply  # type: ignore[method-assign]
        ClusterState.release = release  # type: ignore[method-assign]


def default_inputs() -> tuple[ClusterSpec, PodTrace]:
    """The default Alibaba trace and its GPU nodes."""
    return load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))


def inflation_digest(spec: ClusterSpec, trace: PodTrace, policy: str, seed: int) -> dict[str, Any]:
    """Digest of one inflation run to 130% plus its headline results."""
    from seedance.sim.inflation import run_inflation

    with recording() as rec:
        run = run_inflation(spec, trace, policy, seed)
    return {**rec.summary(), "failed": run.failed, "final_alloc_pct": run.final_alloc_pct}


def replay_slice(trace: PodTrace) -> PodTrace:
    """The replay slice of the default trace (first ``REPLAY_PODS`` pods by creation time)."""
    import numpy as np

    order = np.argsort(trace.creation, kind="stable")[:REPLAY_PODS]
    return trace.take(np.sort(order))


def replay_digest(spec: ClusterSpec, trace: PodTrace, policy: str, seed: int) -> dict[str, Any]:
    """Digest of one replay of the slice on a quarter of the nodes."""
    from seedance.sim.replay import run_replay

    with recording() as rec:
        run = run_replay(spec, trace, policy, seed=seed, capacity_scale=REPLAY_SCALE)
    return {**rec.summary(), "scheduled": run.scheduled, "utilization_pct": run.utilization_pct}


def record_all() -> dict[str, Any]:
    spec, trace = default_inputs()
    sliced = replay_slice(trace)
    out: dict[str, Any] = {"trace": f"{ALIBABA}/openb_pod_list_default.csv", "inflation": {}, "replay": {}}
    for policy in POLICIES:
        for seed in SEEDS:
            key = f"{policy}/{seed}"
            out["inflation"][key] = inflation_digest(spec, trace, policy, seed)
            out["replay"][key] = replay_digest(spec, sliced, policy, seed)
            print(key, out["inflation"][key]["sha256"][:12], out["replay"][key]["sha256"][:12], flush=True)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=GOLDEN)
    args = ap.parse_args()
    args.out.write_text(json.dumps(record_all(), indent=1) + "\n", encoding="utf-8")
