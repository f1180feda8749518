"""Tiered replay: an exact hand-made scenario, and hypothesis properties of tiered binding.

Properties (issue 4): a Gold pod never shares a GPU and is never preempted; no victim is evicted
inside its min-runtime (reclaim min-runtime on borrowed capacity); availability lies in [0, 1];
GPU-seconds are conserved (segments vs. the integral of the cluster's allocated GPU).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import make_trace

from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.sim.tiered import DONE, REJECTED, TieredReplay
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.availability import pod_availability
from seedance.traces.schema import PodTrace

GOLD = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
SILVER = {"gpu.sla.level": "silver", "gpu.mode": "exclusive"}
BRONZE = {"gpu.sla.level": "bronze", "gpu.mode": "shared"}
T4 = 0.35


def nodes(*shape: tuple[str, int, dict[str, str]]) -> ClusterSpec:
    return ClusterSpec(nodes=tuple(
        NodeSpec(name=n, cpu_milli=64000, memory_mib=262144, gpu_count=g, gpu_model="T4", labels=lab)
        for n, g, lab in shape
    ))


def trace(rows: list[tuple[str, int, int, float, float]]) -> PodTrace:
    """Pods ``(qos, num_gpu, gpu_milli, creation, deletion)`` with 1 core and 1 GiB each."""
    t = make_trace([(1000, 1024, k, m) for _, k, m, _, _ in rows], times=[(c, d) for *_, c, d in rows])
    return dataclasses.replace(t, qos=np.array([q for q, *_ in rows], dtype=object))


def test_gold_reclaims_borrowed_gpus_and_the_victims_resume() -> None:
    spec = nodes(("g0", 2, GOLD), ("b0", 1, BRONZE))
    tr = trace([
        ("BE", 1, 1000, 0, 1000),  # bronze pool
        ("BE", 1, 1000, 10, 1000),  # borrows a gold GPU
        ("BE", 1, 500, 20, 1000),  # a share borrows the other gold GPU, as a whole GPU
        ("LS", 2, 1000, 100, 400),  # gold reclaims both
    ])
    sim = TieredReplay(spec, tr, explain_pod=1)
    sim.run()
    seg = sim.segments()
    rows = sorted(zip(seg.pod.tolist(), seg.start.tolist(), seg.end.tolist(), seg.lost_s.tolist(),
                      seg.evicted.tolist(), seg.borrowed.tolist(), seg.alloc_milli.tolist(), strict=True))
    assert rows == [
        (0, 0.0, 1000.0, 0.0, False, False, 1000),
        (1, 10.0, 100.0, 90.0, True, True, 1000),  # lost 90 s: no checkpoint yet (bronze: every 1800 s)
        (1, 400.0, 1000.0, 0.0, False, True, 1000),
        (2, 20.0, 100.0, 80.0, True, True, 1000),
        (2, 400.0, 1000.0, 0.0, False, True, 1000),
        (3, 100.0, 400.0, 0.0, False, False, 2000),
    ]
    assert sim.preempted.tolist() == [0, 1, 1, 0] and sim.preemptions == 2
    _, av = pod_availability(tr.creation, tr.deletion, seg.pod, seg.start, seg.end)
    assert av.tolist() == pytest.approx([1.0, 690 / 990, 680 / 980, 1.0])
    assert sim.used_gpu_milli_s == pytest.approx(float((seg.alloc_milli * (seg.end - seg.start)).sum()))
    events = [e["event"] for e in sim.log]
    assert events == ["decision", "preempted", "decision", "decision", "ended"]
    pre = sim.log[1]
    assert pre["by"] == 3 and pre["cost_usd"] == pytest.approx(90 / 3600 * T4 + 0.1, abs=1e-6)
    assert sim.log[2]["outcome"] == "pending"  # tried again at once: nothing free
    assert sim.log[3]["explanation"]["stage"] == "borrow"


def test_two_simulations_do_not_interact() -> None:
    spec = nodes(("g0", 2, GOLD), ("b0", 1, BRONZE))
    tr = trace([("BE", 1, 1000, 0, 100), ("BE", 1, 1000, 0, 100), ("LS", 2, 1000, 10, 50)])
    a, b = TieredReplay(spec, tr), TieredReplay(spec, tr)
    a.run()
    b.run()
    assert a.segments().start.tolist() == b.segments().start.tolist() and a.preemptions == b.preemptions == 1


RECLAIM_60 = DEFAULT_TIER_CONFIG.model_copy(update={"tiers": {
    name: spec.model_copy(update={"reclaim_min_runtime_s": 60.0}) if name != "gold" else spec
    for name, spec in DEFAULT_TIER_CONFIG.tiers.items()
}})

# bronze's own pool includes the silver nodes: silver then *preempts* bronze there (min-runtime 300 s)
SHARED_POOL = DEFAULT_TIER_CONFIG.model_copy(update={"tiers": {
    **DEFAULT_TIER_CONFIG.tiers,
    "bronze": DEFAULT_TIER_CONFIG.tiers["bronze"].model_copy(update={
        "node_labels": {"gpu.sla.level": ("bronze", "silver")}, "borrow_labels": {"gpu.sla.level": ("gold",)}}),
}})

POD = st.tuples(
    st.sampled_from(["LS", "Guaranteed", "Burstable", "BE"]),
    st.sampled_from([(0, 0), (1, 1000), (1, 500), (1, 250), (2, 1000)]),
    st.integers(0, 600),
    st.integers(0, 900),
)


@settings(max_examples=80, deadline=None)
@given(
    pods=st.lists(POD, min_size=1, max_size=30),
    config=st.sampled_from([DEFAULT_TIER_CONFIG, RECLAIM_60, SHARED_POOL]),
)
def test_tiered_binding_properties(
    pods: list[tuple[str, tuple[int, int], int, int]], config: TierConfig
) -> None:
    spec = nodes(("g0", 2, GOLD), ("g1", 2, GOLD), ("s0", 2, SILVER), ("b0", 2, BRONZE))
    tr = trace([(q, k, m, float(c), float(c + d)) for q, (k, m), c, d in pods])
    sim = TieredReplay(spec, tr, tier_config=config)
    sim.run()
    seg = sim.segments()
    gold = np.array([sim.tier(p) == "gold" for p in range(len(tr))])
    # every pod ended; nothing is held at the end
    assert set(sim.status.tolist()) <= {DONE, REJECTED} and len(sim.running) == 0
    assert sim.state.used_gpu_milli == 0 and sim.state.live_placements() == 0
    # a Gold pod is never preempted (one run at most, never evicted)
    assert (sim.preempted[gold] == 0).all()
    assert not (seg.evicted & gold[seg.pod]).any()
    # a Gold pod never shares a GPU: no other run overlaps it in time on one of its GPUs
    for i in np.flatnonzero(gold[seg.pod] & (seg.gpu_mask != 0)).tolist():
        others = (seg.node == seg.node[i]) & ((seg.gpu_mask & seg.gpu_mask[i]) != 0)
        others &= (seg.start < seg.end[i]) & (seg.end > seg.start[i])
        others[i] = False
        assert not others.any()
        assert seg.alloc_milli[i] % 1000 == 0
    # no victim inside its min-runtime (reclaim min-runtime when it was borrowing)
    for i in np.flatnonzero(seg.evicted).tolist():
        ts = config.tiers[sim.tier(int(seg.pod[i]))]
        protected = ts.reclaim_min_runtime_s if seg.borrowed[i] else ts.min_runtime_s
        assert seg.end[i] - seg.start[i] >= protected
        assert 0.0 <= seg.lost_s[i] <= seg.end[i] - seg.start[i]
    # availability in [0, 1]; runs stay inside the requested window
    ran, av = pod_availability(tr.creation, tr.deletion, seg.pod, seg.start, seg.end)
    assert ((av >= 0) & (av <= 1)).all()
    assert (ran <= tr.deletion - tr.creation + 1e-9).all()
    assert (seg.start >= tr.creation[seg.pod]).all() and (seg.end <= tr.deletion[seg.pod]).all()
    # GPU-seconds conserved: the runs' GPU-seconds equal the integral of allocated GPU over time
    assert sim.used_gpu_milli_s == pytest.approx(float((seg.alloc_milli * (seg.end - seg.start)).sum()), abs=1e-6)
