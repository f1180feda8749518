"""Regression tests of an outside probe's findings: hostile YAML, keep-alive after a 500, store loss,
header size and idle connections, security headers, 405 ``Allow``, infrastructure ownership, admin
tokens, the OpenAPI document against the validators, and newcomer friction in the CLI."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
import pytest

from seedance.cli.main import main
from seedance.control.app import create_app
from seedance.control.errors import Conflict, Forbidden
from seedance.control.schemas import ClusterCreate, NodeUpdate, Role, TenantCreate, TokenCreate
from seedance.control.security import Principal
from seedance.control.service import ControlService
from seedance.control.services import clusters, events, tenants, tokens
from seedance.core.lifecycle import NodeStatus
from tests.control.conftest import PG_BASE, LiveServer
from tests.control.helpers import ADMIN_TOKEN, add_nodes, job_row, serve_in_thread, settings_for, submit

DEEP = "spec:\n  x: " + "[" * 600 + "]" * 600 + "\n"
DEEPER = "spec:\n  x: " + "[" * 5000 + "]" * 5000 + "\n"
BLOCK_DEEP = "spec:\n  x:\n  " + "- " * 600 + "leaf\n"
HUGE_INT = "spec:\n  x: " + "7" * 5000 + "\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEEDANCE_CONTEXT", raising=False)
    return tmp_path / "home"


def exchange(sock: socket.socket, request: bytes) -> bytes:
    """Send one HTTP/1.1 request on ``sock`` and read one whole answer (b"" if the peer closed)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(
        b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


# ------------------------------------------------------------------------------- hostile YAML
@pytest.mark.parametrize(("text", "message"), [
    (DEEP, "nested deeper than 64 levels"), (DEEPER, "nested deeper than 64 levels"),
    (BLOCK_DEEP, "nested deeper than 64 levels"), (HUGE_INT, "integer with more than 100 digits"),
])
def test_hostile_policy_yaml_is_a_quick_422(live_server: LiveServer, text: str, message: str) -> None:
    c = live_server.client()
    t0, cpu0 = time.perf_counter(), time.process_time()  # the server runs in this process (a thread)
    r = c.post("/api/v1/policies", json={"name": "hostile", "config_yaml": text})
    assert (r.status_code, message in r.json()["detail"]) == (422, True), r.text
    # CPU seconds, which a busy machine does not inflate (wall time only bounds a hang)
    assert time.process_time() - cpu0 < 2.0
    assert time.perf_counter() - t0 < 10.0
    assert c.get("/api/v1/policies").json() == []
    assert c.get("/healthz").status_code == 200  # and the connection still serves


@pytest.mark.parametrize(("text", "message"), [(DEEP, "nested deeper"), (BLOCK_DEEP, "nested deeper"),
                                               (HUGE_INT, "more than 100 digits")])
def test_cli_submit_of_hostile_yaml_is_one_error_line_and_exit_2(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    f = tmp_path / "hostile.yaml"
    f.write_text(text)
    code, _, err = run(capsys, "submit", "-f", str(f))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert str(f) in err  # the line names the file


# --------------------------------------------------------------- 500 / store loss / headers
def test_a_500_leaves_the_keep_alive_connection_usable(sqlite_url: str) -> None:
    svc = ControlService(settings_for(sqlite_url))
    app = create_app(service=svc)

    def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom)
    base, stop = serve_in_thread(app)
    port = int(base.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            first = exchange(sock, b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            assert first.startswith(b"HTTP/1.1 500"), first[:200]
            body = json.loads(first.partition(b"\r\n\r\n")[2])
            assert body["detail"].startswith("internal server error")
            second = exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert second.startswith(b"HTTP/1.1 200"), second[:200]
    finally:
        stop()


def test_losing_the_postgresql_connection_is_a_json_503_with_retry_after(pg_schema_url: str) -> None:
    app_name = f"sd_probe_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    svc = ControlService(settings_for(f"{pg_schema_url}&application_name={app_name}"))
    app = create_app(service=svc)
    base, stop = serve_in_thread(app)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30) as c:
            assert c.get("/api/v1/jobs").status_code == 200
            with psycopg.connect(PG_BASE, autocommit=True) as admin:
                killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                       "WHERE application_name = %s", (app_name,)).fetchone()
            assert killed is not None and killed[0] >= 1
            r = c.get("/api/v1/jobs")
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "1" and r.headers["content-type"] == "application/json"
            assert "store is unavailable" in r.json()["detail"]
            assert c.get("/api/v1/jobs").status_code == 200  # the pool reconnects on the next request
    finally:
        stop()
        svc.close()


def test_header_size_limit_and_idle_timeout(sqlite_url: str) -> None:
    from seedance.cli.serve import uvicorn_limits

    settings = settings_for(sqlite_url, max_header_bytes=8192, idle_timeout_s=1)
    svc = ControlService(settings)
    base, stop = serve_in_thread(create_app(service=svc), **uvicorn_limits(settings))
    port = int(base.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 64 * 1024 + b"\r\n\r\n"
            answer = exchange(sock, big)
            assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            assert exchange(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 200")
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
        idle[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # a request that never ends
        t0 = time.monotonic()
        closed = [s.recv(1) for s in idle]  # b"" once the server closes the connection
        assert closed == [b""] * 20 and time.monotonic() - t0 < 4.0
        for s in idle:
            s.close()
    finally:
        stop()
        svc.close()


def test_security_headers_and_405_allow(live_server: LiveServer) -> None:
    c = live_server.client()
    for path in ("/dashboard/", "/api/v1/whoami", "/api/v1/jobs/999"):
        r = c.get(path)
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    r = c.delete("/api/v1/jobs")
    assert (r.status_code, r.headers["allow"]) == (405, "GET, POST")
    r = c.put("/api/v1/tokens/1")
    assert (r.status_code, r.headers["allow"]) == (405, "DELETE, GET")


def test_sqlite_store_is_private(tmp_path: Path, make_service: Callable[..., ControlService]) -> None:
    db = tmp_path / "fresh" / "store.db"
    make_service(f"sqlite:///{db}")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    old = tmp_path / "old.db"
    old.touch(mode=0o644)
    os.chmod(old, 0o644)
    make_service(f"sqlite:///{old}")
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o600


# -------------------------------------------------------------------- shared infrastructure
def _principal(svc: ControlService, tenant: str, role: Role) -> tuple[Principal, str]:
    admin = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        found = [t for t in tenants.list_tenants(session=s, principal=admin) if t.name == tenant]
        t = found[0] if found else tenants.create_tenant(session=s, principal=admin, data=TenantCreate(name=tenant))
        _, value = tokens.create_token(session=s, principal=admin, data=TokenCreate.model_validate(
            {"name": f"{tenant}-{role.value}", "role": role.value, "tenant_id": t.id}))
    return svc.authenticate(value), value


def test_node_operations_need_cluster_admin_when_other_tenants_jobs_run_there(
        make_service: Callable[..., ControlService], db_url: str) -> None:
    svc = make_service(db_url)
    add_nodes(svc, count=1)
    op_a, _ = _principal(svc, "team-a", Role.OPERATOR)
    member_b, _ = _principal(svc, "team-b", Role.MEMBER)
    with svc.db.write() as s:
        from seedance.control.schemas import JobCreate
        from seedance.control.services import jobs

        job, _ = jobs.submit_job(session=s, principal=member_b, data=JobCreate(gpus=1, name="b-job"),
                                 scorer=svc.scorer, directory=svc.directory)
    svc.loop.run_once()
    assert job_row(svc, job.id).node_name == "node-0"
    for action in (lambda s, p: clusters.delete_node(session=s, principal=p, cluster_name="default",
                                                     node_name="node-0"),
                   lambda s, p: clusters.update_node(session=s, principal=p, cluster_name="default",
                                                     node_name="node-0", data=NodeUpdate(status=NodeStatus.CORDONED))):
        with pytest.raises(Forbidden, match="holds jobs of other tenants.*needs role cluster-admin"), \
                svc.db.write() as s:
            action(s, op_a)
    assert job_row(svc, job.id).status == "running"  # nothing happened
    # an operator may still change a node with only its own tenant's jobs (or none)
    with svc.db.write() as s:
        clusters.create_cluster(session=s, principal=op_a, data=ClusterCreate(name="lab"))
    add_nodes(svc, cluster="lab", count=1, prefix="lab")
    with svc.db.write() as s:
        clusters.update_node(session=s, principal=op_a, cluster_name="lab", node_name="lab-0",
                             data=NodeUpdate(status=NodeStatus.CORDONED))
    cadmin_a, _ = _principal(svc, "team-a", Role.CLUSTER_ADMIN)
    with svc.db.write() as s:
        assert clusters.delete_node(session=s, principal=cadmin_a, cluster_name="default",
                                    node_name="node-0") == [job.id]
    with svc.db.read() as s:
        removed = events.list_events(session=s, principal=op_a, kind="node.removed")
        seen_by_a = list(events.list_events(session=s, principal=op_a, limit=1000))
        requeued_b = events.list_events(session=s, principal=member_b, kind="job.requeued")
    assert len(removed) == 1 and removed[0].tenant_id is None
    assert set(removed[0].data) == {"requeued_jobs", "labels"} and removed[0].data["requeued_jobs"] == 1
    assert all(e.job_id is None or e.tenant_id == op_a.tenant_id for e in seen_by_a)
    assert [e.job_id for e in requeued_b] == [job.id]


# ------------------------------------------------------------------------------ admin tokens
def test_concurrent_revocations_keep_one_admin_token(make_service: Callable[..., ControlService],
                                                     pg_schema_url: str) -> None:
    svc = make_service(pg_schema_url)
    boot = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        second, value = tokens.create_token(session=s, principal=boot, data=TokenCreate.model_validate(
            {"name": "second", "role": "admin"}))
    other = svc.authenticate(value)
    first_done = threading.Event()
    outcomes: dict[str, str] = {}

    def revoke(who: Principal, target: int, key: str, hold: bool) -> None:
        try:
            with svc.db.write() as s:
                tokens.revoke_token(session=s, principal=who, token_id=target)
                if hold:
                    first_done.set()
                    time.sleep(0.5)  # keep the transaction open while the other one runs
            outcomes[key] = "revoked"
        except Conflict as exc:
            outcomes[key] = str(exc)

    t1 = threading.Thread(target=revoke, args=(other, boot.token_id, "boot", True))
    t1.start()
    assert first_done.wait(10)
    revoke(boot, second.id, "second", False)
    t1.join(10)
    assert outcomes["boot"] == "revoked" and "last admin token" in outcomes["second"], outcomes
    with svc.db.read() as s:
        live = [t for t in tokens.list_tokens(session=s, principal=other) if t.role == "admin" and not t.revoked_at]
    assert [t.id for t in live] == [second.id]


def test_a_revoked_bootstrap_token_stops_start_up_with_a_clear_error(
        home: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    svc = ControlService(settings_for(sqlite_url))
    boot = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        tokens.create_token(session=s, principal=boot,
                            data=TokenCreate.model_validate({"name": "ops", "role": "admin"}))
        tokens.revoke_token(session=s, principal=boot, token_id=boot.token_id)
    svc.close()
    with pytest.raises(tokens.BootstrapRevoked, match="was revoked"):
        ControlService(settings_for(sqlite_url))
    monkeypatch.setenv("SEEDANCE_BOOTSTRAP_TOKEN", ADMIN_TOKEN)
    code, _, err = run(capsys, "serve", "--database-url", sqlite_url, "--no-scheduler")
    assert code == 2 and err.startswith("error: ") and "bootstrap token" in err and "was revoked" in err, err


# ------------------------------------------------------------------- OpenAPI vs validators
def test_openapi_states_the_validators_rules(live_server: LiveServer) -> None:
    c = live_server.client()
    spec = c.get("/openapi.json").json()["components"]["schemas"]
    job = spec["JobCreate"]["properties"]
    assert job["labels"]["additionalProperties"] is False
    assert {b.get("multipleOf") for b in job["gpus"]["anyOf"]} == {None, 0.001}
    assert "A100-80GB" in job["gpu_types"]["items"]["enum"]
    assert "best-fit" in spec["PolicyCreate"]["properties"]["placement"]["enum"]
    assert spec["TenantCreate"]["properties"]["display_name"]["pattern"] == r"^[^\x00]*$"
    add_nodes(live_server.service, count=1)
    r = c.post("/api/v1/jobs", json={"gpus": 1.0, "cpu_milli": 1109.0, "memory_mib": 2048.0, "name": "integral"})
    assert r.status_code == 201 and r.json()["cpu_milli"] == 1109, r.text
    for body in ({"cpu_milli": 1109.5}, {"cpu_milli": "1109"}, {"cpu_milli": True}, {"gpus": 1.5},
                 {"gpu_types": ["a100-80gb"]}, {"labels": {"bad key!": "v"}}):
        assert c.post("/api/v1/jobs", json=body).status_code == 422, body
    assert c.post("/api/v1/policies", json={"name": "p", "placement": "BEST-FIT"}).status_code == 422


# ------------------------------------------------------------------------------ CLI friction
def test_tenant_and_token_commands(home: Path, live_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "config", "set-context", "lab", "--server", live_server.url, "--token", ADMIN_TOKEN,
               "--use")[0] == 0
    code, out, err = run(capsys, "tenant", "create", "ml-team", "--display-name", "ML team", "-o", "json")
    assert code == 0, err
    tenant = json.loads(out)
    assert tenant["name"] == "ml-team"
    code, out, _ = run(capsys, "tenant", "list", "-o", "json")
    assert {t["name"] for t in json.loads(out)} == {"system", "ml-team"}
    code, out, err = run(capsys, "token", "create", "alice", "--role", "member", "--tenant-id", str(tenant["id"]),
                         "-o", "json")
    assert code == 0, err
    made = json.loads(out)
    assert made["token"].startswith("sdt_") and made["role"] == "member"
    assert live_server.client(made["token"]).get("/api/v1/whoami").json()["tenant"] == "ml-team"
    code, out, _ = run(capsys, "token", "create", "bob")  # table output: the value alone on stdout
    assert code == 0 and out.strip().startswith("sdt_") and out.count("\n") == 1
    code, out, _ = run(capsys, "token", "list", "-o", "json")
    listed = json.loads(out)
    assert {t["name"] for t in listed} >= {"alice", "bob"} and all("token" not in t for t in listed)
    code, out, _ = run(capsys, "token", "revoke", str(made["id"]), "-o", "json")
    assert code == 0 and json.loads(out)["revoked_at"] is not None
    assert live_server.client(made["token"]).get("/api/v1/whoami").status_code == 401
    code, _, err = run(capsys, "token", "create", "eve", "--role", "root")
    assert code == 2 and err.startswith("error: ") and "unknown role 'root'" in err


def test_cancelled_names_are_reusable_and_cancelled_jobs_show_no_node(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("kind: Cluster\nmetadata: {name: default}\nspec:\n  nodes:\n"
                 "    - {name: n0, cpu_milli: 8000, memory_mib: 64000, gpu_count: 2, gpu_model: T4}\n"
                 "---\nkind: TrainingJob\nmetadata: {name: again}\nspec: {gpus: 1}\n")
    assert run(capsys, "submit", "-f", str(f))[0] == 0
    code, out, err = run(capsys, "cancel", "again")
    assert code == 0, err
    code, out, _ = run(capsys, "get", "jobs")
    row = next(line for line in out.splitlines() if "again" in line)
    assert "cancelled" in row and "n0" not in row
    g = tmp_path / "again.yaml"
    g.write_text("kind: TrainingJob\nmetadata: {name: again}\nspec: {gpus: 1}\n")
    code, _, err = run(capsys, "submit", "-f", str(g))
    assert code == 0, err
    code, out, _ = run(capsys, "get", "jobs", "-o", "json")
    assert sorted(j["status"] for j in json.loads(out) if j["name"] == "again") == ["cancelled", "running"]
    code, _, err = run(capsys, "submit", "-f", str(g))  # a live job of that name: still a conflict
    assert code == 2 and "already exists" in err, err
    code, out, _ = run(capsys, "describe", "job", "again", "-o", "json")
    described = json.loads(out)
    assert code == 0 and described.get("status", described.get("job", {}).get("status")) == "running", described


def test_every_cli_error_starts_with_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["submit"], ["get", "jobs", "--bogus"], ["tenant", "list"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and err.startswith("error: ") and "Error:" not in err, (argv, err)


# ------------------------------------------------------------------------------ rate limits
def test_per_token_rate_limit_is_a_429_with_retry_after(live_server_factory: Callable[..., LiveServer],
                                                        sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, rate_limit_per_token=5, rate_limit_per_address=0)
    with server.client() as c:
        answers = [c.get("/api/v1/whoami") for _ in range(20)]
    limited = [r for r in answers if r.status_code == 429]
    assert limited and {r.status_code for r in answers} == {200, 429}
    assert limited[0].headers["retry-after"] == "1" and "too many requests" in limited[0].json()["detail"]


def test_per_address_rate_limit(live_server_factory: Callable[..., LiveServer], sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, rate_limit_per_address=5, rate_limit_per_token=0)
    with httpx.Client(base_url=server.url) as c:
        codes = [c.get("/healthz").status_code for _ in range(20)]
    assert 429 in codes and 200 in codes


def test_failed_authentications_are_throttled_before_the_store_is_asked(
        live_server_factory: Callable[..., LiveServer], sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, failed_auth_per_address=3)
    svc = server.service
    lookups = []
    real = svc.authenticate

    def counting(value: str | None) -> Principal:
        lookups.append(value)
        return real(value)

    svc.authenticate = counting  # type: ignore[method-assign]
    bad = server.client("sdt_guess_" + "x" * 30)
    assert [bad.get("/api/v1/jobs").status_code for _ in range(3)] == [401, 401, 401]
    r = bad.get("/api/v1/jobs")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert len(lookups) == 3  # the fourth guess never reached the token lookup


def test_redis_rate_limiter_is_shared_between_workers() -> None:
    from seedance.control.ratelimit import RATE_LIMITERS

    prefix = f"seedance:test:rl:{os.getpid()}:{time.monotonic_ns()}:"
    a = RATE_LIMITERS.get("redis")(redis_url="redis://127.0.0.1:6379/0", prefix=prefix)
    b = RATE_LIMITERS.get("redis")(redis_url="redis://127.0.0.1:6379/0", prefix=prefix)
    try:
        assert [a.hit("k", 3, 60), b.hit("k", 3, 60), a.hit("k", 3, 60)] == [None, None, None]
        wait = b.hit("k", 3, 60)
        assert wait is not None and 0 < wait <= 60
        assert a.over("k", 3, 60) is not None and a.over("other", 3, 60) is None
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------- maintained aggregates
def test_job_counts_follow_every_write_in_its_transaction(make_service: Callable[..., ControlService],
                                                          db_url: str) -> None:
    from sqlalchemy import func, select, text

    from seedance.control.db.aggregates import JobCount
    from seedance.control.db.models import Job
    from seedance.control.services import dashboard

    svc = make_service(db_url)
    add_nodes(svc, count=1, gpus=2)
    ids = [submit(svc, gpus=1, tier=tier) for tier in ("gold", "silver", "silver", "bronze")]
    svc.loop.run_once()  # two bind, two wait
    with svc.db.write() as s:
        from seedance.control.services import jobs

        jobs.cancel_job(session=s, principal=svc.authenticate(ADMIN_TOKEN), job_id=ids[-1])

    def by_counts() -> dict[tuple[str, str], int]:
        with svc.db.read() as s:
            rows = s.execute(select(JobCount.tier, JobCount.status, func.sum(JobCount.n))
                             .group_by(JobCount.tier, JobCount.status)).all()
        return {(t, st): int(n) for t, st, n in rows if n}

    def by_scan() -> dict[tuple[str, str], int]:
        with svc.db.read() as s:
            rows = s.execute(select(Job.tier, Job.status, func.count(Job.id)).group_by(Job.tier, Job.status)).all()
        return {(t, st): int(n) for t, st, n in rows}

    assert by_counts() == by_scan()
    assert sum(by_counts().values()) == 4 and by_counts()[("bronze", "cancelled")] == 1
    with svc.db.write() as s:  # a rolled-back write leaves the counters alone
        s.execute(text("UPDATE jobs SET status = 'failed'"))
        s.rollback()
    assert by_counts() == by_scan()
    metrics = svc.metrics.render().decode()
    assert 'seedance_jobs{cluster="default",status="running",tier="gold"} 1.0' in metrics
    assert 'seedance_job_cost_score_count{tier="silver"} 2.0' in metrics
    with svc.db.read() as s:
        data = dashboard.dashboard_data(session=s, principal=svc.authenticate(ADMIN_TOKEN), cluster=None)
    assert data.jobs_by_tier_status == {t: {st: n for (tt, st), n in by_scan().items() if tt == t}
                                        for t in ("gold", "silver", "bronze")}


def test_metrics_need_a_token_or_a_separate_listener(live_server_factory: Callable[..., LiveServer],
                                                     sqlite_url: str, tmp_path: Path) -> None:
    from tests.control.helpers import free_port

    prod = live_server_factory(sqlite_url, environment="production")
    assert prod.client(None).get("/metrics").status_code == 401
    assert "seedance_http_requests_total" in prod.client().get("/metrics").text
    port = free_port()
    other = live_server_factory(f"sqlite:///{tmp_path / 'other.db'}", metrics_listen=f"127.0.0.1:{port}")
    assert other.client(None).get("/metrics").status_code == 401  # the API port wants a token now
    scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scrape.status_code == 200 and "seedance_http_requests_total" in scrape.text


def test_a_vanishing_gpu_fraction_is_refused() -> None:
    from pydantic import ValidationError

    from seedance.control.schemas import JobCreate

    for tiny in (1e-10, 5e-10):  # within the 0.001-step tolerance, but would round to 0 milli-GPU on 1 GPU
        with pytest.raises(ValidationError, match="at least 0.001"):
            JobCreate(gpus=tiny)
    assert (JobCreate(gpus=0.001).num_gpu, JobCreate(gpus=0.001).gpu_milli) == (1, 1)
