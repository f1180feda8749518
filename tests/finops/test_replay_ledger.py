"""Replay → ledger: a hand-made replay billed exactly, and the full default trace's invariants."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from seedance.finops.allocation import AllocationQuery, allocate
from seedance.finops.lines import ALLOC, IDLE, LedgerFrame
from seedance.finops.prices import GIB, PriceSheet
from seedance.finops.replay import load_label_file, replay_ledger, spans_from_replay
from seedance.sim.replay import ReplaySimulation
from seedance.traces.alibaba import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file
from tests.conftest import make_cluster, make_trace

EPOCH = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
MIB = 2**20


def test_hand_made_replay_is_billed_exactly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = make_cluster([(32000, 65536, 4, "T4")])
    # two pods: a 0.25-GPU share for 2 h and a whole GPU for 30 min starting at 1 h
    trace = make_trace([(4000, 8192, 1, 250), (8000, 16384, 1, 1000)], times=[(0, 7200), (3600, 5400)])
    sim = ReplaySimulation(spec, trace, "best-fit")
    sim.run()
    labels = tmp_path / "labels.csv"
    labels.write_text("name,team,namespace\np0000,nlp,research\n")
    lines = replay_ledger(spec, trace, spans_from_replay(sim), PriceSheet(gpu={"T4": 1.0}, cpu=0.1, ram_gib=0.01),
                          cluster="c", source="replay:t", epoch=EPOCH, labels=load_label_file(labels))
    frame = LedgerFrame.from_lines(lines)
    alloc = [ln for ln in lines if ln.kind == ALLOC]
    share = [ln for ln in alloc if ln.pod == "p0000"]
    assert [round(ln.gpu_h, 9) for ln in share] == [0.25, 0.25] and share[0].namespace == "research"
    assert share[0].labels == {"qos": "LS", "team": "nlp"}
    assert math.isclose(sum(ln.gpu_cost for ln in share), 0.5)  # 0.25 GPU × 2 h × $1
    whole = [ln for ln in alloc if ln.pod == "p0001"]
    assert [round(ln.gpu_h, 9) for ln in whole] == [0.5] and whole[0].namespace == "default"
    assert math.isclose(sum(ln.cpu_cost for ln in whole), 8 * 0.5 * 0.1)
    node_hour = 4 * 1.0 + 32 * 0.1 + 64 * 0.01
    assert math.isclose(frame.total(), 2 * node_hour)  # two hours of the node, every dollar on a line
    doc = allocate(frame, AllocationQuery(start=EPOCH, end=EPOCH + dt.timedelta(hours=2), aggregate=("team",)),
                   cluster="c")
    e = {x["name"]: x for x in doc["allocations"]}
    assert set(e) == {"nlp", "__unallocated__", "__idle__"}
    assert math.isclose(e["__idle__"]["gpu_cost"], 8 - 0.5 - 0.5)


@pytest.fixture(scope="module")
def default_replay() -> tuple:
    spec = load_nodes(data_file(DEFAULT_NODES))
    trace = load_pods(data_file(DEFAULT_PODS))
    sim = ReplaySimulation(spec, trace, "fgd", seed=42)
    sim.run()
    prices = PriceSheet()
    lines = replay_ledger(spec, trace, spans_from_replay(sim), prices, cluster="alibaba", source="replay:fgd",
                          epoch=EPOCH)
    return spec, trace, sim, prices, lines


def test_full_default_trace_every_window_adds_up(default_replay: tuple) -> None:
    spec, trace, sim, prices, lines = default_replay
    frame = LedgerFrame.from_lines(lines)
    e0 = EPOCH.timestamp()
    t0, t1 = e0 + float(trace.creation.min()), e0 + float(trace.deletion.max())
    node_hour = sum(n.gpu_count * prices.gpu_h(n.gpu_model or "") + n.cpu_milli / 1000 * prices.cpu
                    + n.memory_mib * MIB / GIB * prices.ram_gib for n in spec.nodes)
    starts = np.unique(frame.window_start)
    assert starts.size == math.ceil(t1 / 3600) - math.floor(t0 / 3600) > 3500  # every hour of ~149 days
    worst = 0.0
    for w in starts:
        sel = frame.window_start == w
        hours = (min(t1, w + 3600) - max(t0, w)) / 3600.0
        worst = max(worst, abs(float(frame.num["total_cost"][sel].sum()) - node_hour * hours))
        kinds = frame.text["kind"][sel]
        assert set(kinds.tolist()) <= {ALLOC, IDLE}
    assert worst < 0.01, worst  # Σ allocations + idle = cluster cost in every one of ~3 600 hourly windows
    # every placed pod is billed its request for exactly the time it ran
    placed = [r for r in sim.records if r.placement is not None]
    billed_h = float(frame.num["gpu_h"][frame.text["kind"] == ALLOC].sum())
    want_h = sum(len(r.placement.gpus) * r.placement.gpu_milli / 1000 * (r.end - r.start) / 3600 for r in placed)
    assert math.isclose(billed_h, want_h, rel_tol=1e-9)


def test_full_default_trace_aggregations_and_shares(default_replay: tuple) -> None:
    _, trace, sim, _, lines = default_replay
    frame = LedgerFrame.from_lines(lines)
    end = EPOCH + dt.timedelta(days=150)
    totals = []
    for agg in (("qos",), ("node",), ("pod",), ("gpu_model",), ("cluster",)):
        doc = allocate(frame, AllocationQuery(start=EPOCH, end=end, aggregate=agg, share_idle="weighted"),
                       cluster="alibaba")
        totals.append(sum(e["total_cost"] for e in doc["allocations"]))
    assert max(totals) - min(totals) < 0.01 and abs(totals[0] - frame.total()) < 0.01
    # every GPU-share pod is billed exactly its share of each of its GPU-hours (the trace's shares are
    # in milli-GPU, e.g. 0.46 GPU)
    shares = [k for k, r in enumerate(sim.records) if r.placement is not None and 0 < r.placement.gpu_milli < 1000]
    assert len(shares) > 1000
    by_pod: dict[str, list] = {}
    for ln in lines:
        if ln.kind == ALLOC:
            by_pod.setdefault(ln.pod, []).append(ln)
    for i in shares[:200]:
        f = sim.records[i].placement.gpu_milli / 1000
        mine = by_pod[str(trace.name[i])]
        hours = (sim.records[i].end - sim.records[i].start) / 3600
        assert math.isclose(sum(ln.gpu_h for ln in mine), f * hours, rel_tol=1e-9)
        assert all(math.isclose(ln.gpu_h, f * ln.run_s / 3600, rel_tol=1e-9) for ln in mine)
