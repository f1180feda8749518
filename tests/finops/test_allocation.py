"""OpenCost's allocation model on hand-built ledgers: exact figures, idle and shared rules, invariants."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.finops.allocation import AllocationQuery, allocate, to_opencost
from seedance.finops.ingest import ContainerKey, LedgerIngestor, split_windows
from seedance.finops.lines import LedgerFrame
from seedance.finops.prices import PriceSheet
from tests.finops.helpers import GIB, assets, ticks, usage

UTC = dt.UTC
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
PRICES = PriceSheet(gpu={"H100-80GB": 10.0, "A100-80GB": 4.0}, cpu=0.05, ram_gib=0.01)
KEYS = [ContainerKey("ml", "train", "main", labels=(("team", "nlp"),)),
        ContainerKey("serve", "chat", "main", labels=(("env", "prod"), ("team", "search"))),
        ContainerKey("kube-system", "dns", "main"),
        ContainerKey("serve", "embed", "main", labels=(("env", "prod"), ("team", "search")))]


def one_hour(shares: dict[int, tuple[float, float]] | None = None, *, hours: int = 1) -> LedgerFrame:
    """Node n1 (8 H100, 96 cores, 1 TiB) for ``hours``; containers bill (gpu request, gpu use) per key."""
    shares = shares if shares is not None else {0: (2.0, 1.0), 1: (0.25, 0.1), 2: (0.0, 0.0), 3: (0.5, 0.5)}
    e0 = T0.timestamp()
    ts = ticks(e0, e0 + 3600 * hours, 60.0)
    rows = []
    for k, (req, use) in shares.items():
        for t in ts:
            rows.append((t, 60.0, 0, k, 1 if req or use else 0, 2.0, 1.0, 8 * GIB, 10 * GIB, req, use))
    ing = LedgerIngestor("c", PRICES)
    ing.add(usage(rows, nodes=["n1"], keys=KEYS, models=["", "H100-80GB"]),
            assets([(t, 60.0, 0, 96.0, 1024 * GIB, 0, 8.0, 1) for t in ts], nodes=["n1"], models=["H100-80GB"]))
    return LedgerFrame.from_lines([ln for nw in ing.node_windows() for ln in ing.lines(nw)])


def q(**kw: object) -> AllocationQuery:
    args: dict = {"start": T0, "end": T0 + dt.timedelta(hours=1), **kw}
    return AllocationQuery(**args)


def by_name(doc: dict) -> dict[str, dict]:
    return {e["name"]: e for e in doc["allocations"]}


NODE_HOUR = 8 * 10.0 + 96 * 0.05 + 1024 * 0.01  # $ of the node for one hour


def test_quarter_share_is_billed_a_quarter_of_the_gpu_hour() -> None:
    doc = allocate(one_hour(), q(aggregate=("pod",)), cluster="c")
    e = by_name(doc)
    assert math.isclose(e["chat"]["gpu_hours"], 0.25) and math.isclose(e["chat"]["gpu_cost"], 2.5)
    assert math.isclose(e["train"]["gpu_cost"], 20.0)  # max(request 2, usage 1) = 2 GPUs for 1 h
    assert math.isclose(e["chat"]["gpu_efficiency"], 0.1 / 0.25)
    # RAM usage 10 GiB above the 8 GiB request is billed (OpenCost: max(request, usage)), CPU request 2
    assert math.isclose(e["chat"]["ram_cost"], 10 * 0.01) and math.isclose(e["chat"]["cpu_cost"], 2 * 0.05)
    assert math.isclose(e["chat"]["cpu_efficiency"], 0.5) and math.isclose(e["chat"]["ram_efficiency"], 1.25)
    assert math.isclose(e["chat"]["minutes"], 60.0) and math.isclose(e["chat"]["gpu_count"], 0.25)
    assert math.isclose(doc["total_cost"], NODE_HOUR) and math.isclose(doc["cluster_cost"], NODE_HOUR)


def test_idle_is_its_own_line_per_resource() -> None:
    doc = allocate(one_hour(), q(aggregate=("team",)), cluster="c")
    idle = by_name(doc)["__idle__"]
    assert math.isclose(idle["gpu_cost"], (8 - 2 - 0.25 - 0.5) * 10.0)
    assert math.isclose(idle["cpu_cost"], (96 - 8) * 0.05) and math.isclose(idle["ram_cost"], (1024 - 40) * 0.01)
    assert by_name(doc)["__unallocated__"]["gpu_cost"] == 0  # kube-system has no team label
    assert math.isclose(doc["idle_cost"], idle["total_cost"])
    assert math.isclose(sum(e["total_cost"] for e in doc["allocations"]), NODE_HOUR)
    no_idle = allocate(one_hour(), q(aggregate=("team",), idle=False), cluster="c")
    assert "__idle__" not in by_name(no_idle)
    assert math.isclose(no_idle["total_cost"], NODE_HOUR - idle["total_cost"])


def test_share_idle_weighted_even_and_by_node() -> None:
    base = by_name(allocate(one_hour(), q(aggregate=("team",)), cluster="c"))
    idle_gpu = base["__idle__"]["gpu_cost"]
    w = allocate(one_hour(), q(aggregate=("team",), share_idle="weighted"), cluster="c")
    e = by_name(w)
    assert "__idle__" not in e
    # per resource, by cost: nlp has 20 of the 27.5 $ billed for GPUs and 1/4 of the CPU and RAM cost
    want = idle_gpu * 20 / 27.5 + base["__idle__"]["cpu_cost"] / 4 + base["__idle__"]["ram_cost"] / 4
    assert math.isclose(e["nlp"]["idle_cost"], want)
    assert math.isclose(sum(x["total_cost"] for x in w["allocations"]), NODE_HOUR)
    even = by_name(allocate(one_hour(), q(aggregate=("team",), share_idle="even"), cluster="c"))
    per = base["__idle__"]["total_cost"] / 3  # nlp, search, __unallocated__
    assert all(math.isclose(even[n]["idle_cost"], per) for n in ("nlp", "search", "__unallocated__"))
    bn = allocate(one_hour(), q(aggregate=("team",), share_idle="weighted", idle_by_node=True), cluster="c")
    assert math.isclose(bn["total_cost"], NODE_HOUR) and "__idle__" not in by_name(bn)


def test_idle_of_a_resource_nobody_pays_for_stays_idle() -> None:
    # nobody requests a GPU: its idle cannot be weighted by GPU cost and stays in __idle__ (opencost#883)
    frame = one_hour({0: (0.0, 0.0), 2: (0.0, 0.0)})
    doc = allocate(frame, q(aggregate=("pod",), share_idle="weighted"), cluster="c")
    e = by_name(doc)
    assert math.isclose(e["__idle__"]["gpu_cost"], 80.0) and e["__idle__"]["cpu_cost"] == 0
    assert math.isclose(doc["total_cost"], NODE_HOUR)


def test_shared_namespaces_are_spread_weighted_or_even() -> None:
    doc = allocate(one_hour(), q(aggregate=("namespace",), share_namespaces=("kube-system",)), cluster="c")
    e = by_name(doc)
    assert "kube-system" not in e
    dns = 2 * 0.05 + 10 * 0.01  # what kube-system was billed
    assert math.isclose(e["ml"]["shared_cost"] + e["serve"]["shared_cost"], dns)
    own_ml = e["ml"]["total_cost"] - e["ml"]["shared_cost"]
    own_serve = e["serve"]["total_cost"] - e["serve"]["shared_cost"]
    assert math.isclose(e["ml"]["shared_cost"], dns * own_ml / (own_ml + own_serve))
    assert math.isclose(doc["shared_cost"], dns) and math.isclose(doc["total_cost"], NODE_HOUR)
    even = by_name(allocate(one_hour(), q(aggregate=("namespace",), share_namespaces=("kube-system",),
                                          share_split="even"), cluster="c"))
    assert math.isclose(even["ml"]["shared_cost"], dns / 2)


def test_multi_aggregation_names_and_properties() -> None:
    e = by_name(allocate(one_hour(), q(aggregate=("namespace", "label:team", "env")), cluster="c"))
    assert {"ml/nlp/__unallocated__", "serve/search/prod", "kube-system/__unallocated__/__unallocated__",
            "__idle__"} == set(e)
    assert e["serve/search/prod"]["properties"] == {"namespace": "serve", "label:team": "search", "env": "prod"}
    assert math.isclose(e["serve/search/prod"]["gpu_hours"], 0.75)


def test_steps_and_opencost_shape() -> None:
    frame = one_hour(hours=3)
    doc = allocate(frame, AllocationQuery(start=T0, end=T0 + dt.timedelta(hours=3), aggregate=("pod",),
                                          step_s=3600), cluster="c")
    assert len(doc["sets"]) == 3 and all(math.isclose(s["total_cost"], NODE_HOUR) for s in doc["sets"])
    assert math.isclose(doc["total_cost"], 3 * NODE_HOUR)
    assert math.isclose(by_name(doc)["chat"]["gpu_hours"], 0.75) and math.isclose(by_name(doc)["chat"]["minutes"], 180)
    oc = to_opencost(doc)
    assert oc["code"] == 200 and len(oc["data"]) == 3
    chat = oc["data"][0]["chat"]
    assert math.isclose(chat["gpuCost"], 2.5) and math.isclose(chat["gpuHours"], 0.25) and "totalEfficiency" in chat


def test_bad_queries_are_input_errors() -> None:
    with pytest.raises(InputError, match="valid: none, weighted, even"):
        q(share_idle="half")
    with pytest.raises(InputError, match="annotations"):
        q(aggregate=("annotation:owner",))
    with pytest.raises(InputError, match="ends before"):
        AllocationQuery(start=T0, end=T0 - dt.timedelta(seconds=1))
    with pytest.raises(InputError, match="this window has 50001 steps of 3600 s; at most 50000") as e:
        q(end=T0 + dt.timedelta(hours=50001), step_s=3600.0)
    assert e.value.source == "step"
    assert q(end=T0 + dt.timedelta(hours=50000), step_s=3600.0).step_s == 3600.0  # the bound itself is allowed


def test_an_empty_window_is_an_empty_allocation() -> None:
    """``all`` of an empty ledger: start == end, one empty step, nothing allocated."""
    doc = allocate(one_hour(), AllocationQuery(start=T0, end=T0, step_s=3600.0), cluster="c")
    assert (doc["total_cost"], doc["allocations"], [s["allocations"] for s in doc["sets"]]) == (0.0, [], [[]])


def test_samples_straddling_a_window_edge_are_split_exactly() -> None:
    span, win, dur = split_windows(np.array([3595.0]), np.array([3605.0]), 3600.0)
    assert (span.tolist(), win.tolist(), dur.tolist()) == ([0, 0], [0, 1], [5.0, 5.0])
    ing = LedgerIngestor("c", PRICES)
    ing.add(usage([(3605.0, 10.0, 0, 0, 1, 0, 0, 0, 0, 1.0, 0.0)], nodes=["n"], keys=KEYS[:1],
                  models=["", "H100-80GB"]))
    nws = ing.node_windows()
    assert [nw.window for nw in nws] == [0, 1]
    assert [round(next(iter(nw.containers.values()))[9], 9) for nw in nws] == [5.0, 5.0]


def test_negative_usage_is_refused_before_anything_is_stored() -> None:
    ing = LedgerIngestor("c", PRICES)
    with pytest.raises(InputError, match="negative value") as e:
        ing.add(usage([(60.0, 60.0, 0, 0, 0, 1.0, -0.5, 0, 0, 0, 0)], nodes=["n"], keys=KEYS[:1], models=[""]))
    assert e.value.field == "cpu_use" and ing.state == {}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(0, 2), st.floats(0, 4), st.floats(0, 4),
                          st.floats(0, 1), st.floats(0, 1.5), st.integers(1, 180)), min_size=1, max_size=30),
       st.sampled_from([("namespace",), ("pod",), ("team",), ("node", "env"), ("cluster",), ("container",)]),
       st.sampled_from(["none", "weighted", "even"]), st.booleans(), st.booleans())
def test_every_window_every_aggregation_adds_up_to_the_cluster(
    samples: list[tuple[int, int, int, float, float, float, float, int]], agg: tuple[str, ...], share: str,
    by_node: bool, shared_ns: bool,
) -> None:
    """Σ allocations + idle + shared = cluster cost (within $0.01) for every step and every aggregation."""
    e0 = T0.timestamp()
    models = ["", "H100-80GB", "A100-80GB"]
    rows = []
    for node, key, model, creq, cuse, greq, guse, minute in samples:
        rows.append((e0 + minute * 60.0, 60.0, node, key, model, creq, cuse, 4 * GIB, 2 * GIB,
                     greq if model else 0.0, guse if model else 0.0))
    ts = ticks(e0, e0 + 3 * 3600, 60.0)
    arows = [(t, 60.0, n, 64.0, 512 * GIB, n, 4.0, 1) for t in ts for n in (0, 1)]
    ing = LedgerIngestor("c", PRICES)
    ing.add(usage(rows, nodes=["n0", "n1"], keys=KEYS, models=models),
            assets(arows, nodes=["n0", "n1"], models=["H100-80GB", "A100-80GB"]))
    frame = LedgerFrame.from_lines([ln for nw in ing.node_windows() for ln in ing.lines(nw)])
    cluster_hour = 4 * 10.0 + 4 * 4.0 + 2 * (64 * 0.05 + 512 * 0.01)
    query = AllocationQuery(start=T0, end=T0 + dt.timedelta(hours=3), aggregate=agg, step_s=3600, share_idle=share,
                            idle_by_node=by_node, share_namespaces=("kube-system",) if shared_ns else ())
    doc = allocate(frame, query, cluster="c")
    for s in doc["sets"]:
        assert abs(sum(e["total_cost"] for e in s["allocations"]) - cluster_hour) < 0.01
        assert abs(s["total_cost"] - cluster_hour) < 0.01
    assert abs(doc["total_cost"] - 3 * cluster_hour) < 0.01
    assert abs(sum(e["total_cost"] for e in doc["allocations"]) - doc["total_cost"]) < 0.01
