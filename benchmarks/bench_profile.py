"""Driver speed before/after a change of the scheduling code path: two source trees, one run.

Each driver runs in a fresh subprocess per tree, alternating baseline and candidate, ``--repeat``
times; only the timed part (after loading the trace) is measured, as CPU time of the process
(``time.process_time``: less sensitive than wall time to other load on a shared machine). Prints
medians and the ratio candidate / baseline per driver (compare ratios from the same run only).

    .venv/bin/python benchmarks/bench_profile.py --baseline-src ../main/src [--repeat 3]

Drivers: inflation (best-fit, fgd; default trace, seed 42, to 130%), replay (best-fit, 10% of
the nodes), tiered replay (scale 0.004), MIG-pool inflation (best-fit), extender
(filter + prioritize + bind of 300 pods on 200 nodes, in process), live loop (one cycle of 400
jobs on 40 nodes, SQLite).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

_LOAD = """
import time
from seedance.traces import load_nodes, load_pods
from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file
spec, trace = load_nodes(data_file(DEFAULT_NODES)), load_pods(data_file(DEFAULT_PODS))
"""

DRIVERS: dict[str, str] = {
    "inflation best-fit": _LOAD + """
from seedance.sim.inflation import run_inflation
t0 = time.process_time(); run_inflation(spec, trace, "best-fit", 42); print(time.process_time() - t0)
""",
    "inflation fgd": _LOAD + """
from seedance.sim.inflation import run_inflation
t0 = time.process_time(); run_inflation(spec, trace, "fgd", 42); print(time.process_time() - t0)
""",
    "replay best-fit": _LOAD + """
from seedance.sim.replay import run_replay
t0 = time.process_time(); run_replay(spec, trace, "best-fit", capacity_scale=0.1); print(time.process_time() - t0)
""",
    "tiered replay": _LOAD + """
from seedance.sim.ab import prepare_cluster
from seedance.sim.tiered import TieredReplay
cluster, _ = prepare_cluster(spec, trace, capacity_scale=0.004, seed=0)
t0 = time.process_time(); TieredReplay(cluster, trace).run(); print(time.process_time() - t0)
""",
    "mig inflation": _LOAD + """
from seedance.slicing.sim import run_sliced_inflation
t0 = time.process_time()
run_sliced_inflation(spec, trace, "best-fit", 42, slices="mig")
print(time.process_time() - t0)
""",
    "extender": """
import random, time
from seedance.k8s.extender import Extender
from seedance.scheduling import make_policy
class B:
    def bind(self, **kw): pass
rng = random.Random(1)
def node(i):
    labels = {"kubernetes.io/hostname": f"n{i}", "gpu.model": "A100-80GB",
              "gpu.sla.level": ["gold", "silver", "bronze"][i % 3]}
    if i % 3 == 0:
        labels["gpu.mode"] = "exclusive"
    return {"metadata": {"name": f"n{i}", "labels": labels, "resourceVersion": "1"}, "spec": {},
            "status": {"allocatable": {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}}}
def pod(j):
    tier = ["gold", "silver", "bronze"][j % 3]
    ann = {"seedance.ai/borrow": "true"}
    lim = {"nvidia.com/gpu": "1"}
    if j % 2:
        ann["seedance.ai/gpu-milli"] = str(rng.choice([250, 500]))
    return {"metadata": {"name": f"p{j}", "namespace": "d", "uid": f"u{j}", "labels": {"seedance.ai/tier": tier},
                         "annotations": ann},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi", **lim},
                                                                "limits": lim}}]}}
ext = Extender(make_policy("best-fit"), binder=B())
ext.set_nodes([node(i) for i in range(200)])
names = [f"n{i}" for i in range(200)]
t0 = time.process_time()
for j in range(300):
    p = pod(j)
    ok = ext.filter({"Pod": p, "NodeNames": names})["NodeNames"]
    pr = ext.prioritize({"Pod": p, "NodeNames": ok})
    if ok:
        best = max(pr, key=lambda h: h["Score"])["Host"]
        ext.bind({"PodName": f"p{j}", "PodNamespace": "d", "PodUID": f"u{j}", "Node": best})
print(time.process_time() - t0)
""",
    "live loop": """
import tempfile, time, os
from seedance.control.service import ControlService
from seedance.control.settings import ControlSettings
from seedance.control.schemas import ClusterCreate, JobCreate, NodeCreate
from seedance.control.services import clusters, jobs
tok = "sdt_bench_admin_" + "a" * 24
d = tempfile.mkdtemp()
os.environ.setdefault("SEEDANCE_HOME", d)
svc = ControlService(ControlSettings(database_url=f"sqlite:///{d}/s.db", bootstrap_token=tok, scheduler_enabled=False,
                                     scheduler_batch=1024))
me = svc.authenticate(tok)
with svc.db.write() as s:
    clusters.create_cluster(session=s, principal=me, data=ClusterCreate(name="default"))
    for i in range(40):
        clusters.add_node(session=s, principal=me, cluster_name="default", data=NodeCreate(
            name=f"n{i}", cpu_milli=96000, memory_mib=512000, gpu_count=8, gpu_model="A100-80GB", labels={}))
    for j in range(400):
        jobs.submit_job(session=s, principal=me, data=JobCreate(gpus=[0.25, 0.5, 1.0, 2.0][j % 4], tier="bronze"),
                        scorer=svc.scorer, directory=svc.directory)
t0 = time.process_time(); svc.loop.run_once(); print(time.process_time() - t0)
svc.close()
""",
}


def run(src: str, code: str) -> float:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"driver failed with PYTHONPATH={src}:\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline-src", required=True, help="src/ folder of the baseline tree")
    ap.add_argument("--candidate-src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drivers", default=",".join(DRIVERS))
    ap.add_argument(
        "--collect",
        action="store_true",
        help="run a full garbage collection just before each timed part (the first full collection of a fresh "
        "process then never lands in it: its moment depends on how many objects the imports made)",
    )
    args = ap.parse_args()
    print(f"{'driver':<20} {'baseline CPU s':>15} {'candidate CPU s':>16} {'ratio':>7}")
    for name in args.drivers.split(","):
        code = DRIVERS[name]
        if args.collect:
            code = code.replace("t0 = time.process_time()", "import gc; gc.collect(); t0 = time.process_time()")
        base: list[float] = []
        cand: list[float] = []
        for _ in range(args.repeat):
            base.append(run(args.baseline_src, code))
            cand.append(run(args.candidate_src, code))
        mb, mc = statistics.median(base), statistics.median(cand)
        print(f"{name:<20} {mb:>15.3f} {mc:>16.3f} {mc / mb:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
