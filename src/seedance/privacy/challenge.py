"""The WebAuthn attestation challenge of a paused cluster's device (``webauthn``, py_webauthn 2.8).

Flow per device: ``issue`` (registration options with ``attestation="direct"``, a random 64-byte
challenge, stored in Redis; single use; ``challenge_timeout_s`` to answer) -> ``answer``:

* passed (the library verifies the ceremony, and under the ``trusted-root`` policy the
  attestation is a certificate chain ending in a configured root): the device goes into the
  ``verified`` expiring set and its ingestion resumes;
* failed (any verification error): the device is marked ``emulator`` and added to the blacklist
  sorted set for ``blacklist_ttl_days`` (30);
* timed out (no answer by the deadline; found by ``sweep`` or by a late answer): as failed.

A response that is not a registration credential at all (wrong shape, not base64url) is bad
input: 422, nothing stored, the challenge stays open. Every step is an event in the log and a
count in ``seedance_privacy_fingerprint_steps_total``.

Why ``trusted-root`` by default: an emulator can run a software authenticator, which can only
self-attest (``none`` or ``packed`` without a certificate chain). Only an attestation signed under
a hardware vendor's root (FIDO Metadata Service, Android key attestation, Apple, TPM) says the
key lives in a real authenticator.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from seedance.control.errors import Conflict, Forbidden, NotFound
from seedance.control.services import events
from seedance.core.errors import InputError
from seedance.privacy.errors import Gone
from seedance.privacy.fingerprint import device_tags, is_paused
from seedance.privacy.models import FingerprintDevice
from seedance.privacy.schemas import ChallengeRead, ChallengeResult
from seedance.privacy.subjects import require_subject

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

_X5C_FORMATS = ("packed", "tpm", "android-key", "apple", "fido-u2f", "android-safetynet")
_GRACE_S = 86_400  # a challenge record outlives its deadline by this much, so the sweep sees it


def _chal_key(svc: PrivacyService, cid: str) -> str:
    return svc.key("fp", "chal", cid)


def _deadlines(svc: PrivacyService) -> str:
    return svc.key("fp", "chal-deadlines")


def issue(svc: PrivacyService, *, tenant_id: int, device_id: str, subject: str | None) -> ChallengeRead:
    """A new challenge for a device of a paused cluster (409 when the device needs none)."""
    from webauthn import generate_registration_options, options_to_json
    from webauthn.helpers import bytes_to_base64url
    from webauthn.helpers.structs import (
        AttestationConveyancePreference,
        AuthenticatorSelectionCriteria,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    now = svc.now()
    ts = now.timestamp()
    s = svc.settings
    with svc.db.write() as session:
        material = require_subject(svc, session=session, tenant_id=tenant_id, external_id=subject) if subject else None
        tag, candidates = device_tags(svc, session, device_id, material, now)
        if svc.blacklist.contains_any(candidates, ts):
            raise Forbidden("this device is blacklisted; it cannot be challenged again before its entry expires")
        sig = svc.redis.get(svc.key("fp", "dev", tag))
        if sig is None or not is_paused(svc, sig):
            raise Conflict("no challenge needed: this device is not in a paused fingerprint cluster")
        if svc.verified.contains_any(candidates, ts):
            raise Conflict("no challenge needed: this device already passed one")
        options = generate_registration_options(
            rp_id=s.webauthn_rp_id, rp_name=s.webauthn_rp_name, user_id=bytes.fromhex(tag[:32]),
            user_name=f"device-{tag[:12]}", timeout=int(s.challenge_timeout_s * 1000),
            attestation=AttestationConveyancePreference.DIRECT,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.DISCOURAGED,
                user_verification=UserVerificationRequirement.DISCOURAGED),
        )
        cid = secrets.token_urlsafe(18)
        deadline = ts + s.challenge_timeout_s
        pipe = svc.redis.pipeline(transaction=True)
        pipe.hset(_chal_key(svc, cid), mapping={
            "tag": tag, "signature": sig, "challenge": bytes_to_base64url(options.challenge),
            "tenant": str(tenant_id), "subject_id": material.subject_id if material else "", "deadline": repr(deadline),
        })
        pipe.expire(_chal_key(svc, cid), int(s.challenge_timeout_s) + _GRACE_S)
        pipe.zadd(_deadlines(svc), {cid: deadline})
        pipe.execute()
        _verdict(session, tag, sig, material.subject_id if material else None, "challenged", now,
                 reason="challenge issued")
        events.record(session=session, kind="privacy.fingerprint.challenge_issued", tenant_id=tenant_id,
                      message="WebAuthn attestation challenge issued to a device of a paused cluster",
                      data={"signature": sig, "challenge": cid, "deadline": deadline})
    svc.metrics.step("challenge_issued")
    return ChallengeRead(challenge_id=cid, public_key=json.loads(options_to_json(options)),
                         expires_at=dt.datetime.fromtimestamp(deadline, dt.UTC))


def answer(svc: PrivacyService, *, tenant_id: int, challenge_id: str, credential: dict[str, Any]) -> ChallengeResult:
    """Verify the answer with the ``webauthn`` library; pass -> resume, fail or late -> blacklist."""
    from webauthn import verify_registration_response
    from webauthn.helpers import base64url_to_bytes, parse_attestation_object, parse_registration_credential_json

    now = svc.now()
    ts = now.timestamp()
    data = svc.redis.hgetall(_chal_key(svc, challenge_id))
    if not data or data.get("tenant") != str(tenant_id):
        raise NotFound("unknown or already answered challenge")
    deadline = float(data["deadline"])
    if ts > deadline:
        until = _timeout(svc, challenge_id, data, now)
        raise Gone(f"challenge expired at {dt.datetime.fromtimestamp(deadline, dt.UTC).isoformat()}; the device is "
                   f"marked as an emulator and blacklisted until {until.isoformat()}")
    try:
        parsed = parse_registration_credential_json(credential)
    except Exception as exc:  # shape errors: not a registration response at all
        raise InputError(f"not a WebAuthn registration response: {exc}; nothing was stored, the challenge is "
                         "still open", source="body", field="credential") from None
    failure: str | None = None
    verified: Any = None
    try:
        verified = verify_registration_response(
            credential=parsed, expected_challenge=base64url_to_bytes(data["challenge"]),
            expected_rp_id=svc.settings.webauthn_rp_id, expected_origin=list(svc.settings.webauthn_origins),
            require_user_verification=False, pem_root_certs_bytes_by_fmt=_roots(svc),
        )
        if svc.settings.attestation_policy == "trusted-root":
            failure = _untrusted(svc, parse_attestation_object(bytes(parsed.response.attestation_object)), verified)
    except Exception as exc:  # every verification failure of the library (and of CBOR/COSE decoding)
        failure = str(exc) or type(exc).__name__
    if not _claim(svc, challenge_id):
        raise NotFound("unknown or already answered challenge")
    tag, sig = data["tag"], data["signature"]
    subject_id = data.get("subject_id") or None
    if failure is not None:
        until = _blacklist(svc, tag, sig, subject_id, tenant_id, now, step="challenge_failed", cid=challenge_id,
                           reason=f"attestation failed: {failure}")
        raise Forbidden(f"attestation failed: {failure}; the device is marked as an emulator and blacklisted until "
                        f"{until.isoformat()}")
    until_ts = ts + svc.settings.verified_ttl_days * 86400
    svc.verified.add(tag, until_ts)
    fmt = str(getattr(verified.fmt, "value", verified.fmt))
    with svc.db.write() as session:
        _verdict(session, tag, sig, subject_id, "verified", now, fmt=fmt, aaguid=verified.aaguid,
                 reason="attestation verified", expires=dt.datetime.fromtimestamp(until_ts, dt.UTC))
        events.record(session=session, kind="privacy.fingerprint.challenge_passed", tenant_id=tenant_id,
                      message=f"WebAuthn attestation verified ({fmt})",
                      data={"signature": sig, "challenge": challenge_id, "fmt": fmt, "aaguid": verified.aaguid})
        events.record(session=session, kind="privacy.fingerprint.resumed", tenant_id=tenant_id,
                      message="event ingestion resumed for the device",
                      data={"signature": sig, "challenge": challenge_id})
    svc.metrics.step("challenge_passed")
    svc.metrics.step("resumed")
    return ChallengeResult(result="passed", fmt=fmt, aaguid=verified.aaguid,
                           verified_until=dt.datetime.fromtimestamp(until_ts, dt.UTC))


def sweep_challenges(svc: PrivacyService, now: dt.datetime) -> int:
    """Blacklist the devices of every challenge past its deadline; returns how many."""
    due = svc.redis.zrangebyscore(_deadlines(svc), "-inf", now.timestamp())
    n = 0
    for cid in due:
        data = svc.redis.hgetall(_chal_key(svc, cid))
        if data:
            _timeout(svc, cid, data, now)
            n += 1
        else:
            svc.redis.zrem(_deadlines(svc), cid)
    return n


def _timeout(svc: PrivacyService, cid: str, data: dict[str, str], now: dt.datetime) -> dt.datetime:
    if not _claim(svc, cid):
        raise NotFound("unknown or already answered challenge")
    return _blacklist(svc, data["tag"], data["signature"], data.get("subject_id") or None, int(data["tenant"]), now,
                      step="challenge_timed_out", cid=cid,
                      reason="no answer to the WebAuthn challenge before its deadline")


def _claim(svc: PrivacyService, cid: str) -> bool:
    """Take the challenge (single use): only one caller sees it deleted."""
    pipe = svc.redis.pipeline(transaction=True)
    pipe.delete(_chal_key(svc, cid))
    pipe.zrem(_deadlines(svc), cid)
    deleted, _ = pipe.execute()
    return bool(deleted)


def _blacklist(svc: PrivacyService, tag: str, sig: str, subject_id: str | None, tenant_id: int, now: dt.datetime,
               *, step: str, cid: str, reason: str) -> dt.datetime:
    """Mark the device an emulator and blacklist it; the event log gets the challenge id, never the tag."""
    until_ts = now.timestamp() + svc.settings.blacklist_ttl_days * 86400
    until = dt.datetime.fromtimestamp(until_ts, dt.UTC)
    svc.blacklist.add(tag, until_ts)
    with svc.db.write() as session:
        _verdict(session, tag, sig, subject_id, "emulator", now, reason=reason, expires=until)
        events.record(session=session, kind=f"privacy.fingerprint.{step}", tenant_id=tenant_id, message=reason,
                      data={"signature": sig, "challenge": cid})
        events.record(session=session, kind="privacy.fingerprint.blacklisted", tenant_id=tenant_id,
                      message=f"device marked as an emulator and blacklisted until {until.isoformat()}",
                      data={"signature": sig, "challenge": cid, "expires_at": until_ts})
    svc.metrics.step(step)
    svc.metrics.step("blacklisted")
    return until


def _verdict(session: Session, tag: str, sig: str, subject_id: str | None, status: str, now: dt.datetime, *,
             reason: str, fmt: str | None = None, aaguid: str | None = None,
             expires: dt.datetime | None = None) -> None:
    session.merge(FingerprintDevice(device_tag=tag, signature=sig, subject_id=subject_id, status=status, fmt=fmt,
                                    aaguid=aaguid, reason=reason[:2000], decided_at=now, expires_at=expires))


def _roots(svc: PrivacyService) -> dict[Any, list[bytes]] | None:
    from webauthn.helpers.structs import AttestationFormat

    if not svc.settings.attestation_roots:
        return None
    pems = []
    for path in svc.settings.attestation_roots:
        try:
            pems.append(path.read_bytes())
        except OSError as exc:
            raise InputError(f"cannot read an attestation root: {exc.strerror}", source=str(path)) from None
    return {AttestationFormat(f): pems for f in _X5C_FORMATS}


def _untrusted(svc: PrivacyService, att: Any, verified: Any) -> str | None:
    """Why an otherwise valid attestation does not prove a real authenticator (``None``: it does)."""
    fmt = str(getattr(att.fmt, "value", att.fmt))
    if fmt == "none":
        return "attestation format 'none' says nothing about the authenticator (a software key can make it)"
    if not svc.settings.attestation_roots:
        return "no trusted attestation roots are configured (SEEDANCE_PRIVACY_ATTESTATION_ROOTS)"
    if fmt not in _X5C_FORMATS or not getattr(att.att_stmt, "x5c", None):
        return f"self attestation ({fmt} without a certificate chain) cannot show the key is in a real authenticator"
    return None
