"""The trust stages of a scheduling profile: ``AttestedTEE`` and ``IsolationGrade`` (+ adapter ``isolation-grade``).

NOTE(seedance): one stage, every driver.
  * ``AttestedTEE`` (filter): a job labelled ``seedance.io/sensitive=true`` may only go to a node
    advertising a TEE (``seedance.io/tee``) that holds a verified, fresh attestation whose
    measurement is on the job's tenant's allow-list (``trust.registry.AttestationRegistry``, the
    verifier of ``trust.attestation``). The mask is read from the registry at the stages' clock on
    every attempt, so a node whose attestation expired or was revoked is out at the next attempt.
    Per node the reason says why (``expired: ...``, ``rejected: ...``, ``advertises no TEE``).
    Without a registry, or with a malformed trust label, a sensitive job is admitted nowhere.
  * ``IsolationGrade`` (filter) with ``isolation-grade`` (adapter): a job's tier and tenant may
    require a grade (profile section ``isolation``); the adapter keeps only the slice backends
    giving it, the filter only the nodes whose pool offers one of them. A tier requiring
    ``hardware`` is thus never placed on a time-sliced (or MPS) share.
  * ``sensitive-guard`` (a ``Hold`` adapter): keeps every sensitive pod pending, with the reason.
    The live loop and the extender run every profile through :func:`ensure_trust`: a profile that
    lists ``AttestedTEE`` is used as it is; otherwise, when the driver has an attestation registry,
    ``AttestedTEE`` is added, and when it has none, ``sensitive-guard`` (so a profile without the
    stage never places a sensitive pod, and explanations of other pods are unchanged).
  The simulator, the live loop and the extender build these through ``build_profile`` with their
  ``StageServices`` (pod directory, registry, clock); ``seedance.profile.builtin`` registers them.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Outcome
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.profile.build import BuildContext
from seedance.profile.config import ProfileConfig
from seedance.profile.context import AttemptFilter, Hold, StageServices
from seedance.profile.stages import ADAPTERS, FILTERS, Attempt, RequestAdapter
from seedance.trust.grades import Grade, GradePolicy, IsolationGradeFilter, adapt_request
from seedance.trust.registry import AttestationRegistry
from seedance.trust.stages import AttestedTeeFilter, TrustRequirement

BoolA = NDArray[np.bool_]


class AttestedTee(AttemptFilter):
    """Filter stage ``AttestedTEE`` (see the module docstring).

    Args:
        services: The driver's services (pod directory, registry, clock).
    """

    name: ClassVar[str] = "AttestedTEE"

    def __init__(self, services: StageServices) -> None:
        self.services = services
        self.registry: AttestationRegistry | None = services.attestation
        self._now = 0.0
        self._req = TrustRequirement("")
        self._bad: str | None = None
        self._inner = (
            None if self.registry is None
            else AttestedTeeFilter(self.registry, clock=lambda: self._now, requirement_of=lambda _r: self._req)
        )

    def begin(self, att: Attempt, req: ResourceRequest) -> None:
        self._now = self.services.now(att)
        info = self.services.info(att)
        self._bad = None
        if info is None:
            self._req = TrustRequirement("")
            return
        try:
            self._req = TrustRequirement.from_labels(info.tenant, info.labels)
        except InputError as exc:  # fail closed: a job whose trust labels do not parse goes nowhere
            self._req = TrustRequirement(info.tenant, sensitive=True)
            self._bad = f"trust labels of {info.name} do not parse: {exc}"

    @property
    def requirement(self) -> TrustRequirement:
        """The requirement of the attempt in progress."""
        return self._req

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        if not self._req.sensitive:
            return np.ones(view.n_nodes, dtype=np.bool_)
        if self._bad is not None or self._inner is None:
            return np.zeros(view.n_nodes, dtype=np.bool_)
        return self._inner.mask_for(view, self._req)

    def reason(self, req: ResourceRequest) -> str:
        if self._bad is not None:
            return self._bad
        if self._inner is None:
            return "no attestation registry: no node is eligible for a sensitive job"
        return f"no verified, fresh attestation for tenant {self._req.tenant}'s sensitive jobs"

    def node_reasons(self, view: ClusterState, req: ResourceRequest) -> list[str | None] | None:
        if not self._req.sensitive or self._bad is not None or self._inner is None:
            return None
        return [None if r is None else f"sensitive job: {r}" for r in self._inner.reasons_for(view, self._req)]


def _grade(services: StageServices, policy: GradePolicy, att: Attempt) -> Grade:
    info = services.info(att)
    tier = att.tier or (info.tier if info is not None else None)
    return policy.required(tier, info.tenant if info is not None else None)


def grade_policy(b: BuildContext) -> GradePolicy:
    """The profile's ``isolation`` section as a :class:`GradePolicy`."""
    iso = b.config.isolation
    return GradePolicy.from_mapping({"tiers": dict(iso.tiers), "tenants": dict(iso.tenants)})


