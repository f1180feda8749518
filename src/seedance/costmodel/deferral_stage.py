"""The ``deferral`` stage of a scheduling profile: a flexible job waits for a cheaper hour, with the reason.

NOTE(seedance): a :class:`~seedance.profile.context.Hold` adapter around
:class:`~seedance.costmodel.live_deferral.LiveDeferral` (the driver lends it through
``StageServices.deferral``). On every attempt of a pod whose directory entry says it is flexible
(``flexibility_hours > 0``) and has a predicted duration, the stage asks
:func:`~seedance.costmodel.live_deferral.decide_deferral` for the start window at the stages'
clock; when that window starts in a later hour the pod stays pending with the deferral's reason
(``explanation["deferral"]``: the window, energy and CO2 now and then). At the window (or when
the deferral no longer pays) the stage passes and the other stages place the pod. The latest
finish is ``min(deadline, submitted + flexibility + duration)``. A signal source that fails
never blocks a pod: it runs now, and the reason of its placement is unchanged.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from seedance.core.decision import Decision, Outcome
from seedance.core.errors import SeedanceError
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.costmodel.score import JobFeatures
from seedance.profile.build import BuildContext
from seedance.profile.context import Hold, PodInfo, StageServices
from seedance.profile.stages import ADAPTERS, Attempt
from seedance.signals.series import HOUR

log = logging.getLogger("seedance.costmodel.deferral")

#: Explanation key of a deferred decision (drivers re-try such pods every cycle).
DEFERRAL_KEY = "deferral"


def features(info: PodInfo, req: ResourceRequest, now: float) -> JobFeatures | None:
    """The cost model's view of a pod (``None``: not flexible, or no predicted duration)."""
    if info.duration_hours is None or info.duration_hours <= 0 or info.flexibility_hours <= 0:
        return None
    duration = info.duration_hours * HOUR
    submitted = info.submitted if info.submitted is not None else now
    latest = submitted + info.flexibility_hours * HOUR + duration
    deadline = latest if info.deadline is None else min(info.deadline, latest)
    gpus = req.num_gpu * req.gpu_milli / MILLI_PER_GPU if req.num_gpu else 0.0
    return JobFeatures(
        duration_s=duration, gpu_model=info.gpu_model or "A100-80GB", gpus=gpus or 1.0, deadline=deadline,
        tier=info.tier, flexible=True, submitted=submitted,
    )


class Deferral(Hold):
    """Adapter ``deferral`` (see the module docstring)."""

    name: ClassVar[str] = "deferral"

    def __init__(self, services: StageServices) -> None:
        self.services = services

    def hold(self, att: Attempt, req: ResourceRequest) -> Decision | None:
        stage = self.services.deferral
        info = self.services.info(att)
        if stage is None or info is None:
            return None
        now = self.services.now(att)
        job = features(info, req, now)
        if job is None:
            return None
        try:
            d = stage(job, now)
        except (SeedanceError, OSError) as exc:  # signals unavailable: run now, never block
            log.warning("deferral of %s skipped: %s", info.name, exc)
            return None
        if not d.defer:
            return None
        return Decision(att.pod, Outcome.PENDING, reason=d.reason, explanation={DEFERRAL_KEY: d.to_json()})


def _deferral(b: BuildContext) -> Deferral:
    return Deferral(b.services)


ADAPTERS.add("deferral", _deferral)
