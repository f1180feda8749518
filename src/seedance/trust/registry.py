"""The node-attestation registry: which nodes hold a verified, fresh attestation, for which tenants.

NOTE(seedance): state per node, columnar (one slot per node name, never reused):
  ``state`` (none / attested / rejected / revoked), ``expires_at`` (the token's ``exp``, capped by
  ``max_validity_s`` after verification), ``measurement`` (interned id), ``tee`` (TEE kind id).
  A node is eligible for a tenant's sensitive job at ``now`` iff it is ``attested``, ``now <
  expires_at``, and its measurement is on that tenant's allow-list (and, when asked, its TEE is one
  of the kinds asked for). A rejected token *drops* the node's previous attestation (fail closed).
  Revoking a node is sticky until :meth:`AttestationRegistry.reinstate`; revoking a ``jti`` refuses
  that token forever. :meth:`AttestationRegistry.sweep` lists the running sensitive jobs whose node
  is no longer eligible for them, so nothing is silently left running on an untrusted node.
  Eligibility is one numpy expression over the cluster's nodes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.trust.attestation import (
    AttestationRejected,
    AttestationVerifier,
    Reason,
    TeeKind,
    VerifiedAttestation,
)

BoolA = NDArray[np.bool_]
_TEES: tuple[TeeKind, ...] = tuple(TeeKind)


class NodeState(IntEnum):
    """Attestation state of a node."""

    NONE = 0
    ATTESTED = 1
    REJECTED = 2
    REVOKED = 3

    @property
    def label(self) -> str:
        """Lower-case name."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class MeasurementPolicy:
    """Launch measurements each tenant accepts for its sensitive jobs (lower-case hex)."""

    tenants: Mapping[str, frozenset[str]]

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Iterable[str]]) -> MeasurementPolicy:
        """``{"bank": ["04a170f3...", ...], ...}``."""
        return cls({t: frozenset(m.lower() for m in ms) for t, ms in doc.items()})

    def allowed(self, tenant: str) -> frozenset[str]:
        """The tenant's allow-list (empty: the tenant may run no sensitive job)."""
        return self.tenants.get(tenant, frozenset())

    def union(self) -> frozenset[str]:
        """Every measurement some tenant accepts (what a node may register with)."""
        return frozenset().union(*self.tenants.values()) if self.tenants else frozenset()


@dataclass(frozen=True, slots=True)
class NodeTrust:
    """One node's attestation state at a time."""

    node: str
    state: str
    eligible_now: bool
    reason: str
    attestation: VerifiedAttestation | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "node": self.node,
            "state": self.state,
            "eligible_now": self.eligible_now,
            "reason": self.reason,
            "attestation": self.attestation.to_json() if self.attestation else None,
        }


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A running job as the registry's sweep sees it."""

    job: str
    tenant: str
    node: str
    sensitive: bool


@dataclass(frozen=True, slots=True)
class TrustAlert:
    """A running sensitive job whose node lost its eligibility."""

    job: str
    tenant: str
    node: str
    reason: str
    at: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {"job": self.job, "tenant": self.tenant, "node": self.node, "reason": self.reason, "at": self.at}


