"""A synthetic population of data subjects for the erasure tests and benchmark.

Every subject gets what the real paths give it: a sealed profile (e-mail, name, plan), telemetry
from two devices (session ids keyed by the subject's key, the daily roll-up), device sightings in
the fingerprint sets; some get a consent record, a challenged-device verdict, a cached profile and
a blacklist entry. Rows are written through the product's own functions (``identify``,
``device_tags``, ``anonymize_batch``, ``store_events``, ``screen``), many subjects per transaction,
so 10,000 subjects load in minutes rather than through 20,000 HTTP calls.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, text

from seedance.privacy.anonymize import anonymize_batch
from seedance.privacy.fingerprint import device_tags, screen
from seedance.privacy.models import ConsentRecord, FingerprintDevice
from seedance.privacy.registry import SUBJECT_DATA
from seedance.privacy.schemas import Fingerprint
from seedance.privacy.subjects import identify, open_profile, read_profile
from seedance.privacy.telemetry import SUBJECT_KEY_ID, store_events
from tests.privacy.conftest import Env

FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport")
ACTIONS = ("view", "refresh", "filter", "open_job", "cancel_job", "export")
RENDERERS = tuple(f"ANGLE (Vendor{k % 7}, GPU model {k})" for k in range(2000))  # ~10 devices each at 10k subjects


@dataclass
class Person:
    """One subject as the test knows it (the store never holds these in clear)."""

    external_id: str
    name: str
    device_ids: list[str]
    subject_id: str = ""


@dataclass
class Population:
    people: list[Person] = field(default_factory=list)

    def by_subject(self) -> dict[str, Person]:
        return {p.subject_id: p for p in self.people}


def populate(env: Env, n: int, *, seed: int = 7, chunk: int = 250) -> Population:
    """Load ``n`` subjects into ``env``'s stores."""
    rng = random.Random(seed)
    svc = env.privacy
    tenant = env.admin().tenant_id
    now = env.clock()
    pop = Population()
    for start in range(0, n, chunk):
        batch_people = []
        for i in range(start, min(n, start + chunk)):
            token = uuid.UUID(int=rng.getrandbits(128)).hex[:10]
            p = Person(external_id=f"user{i:05d}.{token}@example.org",
                       name=f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                       device_ids=[f"dev-{uuid.UUID(int=rng.getrandbits(128))}" for _ in range(2)])
            batch_people.append(p)
        with svc.db.write() as s:
            consents, devices = [], []
            for p in batch_people:
                p.subject_id, _ = identify(svc, session=s, tenant_id=tenant, external_id=p.external_id,
                                           traits={"email": p.external_id, "name": p.name, "plan": "pro"})
                material = svc.keys.material(s, p.subject_id)
                assert material is not None
                for d in p.device_ids:
                    tag, cands = device_tags(svc, s, d, material, now)
                    fp = Fingerprint(webgl_renderer=rng.choice(RENDERERS), webgl_vendor="Vendor")
                    verdict = screen(svc, s, tag=tag, candidates=cands, fp=fp, now=now)
                    assert verdict.refused is None
                    t0 = now - dt.timedelta(hours=rng.uniform(1, 100))
                    evs = [(rng.choice(ACTIONS), t0 + dt.timedelta(seconds=k * rng.uniform(1, 30))) for k in range(4)]
                    rows = anonymize_batch(key=material.session, key_id=SUBJECT_KEY_ID, device_id=d,
                                           session_started_at=t0, events=evs)
                    store_events(s, tenant, p.subject_id, rows, verdict.signature, now)
                    svc.redis.sadd(svc.key("subj", p.subject_id, "sessions"), rows[0].session_id)
                    if rng.random() < 0.05:
                        devices.append({"device_tag": tag, "signature": verdict.signature or "", "status": "verified",
                                        "subject_id": p.subject_id, "fmt": "packed", "aaguid": str(uuid.UUID(int=0)),
                                        "reason": "attestation verified", "decided_at": now, "expires_at": None})
                        svc.verified.add(tag, now.timestamp() + 30 * 86400)
                    elif rng.random() < 0.02:
                        svc.blacklist.add(tag, now.timestamp() + 30 * 86400)
                if rng.random() < 0.3:
                    tag = device_tags(svc, s, p.device_ids[0], material, now)[0]
                    consents.append({"tenant_id": tenant, "subject_id": p.subject_id, "device_tag": tag,
                                     "flow_version": "2.0.0", "choice": rng.choice(["granted", "refused"]),
                                     "purposes": {"usage_telemetry": True, "third_party_analytics": False},
                                     "decided_at": now})
            if consents:
                s.execute(insert(ConsentRecord), consents)
            if devices:
                s.execute(insert(FingerprintDevice), devices)
        with svc.db.read() as s:
            for p in batch_people:
                if rng.random() < 0.2:
                    read_profile(svc, session=s, subject_id=p.subject_id)  # fills the Redis profile cache
        pop.people.extend(batch_people)
    return pop


def data_checksums(env: Env, exclude: set[str]) -> dict[str, tuple[int, str]]:
    """Per subject table: row count and SHA-256 of the rows of subjects not in ``exclude`` (in key order)."""
    out: dict[str, tuple[int, str]] = {}
    with env.control.db.engine.connect() as conn:
        for item in SUBJECT_DATA:
            h = hashlib.sha256()
            n = 0
            pk = ", ".join(c.name for c in item.model.__table__.primary_key.columns)
            for row in conn.execute(text(f"SELECT * FROM {item.table} ORDER BY {pk}")):
                m = row._mapping
                if m[item.column] in exclude:
                    continue
                n += 1
                h.update(repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode())
            out[item.table] = (n, h.hexdigest())
    return out


def redis_checksum(env: Env, exclude: set[str]) -> tuple[int, str]:
    """Count and SHA-256 of the Redis keys of subjects not in ``exclude`` (their profile caches and sessions)."""
    r = env.privacy.redis
    h = hashlib.sha256()
    n = 0
    for key in sorted(r.scan_iter(match=env.privacy.key("subj", "*"), count=1000)):
        if key.split(":")[-2] in exclude:
            continue
        n += 1
        value: Any = r.get(key) if r.type(key) == "string" else sorted(r.smembers(key))
        h.update(f"{key}={value}".encode())
    return n, h.hexdigest()


def profiles(env: Env, subject_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Unsealed profiles of the subjects whose keys still exist."""
    from seedance.privacy.models import Subject

    out = {}
    with env.control.db.read() as s:
        rows = {r.id: r for r in s.scalars(select(Subject).where(Subject.id.in_(subject_ids)))}
        for sid in subject_ids:
            material = env.privacy.keys.material(s, sid)
            if material is not None and sid in rows:
                out[sid] = open_profile(material, rows[sid].profile_ct)
    return out
