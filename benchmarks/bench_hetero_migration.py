"""The planner's V100 -> L40S and L40S -> V100 migration estimates beside the whitepaper's 8.3 s / 12.7 s.

    .venv/bin/python benchmarks/bench_hetero_migration.py [--json out.json]

The whitepaper (section 2.3) gives average migration times (8.3 s V100 -> L40S, 12.7 s back) and a
"memory sync bandwidth" (42.1 / 31.5 GB/s) but no model size. This script prices the same moves with
the migration planner (``seedance.hetero.migration``) between a PCIe V100-32GB box (``pcie-v100``
topology fixture) and a PCIe L40S box (``pcie-l40s``), 100 Gbit/s and 10 Gbit/s networks, tiered
storage, for: an 8B-parameter model's FP16 weights (16 GB, an inference model moved as the whitepaper's
text describes), a full V100-32GB (32 GB), and the size the whitepaper's own figures imply
(8.3 s x 42.1 GB/s = 349 GB, which no V100 holds). ``transfer_s`` is the time the job is away
(checkpoint, transfer, HBM read/write, compatibility, restart); the restart is the planner's 10 s default.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from seedance.core.errors import InputError
from seedance.hetero.fleet import FleetNode, gpu_type
from seedance.hetero.migration import MigrationPlanner, MigrationRequest
from seedance.storage.tiers import STORAGE
from seedance.topology.compat import CudaBuild, newest_driver
from seedance.topology.topo import fixture

WHITEPAPER = {"V100->L40S": {"time_s": 8.3, "sync_gbs": 42.1}, "L40S->V100": {"time_s": 12.7, "sync_gbs": 31.5}}


def node(name: str, gpu: str, gpus: int, topo: str, gbps: float) -> FleetNode:
    g = gpu_type(gpu)
    return FleetNode(name, g, gpus, newest_driver(g.compute_capability), g.tdp_w, STORAGE.get("tiered"),
                     gbps / 8.0, topo)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    planner = MigrationPlanner(topologies={"pcie-v100": fixture("pcie-v100"), "pcie-l40s": fixture("pcie-l40s")})
    build = CudaBuild.of("11.8", sass=["sm_70", "sm_80"], ptx=["compute_80"])
    rows: list[dict[str, Any]] = []
    for gbps in (100.0, 10.0):
        v100 = node("v100-box", "V100-32GB", 8, "pcie-v100", gbps)
        l40s = node("l40s-box", "L40S", 4, "pcie-l40s", gbps)
        for size in (16.0, 32.0, 8.3 * 42.1):
            for label, src, dst in (("V100->L40S", v100, l40s), ("L40S->V100", l40s, v100)):
                try:
                    req = MigrationRequest(label, size, build, src, 0.0, precision="fp16")
                except InputError as exc:
                    rows.append({"move": label, "network_gbps": gbps, "state_gb": size, "refused": str(exc)})
                    continue
                c = planner.cost(req, dst)
                row = {"move": label, "network_gbps": gbps, "state_gb": round(size, 1), "feasible": c.feasible}
                if c.feasible:
                    slow = c.slowest
                    assert slow is not None
                    row.update(transfer_s=round(c.transfer_s, 2), checkpoint_s=round(c.checkpoint_s, 2),
                               topology_s=round(c.topology_s, 2), restart_s=c.restart_s,
                               slowest_link=f"{slow.kind} {slow.gbs:g} GB/s", whitepaper_s=WHITEPAPER[label]["time_s"])
                else:
                    row["refused"] = c.reason
                rows.append(row)
    for r in rows:
        print(r)
    implied = {k: round(v["time_s"] * v["sync_gbs"], 1) for k, v in WHITEPAPER.items()}
    print("state size implied by the whitepaper's time x sync bandwidth (GB):", implied)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "whitepaper": WHITEPAPER, "implied_state_gb": implied}, fh, indent=2)


if __name__ == "__main__":
    main()
