"""Isolation grades of running jobs in the API's job representation, ``describe`` and ``explain``.

Two tenants share GPUs on a time-sliced node (runtime), on a MIG node (different GPU instances:
hardware) and a whole GPU (hardware); the grade is read-only, derived, and the OpenAPI document
stays valid with it. A deferred job's reason shows in ``describe`` and ``explain``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from seedance.cli.main import main
from seedance.control.schemas import JobCreate
from seedance.control.service import ControlService
from seedance.control.services import jobs, tenants
from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN, add_nodes


def _submit_for(svc: ControlService, tenant: str, **fields: Any) -> int:
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        tid = tenants.ensure_tenant(session=s, name=tenant).id
        out, _ = jobs.submit_job(session=s, principal=me, data=JobCreate.model_validate({**fields, "tenant_id": tid}),
                                 scorer=svc.scorer, directory=svc.directory)
    return out.id


def test_the_api_shows_the_isolation_grade_of_every_running_job(
    live_server_factory: Callable[..., LiveServer], sqlite_url: str
) -> None:
    server = live_server_factory(sqlite_url)
    svc = server.service
    add_nodes(svc, count=1, gpus=1, prefix="ts", labels={"gpu.mode": "shared"})
    add_nodes(svc, count=1, gpus=1, prefix="mig", labels={"gpu.mode": "mig"})
    add_nodes(svc, count=1, gpus=1, prefix="whole", labels={"gpu.mode": "exclusive"})
    ids = {
        "a-ts": _submit_for(svc, "bank", gpus=0.25, gpu_types=[], name="a-ts"),
        "b-ts": _submit_for(svc, "shop", gpus=0.25, name="b-ts"),
    }
    svc.loop.run_once()  # both shares on ts-0 (best-fit: the tightest node), time-sliced
    ids["whole"] = _submit_for(svc, "bank", gpus=1, name="whole")
    svc.loop.run_once()
    c = server.client()
    got = {n: c.get(f"/api/v1/jobs/{j}").json() for n, j in ids.items()}
    assert {n: (g["node"], g["status"]) for n, g in got.items()} == {
        "a-ts": ("ts-0", "running"), "b-ts": ("ts-0", "running"), "whole": ("mig-0", "running")}
    assert got["a-ts"]["isolation"] == {
        "grade": "runtime", "slice_grade": "runtime", "backend": "time-slicing", "gpu": 0, "weakest_with": "b-ts",
        "reason": "time-sliced contexts"}
    assert got["b-ts"]["isolation"]["weakest_with"] == "a-ts"
    assert got["whole"]["isolation"] == {
        "grade": "hardware", "slice_grade": "hardware", "backend": "whole", "gpu": 0, "weakest_with": None,
        "reason": "no other tenant on this GPU"}
    listed = {j["name"]: j["isolation"] for j in c.get("/api/v1/jobs").json()["items"]}
    assert listed["a-ts"]["grade"] == "runtime" and listed["whole"]["grade"] == "hardware"
    assert c.get(f"/api/v1/jobs/{ids['a-ts']}/explain").json()["job"]["isolation"]["grade"] == "runtime"
    pending = _submit_for(svc, "bank", gpus=4, name="big")  # never fits: no grade while not placed
    assert c.get(f"/api/v1/jobs/{pending}").json()["isolation"] is None
    spec = c.get("/openapi.json").json()
    assert spec["components"]["schemas"]["IsolationRead"]["properties"]["grade"]["enum"] == [
        "hardware", "driver", "runtime", "none"]
    job_schema = spec["components"]["schemas"]["JobRead"]
    assert "isolation" not in job_schema.get("required", [])  # read-only, derived: old clients unaffected
    assert {"$ref": "#/components/schemas/IsolationRead"} in job_schema["properties"]["isolation"]["anyOf"]


def test_mig_shares_of_two_tenants_are_hardware_isolated(make_service: Callable[..., ControlService],
                                                         sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=1, prefix="mig", labels={"gpu.mode": "mig"})
    a = _submit_for(svc, "bank", gpus=0.25)
    b = _submit_for(svc, "shop", gpus=0.25)
    svc.loop.run_once()
    with svc.db.read() as s:
        ga = jobs.to_read(jobs.get_job(session=s, principal=svc.authenticate(ADMIN_TOKEN), job_id=a), "default")
        gb = jobs.to_read(jobs.get_job(session=s, principal=svc.authenticate(ADMIN_TOKEN), job_id=b), "default")
    assert ga.node == gb.node == "mig-0" and ga.gpu_indices == gb.gpu_indices == [0]
    assert ga.isolation is not None and gb.isolation is not None
    assert (ga.isolation.grade, ga.isolation.backend, gb.isolation.grade) == ("hardware", "mig", "hardware")
    assert ga.isolation.weakest_with is None  # nobody weaker: a MIG pair of tenants is hardware-isolated


MANIFEST = """\
apiVersion: seedance/v1
kind: Cluster
metadata: {name: default}
spec:
  nodes:
    - {name: ts-0, cpu_milli: 32000, memory_mib: 256000, gpu_count: 2, gpu_model: T4, labels: {gpu.mode: shared}}
---
kind: InferenceService
metadata: {name: chat}
spec: {tier: silver, gpus: 0.25}
"""


def test_describe_and_explain_show_the_grade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    f = tmp_path / "m.yaml"
    f.write_text(MANIFEST)
    assert main(["submit", "-f", str(f), "-o", "json"]) == 0
    capsys.readouterr()
    assert main(["describe", "job", "chat", "-o", "json"]) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert job["isolation"]["backend"] == "time-slicing" and job["isolation"]["slice_grade"] == "runtime"
    assert job["isolation"]["grade"] == "hardware"  # alone on its GPU: no other tenant to leak to
    assert main(["describe", "job", "chat"]) == 0
    assert '"slice_grade": "runtime"' in capsys.readouterr().out  # the table form
    assert main(["explain", "job", "chat"]) == 0
    out = capsys.readouterr().out
    assert "isolation" in out and "time-slicing" in out
