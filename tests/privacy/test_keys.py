"""Sealing, the key vault, rotated HMAC keys, the master key, the expiring sorted set, the erasure map."""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select

from seedance.control.db.models import Base
from seedance.core.errors import InputError
from seedance.privacy import crypto
from seedance.privacy.expiring import ExpiringSet
from seedance.privacy.keys import KeyRing, RingPolicy, SubjectKeys, load_master_key
from seedance.privacy.models import KEY_TABLES, HmacKey, SubjectKey, Tombstone
from seedance.privacy.registry import LEDGER_TABLES, SUBJECT_DATA
from tests.privacy.conftest import Env

H = 3600.0


def test_seal_opens_only_with_its_key_and_context() -> None:
    k = crypto.new_key()
    box = crypto.seal(k, b"secret", "profile:a")
    assert crypto.open_sealed(k, box, "profile:a") == b"secret"
    with pytest.raises(crypto.SealError):
        crypto.open_sealed(k, box, "profile:b")  # moved to another row
    with pytest.raises(crypto.SealError):
        crypto.open_sealed(crypto.new_key(), box, "profile:a")
    tampered = box[:-1] + bytes([box[-1] ^ 1])
    with pytest.raises(crypto.SealError):
        crypto.open_sealed(k, tampered, "profile:a")
    assert crypto.seal(k, b"secret", "x") != crypto.seal(k, b"secret", "x")  # fresh nonce each time
    assert crypto.keyed_hash(k, "a\x1fb") != crypto.keyed_hash(k, "a", "b")  # parts cannot run together


def test_master_key_sources(tmp_path: Path) -> None:
    good = crypto.encode_key(crypto.new_key())
    assert crypto.encode_key(load_master_key(good, home=None, local=False)) == good
    with pytest.raises(InputError, match="required outside local mode"):
        load_master_key(None, home=tmp_path, local=False)
    with pytest.raises(InputError, match="32 bytes"):
        load_master_key(crypto.encode_key(b"short"), home=None, local=False)
    k1 = load_master_key(None, home=tmp_path, local=True)
    assert load_master_key(None, home=tmp_path, local=True) == k1  # created once, then read
    assert stat.S_IMODE(os.stat(tmp_path / "privacy-master.key").st_mode) == 0o600


def test_subject_keys_find_shred_tombstone(env: Env) -> None:
    keys = SubjectKeys(crypto.new_key())
    now = dt.datetime.now(dt.UTC)
    with env.control.db.write() as s:
        m = keys.create(s, 1, "Ada@Example.org", now)
        assert keys.find(s, 1, " ada@example.ORG") == m.subject_id  # normalised
        assert keys.find(s, 2, "ada@example.org") is None  # another tenant
        assert keys.material(s, m.subject_id) == m
        fp = keys.shred(s, m.subject_id, 7, now)
        assert fp is not None and keys.shred(s, m.subject_id, 7, now) is None  # once
        assert keys.material(s, m.subject_id) is None and keys.find(s, 1, "ada@example.org") is None
        row = s.get(SubjectKey, m.subject_id)
        tomb = s.scalars(select(Tombstone)).one()
    assert row is not None and (row.wrapped_key, row.lookup_hash) == (None, None) and row.key_fingerprint == fp
    assert (tomb.subject_id, tomb.request_id, tomb.key_fingerprint) == (m.subject_id, 7, fp)


def test_key_ring_rotates_by_epoch_and_destroys_after_retention(env: Env) -> None:
    ring = KeyRing(crypto.new_key(), {"session": RingPolicy(24 * H, 7 * 24 * H)})
    t0 = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
    with env.control.db.write() as s:
        a_id, a = ring.current(s, "session", t0)
        assert ring.current(s, "session", t0 + dt.timedelta(hours=11)) == (a_id, a)  # same day, same key
        b_id, b = ring.current(s, "session", t0 + dt.timedelta(hours=12))  # next UTC day
        assert b_id != a_id and b != a
        assert [k for k, _ in ring.live(s, "session", t0 + dt.timedelta(days=2))] == [b_id, a_id]
        row = s.get(HmacKey, a_id)
        assert row is not None and row.retire_at == dt.datetime(2026, 5, 2, tzinfo=dt.UTC)
        assert row.destroy_at == dt.datetime(2026, 5, 9, tzinfo=dt.UTC)
        assert ring.destroy_expired(s, dt.datetime(2026, 5, 8, 23, tzinfo=dt.UTC)) == []
        assert ring.destroy_expired(s, dt.datetime(2026, 5, 9, tzinfo=dt.UTC)) == [a_id]
        assert [k for k, _ in ring.live(s, "session", dt.datetime(2026, 5, 9, tzinfo=dt.UTC))] == [b_id]
        assert s.get(HmacKey, a_id).wrapped_key is None  # type: ignore[union-attr]
    with pytest.raises(InputError, match="unknown key purposes"):
        KeyRing(crypto.new_key(), {"ads": RingPolicy(1, 1)})


def test_expiring_set_on_real_redis(env: Env) -> None:
    r = env.privacy.redis
    s = ExpiringSet(r, env.privacy.key("test", "bl"))
    now = dt.datetime.now(dt.UTC).timestamp()
    s.add("a", now + 10)
    s.add("b", now + 30 * 86400)
    s.add("a", now - 1)  # moved into the past: expired
    assert s.expires_at("a", now) is None and s.expires_at("b", now) == pytest.approx(now + 30 * 86400)
    assert s.contains_any(["x", "b"], now) == "b"
    assert [m for m, _ in s.members(now)] == ["b"]
    assert s.prune(now) == 1 and r.zcard(s.key) == 1
    assert 30 * 86400 - 5 <= r.ttl(s.key) <= 30 * 86400 + 1
    with pytest.raises(ValueError, match="finite"):
        s.add("c", float("inf"))


def test_every_table_with_a_subject_column_is_mapped(env: Env) -> None:
    mapped = {i.table for i in SUBJECT_DATA}
    for table in Base.metadata.sorted_tables:
        if "subject_id" in table.c or table.name == "privacy_subjects":
            assert table.name in mapped | LEDGER_TABLES, f"{table.name} holds subject data but is not in SUBJECT_DATA"
    names = set(inspect(env.control.db.engine).get_table_names())
    assert set(KEY_TABLES) <= names and not set(KEY_TABLES) & mapped


def test_an_idle_worker_pass_creates_no_master_key(make_env: Any, sqlite_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from seedance.privacy.erasure import run_erasures
    from seedance.privacy.maintenance import sweep

    monkeypatch.setenv("SEEDANCE_HOME", str(tmp_path / "home"))
    env = make_env(sqlite_url, master_key=None)
    out = sweep(env.privacy)
    assert (out.timed_out, out.blacklist_pruned, out.verified_pruned, out.keys_destroyed) == (0, 0, 0, [])
    assert run_erasures(env.privacy) == []
    assert not (tmp_path / "home" / "privacy-master.key").exists()
