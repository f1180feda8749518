"""Cost-change decomposition: exact on hand-made windows, sums to the change on random ones."""

from __future__ import annotations

import datetime as dt
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.finops.explain import Quantities, decompose, explain, label_mask, main_cause
from seedance.finops.ingest import ContainerKey, LedgerIngestor
from seedance.finops.lines import LedgerFrame
from seedance.finops.prices import PriceSheet
from tests.finops.helpers import GIB, assets, ticks, usage

T0 = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)
KEY = ContainerKey("ml", "train", "main", labels=(("team", "nlp"),))


def window(start: dt.datetime, *, gpus: float, used: float, price: float, node_gpus: float = 4.0,
           model: str = "H100-80GB", hours: int = 1) -> LedgerFrame:
    e0 = start.timestamp()
    ts = ticks(e0, e0 + 3600 * hours, 300.0)
    ing = LedgerIngestor("c", PriceSheet(gpu={model: price}, cpu=0.0, ram_gib=0.0))
    ing.add(usage([(t, 300.0, 0, 0, 1, 0.0, 0.0, 0.0, 0.0, gpus, used) for t in ts], nodes=["n"], keys=[KEY],
                  models=["", model]),
            assets([(t, 300.0, 0, 8.0, 8 * GIB, 0, node_gpus, 1) for t in ts], nodes=["n"], models=[model]))
    return LedgerFrame.from_lines([ln for nw in ing.node_windows() for ln in ing.lines(nw)])


def test_price_volume_idle_and_efficiency_effects() -> None:
    f0 = window(T0, gpus=1.0, used=1.0, price=10.0)
    f1 = window(T0 + H, gpus=2.0, used=1.5, price=12.0)
    doc = explain(f0, f1, w0=(T0, T0 + H), w1=(T0 + H, T0 + 2 * H))
    e = doc["effects"]
    # 4 GPUs × $10 → 4 GPUs × $12: +8 $; the hours only move between categories
    assert math.isclose(doc["change"], 8.0)
    assert math.isclose(e["price"], 8.0)  # every one of 4 GPU-hours costs 2 $ more
    assert math.isclose(e["volume"], 5.0)  # +0.5 used GPU-h at the base $10
    assert math.isclose(e["efficiency"], 5.0)  # +0.5 billed-but-unused GPU-h
    assert math.isclose(e["idle"], -10.0)  # 1 GPU-h less idle
    assert e["mix"] == 0 and e["shared"] == 0 and abs(doc["residual"]) < 1e-9
    assert doc["main_cause"] == "idle -10.00"
    (row,) = doc["hourly"]
    assert (row["baseline_cost"], row["cost"], row["savings"]) == (40.0, 48.0, -8.0)


def test_gpu_mix_effect() -> None:
    f0 = window(T0, gpus=4.0, used=4.0, price=10.0, model="H100-80GB")
    f1 = window(T0 + H, gpus=4.0, used=4.0, price=4.0, model="A100-80GB")
    e = explain(f0, f1, w0=(T0, T0 + H), w1=(T0 + H, T0 + 2 * H))["effects"]
    # the same 4 used GPU-h moved from $10 H100s to A100s: at base prices ($4 for the new A100) that is mix
    assert math.isclose(e["mix"], -24.0) and math.isclose(e["price"], 0.0) and math.isclose(e["volume"], 0.0)


def test_team_filter_ignores_idle() -> None:
    f0 = window(T0, gpus=1.0, used=1.0, price=10.0)
    f1 = window(T0 + H, gpus=2.0, used=2.0, price=10.0)
    doc = explain(f0, f1, w0=(T0, T0 + H), w1=(T0 + H, T0 + 2 * H), mask0=label_mask(f0, [("team", "nlp")]),
                  mask1=label_mask(f1, [("team", "nlp")]), include_idle=False)
    assert math.isclose(doc["change"], 10.0) and math.isclose(doc["effects"]["volume"], 10.0)
    assert doc["effects"]["idle"] == 0


def test_windows_of_different_length_compare_with_the_mean_hour() -> None:
    f0 = window(T0, gpus=1.0, used=1.0, price=10.0, hours=2)
    f1 = window(T0 + 2 * H, gpus=1.0, used=1.0, price=10.0, hours=3)
    doc = explain(f0, f1, w0=(T0, T0 + 2 * H), w1=(T0 + 2 * H, T0 + 5 * H))
    assert len(doc["hourly"]) == 3 and all(math.isclose(r["savings"], 0.0, abs_tol=1e-9) for r in doc["hourly"])
    assert all(r["baseline_cost"] == 40.0 for r in doc["hourly"])


cell = st.tuples(st.floats(0, 50), st.floats(0, 50), st.floats(0, 50), st.floats(0.01, 20))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["gpu:H100-80GB", "gpu:A100-80GB", "gpu:T4", "cpu:", "ram:"]), cell),
       st.dictionaries(st.sampled_from(["gpu:H100-80GB", "gpu:A100-80GB", "gpu:T4", "cpu:", "ram:"]), cell),
       st.floats(0, 10), st.floats(0, 10))
def test_effects_sum_to_the_change(a: dict, b: dict, o0: float, o1: float) -> None:
    def quant(d: dict, other: float) -> Quantities:
        hours, cost = {}, {}
        for k, (u, w, i, p) in d.items():
            r, m = k.split(":")
            hours.update({(r, m, "used"): u, (r, m, "waste"): w, (r, m, "idle"): i})
            cost[(r, m)] = (u + w + i) * p
        return Quantities(hours, cost, other)

    q0, q1 = quant(a, o0), quant(b, o1)
    e = decompose(q0, q1)
    assert math.isclose(sum(e.values()), q1.total - q0.total, abs_tol=1e-6 * (1 + abs(q1.total) + abs(q0.total)))
    assert main_cause(e).split()[0] in e
