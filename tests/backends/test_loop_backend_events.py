"""What the live loop does with what a backend reports: a lost run is re-queued and placed again, a
dead node goes down, backend-side cancels and failures keep their reason; logs through the API and
the CLI. A scripted dispatcher stands in for Ray, so every step is exact."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from sqlalchemy import select

from seedance.backends.dispatch import BackendStatus, Dispatcher, DispatchRequest
from seedance.cli.main import main
from seedance.control.db.models import EventRecord, Node
from seedance.control.service import ControlService
from tests.backends.conftest import start_server
from tests.control.helpers import ADMIN_TOKEN, add_nodes, job_row, settings_for, submit


class Scripted(Dispatcher):
    """Records dispatches; reports what the test sets."""

    name = "scripted"

    def __init__(self) -> None:
        self.dispatched: list[DispatchRequest] = []
        self.status: dict[str, BackendStatus] = {}
        self.reasons: dict[str, str] = {}
        self.health: dict[str, bool] = {}
        self.cancelled: list[str] = []
        self.texts: dict[int, str] = {}

    def dispatch(self, job: DispatchRequest) -> str:
        self.dispatched.append(job)
        runs = sum(1 for d in self.dispatched if d.job_id == job.job_id)
        return f"scripted:{job.job_id}:{runs}"

    def cancel(self, handle: str) -> None:
        self.cancelled.append(handle)

    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        return {h: self.status.get(h, BackendStatus.RUNNING) for h in handles}

    def reason(self, handle: str) -> str | None:
        return self.reasons.get(handle)

    def node_health(self) -> Mapping[str, bool]:
        return dict(self.health)

    def logs(self, job_id: int, *, tail_bytes: int | None = None) -> str | None:
        text = self.texts.get(job_id)
        return text[-tail_bytes:] if text is not None and tail_bytes else text


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[ControlService]:
    service = ControlService(settings_for(f"sqlite:///{tmp_path / 'store.db'}"), dispatcher=Scripted())
    service.loop.poll_interval_s = 0.0
    add_nodes(service, count=2, gpus=1, labels={"gpu.sla.level": "gold"})
    yield service
    service.close()


def kinds(svc: ControlService, job_id: int | None = None) -> list[str]:
    with svc.db.read() as s:
        q = select(EventRecord.kind).order_by(EventRecord.id)
        q = q.where(EventRecord.job_id == job_id) if job_id is not None else q.where(EventRecord.job_id.is_(None))
        return list(s.scalars(q))


def test_a_lost_run_is_requeued_and_placed_again_off_the_dead_node(svc: ControlService) -> None:
    d = svc.dispatcher
    assert isinstance(d, Scripted)
    a = submit(svc, name="a", gpus=0.5)
    svc.loop.run_once()
    first = d.dispatched[0]
    assert (first.node, first.gpu_indices, first.gpu_milli) == ("node-0", (0,), 500)
    assert first.node_labels == {"gpu.sla.level": "gold"}  # the decided node's labels reach the backend
    job = job_row(svc, a)
    assert (job.status, job.dispatch_handle) == ("running", "scripted:1:1")
    # the backend loses the run and the node
    d.status["scripted:1:1"] = BackendStatus.PREEMPTED
    d.reasons["scripted:1:1"] = "node lost: node-0 died"
    d.health = {"node-0": False, "node-1": True}
    svc.loop.run_once()
    job = job_row(svc, a)
    assert (job.status, job.node_name, job.gpu_indices, job.dispatch_handle) == ("pending", None, [], None)
    assert job.status_reason == "re-queued: node lost: node-0 died"
    with svc.db.read() as s:
        assert dict(s.execute(select(Node.name, Node.status)).all()) == {"node-0": "down", "node-1": "ready"}
    svc.loop.run_once()  # placed again by Seedance, on the surviving node, and dispatched as a new run
    job = job_row(svc, a)
    assert (job.status, job.node_name, job.dispatch_handle) == ("running", "node-1", "scripted:1:2")
    assert [x.node for x in d.dispatched] == ["node-0", "node-1"]
    assert kinds(svc, a) == ["job.submitted", "job.bound", "job.started", "job.preempted", "job.requeued",
                             "job.bound", "job.started"]
    assert kinds(svc) == ["cluster.created", "node.added", "node.added", "node.down"]
    # a node already down is not written again; the run ends normally
    with svc.db.read() as s:
        version = s.scalars(select(Node.version).where(Node.name == "node-0")).one()
    d.status["scripted:1:2"] = BackendStatus.SUCCEEDED
    svc.loop.run_once()
    assert job_row(svc, a).status == "succeeded"
    with svc.db.read() as s:
        assert s.scalars(select(Node.version).where(Node.name == "node-0")).one() == version
    assert kinds(svc).count("node.down") == 1


def test_backend_cancels_and_failures_end_the_job_with_the_backends_reason(svc: ControlService) -> None:
    d = svc.dispatcher
    assert isinstance(d, Scripted)
    a, b = submit(svc, name="a", gpus=1), submit(svc, name="b", gpus=1)
    svc.loop.run_once()
    d.status.update({"scripted:1:1": BackendStatus.CANCELLED, "scripted:2:1": BackendStatus.FAILED})
    d.reasons["scripted:2:1"] = "RuntimeError: injected failure at step 2"
    svc.loop.run_once()
    assert (job_row(svc, a).status, job_row(svc, a).status_reason) == ("cancelled", "backend reported cancelled")
    failed = job_row(svc, b)
    assert (failed.status, failed.status_reason) == ("failed", "RuntimeError: injected failure at step 2")
    assert kinds(svc, b)[-1] == "job.failed"
    c = submit(svc, name="c", gpus=1)
    svc.loop.run_once()  # the freed GPUs are used again
    assert job_row(svc, c).status == "running"


def test_logs_through_the_api_and_seedancectl(svc: ControlService, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    d = svc.dispatcher
    assert isinstance(d, Scripted)
    a = submit(svc, name="a", gpus=1)
    svc.loop.run_once()
    d.texts[a] = "=== attempt 1 ===\nstep 1/2 loss 0.5\nstep 2/2 loss 0.25\n"
    url, stop = start_server(svc)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30) as http:
            body = http.get(f"/api/v1/jobs/{a}/logs").json()
            assert body == {"job_id": a, "name": "a", "status": "running", "backend": "scripted", "available": True,
                            "text": d.texts[a], "note": ""}
            assert http.get(f"/api/v1/jobs/{a}/logs", params={"tail_bytes": 5}).json()["text"] == "0.25\n"
            assert http.get(f"/api/v1/jobs/{a}/logs", params={"tail_bytes": 0}).status_code == 422
            assert http.get("/api/v1/jobs/999/logs").status_code == 404
            del d.texts[a]
            body = http.get(f"/api/v1/jobs/{a}/logs").json()
            assert (body["available"], body["text"]) == (False, "")
            assert body["note"] == "backend scripted keeps no log of this job"
            # a cancel through the API stops the run on the backend
            assert http.post(f"/api/v1/jobs/{a}/cancel").json()["status"] == "cancelled"
            assert d.cancelled == ["scripted:1:1"]
        # seedancectl logs -f against the server: prints what comes, until the job ends
        monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "remote"))
        monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
        assert main(["config", "set-context", "lab", "--server", url, "--token", ADMIN_TOKEN, "--use"]) == 0
        b = submit(svc, name="b", gpus=1)
        svc.loop.run_once()
        d.texts[b] = "one\n"

        def backend() -> None:
            time.sleep(0.6)
            d.texts[b] += "two\n"
            time.sleep(0.6)
            d.texts[b] += "three\n"
            d.status[job_row(svc, b).dispatch_handle or ""] = BackendStatus.SUCCEEDED
            svc.loop.run_once()

        capsys.readouterr()
        worker = threading.Thread(target=backend)
        worker.start()
        assert main(["logs", "b", "-f", "--interval", "0.2"]) == 0
        worker.join()
        assert capsys.readouterr().out == "one\ntwo\nthree\n"
        assert main(["logs", "b", "--tail-bytes", "6"]) == 0
        assert capsys.readouterr().out == "three\n"
    finally:
        stop()
    # the CLI without a context: the local store, its (noop) backend keeps no logs
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: Cluster\nmetadata: {name: default}\nspec:\n  nodes:\n"
                        "    - {name: n0, cpu_milli: 8000, memory_mib: 32768, gpu_count: 1, gpu_model: T4}\n---\n"
                        "kind: TrainingJob\nmetadata: {name: local-job}\nspec: {gpus: 1}\n")
    assert main(["submit", "-f", str(manifest), "-o", "json"]) == 0
    capsys.readouterr()
    assert main(["logs", "local-job"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and "backend noop keeps no log of this job" in out.err
    assert main(["logs", "local-job", "-o", "json"]) == 0
    assert '"available": false' in capsys.readouterr().out
    assert main(["logs", "nope"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["logs", "local-job", "-o", "xml"]) == 2
