"""The extender's trust wiring: the pods it is asked about as the stages' pod directory, the registry, the clock.

NOTE(seedance): kube-scheduler asks about one pod at a time; :meth:`ExtenderStages.attempt_id`
gives each pod (by UID) a small integer id and its :class:`~seedance.profile.context.PodInfo`
(tenant = the ``seedance.io/tenant`` label, else the namespace; the pod's labels; its tier), so
the profile's ``AttestedTEE`` and ``IsolationGrade`` stages decide exactly as in the simulator and
the live loop. ``configure`` runs the profile through ``ensure_trust`` (a pod labelled sensitive is
never admitted without a verified, fresh attestation, whatever the profile lists), and
:data:`TRUST_NODE_LABELS` are the node labels the extender must keep in its node cache.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seedance.profile.config import ProfileConfig
from seedance.profile.context import PodInfo, StageServices
from seedance.trust.stages import LABEL_TEE

if TYPE_CHECKING:
    from seedance.k8s.objects import PodInfo as K8sPod
    from seedance.trust.registry import AttestationRegistry

#: Pod label naming the tenant (default: the pod's namespace).
LABEL_TENANT = "seedance.io/tenant"
#: Node labels the trust stages read.
TRUST_NODE_LABELS = frozenset({LABEL_TEE})


@dataclass(slots=True)
class ExtenderPods:
    """Pods by attempt id (the most recent ``capacity`` pods asked about)."""

    capacity: int = 4096
    _ids: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _info: dict[int, PodInfo] = field(default_factory=dict)
    _next: int = 0

    def put(self, pod: K8sPod) -> int:
        """The attempt id of ``pod`` (stable per UID while remembered), its context recorded."""
        pid = self._ids.get(pod.uid)
        if pid is None:
            pid = self._next
            self._next += 1
            self._ids[pod.uid] = pid
            if len(self._ids) > self.capacity:
                _, old = self._ids.popitem(last=False)
                self._info.pop(old, None)
        else:
            self._ids.move_to_end(pod.uid)
        labels = dict(pod.labels)
        self._info[pid] = PodInfo(name=f"{pod.namespace}/{pod.name}", tenant=labels.get(LABEL_TENANT, pod.namespace),
                                  labels=labels, tier=pod.tier or "bronze")
        return pid

    def info(self, pod: int) -> PodInfo | None:
        return self._info.get(pod)


@dataclass(slots=True)
class ExtenderStages:
    """What the extender lends the trust stages.

    Args:
        registry: The node-attestation registry (``None``: no node is eligible for a sensitive pod).
        clock: The stages' clock (default: ``time.time``).
    """

    registry: AttestationRegistry | None = None
    clock: Callable[[], float] = time.time
    pods: ExtenderPods = field(default_factory=ExtenderPods)
    _services: StageServices | None = None

    @property
    def services(self) -> StageServices:
        """The profile's stage services."""
        if self._services is None:
            self._services = StageServices(pods=self.pods, attestation=self.registry, clock=self.clock)
        return self._services

    def configure(self, cfg: ProfileConfig) -> ProfileConfig:
        """``cfg`` as the extender runs it (``ensure_trust``)."""
        from seedance.trust.profile_stages import ensure_trust

        return ensure_trust(cfg, registry=self.registry is not None)

    def attempt_id(self, pod: K8sPod) -> int:
        """The pod id of an attempt for ``pod``."""
        return self.pods.put(pod)
