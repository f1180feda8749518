"""The attested-TEE placement stage: sensitive jobs only on nodes holding a fresh, verified attestation.

A node advertises its TEE with the label ``seedance.io/tee`` (``sev-snp``, ``tdx``, ``sgx``); a
job is sensitive when it carries the label ``seedance.io/sensitive=true``. For a sensitive job the
stage's mask is: node advertises a TEE (one of those the job asks for, when it names any) AND the
registry says the node is eligible for the job's tenant at the stage's clock time. Non-sensitive
jobs pass everywhere. The stage only reads the registry; it is evaluated once per scheduling
attempt, so an attestation that expires takes the node out at the next attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import FilterPlugin
from seedance.trust.attestation import TeeKind
from seedance.trust.registry import AttestationRegistry

BoolA = NDArray[np.bool_]

#: Node label advertising the node's TEE.
LABEL_TEE = "seedance.io/tee"
#: Job label marking a job sensitive (``"true"``).
LABEL_SENSITIVE = "seedance.io/sensitive"
#: Job label naming the TEE kinds a sensitive job accepts (comma-separated; empty: any).
LABEL_TEE_REQUIRED = "seedance.io/tee-required"


@dataclass(frozen=True, slots=True)
class TrustRequirement:
    """What a job needs from a node's attestation."""

    tenant: str
    sensitive: bool = False
    tee: frozenset[TeeKind] = frozenset()

    @classmethod
    def from_labels(cls, tenant: str, labels: Mapping[str, str]) -> TrustRequirement:
        """From job labels (``seedance.io/sensitive``, ``seedance.io/tee-required``)."""
        sensitive = labels.get(LABEL_SENSITIVE, "false").strip().lower()
        if sensitive not in ("true", "false"):
            raise InputError(f"must be true or false, got {sensitive!r}", field=LABEL_SENSITIVE)
        kinds = frozenset(_tee(k) for k in labels.get(LABEL_TEE_REQUIRED, "").split(",") if k.strip())
        return cls(tenant, sensitive == "true", kinds)


def _tee(name: str) -> TeeKind:
    try:
        return TeeKind(name.strip().lower())
    except ValueError as exc:
        raise InputError(
            f"unknown TEE {name!r}; valid: {', '.join(k.value for k in TeeKind)}", field=LABEL_TEE_REQUIRED
        ) from exc


class AttestedTeeFilter(FilterPlugin):
    """Filter stage: a sensitive job's nodes must advertise a TEE and hold a fresh attestation for its tenant.

    Args:
        registry: The node-attestation registry.
        clock: Current time (the simulator's clock, or ``time.time`` live).
        requirement_of: The trust requirement of a request (the scheduling profile's request context).
    """

    name: ClassVar[str] = "AttestedTEE"

    def __init__(
        self,
        registry: AttestationRegistry,
        *,
        clock: Callable[[], float],
        requirement_of: Callable[[ResourceRequest], TrustRequirement],
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.requirement_of = requirement_of
        self._cache: tuple[ClusterSpec, int, NDArray[np.intp]] | None = None

    def _slots(self, view: ClusterState) -> NDArray[np.intp]:
        c = self._cache
        if c is not None and c[0] is view.spec and c[1] == self.registry.generation:
            return c[2]
        slots = self.registry.indices([n.name for n in view.spec.nodes])
        self._cache = (view.spec, self.registry.generation, slots)
        return slots

    def _advertised(self, view: ClusterState, r: TrustRequirement) -> BoolA:
        kinds = r.tee or frozenset(TeeKind)
        return view.label_mask(LABEL_TEE, tuple(k.value for k in kinds))

    def mask_for(self, view: ClusterState, r: TrustRequirement) -> BoolA:
        """Mask over the nodes for requirement ``r``."""
        if not r.sensitive:
            return np.ones(view.n_nodes, dtype=np.bool_)
        return self._advertised(view, r) & self.registry.eligible(self._slots(view), r.tenant, self.clock(), r.tee)

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Called once per scheduling attempt."""
        return self.mask_for(view, self.requirement_of(req))

    def reasons_for(self, view: ClusterState, r: TrustRequirement) -> list[str | None]:
        """Per node, why it is rejected (``None`` where it passes)."""
        if not r.sensitive:
            return [None] * view.n_nodes
        adv = self._advertised(view, r)
        names = [n.name for n in view.spec.nodes]
        reg = self.registry.reasons(names, r.tenant, self.clock(), r.tee)
        return [
            None
            if a and g is None
            else (
                f"advertises no TEE{' of ' + ', '.join(sorted(k.value for k in r.tee)) if r.tee else ''} ({LABEL_TEE})"
                if not a
                else g
            )
            for a, g in zip(adv, reg, strict=True)
        ]
