"""The Ray backend on a real local 3-node Ray cluster, driven by a live control plane over HTTP.

Acceptance (issue 7, Ray part): 24 jobs with fractional GPUs (1, 0.5, 0.25) train a small PyTorch
model for a few steps on CPU; each runs on the Ray node of Seedance's decision with Seedance's GPU
indices; one is cancelled while it runs (its worker process is killed); a node is killed while it
runs jobs, which are re-queued, placed again by Seedance on the surviving nodes and finish. Every
job's placement (every run of it) is checked against the decisions the control plane recorded.

Timing: jobs hold on their GPUs after training until released (``seedance.io/hold``), so the node
is killed while they run, never racing their end; every wait has a deadline and the module a hard
timeout. Figures are printed (``-s``) for docs/ray.md.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from seedance.cli.main import main
from tests.backends.conftest import GPUS_PER_NODE, NODES, VICTIM, Plane, RayWorld, process_gone, wait_for

# a hard limit per test (cluster start included): a hung Ray call must not hang the suite
pytestmark = [pytest.mark.slow, pytest.mark.timeout(420, method="thread"), pytest.mark.xdist_group("ray")]

SIZES = (1.0, 0.5, 0.25)
N_JOBS = 24
STEPS = 6


def jobs_by_id(api: Any) -> dict[int, dict[str, Any]]:
    items = api.get("/api/v1/jobs", params={"limit": 1000}).json()["items"]
    return {j["id"]: j for j in items}


def latest_attempts(plane: Plane) -> dict[int, dict[str, Any]]:
    return {a["job_id"]: a for a in plane.dispatcher.attempts()}


def test_jobs_run_where_seedance_placed_them_and_none_is_lost_when_a_node_dies(
    ray_world: RayWorld, plane: Plane, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))  # the CLI's contexts file
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    t0 = time.perf_counter()
    api = plane.client()
    ids: list[int] = []
    for i in range(N_JOBS + 1):  # one more than the acceptance count: it is cancelled while it runs
        r = api.post("/api/v1/jobs", json={
            "name": f"train-{i:02d}", "gpus": SIZES[i % 3], "cpu_milli": 500, "memory_mib": 512,
            "labels": {"seedance.io/steps": str(STEPS), "seedance.io/hold": "true", "team": "ml"}})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])

    # 1. the first wave: Seedance fills the 6 GPUs; every bound job is dispatched and starts on Ray
    def wave_started() -> bool:
        jobs, att = jobs_by_id(api), latest_attempts(plane)
        running = [j for j in jobs.values() if j["status"] == "running"]
        return (bool(running) and not any(j["status"] == "bound" for j in jobs.values())
                and all(att.get(j["id"], {}).get("status") == "running" for j in running)
                and any(j["node"] == VICTIM for j in running))

    wait_for(wave_started, 240, "the first wave of jobs to start on Ray")
    t_wave = time.perf_counter() - t0
    jobs = jobs_by_id(api)
    first_wave = {j["id"]: j for j in jobs.values() if j["status"] == "running"}
    used = defaultdict(float)
    for j in first_wave.values():
        used[j["node"]] += j["gpus"]
    assert set(used) == set(NODES) and all(u <= GPUS_PER_NODE for u in used.values()), used

    # 2. preemption by the control plane: cancel a running job -> its Ray task is killed
    target = next(j for j in first_wave.values() if j["node"] != VICTIM)
    pid = latest_attempts(plane)[target["id"]]["pid"]
    assert pid and not process_gone(pid)
    t_cancel = time.perf_counter()
    r = api.post(f"/api/v1/jobs/{target['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    wait_for(lambda: process_gone(pid), 60, f"the worker process {pid} of the cancelled job to exit")
    cancel_s = time.perf_counter() - t_cancel
    assert latest_attempts(plane)[target["id"]]["status"] == "cancelled"
    survivors = [i for i in ids if i != target["id"]]
    assert len(survivors) == N_JOBS

    # 3. node loss: kill the victim's raylet while its jobs run
    def settled() -> bool:  # the GPUs freed by the cancel are taken again and those jobs started
        jobs, att = jobs_by_id(api), latest_attempts(plane)
        return all(att.get(j["id"], {}).get("status") == "running" for j in jobs.values()
                   if j["status"] in ("bound", "running"))

    wait_for(settled, 180, "the jobs placed after the cancel to start")
    on_victim = {j["id"] for j in jobs_by_id(api).values() if j["status"] == "running" and j["node"] == VICTIM}
    assert on_victim
    t_kill = time.perf_counter()
    ray_world.cluster.remove_node(ray_world.handles[VICTIM], allow_graceful=False)

    def victim_down_and_requeued() -> bool:
        nodes = {n["name"]: n["status"] for n in api.get("/api/v1/clusters/default/nodes").json()}
        jobs = jobs_by_id(api)
        return nodes[VICTIM] == "down" and all(jobs[i]["node"] != VICTIM for i in on_victim)

    wait_for(victim_down_and_requeued, 60, f"{VICTIM} to be marked down and its jobs re-queued")
    requeue_s = time.perf_counter() - t_kill

    # 4. release every held job: all finish, the re-queued ones on the surviving nodes
    plane.dispatcher.release()
    t_release = time.perf_counter()

    def all_done() -> Any:
        jobs = jobs_by_id(api)
        states = sorted({jobs[i]["status"] for i in survivors})
        ended = states == ["succeeded"] or set(states) & {"failed", "cancelled", "unschedulable"}
        return states if ended else None

    assert wait_for(all_done, 420, "every job to succeed") == ["succeeded"]
    finish_s = time.perf_counter() - t_release

    # 5. every run of every job ran where Seedance decided, with its GPU indices and share
    attempts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for a in plane.dispatcher.attempts():
        attempts[a["job_id"]].append(a)
    dead = ray_world.ray_ids[VICTIM]
    runs = matches = 0
    for jid in ids:
        binds = [d for d in api.get(f"/api/v1/jobs/{jid}/decisions").json()["items"] if d["outcome"] == "bind"]
        runs_of = attempts[jid]
        assert len(runs_of) == len(binds), (jid, runs_of, binds)
        for a, d in zip(runs_of, binds, strict=True):
            runs += 1
            assert a["node"] == d["node"] and list(a["gpu_indices"]) == d["gpu_indices"], (a, d)
            assert a["ray_node"] == ray_world.ray_ids[d["node"]], (a, d)
            assert a["ran_on"] == ray_world.ray_ids[d["node"]], (a, d)  # reported by the task itself
            assert a["cuda_visible"] == ",".join(str(g) for g in d["gpu_indices"])
            share = jobs_by_id(api)[jid]["gpus"]
            assert a["options"]["num_gpus"] == pytest.approx(share) and a["options"]["num_cpus"] == 0
            for g in d["gpu_indices"]:
                assert a["options"]["resources"][f"seedance.gpu:{g}"] == pytest.approx(min(share, 1.0))
            label = NODES[d["node"]]["gpu.sla.level"]
            assert a["options"]["resources"][f"gpu.sla.level:{label}"] == pytest.approx(0.001)
            matches += 1
        if jid == target["id"]:
            assert [a["status"] for a in runs_of] == ["cancelled"]
            continue
        *lost, last = runs_of
        assert last["status"] == "succeeded" and last["ran_on"] != dead
        assert last["result"]["steps"] == STEPS and last["result"]["final_loss"] < last["result"]["first_loss"]
        assert all(a["status"] == "lost" and a["node"] == VICTIM for a in lost)
        assert bool(lost) == (jid in on_victim), (jid, runs_of)

    # 6. what the store says about the lost runs, and the logs of a re-queued job (API and CLI)
    requeued = sorted(on_victim)
    kinds = [e["kind"] for e in api.get(f"/api/v1/jobs/{requeued[0]}/events").json()["items"]]
    assert "job.preempted" in kinds and "job.requeued" in kinds and kinds[0] == "job.succeeded"
    logs = api.get(f"/api/v1/jobs/{requeued[0]}/logs").json()
    assert logs["available"] and logs["backend"] == "ray"
    text = logs["text"]
    assert text.index("=== attempt 1") < text.index("attempt 1: lost") < text.index("=== attempt 2")
    assert f"step {STEPS}/{STEPS} loss" in text.split("=== attempt 2")[1] and "attempt 2: succeeded" in text
    assert "CUDA_VISIBLE_DEVICES=" in text and "torch 2.13.0" in text
    name = jobs_by_id(api)[requeued[0]]["name"]
    assert main(["config", "set-context", "ray-lab", "--server", plane.url, "--token", api.headers[
        "Authorization"].split()[1], "--use"]) == 0
    capsys.readouterr()
    assert main(["logs", name, "--tail-bytes", "4000"]) == 0
    out = capsys.readouterr().out
    assert "attempt 2: succeeded" in out and len(out.encode()) <= 4000
    assert main(["logs", name, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == text

    # 7. Ray gave every GPU back; the dead node's GPUs are gone from the cluster
    import ray

    free = wait_for(lambda: (r := ray.available_resources()).get("GPU", 0) >= 2 * GPUS_PER_NODE - 1e-9 and r,
                    30, "Ray to free every GPU")
    assert free["GPU"] == pytest.approx(2 * GPUS_PER_NODE)
    figures = {
        "jobs": N_JOBS, "runs": runs, "placement_matches": matches, "ray_nodes": len(NODES),
        "requeued": len(on_victim), "lost": 0, "cluster_start_s": round(ray_world.start_s, 1),
        "first_wave_s": round(t_wave, 1), "cancel_to_process_exit_s": round(cancel_s, 2),
        "kill_to_requeue_s": round(requeue_s, 2), "release_to_all_succeeded_s": round(finish_s, 1),
        "test_s": round(time.perf_counter() - t0, 1),
    }
    with capsys.disabled():
        print("\nray acceptance:", json.dumps(figures))


def test_a_failing_job_is_failed_with_its_error_and_traceback_in_the_log(plane: Plane) -> None:
    api = plane.client()
    r = api.post("/api/v1/jobs", json={"name": "bad-train", "gpus": 0.25, "cpu_milli": 500, "memory_mib": 512,
                                       "labels": {"seedance.io/steps": "5", "seedance.io/fail-at": "2"}})
    assert r.status_code == 201, r.text
    jid = r.json()["id"]
    job = wait_for(lambda: (j := api.get(f"/api/v1/jobs/{jid}").json())["status"] in ("failed", "succeeded") and j,
                   240, "the failing job to end")
    assert job["status"] == "failed"
    assert job["status_reason"] == "RuntimeError: injected failure at step 2"
    text = api.get(f"/api/v1/jobs/{jid}/logs").json()["text"]
    assert "step 2/5 loss" in text and "step 3/5" not in text
    assert "Traceback (most recent call last)" in text and "attempt 1: failed (RuntimeError: injected" in text
    kinds = [e["kind"] for e in api.get(f"/api/v1/jobs/{jid}/events").json()["items"]]
    assert kinds[0] == "job.failed"


def test_seedancectl_serve_with_dispatcher_ray_runs_a_job_on_the_cluster(
    ray_world: RayWorld, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The production path: ``seedancectl serve --dispatcher ray`` in its own process, reaching the
    cluster by address (``SEEDANCE_RAY_ADDRESS``), with its own supervisor (another namespace)."""
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.control.helpers import ADMIN_TOKEN, free_port

    port = free_port()
    env = {**os.environ, "SEEDANCE_HOME": str(tmp_path / "home"), "SEEDANCE_BOOTSTRAP_TOKEN": ADMIN_TOKEN,
           "SEEDANCE_RAY_ADDRESS": ray_world.cluster.address, "SEEDANCE_RAY_NAMESPACE": "seedance-serve",
           "SEEDANCE_RAY_LOG_DIR": str(tmp_path / "logs"), "SEEDANCE_SCHEDULER_INTERVAL_S": "0.2"}
    err = tmp_path / "serve.err"
    proc = subprocess.Popen(
        [sys.executable, "-m", "seedance.cli.main", "serve", "--port", str(port), "--dispatcher", "ray",
         "--database-url", f"sqlite:///{tmp_path / 'serve.db'}"],
        env=env, stdout=subprocess.DEVNULL, stderr=err.open("wb"), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60)

        def up() -> bool:
            try:
                return api.get("/healthz").status_code == 200
            except httpx.TransportError:
                assert proc.poll() is None, err.read_text()
                return False

        wait_for(up, 120, "seedancectl serve to answer")
        assert api.post("/api/v1/clusters", json={"name": "default"}).status_code == 201
        for name in NODES:  # the victim of the first test stays registered: the backend marks it down
            assert api.post("/api/v1/clusters/default/nodes", json={
                "name": name, "cpu_milli": 16_000, "memory_mib": 65_536, "gpu_count": GPUS_PER_NODE,
                "gpu_model": "A100-80GB", "labels": NODES[name]}).status_code == 201
        r = api.post("/api/v1/jobs", json={"name": "served", "gpus": 0.5, "labels": {"seedance.io/steps": "3"}})
        assert r.status_code == 201, r.text
        jid = r.json()["id"]
        job = wait_for(lambda: (j := api.get(f"/api/v1/jobs/{jid}").json())["status"] in ("succeeded", "failed")
                       and j, 240, "the served job to end")
        assert job["status"] == "succeeded", job
        if ray_world.handles[VICTIM] not in ray_world.cluster.worker_nodes:  # killed by the first test
            assert job["node"] != VICTIM
        monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "cli"))
        monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
        assert main(["config", "set-context", "served", "--server", url, "--token", ADMIN_TOKEN, "--use"]) == 0
        capsys.readouterr()
        assert main(["logs", "served"]) == 0
        out = capsys.readouterr().out
        assert "step 3/3 loss" in out and "attempt 1: succeeded" in out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
