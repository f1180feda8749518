"""Full results of every replay that ``bench_inference_speed.py`` times, for before/after checks of an engine change.

Writes, per row, the result dict of :meth:`Experiment.simulate` (without ``wall_s``) and a SHA-256
of every request's outcome (arrival, first token, finish, state, preemptions, prefix-cache hit
tokens, rejection reasons) and of the memory series, iterations and events. Run it at two
revisions and compare the files: a speed-up must leave them byte-identical.

    PYTHONPATH=src .venv/bin/python benchmarks/inference_result_digest.py before.json
    PYTHONPATH=src .venv/bin/python benchmarks/inference_result_digest.py after.json --rows mt/seedance+all
    cmp before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from seedance.inference.disagg import Disaggregation
from seedance.inference.experiment import Deployment, Experiment
from seedance.inference.metrics import SLO
from seedance.inference.routing import Admission
from seedance.inference.run import ServingRun
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.inference.workloads import multi_turn
from seedance.traces.paths import data_file


def digest(run: ServingRun) -> str:
    """SHA-256 of a run's per-request outcomes and counters."""
    h = hashlib.sha256()
    for a in (run.arrival, run.first_token, run.finish, run.mem_mib, run.mem_t):
        h.update(np.asarray(np.nan_to_num(a, nan=-1.0), np.float64).tobytes())
    for b in (run.state, run.preemptions, run.cached_tokens if run.cached_tokens is not None else np.zeros(1)):
        h.update(np.asarray(b, np.int64).tobytes())
    h.update(f"{run.iterations} {run.events}".encode())
    h.update(json.dumps(run.reject_reason, sort_keys=True).encode())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="JSON file to write")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    args = ap.parse_args()
    trace = load_azure_trace(data_file(CONV_TRACE))
    exp = Experiment(trace, Deployment(replicas=4), SLO())
    mt = Experiment(multi_turn(trace), Deployment(replicas=4), SLO())
    adm = Admission(ttft_ms=(10_000.0,))
    r01: dict[str, Any] = {"prefix_cache": True, "router": "prefix-aware", "router_options": {"cache_threshold": 0.1}}
    cases: list[tuple[str, Experiment, str, dict[str, Any]]] = [
        (p, exp, p, {}) for p in ("static", "dynamic", "continuous", "continuous-chunked", "seedance")]
    cases += [
        ("mt/chunked", mt, "continuous-chunked", {}),
        ("mt/+prefix-cache", mt, "continuous-chunked", {"prefix_cache": True}),
        ("mt/+prefix-router", mt, "continuous-chunked", {"prefix_cache": True, "router": "prefix-aware"}),
        ("mt/+prefix-router-0.1", mt, "continuous-chunked", {**r01}),
        ("mt/+admission", mt, "continuous-chunked", {**r01, "admission": adm}),
        ("mt/seedance+all", mt, "seedance", {**r01, "admission": adm}),
        ("mt/perfect-cache", mt, "continuous-chunked", {"perfect_cache": True}),
        ("mt/disagg-1:3", mt, "continuous-chunked", {"disaggregate": Disaggregation(prefill=1)}),
    ]
    wanted = {r for r in args.rows.split(",") if r}
    out: dict[str, Any] = {}
    for name, e, policy, engine in cases:
        if wanted and name not in wanted:
            continue
        row, run = e.simulate(policy, 1.0, **engine)
        row = {k: v for k, v in row.items() if k != "wall_s"}
        out[name] = {"row": json.loads(json.dumps(row, default=str)), "digest": digest(run)}
        print(name, out[name]["digest"][:16], flush=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
