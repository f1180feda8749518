"""Live preemption on a real local 3-node Ray cluster, driven by a live control plane over HTTP.

Acceptance (issue 12, item 4): the cluster's six GPUs are full of Bronze runs (two in the Bronze
pool, four borrowed on the Gold and Silver pools); a Gold job arrives and preempts the cheapest
Bronze run it may take on its own pool (the replay's stage: borrowed capacity is taken back, but
not within ``reclaim_min_runtime_s``). That run's Ray task is stopped (its worker exits), the job is
re-queued with its attempt recorded, placed again later and finishes. Every job submitted
succeeds: nothing is lost. ``seedancectl describe job`` says who preempted it and why.
Figures are printed (``-s``).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seedance.backends.ray_backend import RayDispatcher
from seedance.cli.main import main
from seedance.control.service import ControlService
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from tests.backends.conftest import (
    GPUS_PER_NODE,
    NODES,
    Plane,
    RayWorld,
    process_gone,
    register_nodes,
    start_server,
    wait_for,
)
from tests.control.helpers import settings_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480, method="thread"), pytest.mark.xdist_group("ray")]

GOLD_NODE = "gpu-a"
PROTECT_S = 12.0  # borrowed Bronze capacity is not taken back before a run is this old
STEPS = 4


def tiers() -> TierConfig:
    """Default tiers on this cluster's labels (every node is gpu.mode=shared): Gold's pool is gpu-a."""
    t = dict(DEFAULT_TIER_CONFIG.tiers)
    t["gold"] = t["gold"].model_copy(update={"node_labels": {"gpu.sla.level": ("gold",)}})
    t["bronze"] = t["bronze"].model_copy(update={"reclaim_min_runtime_s": PROTECT_S})
    return DEFAULT_TIER_CONFIG.model_copy(update={"tiers": t})


@pytest.fixture(scope="module")
def tier_plane(ray_world: RayWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """A control plane with tier pools and live preemption, dispatching to the module's Ray cluster."""
    root = tmp_path_factory.mktemp("preempt-plane")
    dispatcher = RayDispatcher(log_dir=str(root / "logs"), flush_s=0.3, namespace="seedance-test")
    service = ControlService(
        settings_for(f"sqlite:///{root / 'store.db'}", scheduler_enabled=True, scheduler_interval_s=0.2,
                     tier_pools=True, preemption=True),
        dispatcher=dispatcher, tier_config=tiers())
    service.loop.poll_interval_s = 0.2
    url, stop = start_server(service)
    p = Plane(url, service, dispatcher, root / "logs")
    register_nodes(p)
    try:
        yield p
    finally:
        stop()
        service.close()


def attempts_of(plane: Plane, jid: int) -> list[dict[str, Any]]:
    return sorted(plane.dispatcher.attempts(jid), key=lambda a: a["attempt"])


def ts(value: str) -> float:
    return dt.datetime.fromisoformat(value).timestamp()


