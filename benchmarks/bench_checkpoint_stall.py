"""Checkpoint stall, NVMe/CXL tiers vs remote storage only, each layout tuned by the same interval rule.

The replays of ``seedancectl simulate --mode replay --workload gavel-mix --storage tiered,remote-only``
(``checkpoint_both_tuned`` of its payload), one (rule, policy, seed, layout) per line of JSON as each
finishes, so that a partial run still reports; the summary at the end is the mean over seeds.

    .venv/bin/python benchmarks/bench_checkpoint_stall.py --rule checkfreq -o stall-checkfreq.jsonl
    .venv/bin/python benchmarks/bench_checkpoint_stall.py --rule young-daly -o stall-young-daly.jsonl
    .venv/bin/python benchmarks/bench_checkpoint_stall.py --summary stall-checkfreq.jsonl
    # sensitivity: a staged snapshot overlapping half of the next iteration (CheckFreq's pipelining)
    .venv/bin/python benchmarks/bench_checkpoint_stall.py --rule checkfreq --snapshot-overlap 0.5 -o ov.jsonl
    # remote-only at the tiered layout's interval (the same recovery points)
    .venv/bin/python benchmarks/bench_checkpoint_stall.py --layouts remote-only --interval-layout tiered -o same.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from seedance.hetero.experiment import GAVEL_CLUSTER, _fleet
from seedance.hetero.replay import ReplayOptions, replay
from seedance.hetero.throughput import default_matrix
from seedance.hetero.workload import alibaba_gaps, gavel_mix
from seedance.traces.paths import DEFAULT_PODS, data_file

POLICIES = ("hetero-jct", "hetero-fair", "agnostic", "agnostic-las", "agnostic-fair")
LAYOUTS = ("tiered", "remote-only")
FIELDS = ("checkpoint_stall_s", "stall_periodic_s", "stall_leave_s", "stall_restore_s", "mean_checkpoint_interval_s",
          "expected_rework_per_interruption_s", "expected_rework_s", "stall_plus_rework_s", "avg_jct_s",
          "migrations", "preemptions", "gpu_hours")


def run(rule: str, seeds: list[int], policies: list[str], out: Path, *, layouts: tuple[str, ...] = LAYOUTS,
        interval_layout: str | None = None, snapshot_overlap: float = 0.0) -> None:
    """Replay each (seed, policy, layout); ``interval_layout`` fixes one layout's interval for all (else own)."""
    m = default_matrix()
    gaps = alibaba_gaps(data_file(DEFAULT_PODS))
    with out.open("a") as f:
        for s in seeds:
            wl = gavel_mix(m, gaps, jobs=300, jobs_per_hour=3.0, seed=s)
            for p in policies:
                for layout in layouts:
                    ref = interval_layout or layout
                    o = ReplayOptions(interval_rule=rule, interval_layout=ref, snapshot_overlap=snapshot_overlap)
                    r = replay(p, wl, _fleet(GAVEL_CLUSTER, layout), o)
                    f.write(json.dumps({"rule": rule, "seed": s, "policy": p, "layout": layout,
                                        "interval_layout": ref, "snapshot_overlap": snapshot_overlap,
                                        **{k: r[k] for k in FIELDS}}) + "\n")
                    f.flush()


def summary(path: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        by[(r["policy"], r["layout"])][r["seed"]] = r
    out: dict[str, Any] = {}
    for p in dict.fromkeys(r["policy"] for r in rows):
        seeds = sorted(set(by[(p, "tiered")]) & set(by[(p, "remote-only")]))
        if not seeds:
            continue
        mean = {lay: {k: float(np.mean([by[(p, lay)][s][k] for s in seeds])) for k in FIELDS} for lay in LAYOUTS}
        t, r = mean["tiered"], mean["remote-only"]
        out[p] = {"seeds": seeds, **mean,
                  "stall_ratio": r["checkpoint_stall_s"] / t["checkpoint_stall_s"],
                  "stall_plus_rework_ratio": r["stall_plus_rework_s"] / t["stall_plus_rework_s"],
                  "rework_per_interruption_ratio": r["expected_rework_per_interruption_s"]
                  / t["expected_rework_per_interruption_s"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rule", default="checkfreq", choices=("checkfreq", "young-daly"))
    ap.add_argument("--seeds", default="42-46")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("-o", "--out", type=Path, default=Path("stall.jsonl"))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--interval-layout", default=None, help="one layout's interval for every layout (default: own)")
    ap.add_argument("--snapshot-overlap", type=float, default=0.0,
                    help="share of an iteration a staged snapshot may overlap (sensitivity; default 0, CheckFreq's "
                         "profiler's assumption)")
    ap.add_argument("--summary", type=Path, default=None, help="summarise a JSONL file instead of running")
    a = ap.parse_args()
    if a.summary is not None:
        print(json.dumps(summary(a.summary), indent=1))
        return
    lo, _, hi = a.seeds.partition("-")
    run(a.rule, list(range(int(lo), int(hi or lo) + 1)), a.policies.split(","), a.out,
        layouts=tuple(a.layouts.split(",")), interval_layout=a.interval_layout, snapshot_overlap=a.snapshot_overlap)
    print(json.dumps(summary(a.out), indent=1))


if __name__ == "__main__":
    main()