class IsolationGrade(AttemptFilter):
    """Filter stage ``IsolationGrade``: only nodes whose pool gives a share the required grade."""

    name: ClassVar[str] = "IsolationGrade"
    resolvable: ClassVar[bool] = False

    def __init__(self, services: StageServices, policy: GradePolicy, *, mps_limited: bool = False) -> None:
        self.services = services
        self.policy = policy
        self.mps_limited = mps_limited
        self._inner = IsolationGradeFilter(Grade.NONE, mps_limited=mps_limited)

    def begin(self, att: Attempt, req: ResourceRequest) -> None:
        g = _grade(self.services, self.policy, att)
        if g is not self._inner.required:
            self._inner = IsolationGradeFilter(g, mps_limited=self.mps_limited)

    @property
    def required(self) -> Grade:
        """The grade the attempt in progress requires."""
        return self._inner.required

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        if self._inner.required is Grade.NONE:
            return np.ones(view.n_nodes, dtype=np.bool_)
        return self._inner.mask(view, req)

    def reason(self, req: ResourceRequest) -> str:
        return f"no share of {self._inner.required.label} isolation here"

    def node_reasons(self, view: ClusterState, req: ResourceRequest) -> list[str | None] | None:
        if self._inner.required is Grade.NONE:
            return None
        return self._inner.reasons(view, req)


class IsolationGradeRequest(RequestAdapter):
    """Adapter ``isolation-grade``: a share accepts only the slice backends giving its required grade."""

    name: ClassVar[str] = "isolation-grade"

    def __init__(self, services: StageServices, policy: GradePolicy, *, mps_limited: bool = False) -> None:
        self.services = services
        self.policy = policy
        self.mps_limited = mps_limited

    def adapt(self, att: Attempt, req: ResourceRequest) -> ResourceRequest:
        g = _grade(self.services, self.policy, att)
        return req if g is Grade.NONE else adapt_request(req, g, mps_limited=self.mps_limited)


class SensitiveGuard(Hold):
    """Adapter ``sensitive-guard``: a sensitive pod (or one whose trust labels do not parse) stays pending."""

    name: ClassVar[str] = "sensitive-guard"

    def __init__(self, services: StageServices, profile: str) -> None:
        self.services = services
        self.profile = profile

    def hold(self, att: Attempt, req: ResourceRequest) -> Decision | None:
        info = self.services.info(att)
        if info is None:
            return None
        try:
            sensitive = TrustRequirement.from_labels(info.tenant, info.labels).sensitive
        except InputError:
            sensitive = True
        if not sensitive:
            return None
        return Decision(att.pod, Outcome.PENDING, reason=(
            f"sensitive job: profile {self.profile!r} has no AttestedTEE stage and no attestation registry is "
            "configured, so no node is eligible"), explanation={"held_by": self.name})


def ensure_trust(cfg: ProfileConfig, *, registry: bool) -> ProfileConfig:
    """``cfg`` as a live driver runs it (see the module docstring)."""
    if any(f.lower() == "attestedtee" for f in cfg.filters):
        return cfg
    if registry:
        return cfg.model_copy(update={"filters": (*cfg.filters, "AttestedTEE")})
    if any(a.lower() == "sensitive-guard" for a in cfg.adapters):
        return cfg
    return cfg.model_copy(update={"adapters": ("sensitive-guard", *cfg.adapters)})


def _attested(b: BuildContext) -> AttestedTee:
    return AttestedTee(b.services)


def _isolation(b: BuildContext) -> IsolationGrade:
    return IsolationGrade(b.services, grade_policy(b), mps_limited=b.config.isolation.mps_limited)


def _isolation_request(b: BuildContext) -> IsolationGradeRequest:
    return IsolationGradeRequest(b.services, grade_policy(b), mps_limited=b.config.isolation.mps_limited)


FILTERS.add("AttestedTEE", _attested)
FILTERS.add("IsolationGrade", _isolation)
ADAPTERS.add("isolation-grade", _isolation_request)
ADAPTERS.add("sensitive-guard", lambda b: SensitiveGuard(b.services, b.config.name))
