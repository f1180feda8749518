"""``/api/v1/clusters/{cluster}/nodes/{node}/attestation``: a node's TEE attestation (nonce, token, status).

The node agent asks for a nonce (``POST .../attestation/challenge``), has its attestation service
bind it into a token, and puts ``{token, nonce}`` (``PUT .../attestation``): the token is verified
with the process's :class:`~seedance.trust.attestation.AttestationVerifier` and recorded in the
loop's registry (a rejection answers 422 and drops the node's previous attestation: fail closed).
Operator or cluster-admin. 409 when the service has no attestation configured.
"""

from __future__ import annotations

import base64
import binascii
import json
import time

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from seedance.control.api.deps import ClusterPath, NodePath, PrincipalDep, ServiceDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.errors import Conflict
from seedance.control.schemas import Role
from seedance.control.service import ControlService
from seedance.control.services import clusters
from seedance.core.errors import InputError
from seedance.trust.attestation import AttestationRejected, TeeKind
from seedance.trust.registry import AttestationRegistry
from seedance.trust.stages import LABEL_TEE

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES, tags=["attestation"])
_PATH = "/clusters/{cluster}/nodes/{node}/attestation"


class AttestationPut(BaseModel):
    """A node's attestation token and the nonce it binds."""

    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=32_000, description="The attestation service's JWT (compact JWS).")
    nonce: str = Field(min_length=1, max_length=200, description="The nonce from .../attestation/challenge.")


class Challenge(BaseModel):
    """A single-use nonce for the node's next attestation."""

    nonce: str
    ttl_s: float


class AttestationStatus(BaseModel):
    """A node's attestation as the scheduler sees it now."""

    node: str
    state: str = Field(description="none / attested / rejected / revoked.")
    verified: bool = Field(description="Attested and unexpired now.")
    expires_at: float | None = Field(description="Unix time the attestation stops admitting (None: not attested).")
    tee: str | None
    jti: str | None
    reason: str


def _registry(svc: ControlService) -> AttestationRegistry:
    reg = svc.loop.stages.registry if svc.loop.stages is not None else None
    if reg is None:
        raise Conflict("node attestation is not configured on this service (set attestation_service)")
    return reg


def _status(reg: AttestationRegistry, node: str) -> AttestationStatus:
    t = reg.trust(node, time.time())
    a = t.attestation
    expires = reg.expires_at(node) if a is not None else None
    return AttestationStatus(node=node, state=t.state, verified=t.eligible_now, expires_at=expires,
                             tee=a.tee.value if a else None, jti=a.jti if a else None, reason=t.reason)


def _bound_nonce(token: str) -> str | None:
    """The nonce a token's claims bind (``nonce``, or base64 ``attester_held_data``), unverified."""
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        if not isinstance(claims, dict):
            return None
        if isinstance(claims.get("nonce"), str):
            return str(claims["nonce"])
        held = claims.get("attester_held_data")
        return base64.b64decode(held, validate=True).decode() if isinstance(held, str) else None
    except (IndexError, ValueError, binascii.Error, UnicodeDecodeError):
        return None


def _node_tee(svc: ControlService, me: PrincipalDep, cluster: str, node: str, action: str) -> TeeKind | None:
    me.require(Role.OPERATOR, action)
    with svc.db.read() as s:
        _, n = clusters.get_node(session=s, cluster_name=cluster, node_name=node)
        label = (n.labels or {}).get(LABEL_TEE)
    try:
        return TeeKind(label) if label else None
    except ValueError:
        raise InputError(f"node {node} advertises an unknown TEE {label!r}", field=LABEL_TEE) from None


@router.post(_PATH + "/challenge", status_code=201, response_model=Challenge)
def challenge(cluster: ClusterPath, node: NodePath, svc: ServiceDep, me: PrincipalDep) -> Challenge:
    """A fresh nonce the node binds into its next attestation token (operator)."""
    _node_tee(svc, me, cluster, node, "asking an attestation nonce")
    reg = _registry(svc)
    return Challenge(nonce=reg.challenge(node, time.time()), ttl_s=reg.verifier.nonces.ttl_s)


@router.put(_PATH, response_model=AttestationStatus)
def put_attestation(
    cluster: ClusterPath, node: NodePath, data: AttestationPut, svc: ServiceDep, me: PrincipalDep
) -> AttestationStatus:
    """Verify the node's attestation token and record it (operator); 422 says why a token is rejected."""
    tee = _node_tee(svc, me, cluster, node, "attesting a node")
    reg = _registry(svc)
    if _bound_nonce(data.token) != data.nonce:
        raise InputError("the token does not bind this nonce", field="nonce")
    try:
        reg.submit(node, data.token, time.time(), advertised=tee)
    except AttestationRejected as exc:
        svc.wake_scheduler()  # the node's previous attestation is dropped
        raise InputError(f"attestation rejected ({exc.reason.value}): {exc.message}", field="token") from exc
    svc.wake_scheduler()
    return _status(reg, node)


@router.get(_PATH, response_model=AttestationStatus)
def get_attestation(cluster: ClusterPath, node: NodePath, svc: ServiceDep, me: PrincipalDep) -> AttestationStatus:
    """The node's attestation status now."""
    with svc.db.read() as s:
        clusters.get_node(session=s, cluster_name=cluster, node_name=node)
    return _status(_registry(svc), node)
