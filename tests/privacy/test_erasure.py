"""Erasure requests end to end: every store, the key destroyed, backups unreadable for the subject, a scan
proving it, the proof in Parquet; other subjects untouched. SQLite and PostgreSQL (``pg_dump``) alike."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from seedance.control.services import events
from seedance.privacy import audit
from seedance.privacy.backup import replay_ledger, restored, take_backup
from seedance.privacy.erasure import _claim, _erase_tables, run_erasures
from seedance.privacy.models import ErasureRequest, Subject, SubjectKey, TelemetryEvent, Tombstone
from tests.control.conftest import db_url  # noqa: F401  (fixture)
from tests.privacy.conftest import Env, client_for
from tests.privacy.helpers import WEBGL, batch, occurrences, table_count

PEOPLE = {
    "ada@example.org": ("Ada Lovelace", ["dev-ada-phone-0001", "dev-ada-laptop-002"]),
    "bob@example.org": ("Bob Kahn", ["dev-bob-phone-0003"]),
    "cy@example.org": ("Cy Young", ["dev-cy-laptop-00004"]),
}


def load(c: Any, env: Env) -> dict[str, str]:
    ids = {}
    for email, (name, devices) in PEOPLE.items():
        r = c.post("/api/v1/privacy/subjects", json={"subject": email, "traits": {"email": email, "name": name}})
        assert r.status_code == 201, r.text
        ids[email] = r.json()["subject_id"]
        for d in devices:
            assert c.post("/api/v1/telemetry/events",
                          json=batch(env, d, subject=email, fingerprint=WEBGL)).status_code == 202
        assert c.post("/api/v1/privacy/consents", json={
            "flow_version": "2.0.0", "choice": "granted", "subject": email, "device_id": devices[0],
            "purposes": {"usage_telemetry": True, "third_party_analytics": True}}).status_code == 201
        assert c.get(f"/api/v1/privacy/subjects/{ids[email]}").json()["profile"]["traits"]["name"] == name  # cached
    assert c.post("/api/v1/telemetry/events", json=batch(env, "dev-anonymous-0009")).status_code == 202
    return ids


@pytest.fixture
def any_env(make_env: Any, db_url: str) -> Env:  # noqa: F811
    return make_env(db_url)


def test_erasure_covers_every_store_and_leaves_others_intact(any_env: Env) -> None:
    env = any_env
    with client_for(env) as c:
        ids = load(c, env)
        ada = ids["ada@example.org"]
        assert c.post("/api/v1/privacy/backups").status_code == 201  # taken before the request
        r = c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"})
        assert r.status_code == 202, r.text
        req = r.json()
        assert req["status"] == "pending" and req["subject_id"] == ada
        deadline = dt.datetime.fromisoformat(req["deadline"]) - dt.datetime.fromisoformat(req["requested_at"])
        assert deadline == dt.timedelta(hours=72)
        again = c.post("/api/v1/privacy/erasure-requests", json={"subject": "ADA@example.org "})
        assert again.status_code == 200 and again.json()["id"] == req["id"]  # one open request per subject
        env.clock.advance(minutes=5)
        done = c.post("/api/v1/privacy/erasures/run").json()["items"]
        assert [d["status"] for d in done] == ["verified"], done[0]["error"]
        out = c.get(f"/api/v1/privacy/erasure-requests/{req['id']}").json()
        # the subject is gone: its telemetry is refused, a new request finds nobody
        gone = c.post("/api/v1/telemetry/events", json=batch(env, "dev-ada-phone-0001", subject="ada@example.org"))
        assert gone.status_code == 404
        r = c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"})
        assert r.status_code == 404 and "nothing to erase" in r.json()["detail"]
        other = c.get(f"/api/v1/privacy/subjects/{ids['bob@example.org']}").json()
    assert out["within_deadline"] is True and out["verified_at"] is not None
    rep = out["report"]
    assert rep["stores"]["primary"]["telemetry_events"] == 4 and rep["stores"]["primary"]["privacy_subjects"] == 1
    assert rep["stores"]["primary"]["privacy_consents"] == 1
    assert rep["stores"]["derived"]["privacy_subject_activity"] == 1
    assert rep["stores"]["redis"]["keys_deleted"] >= 3  # profile cache, sessions, consent
    (backup,) = rep["stores"]["backups"].values()
    assert backup["subject_rows_sealed"] is True and backup["decryptable"] is False
    assert set(rep["scan"]) >= {"primary", "redis", "audit", "backup:1", "backup:1:replayed"}
    assert all(v["violations"] == 0 for v in rep["scan"].values())
    assert rep["scan"]["backup:1"]["kinds"] == ["pseudonym", "subject_id"]  # sealed copies only, key destroyed
    assert rep["scan"]["backup:1:replayed"]["kinds"] == []
    # the proof hash is the SHA-256 of the canonical proof
    iso = {k: dt.datetime.fromisoformat(out[k]).isoformat() for k in ("requested_at", "erased_at", "verified_at")}
    proof = {"request_id": out["id"], "subject_id": ada, **iso, "report": rep}
    canon = json.dumps(proof, sort_keys=True, separators=(",", ":")).encode()
    assert out["proof_hash"] == hashlib.sha256(canon).hexdigest()
    # key destroyed and recorded; identity wiped from the ledger
    with env.control.db.read() as s:
        key = s.get(SubjectKey, ada)
        tomb = s.scalars(select(Tombstone)).one()
        row = s.get(ErasureRequest, out["id"])
    assert key is not None and key.wrapped_key is None and key.lookup_hash is None and key.shredded_at is not None
    assert (tomb.subject_id, tomb.request_id, tomb.key_fingerprint) == (ada, out["id"], key.key_fingerprint)
    assert rep["key"]["fingerprint"] == key.key_fingerprint
    assert row is not None and row.identity_ct is None
    # nothing of Ada anywhere live; the others untouched
    assert occurrences(env, "ada@example.org", "Ada Lovelace", *PEOPLE["ada@example.org"][1]) == []
    assert [f for f in occurrences(env, ada) if not f.startswith(
        ("db:privacy_erasure_requests", "db:privacy_tombstones", "db:privacy_subject_keys", "db:events"))] == []
    assert other["profile"]["traits"] == {"email": "bob@example.org", "name": "Bob Kahn"}
    assert table_count(env, TelemetryEvent) == 2 + 2 + 2  # bob, cy, anonymous
    # the audit record
    (path,) = audit.files(env.privacy.audit_dir)
    req_at = dt.datetime.fromisoformat(out["requested_at"])
    assert path.name == f"delete_requests_{req_at.year}Q{(req_at.month - 1) // 3 + 1}.parquet"
    (arow,) = pq.read_table(path).to_pylist()
    assert (arow["request_id"], arow["subject_tombstone"], arow["proof_hash"]) == (out["id"], ada, out["proof_hash"])
    assert arow["within_deadline"] is True and arow["key_fingerprint"] == key.key_fingerprint
    assert arow["deadline"] - arow["requested_at"] == dt.timedelta(hours=72)


def test_backup_copy_is_unreadable_after_erasure_and_replay_removes_it(pg_env: Env) -> None:
    env = pg_env
    with client_for(env) as c:
        ids = load(c, env)
        rec = take_backup(env.privacy)
        assert rec.fmt == "pg_dump-custom" and rec.excluded == ["privacy_subject_keys", "privacy_hmac_keys"]
        c.post("/api/v1/privacy/erasure-requests", json={"subject": "bob@example.org"})
        assert c.post("/api/v1/privacy/erasures/run").json()["items"][0]["status"] == "verified"
    bob, ada = ids["bob@example.org"], ids["ada@example.org"]
    with restored(env.privacy, rec) as rdb, rdb.read() as rs, env.control.db.read() as ls:
        tables = {r[0] for r in rs.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))}
        assert "privacy_subject_keys" not in tables and "privacy_subjects" in tables  # the vault is not in backups
        rows = {r.id: r.profile_ct for r in rs.scalars(select(Subject))}
        assert set(rows) == set(ids.values())  # the backup still holds Bob's sealed row ...
        assert env.privacy.keys.material(ls, bob) is None  # ... but its key is gone: unreadable
        from seedance.privacy.subjects import open_profile

        ada_key = env.privacy.keys.material(ls, ada)
        assert ada_key is not None
        assert open_profile(ada_key, rows[ada])["traits"]["name"] == "Ada Lovelace"  # others restore fine
        deleted = replay_ledger(env.control.db, rdb)
        assert deleted["privacy_subjects"] == 1 and deleted["telemetry_events"] == 2
    with restored(env.privacy, rec) as rdb, rdb.read() as rs:  # the file itself never changes
        assert bob in set(rs.scalars(select(Subject.id)))


def test_a_leftover_identifier_fails_the_verification_with_its_location(env: Env) -> None:
    with client_for(env) as c:
        load(c, env)
        c.post("/api/v1/privacy/erasure-requests", json={"subject": "cy@example.org"})
        with env.control.db.write() as s:  # something logged the e-mail address in clear
            events.record(session=s, kind="oops", message="user cy@example.org did a thing")
        (res,) = c.post("/api/v1/privacy/erasures/run").json()["items"]
    assert res["status"] == "failed" and res["proof_hash"] is None
    assert "external_id in primary events:" in res["error"] and "cy@example.org" not in res["error"]
    assert res["erased_at"] is not None  # the rows and the key are gone all the same
    assert audit.files(env.privacy.audit_dir) == []  # no proof recorded for a failed verification


def test_an_interrupted_run_is_finished_by_the_next(pg_env: Env) -> None:
    env = pg_env
    with client_for(env) as c:
        ids = load(c, env)
        c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"})
    (work,) = _claim(env.privacy, 10)
    _erase_tables(env.privacy, work)  # ... and the process dies here: key destroyed, Redis not yet cleaned
    with env.control.db.write() as s:  # the claim goes stale
        s.execute(text("UPDATE privacy_erasure_requests SET status = 'running', started_at = :t"),
                  {"t": env.clock() - dt.timedelta(hours=2)})
    (res,) = run_erasures(env.privacy)
    assert res.status == "verified" and res.report["key"]["fingerprint"] == work.key_fingerprint
    assert occurrences(env, ids["ada@example.org"]) == [] or all(
        f.startswith(("db:privacy_erasure_requests", "db:privacy_tombstones", "db:privacy_subject_keys", "db:events"))
        for f in occurrences(env, ids["ada@example.org"]))


def test_unknown_subject_and_bad_requests_are_4xx_nothing_stored(env: Env) -> None:
    with client_for(env) as c:
        r = c.post("/api/v1/privacy/erasure-requests", json={"subject": "ghost@example.org"})
        assert r.status_code == 404 and "unknown subject" in r.json()["detail"]
        assert c.post("/api/v1/privacy/erasure-requests", json={"subject": ""}).status_code == 422
        assert c.post("/api/v1/privacy/erasure-requests", json={"subject": "a", "device_ids": ["x"]}).status_code == 422
        assert c.get("/api/v1/privacy/erasure-requests/999").status_code == 404
    assert table_count(env, ErasureRequest) == 0


def test_roles_and_tenants(env: Env) -> None:
    with client_for(env) as c:
        t = c.post("/api/v1/tenants", json={"name": "acme"}).json()
        viewer = c.post("/api/v1/tokens", json={"name": "v", "role": "viewer", "tenant_id": t["id"]}).json()["token"]
        op = c.post("/api/v1/tokens", json={"name": "o", "role": "operator", "tenant_id": t["id"]}).json()["token"]
        load(c, env)
    with client_for(env, viewer) as c:
        assert c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"}).status_code == 403
    with client_for(env, op) as c:  # another tenant's subject does not exist for this operator
        assert c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"}).status_code == 404
        assert c.post("/api/v1/privacy/erasures/run").status_code == 403


def test_tombstones_are_append_only(env: Env) -> None:
    with client_for(env) as c:
        load(c, env)
        c.post("/api/v1/privacy/erasure-requests", json={"subject": "ada@example.org"})
        c.post("/api/v1/privacy/erasures/run")
    for sql in ("UPDATE privacy_tombstones SET key_fingerprint = 'x'", "DELETE FROM privacy_tombstones"):
        with pytest.raises(DBAPIError, match="append-only"), env.control.db.write() as s:
            s.execute(text(sql))
    assert table_count(env, Tombstone) == 1