class AttestationRegistry:
    """Verified attestations per node, with expiry and revocation.

    Args:
        verifier: Token verifier (owns the nonce store).
        policy: Per-tenant measurement allow-lists.
        max_validity_s: Trust a verified token at most this long, whatever its ``exp`` (``None``: ``exp``).
    """

    def __init__(
        self, verifier: AttestationVerifier, policy: MeasurementPolicy, *, max_validity_s: float | None = None
    ) -> None:
        self.verifier = verifier
        self.policy = policy
        self.max_validity_s = max_validity_s
        self._index: dict[str, int] = {}
        self._names: list[str] = []
        self._state = np.zeros(0, dtype=np.int8)
        self._expires = np.zeros(0, dtype=np.float64)
        self._measure = np.zeros(0, dtype=np.int32)
        self._tee = np.zeros(0, dtype=np.int8)
        self._records: list[VerifiedAttestation | None] = []
        self._reasons: list[str] = []
        self._measure_ids: dict[str, int] = {}
        self._revoked_jti: set[str] = set()
        self._grow = threading.Lock()
        #: Grows by one whenever a node gets a slot (caches of node-index maps key on it).
        self.generation = 0

    # ------------------------------------------------------------------ writes
    def _slot(self, node: str) -> int:
        i = self._index.get(node)
        if i is not None:
            return i
        with self._grow:  # API threads add nodes while the loop reads: columns grow first, the index last
            i = self._index.get(node)
            if i is not None:
                return i
            i = len(self._names)
            self._state = np.append(self._state, np.int8(NodeState.NONE))
            self._expires = np.append(self._expires, -np.inf)
            self._measure = np.append(self._measure, np.int32(-1))
            self._tee = np.append(self._tee, np.int8(-1))
            self._records.append(None)
            self._reasons.append("never attested")
            self._names.append(node)
            self._index[node] = i
            self.generation += 1
            return i

    def challenge(self, node: str, now: float) -> str:
        """A fresh nonce the node must bind into its next attestation."""
        self._slot(node)
        return self.verifier.nonces.issue(node, now)

    def submit(self, node: str, token: str, now: float, *, advertised: TeeKind | None = None) -> VerifiedAttestation:
        """Verify ``token`` for ``node`` and record it; a rejection drops the node's trust and re-raises."""
        i = self._slot(node)
        if self._state[i] == NodeState.REVOKED:
            raise AttestationRejected(Reason.REVOKED, f"node {node} is revoked: {self._reasons[i]}")
        try:
            rec = self.verifier.verify(
                token, node=node, now=now, advertised=advertised, allowed_measurements=self.policy.union()
            )
            if rec.jti is not None and rec.jti in self._revoked_jti:
                raise AttestationRejected(Reason.REVOKED, f"token {rec.jti} is revoked")
        except AttestationRejected as exc:
            self._state[i] = NodeState.REJECTED
            self._expires[i] = -np.inf
            self._records[i] = None
            self._reasons[i] = f"last token rejected: {exc}"
            raise
        expires = rec.expires_at if self.max_validity_s is None else min(rec.expires_at, now + self.max_validity_s)
        self._state[i] = NodeState.ATTESTED
        self._expires[i] = expires
        self._measure[i] = self._measure_ids.setdefault(rec.measurement, len(self._measure_ids))
        self._tee[i] = _TEES.index(rec.tee)
        self._records[i] = rec
        self._reasons[i] = f"attested by {rec.service} ({rec.format}), jti {rec.jti}"
        return rec

    def revoke(self, *, node: str | None = None, jti: str | None = None, reason: str = "revoked") -> list[str]:
        """Revoke a node (sticky until :meth:`reinstate`) or a token id (refused forever; its node must re-attest).

        Returns the nodes that lost trust.
        """
        hit: list[str] = []
        if jti is not None:
            self._revoked_jti.add(jti)
            for i, rec in enumerate(self._records):
                if rec is not None and rec.jti == jti:
                    self._state[i] = NodeState.NONE
                    self._expires[i] = -np.inf
                    self._records[i] = None
                    self._reasons[i] = f"token {jti} revoked: {reason}"
                    hit.append(self._names[i])
        if node is not None:
            i = self._slot(node)
            self._state[i] = NodeState.REVOKED
            self._expires[i] = -np.inf
            self._reasons[i] = reason
            hit.append(node)
        return list(dict.fromkeys(hit))

    def reinstate(self, node: str) -> None:
        """Clear a node's revocation; it must attest again before it is eligible."""
        i = self._slot(node)
        if self._state[i] == NodeState.REVOKED:
            self._state[i] = NodeState.NONE
            self._records[i] = None
            self._reasons[i] = "reinstated, not attested since"

    # ------------------------------------------------------------------ reads
    def indices(self, nodes: Sequence[str]) -> NDArray[np.intp]:
        """Registry slot of each node name (``-1`` for a node never seen)."""
        return np.array([self._index.get(n, -1) for n in nodes], dtype=np.intp)

    def eligible(self, slots: NDArray[np.intp], tenant: str, now: float, tee: Iterable[TeeKind] = ()) -> BoolA:
        """Mask over ``slots`` (from :meth:`indices`): attested, unexpired, measurement allowed for ``tenant``."""
        known = slots >= 0
        s = np.where(known, slots, 0)
        if len(self._names) == 0:
            return np.zeros(slots.shape, dtype=np.bool_)
        ok: BoolA = known & (self._state[s] == NodeState.ATTESTED) & (self._expires[s] > now)
        allowed = [self._measure_ids[m] for m in self.policy.allowed(tenant) if m in self._measure_ids]
        ok &= np.isin(self._measure[s], np.array(allowed, dtype=np.int32))
        kinds = [_TEES.index(k) for k in tee]
        if kinds:
            ok &= np.isin(self._tee[s], np.array(kinds, dtype=np.int8))
        return ok

    def expires_at(self, node: str) -> float | None:
        """When the node's recorded attestation stops admitting (its ``exp``, capped; ``None``: none recorded)."""
        i = self._index.get(node)
        return float(self._expires[i]) if i is not None and self._records[i] is not None else None

    def trust(self, node: str, now: float, tenant: str | None = None) -> NodeTrust:
        """State of one node (for ``explain`` and the audit report)."""
        i = self._index.get(node)
        if i is None:
            return NodeTrust(node, NodeState.NONE.label, False, "never attested", None)
        state = NodeState(int(self._state[i]))
        rec = self._records[i]
        reason = self._reasons[i]
        label = state.label
        if state is NodeState.ATTESTED and self._expires[i] <= now:
            label, reason = "expired", f"attestation expired {now - self._expires[i]:.0f} s ago ({reason})"
        eligible = (
            bool(self.eligible(np.array([i], dtype=np.intp), tenant, now)[0])
            if tenant is not None
            else (label == "attested")
        )
        if tenant is not None and label == "attested" and not eligible:
            reason = f"measurement {rec.measurement[:16] if rec else '?'}... is not on {tenant}'s allow-list"
        return NodeTrust(node, label, eligible, reason, rec)

    def reasons(self, nodes: Sequence[str], tenant: str, now: float, tee: Iterable[TeeKind] = ()) -> list[str | None]:
        """Per node, why it is not eligible for ``tenant``'s sensitive jobs (``None`` where it is)."""
        kinds = tuple(tee)
        ok = self.eligible(self.indices(nodes), tenant, now, kinds)
        out: list[str | None] = []
        for n, good in zip(nodes, ok, strict=True):
            if good:
                out.append(None)
                continue
            t = self.trust(n, now, tenant)
            if t.eligible_now and kinds and t.attestation is not None and t.attestation.tee not in kinds:
                out.append(f"attested TEE {t.attestation.tee.value} is not one of {', '.join(k.value for k in kinds)}")
            else:
                out.append(f"{t.state}: {t.reason}")
        return out

    def sweep(self, running: Iterable[RunningJob], now: float) -> list[TrustAlert]:
        """Running sensitive jobs on nodes no longer eligible for their tenant (report them, do not leave them)."""
        alerts: list[TrustAlert] = []
        for job in running:
            if not job.sensitive:
                continue
            t = self.trust(job.node, now, job.tenant)
            if not t.eligible_now:
                alerts.append(TrustAlert(job.job, job.tenant, job.node, f"{t.state}: {t.reason}", now))
        return alerts
