"""Device-fingerprint clusters: count devices per WebGL signature, pause a cluster past the threshold.

The signature is a hash of the WebGL signals only (vendor, renderer, parameter hash, render hash);
the other signals a client sends are not stored (data minimisation). Devices are counted as
keyed tags in a Redis sorted set per signature, scored by when each was last seen, over
``cluster_window_hours``: ``ZCARD`` after pruning the window is an exact count. A signature seen
on **more** than ``cluster_threshold`` devices (51 of the default 50) is paused: its devices'
batches are refused with 423 until each device passes a WebAuthn attestation challenge
(``challenge``); a device that fails or does not answer in time is blacklisted.

Equal signatures are not equal people (FingerprintJS's open-source build reports ~60 % accuracy
and normal collision rates around 10 %, fingerprintjs/fingerprintjs#119): the pause never acts on
a device by itself; the challenge is the second signal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from seedance.control.db.models import utcnow
from seedance.control.services import events
from seedance.privacy.crypto import keyed_hash
from seedance.privacy.keys import SubjectKeyMaterial
from seedance.privacy.models import FingerprintCluster
from seedance.privacy.schemas import Fingerprint

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

PAUSED = "paused"


def webgl_signature(fp: Fingerprint) -> str:
    """SHA-256 (first 32 hex) of the WebGL signals."""
    raw = json.dumps([fp.webgl_vendor, fp.webgl_renderer, fp.webgl_params or "", fp.webgl_render or ""])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def device_tags(
    svc: PrivacyService, session: Session, device_id: str, material: SubjectKeyMaterial | None, now: dt.datetime,
) -> tuple[str, list[str]]:
    """The device's tag now, and every tag it may have in the lists (older live device keys too).

    A subject's devices are tagged with the subject's own device key (so erasing the subject's key
    unlinks them in every copy); anonymous devices with the rotated device key.
    """
    if material is not None:
        tag = keyed_hash(material.device, device_id)
        return tag, [tag]
    _, key = svc.ring.current(session, "device", now)
    tag = keyed_hash(key, device_id)
    others = [keyed_hash(k, device_id) for _, k in svc.ring.live(session, "device", now)]
    return tag, [tag, *[t for t in others if t != tag]]


@dataclass(frozen=True, slots=True)
class Screening:
    """The outcome of screening one batch."""

    signature: str | None
    refused: str | None = None  # "blacklisted" or "paused"
    detail: str = ""


def cluster_key(svc: PrivacyService, signature: str) -> str:
    """Redis hash of a cluster's state."""
    return svc.key("fp", "cluster", signature)


def is_paused(svc: PrivacyService, signature: str) -> bool:
    """Whether ingestion of the signature's cluster is paused."""
    return bool(svc.redis.hget(cluster_key(svc, signature), "status") == PAUSED)


def screen(
    svc: PrivacyService, session: Session, *, tag: str, candidates: list[str], fp: Fingerprint | None,
    now: dt.datetime,
) -> Screening:
    """Check the blacklist, count the device under its signature, pause the cluster past the threshold.

    Writes (the device sighting in Redis; a pause in the store and the event log) happen whether or
    not the batch is then refused; the caller commits ``session`` and refuses afterwards.
    """
    s = svc.settings
    ts = now.timestamp()
    hit = svc.blacklist.contains_any(candidates, ts)
    if hit is not None:
        until = dt.datetime.fromtimestamp(svc.blacklist.expires_at(hit, ts) or ts, dt.UTC)
        svc.metrics.step("ingestion_blacklisted")
        return Screening(None, "blacklisted", f"this device is blacklisted until {until.isoformat()} (it failed or "
                         "did not answer a WebAuthn attestation challenge); nothing was stored")
    if fp is None:
        return Screening(None)
    sig = webgl_signature(fp)
    window = s.cluster_window_hours * 3600
    zkey = svc.key("fp", "sig", sig)
    pipe = svc.redis.pipeline(transaction=True)
    pipe.zadd(zkey, {tag: ts})
    pipe.zremrangebyscore(zkey, "-inf", ts - window)
    pipe.zcard(zkey)
    pipe.expire(zkey, int(window) + 60)
    pipe.set(svc.key("fp", "dev", tag), sig, ex=int(window) + 60)
    pipe.hget(cluster_key(svc, sig), "status")
    _, _, count, _, _, status = pipe.execute()
    if status != PAUSED and int(count) > s.cluster_threshold:
        if svc.redis.hsetnx(cluster_key(svc, sig), "status", PAUSED):
            svc.redis.hset(cluster_key(svc, sig), mapping={"devices": int(count), "paused_at": ts})
            _persist_pause(svc, session, sig, fp.webgl_renderer, int(count), now)
        status = PAUSED
    if status == PAUSED and svc.verified.contains_any(candidates, ts) is None:
        svc.metrics.step("ingestion_paused")
        return Screening(sig, "paused", f"event ingestion is paused for this device's WebGL signature cluster "
                         f"({sig}: more than {s.cluster_threshold} devices); answer a WebAuthn attestation "
                         "challenge (POST /api/v1/telemetry/challenges) to resume; nothing was stored")
    return Screening(sig)


def _persist_pause(svc: PrivacyService, session: Session, sig: str, renderer: str, count: int,
                   now: dt.datetime) -> None:
    session.merge(FingerprintCluster(signature=sig, renderer=renderer[:200], status=PAUSED, devices=count,
                                     paused_at=now, updated_at=utcnow()))
    events.record(session=session, kind="privacy.fingerprint.cluster_paused",
                  message=f"{count} devices share WebGL signature {sig} (threshold {svc.settings.cluster_threshold}); "
                  "ingestion paused pending WebAuthn challenges",
                  data={"signature": sig, "devices": count, "threshold": svc.settings.cluster_threshold})
    svc.metrics.step("cluster_paused")
