"""The Ray backend's pieces without a cluster: resources and options, handles, error classes, the
workloads (real PyTorch, in-process), the supervisor's log and report bookkeeping, output capture."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from seedance.backends import ray_runtime as rt
from seedance.backends.dispatch import DISPATCHERS, BackendStatus, DispatchRequest, read_logs
from seedance.backends.ray_backend import RayDispatcher, RaySettings, job_spec, ray_node_resources, ray_start_args
from seedance.backends.workloads import WORKLOADS, JobContext, workload_of
from seedance.core.errors import InputError


def req(**kw: Any) -> DispatchRequest:
    base: dict[str, Any] = {
        "job_id": 7, "tenant_id": 1, "name": "j", "kind": "TrainingJob", "tier": "gold", "cluster": "c", "node": "n1",
        "gpu_model": "A100-80GB", "gpu_indices": (1,), "gpu_milli": 250, "cpu_milli": 2000, "memory_mib": 1024,
        "duration_hours": None, "labels": {}, "node_labels": {"gpu.sla.level": "gold", "team": "x"},
    }
    base.update(kw)
    return DispatchRequest(**base)


def test_a_placed_job_becomes_these_ray_task_options() -> None:
    s = RaySettings()
    # a quarter of GPU 1: num_gpus 0.25, no CPU, GPU 1 booked, the node's tier label asked for
    o = job_spec(req(), s)["options"]
    assert o == {"num_gpus": 0.25, "num_cpus": 0, "resources": {"seedance.gpu:1": 0.25, "gpu.sla.level:gold": 0.001},
                 "max_retries": 0, "retry_exceptions": False, "name": "seedance-job-7"}
    # two whole GPUs on an unlabelled node; Ray's max_calls when set
    o = job_spec(req(gpu_indices=(0, 3), gpu_milli=1000, node_labels={}), RaySettings(max_calls=0))["options"]
    assert o["num_gpus"] == 2 and o["resources"] == {"seedance.gpu:0": 1.0, "seedance.gpu:3": 1.0}
    assert o["max_calls"] == 0
    # CPU only: Ray books the CPU request
    o = job_spec(req(gpu_indices=(), gpu_milli=0, node_labels={"gpu.mode": "mig"}), s)["options"]
    assert o["num_gpus"] == 0 and o["num_cpus"] == 2.0 and o["resources"] == {"gpu.mode:mig": 0.001}
    # the workload and its parameters come from the job's labels
    spec = job_spec(req(labels={"seedance.io/workload": "sleep", "seedance.io/seconds": "3", "team": "a"}), s)
    assert (spec["workload"], spec["params"]) == ("sleep", {"seconds": "3"})
    assert (spec["node"], spec["gpu_indices"], spec["gpu_milli"]) == ("n1", [1], 250)


def test_ray_nodes_advertise_their_name_gpus_and_labels() -> None:
    res = ray_node_resources("gpu-a", 2, {"gpu.sla.level": "gold", "gpu.mode": "shared", "zone": "x"})
    assert res == {"seedance.node:gpu-a": 1.0, "seedance.gpu:0": 1.0, "seedance.gpu:1": 1.0,
                   "gpu.sla.level:gold": 1.0, "gpu.mode:shared": 1.0}
    args = ray_start_args("gpu-a", 2, {"gpu.sla.level": "gold"})
    assert args[0] == "--num-gpus=2" and json.loads(args[1].split("=", 1)[1])["seedance.node:gpu-a"] == 1.0
    assert rt.names_of({"seedance.node:gpu-a": 1.0, "GPU": 2.0}) == ["gpu-a"]


def test_handles_round_trip_and_foreign_handles_are_unknown() -> None:
    assert rt.make_handle(12, 3) == "ray:12:3" and rt.parse_handle("ray:12:3") == (12, 3)
    for bad in ("noop:12", "ray:12", "ray:a:1", "ray:1:2:3", ""):
        assert rt.parse_handle(bad) is None
    d = RayDispatcher(address="127.0.0.1:1")  # never connects: no Ray handle among them
    assert d.poll(["noop:1", "timer:2:3.0"]) == {"noop:1": BackendStatus.UNKNOWN, "timer:2:3.0": BackendStatus.UNKNOWN}
    d.cancel("noop:1")
    assert DISPATCHERS.get("RAY") is RayDispatcher and d.reason("ray:1:1") is None


def test_task_errors_are_classified_failed_cancelled_or_lost() -> None:
    import ray.exceptions as rx

    assert rt.classify_error(rx.TaskCancelledError(), False) == (rt.CANCELLED, "cancelled")
    wrapped = rx.RayTaskError("run_job", "Traceback ...", RuntimeError("injected failure at step 2"))
    assert rt.classify_error(wrapped, False) == (rt.FAILED, "RuntimeError: injected failure at step 2")
    st, why = rt.classify_error(rx.NodeDiedError("Task failed because the node it was running on is dead"), False)
    assert st == rt.LOST and why.startswith("node lost: Task failed because the node")
    assert rt.classify_error(rx.TaskUnschedulableError("node doesn't exist any more"), False)[0] == rt.LOST
    # a crashed worker is a failure on a live node, a loss on a dead one
    assert rt.classify_error(rx.WorkerCrashedError(), False)[0] == rt.FAILED
    assert rt.classify_error(rx.WorkerCrashedError(), True)[0] == rt.LOST


class FakeChannel:
    def __init__(self, release_after: int = 0) -> None:
        self.calls = 0
        self.release_after = release_after

    def released(self) -> bool:
        self.calls += 1
        return self.calls > self.release_after

    def stopping(self) -> bool:
        return False


def test_torch_train_really_trains_and_fails_or_holds_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    out = WORKLOADS.get("train")(JobContext(job_id=3, name="t", attempt=1, params={"steps": "25"}))
    assert out["steps"] == 25 and out["final_loss"] < 0.5 * out["first_loss"] and out["device"] == "cpu"
    again = WORKLOADS.get("torch-train")(JobContext(job_id=3, name="t", attempt=2, params={"steps": "25"}))
    assert again["final_loss"] == pytest.approx(out["final_loss"])  # seeded by the job id
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("job t (id 3) attempt 1: torch 2.13.0+cpu on cpu")
    assert printed[25].startswith("step 25/25 loss ")
    with pytest.raises(RuntimeError, match="injected failure at step 2"):
        WORKLOADS.get("torch-train")(JobContext(job_id=1, name="t", attempt=1, params={"steps": "5", "fail-at": "2"}))
    ch = FakeChannel(release_after=3)
    WORKLOADS.get("torch-train")(JobContext(job_id=1, name="t", attempt=1, params={"steps": "1", "hold": "true"},
                                            channel=ch))
    assert ch.calls == 4  # waited until the fourth look
    assert "holding until released" in capsys.readouterr().out
    with pytest.raises(InputError, match="steps must be in"):
        WORKLOADS.get("torch-train")(JobContext(job_id=1, name="t", attempt=1, params={"steps": "0"}))
    assert WORKLOADS.get("sleep")(JobContext(job_id=1, name="s", attempt=1, params={"seconds": "0"})) == \
        {"seconds": 0.0}
    assert workload_of({}) == ("torch-train", {})


def test_the_supervisor_keeps_one_log_per_job_with_a_size_limit(tmp_path: Path) -> None:
    sup = rt.JobSupervisor(str(tmp_path / "logs"), max_log_bytes=2048)
    a = rt.Attempt(job_id=5, attempt=1, name="j", node="n1", gpu_indices=(0,), gpu_milli=500, options={})
    sup._attempts[(5, 1)] = a
    sup._latest[5] = a
    flags = sup.report(5, 1, {"ray_node": "abc", "ray_gpu_ids": [0], "ray_cuda_visible": "0", "cuda_visible": "0",
                              "pid": 42, "host": "h"}, "hello\n")
    assert flags == {"release": False, "stop": False}
    assert (a.status, a.ran_on, a.pid) == (rt.RUNNING, "abc", 42)
    sup.release([5])
    assert sup.report(5, 1, None, "")["release"] is True
    assert sup.report(9, 1, None, "x") == {"release": False, "stop": True}  # unknown run: told to stop
    sup._finish(a, rt.SUCCEEDED, "succeeded")
    sup._finish(a, rt.LOST, "ignored: already ended")
    text = sup.read_log(5)
    assert text is not None
    assert text.startswith("--- started on Ray node abc (host h, pid 42), CUDA_VISIBLE_DEVICES=0")
    assert text.endswith("hello\n=== attempt 1: succeeded (succeeded) ===\n")
    assert sup.read_log(5, tail_bytes=10) == text.encode()[-10:].decode()
    assert sup.read_log(6) is None
    sup._append(5, "x" * 5000)
    assert (tmp_path / "logs" / "job-5.log").stat().st_size < 2048 + 100
    assert sup.read_log(5).endswith("[seedance: log limit reached; later output dropped]\n")  # type: ignore[union-attr]
    sup._append(5, "more")
    assert not sup.read_log(5).endswith("more")  # type: ignore[union-attr]
    assert sup.attempts(5)[0]["handle"] == "ray:5:1" and "ref" not in sup.attempts(5)[0]


def test_tee_stream_writes_to_both_sides() -> None:
    got: list[str] = []

    class Chan:
        def write(self, text: str) -> None:
            got.append(text)

    orig = io.StringIO()
    tee = rt.TeeStream(orig, Chan())  # type: ignore[arg-type]
    print("a line", file=tee)
    tee.flush()
    assert orig.getvalue() == "a line\n" and "".join(got) == "a line\n" and not tee.isatty()


class Broken(RayDispatcher):
    def logs(self, job_id: int, *, tail_bytes: int | None = None) -> str | None:
        raise ConnectionError("cluster down")


def test_reading_logs_never_raises() -> None:
    text, note = read_logs(Broken(), 1)
    assert text is None and note == "backend ray did not answer: ConnectionError: cluster down"
    assert read_logs(DISPATCHERS.get("noop")(), 1) == (None, "backend noop keeps no log of this job")


def test_the_supervisor_forgets_the_oldest_ended_jobs_beyond_its_record_limit(tmp_path: Path) -> None:
    sup = rt.JobSupervisor(str(tmp_path), max_records=10)
    for jid in range(1, 13):
        a = rt.Attempt(job_id=jid, attempt=1, name=f"j{jid}", node="n", gpu_indices=(), gpu_milli=0, options={})
        sup._attempts[(jid, 1)] = a
        sup._latest[jid] = a
    sup._latest[2].status = rt.RUNNING  # a live run is never forgotten
    for jid in range(1, 13):
        if jid != 2:
            sup._finish(sup._latest[jid], rt.SUCCEEDED, "succeeded")
    assert len(sup._attempts) <= 10 and (2, 1) in sup._attempts and (12, 1) in sup._attempts
    assert (1, 1) not in sup._attempts and 1 not in sup._latest
    assert sup.read_log(1) is not None  # the log stays on disk
