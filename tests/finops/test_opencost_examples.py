"""Side by side with OpenCost's documented allocation numbers, on the same inputs.

1. OpenCost specification v0.1, Appendix A (opencost/opencost ``spec/opencost-specv01.md``): a node with
   1 GPU, 1 CPU and 1 GB RAM costs $35/mo; base prices GPU $30, CPU $30, RAM $10 are normalised to
   $15, $15 and $5 so that they sum to the node's price and keep their ratio.
2. The documented ``/allocation`` example output (https://opencost.io/docs/integrations/api-examples,
   ``fixtures/opencost-allocation-example-output.json``): the ``opencost`` namespace (one container,
   7 days) — its cost = max(request, usage) × rate × hours per resource, its efficiencies and total.
   The rates are not in the file; they are read off the *other* entry (``kube-system``:
   cpuCost / cpuCoreHours, ramCost / ramByteHours), so the prediction for ``opencost`` is independent.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np

from seedance.finops.allocation import AllocationQuery, allocate, to_opencost
from seedance.finops.ingest import ContainerKey, LedgerIngestor
from seedance.finops.lines import LedgerFrame
from seedance.finops.prices import GIB, PriceSheet
from tests.finops.helpers import assets, usage

EXAMPLE = json.loads((Path(__file__).parent / "fixtures" / "opencost-allocation-example-output.json").read_text())
DATA = EXAMPLE["data"][0]


def test_spec_appendix_a_node_price_normalisation() -> None:
    sheet = PriceSheet(gpu={"X": 30.0}, cpu=30.0, ram_gib=10.0, nodes={"node": 35.0})
    r = sheet.node_rates("node", 1.0, GIB, {"X": 1.0})
    assert (round(r.gpu_rate("X"), 9), round(r.cpu, 9), round(r.ram_gib, 9)) == (15.0, 15.0, 5.0)
    assert math.isclose(r.gpu_rate("X") / r.ram_gib, 3.0) and math.isclose(r.cpu / r.ram_gib, 3.0)
    assert sheet.node_rates("other", 1.0, GIB, {"X": 1.0}).cpu == 30.0  # no contract: base prices


def _rates() -> tuple[float, float]:
    ks = DATA["kube-system"]
    return ks["cpuCost"] / ks["cpuCoreHours"], ks["ramCost"] / (ks["ramByteHours"] / GIB)


def _bill(entry: dict, cpu_req: float, cpu_use: float, ram_req: float, ram_use: float) -> dict:
    cpu_rate, ram_rate = _rates()
    start = dt.datetime.fromisoformat(entry["start"].replace("Z", "+00:00"))
    seconds = entry["minutes"] * 60.0
    n = 10_080  # one sample per minute, as OpenCost's default 1m resolution
    dt_s = seconds / n
    t = start.timestamp() + dt_s * np.arange(1, n + 1)
    key = ContainerKey(entry["properties"]["namespace"], "pod", "c")
    rows = [(x, dt_s, 0, 0, 0, cpu_req, cpu_use, ram_req, ram_use, 0.0, 0.0) for x in t]
    ing = LedgerIngestor("default-cluster", PriceSheet(cpu=cpu_rate, ram_gib=ram_rate), window_s=86400.0)
    ing.add(usage(rows, nodes=["n"], keys=[key], models=[""]),
            assets([(x, dt_s, 0, 2.0, 8 * GIB, -1, 0.0, 1) for x in t], nodes=["n"], models=[]))
    frame = LedgerFrame.from_lines([ln for nw in ing.node_windows() for ln in ing.lines(nw)])
    q = AllocationQuery(start=start - dt.timedelta(days=1), end=start + dt.timedelta(days=9),
                        aggregate=("namespace",), idle=False)
    doc = to_opencost(allocate(frame, q, cluster="default-cluster"))
    return doc["data"][0][key.namespace]


def close(a: float, b: float, rel: float = 2e-3) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=2e-5)


def test_documented_allocation_of_the_opencost_namespace() -> None:
    theirs = DATA["opencost"]
    ours = _bill(theirs, theirs["cpuCoreRequestAverage"], theirs["cpuCoreUsageAverage"],
                 theirs["ramByteRequestAverage"], theirs["ramByteUsageAverage"])
    for field in ("minutes", "cpuCores", "cpuCoreHours", "cpuCost", "ramBytes", "ramByteHours", "ramCost",
                  "totalCost", "cpuEfficiency", "ramEfficiency", "totalEfficiency", "gpuCost", "sharedCost"):
        assert close(ours[field], theirs[field]), (field, ours[field], theirs[field])
    # the figures themselves, as OpenCost prints them (5 decimals)
    assert (round(ours["cpuCost"], 5), round(ours["ramCost"], 5), round(ours["totalCost"], 5)) == (
        0.06359, 0.04577, 0.10936)  # theirs: 0.10937, the sum of their two rounded parts is 0.10936


def test_zero_request_bills_usage_with_efficiency_one() -> None:
    # ``prometheus`` requests nothing; OpenCost bills what it used and reports efficiency 1. Its core-hours
    # (1.15098) imply a billed average of 0.00685 cores over the window (its cpuCores), which we feed.
    theirs = DATA["prometheus"]
    ours = _bill(theirs, 0.0, theirs["cpuCores"], 0.0, theirs["ramBytes"])
    assert close(ours["cpuCoreHours"], theirs["cpuCoreHours"]) and close(ours["cpuCost"], theirs["cpuCost"])
    assert close(ours["ramCost"], theirs["ramCost"]) and close(ours["totalCost"], theirs["totalCost"])
    assert ours["cpuEfficiency"] == 1.0 == theirs["cpuEfficiency"]
    assert ours["ramEfficiency"] == 1.0 == theirs["ramEfficiency"]