def test_gold_preempts_the_cheapest_eligible_bronze_run_which_is_requeued_and_finishes(
    ray_world: RayWorld, tier_plane: Plane, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    t0 = time.perf_counter()
    api = tier_plane.client()
    started: dict[int, float] = {}

    def submit(name: str, tier: str, hold: bool) -> int:
        labels = {"seedance.io/steps": str(STEPS), **({"seedance.io/hold": "true"} if hold else {})}
        r = api.post("/api/v1/jobs", json={"name": name, "tier": tier, "gpus": 1, "cpu_milli": 500,
                                           "memory_mib": 512, "labels": labels})
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def run_started(jid: int) -> dict[str, Any] | None:
        j = api.get(f"/api/v1/jobs/{jid}").json()
        att = attempts_of(tier_plane, jid)
        return j if j["status"] == "running" and att and att[-1]["status"] == "running" else None

    def start_bronze(i: int) -> int:  # one at a time: every run has its own start time
        jid = submit(f"bronze-{i}", "bronze", hold=True)
        started[jid] = ts(wait_for(lambda: run_started(jid), 180, f"bronze-{i} to run on Ray")["started_at"])
        return jid

    # 1. six Bronze runs fill the six GPUs; the last one starts just before Gold arrives (protected)
    bronze = [start_bronze(i) for i in range(5)]
    wait = max(started.values()) + PROTECT_S + 1.0 - time.time()
    time.sleep(max(0.0, wait))
    bronze.append(start_bronze(5))
    t_full = time.perf_counter() - t0
    jobs = {j["id"]: j for j in api.get("/api/v1/jobs", params={"limit": 100}).json()["items"]}
    on_gold_pool = {jid: started[jid] for jid in bronze if jobs[jid]["node"] == GOLD_NODE}
    assert len(on_gold_pool) == GPUS_PER_NODE and {jobs[j]["node"] for j in bronze} == set(NODES)
    pids = {jid: attempts_of(tier_plane, jid)[-1]["pid"] for jid in bronze}

    # 2. Gold arrives on the full cluster
    t_gold = time.perf_counter()
    gold = submit("gold-0", "gold", hold=True)  # held too: the victim waits until the release below

    def preempted() -> dict[str, Any] | None:
        recs = [d for jid in on_gold_pool for d in api.get(f"/api/v1/jobs/{jid}/decisions").json()["items"]
                if d["outcome"] == "preempted"]
        return recs[0] if recs and api.get(f"/api/v1/jobs/{gold}").json()["status"] == "running" else None

    rec = wait_for(preempted, 120, "the Gold job to preempt a Bronze run and start")
    preempt_s = time.perf_counter() - t_gold
    victim = rec["job_id"]
    t_decision = ts(rec["created_at"])
    g = api.get(f"/api/v1/jobs/{gold}").json()
    assert g["node"] == GOLD_NODE and g["gpu_indices"] == rec["gpu_indices"]

    # the victim: a Bronze borrower of the Gold pool, past its protection, and the cheapest such run
    # (lost work = its whole run: the youngest eligible one); the protected one was left alone
    assert rec["explanation"]["by_job"] == gold and rec["explanation"]["by_tier"] == "gold"
    v = rec["explanation"]["victim"]
    assert v["kind"] == "reclaim" and v["tier"] == "bronze" and v["min_runtime_s"] == PROTECT_S
    eligible = {j: s for j, s in on_gold_pool.items() if t_decision - s >= PROTECT_S}
    assert eligible and victim == max(eligible, key=lambda j: eligible[j]), (victim, on_gold_pool, t_decision)
    protected = [j for j, s in on_gold_pool.items() if t_decision - s < PROTECT_S]
    assert rec["explanation"]["plan"]["protected"]["min_runtime"] == len(protected)
    assert rec["reason"].startswith(f"preempted by gold job 'gold-0' (id {gold}): reclaim bronze pod {victim}")

    # its Ray run was stopped (the worker exited), the job re-queued with its attempt recorded
    wait_for(lambda: process_gone(pids[victim]), 60, "the preempted run's worker process to exit")
    assert [a["status"] for a in attempts_of(tier_plane, victim)] == ["cancelled"]
    vj = api.get(f"/api/v1/jobs/{victim}").json()
    assert vj["status"] == "pending" and vj["attempt"] == 1
    events = api.get(f"/api/v1/jobs/{victim}/events").json()["items"]
    assert [e["kind"] for e in events[:2]] == ["job.requeued", "job.preempted"]
    assert events[0]["data"]["attempt"] == 1 and events[0]["data"]["node"] == GOLD_NODE
    assert events[1]["message"].startswith(f"preempted by gold job 'gold-0' (id {gold}): reclaim bronze pod")
    others = [j for j in bronze if j != victim]
    assert all(api.get(f"/api/v1/jobs/{j}").json()["status"] == "running" for j in others)

    # 3. release the held runs: everything finishes, the victim on a second run
    tier_plane.dispatcher.release()
    t_release = time.perf_counter()
    every = [*bronze, gold]

    def all_ended() -> list[str] | None:
        states = sorted(api.get(f"/api/v1/jobs/{j}").json()["status"] for j in every)
        return states if set(states) <= {"succeeded", "failed", "cancelled", "unschedulable"} else None

    final = wait_for(all_ended, 300, "every job to end")
    assert final == ["succeeded"] * len(every)
    finish_s = time.perf_counter() - t_release
    runs = attempts_of(tier_plane, victim)
    assert [a["status"] for a in runs] == ["cancelled", "succeeded"]
    assert runs[1]["result"]["steps"] == STEPS
    assert api.get(f"/api/v1/jobs/{victim}").json()["attempt"] == 2
    assert [a["status"] for a in attempts_of(tier_plane, gold)] == ["succeeded"]

    # 4. seedancectl describe says who preempted the job and why
    token = api.headers["Authorization"].split()[1]
    assert main(["config", "set-context", "ray-tiers", "--server", tier_plane.url, "--token", token, "--use"]) == 0
    capsys.readouterr()
    assert main(["describe", "job", str(victim)]) == 0
    table = capsys.readouterr().out
    assert "preempted" in table and "gold-0" in table and f"reclaim bronze pod {victim}" in table.replace("\n", " ")
    assert main(["describe", "job", str(victim), "-o", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert [d["outcome"] for d in described["decisions"] if d["outcome"] != "pending"] == ["bind", "preempted", "bind"]
    assert described["job"]["attempt"] == 2

    figures = {
        "jobs_submitted": len(every), "jobs_succeeded": final.count("succeeded"),
        "lost": len(every) - final.count("succeeded"), "preemptions": len(
            [d for j in every for d in api.get(f"/api/v1/jobs/{j}/decisions").json()["items"]
             if d["outcome"] == "preempted"]),
        "victim_runs": len(runs), "ray_nodes": len(NODES), "cluster_start_s": round(ray_world.start_s, 1),
        "fill_s": round(t_full, 1), "gold_submit_to_running_s": round(preempt_s, 2),
        "release_to_all_succeeded_s": round(finish_s, 1), "test_s": round(time.perf_counter() - t0, 1),
    }
    with capsys.disabled():
        print("\nray preemption acceptance:", json.dumps(figures))
        print(table)
