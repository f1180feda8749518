"""MIG audit acceptance figures: the fault corpus, and the audit's cost against parsing alone.

    .venv/bin/python benchmarks/bench_mig_audit.py [--repeat 30] [--json out.json]

1. Corpus (``seedance.trust.corpus``): every real fixture of ``tests/trust/fixtures/nvsmi`` alone
   and in its consistent pairs, plus 8 nodes (2 per MIG model, 3 GPUs each) whose layouts the
   geometry planner chose, rendered as ``-L`` / ``mig -lgi`` / ``mig -lci`` / ``-q``, with the
   planner's plan as the drift reference; each clean case gets one twin with one injected fault
   (classes spread evenly). Printed: faults found per class, false findings on the clean half,
   extra findings on the faulty half; the same for every injector on every case it applies to.
2. Speed: median time to audit one 8-GPU node (all four outputs) against the median time to only
   parse them, in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from seedance.slicing.mig import Instance, mig_gpu  # noqa: E402
from seedance.trust.audit import audit  # noqa: E402
from seedance.trust.corpus import all_faults, build_corpus, evaluate_corpus  # noqa: E402
from seedance.trust.nvsmi import parse_output  # noqa: E402
from seedance.trust.render import (  # noqa: E402
    RenderGpu,
    compute_instance_rows,
    fake_uuid,
    gpu_instance_rows,
    render_compute_instances,
    render_gpu_instances,
    render_list,
    render_query,
)

FIX = ROOT / "tests" / "trust" / "fixtures" / "nvsmi"


def _median_s(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    t0 = time.perf_counter()
    clean, faulty = build_corpus(FIX, time_limit_s=2.0)
    built_s = time.perf_counter() - t0
    twin = evaluate_corpus(clean, faulty)
    every = evaluate_corpus(clean, all_faults(clean))
    print(f"corpus built in {built_s:.2f} s (8 planner runs)")
    for title, r in (("balanced corpus (one faulty twin per clean case)", twin),
                     ("every injector on every case it applies to", every)):
        print(f"\n{title}: {r.clean_cases} clean cases ({r.clean_files} files), "
              f"{r.faulty_cases} faulty cases ({r.faulty_files} files)")
        print(f"  false findings on clean cases: {len(r.false_findings)}; missed faults: {len(r.missed)}; "
              f"other findings on faulty cases: {len(r.extra)}")
        print("  | fault class | found | injected |")
        print("  |---|---|---|")
        for k, (found, n) in r.by_class.items():
            print(f"  | {k} | {found} | {n} |")

    g = mig_gpu("H100-80GB")
    layouts = [(Instance("4g.40gb", 0), Instance("2g.20gb", 4), Instance("1g.10gb", 6)),
               (Instance("3g.40gb", 0), Instance("3g.40gb", 4)),
               tuple(Instance("1g.10gb", s) for s in range(7))]
    gpus = [RenderGpu(i, g, "NVIDIA H100 80GB HBM3", fake_uuid("GPU", "bench", i), layouts[i % 3]) for i in range(8)]
    texts = [render_list(gpus), render_gpu_instances(gpu_instance_rows(gpus)),
             render_compute_instances(compute_instance_rows(gpus)),
             render_query((FIX / "h100-80gb_q_della.txt").read_text(), gpus)]
    parse_s = _median_s(lambda: [parse_output(t) for t in texts], args.repeat)
    audit_s = _median_s(lambda: audit([parse_output(t, f"f{i}") for i, t in enumerate(texts)]), args.repeat)
    assert not audit([parse_output(t, f"f{i}") for i, t in enumerate(texts)]).findings
    print(f"\n8-GPU H100 node, 4 outputs ({sum(len(t) for t in texts)} bytes), median of {args.repeat} "
          f"(machine shared): parse {parse_s * 1e3:.2f} ms, parse + audit {audit_s * 1e3:.2f} ms "
          f"(audit / parse = {audit_s / parse_s:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps({"balanced": twin.to_json(), "exhaustive": every.to_json(),
                                         "parse_ms": parse_s * 1e3, "audit_ms": audit_s * 1e3}, indent=2))
    ok = not (twin.false_findings or twin.missed or every.false_findings or every.missed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
