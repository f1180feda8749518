"""The MIG stage: slice resolution, the MIG-aware score and the MIG instance ledger as a bind hook.

NOTE(seedance): with a MIG ledger (``slicing.placement.MigLedger``) a profile
  * filters GPU room with ``SliceFit`` instead of ``GpuFit`` (a share on a MIG pool needs a free
    legal start for its profile),
  * scores with ``MigAwarePolicy`` (each pool's nodes scored with the request as booked there),
  * annotates a bound decision with the slice it takes (``explanation["slice"]``; the placement
    books the slice's milli) and records the instance in the ledger on ``apply``.
  With no MIG pool, every decision equals the plain policy's (``tests/slicing`` checks this).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Placement
from seedance.core.resources import ResourceRequest
from seedance.profile.stages import BindHook
from seedance.slicing.placement import MigLedger, served_as_mig


class MigInstances(BindHook):
    """Names the slice of every bound share and keeps the ledger of MIG instances."""

    name: ClassVar[str] = "mig-ledger"

    def __init__(self, ledger: MigLedger) -> None:
        self.ledger = ledger

    def annotate(self, view: ClusterState, req: ResourceRequest, decision: Decision) -> Decision:
        pl = decision.placement
        if pl is None or req.num_gpu == 0:
            return decision
        pid = int(self.ledger.pool[pl.node])
        ps = self.ledger.resolve(req)[pid + 1]
        if ps.slice is None:
            return decision
        info: dict[str, Any] = ps.slice.to_json()
        if not served_as_mig(ps):
            info["gpu_model"] = view.models[int(view.model[pl.node])]
        else:
            info["start"] = self.ledger.start_for(pl.node, pl.gpus[0], ps.profile)
        booked = ps.request.gpu_milli
        placement = pl if booked == pl.gpu_milli else Placement(pl.node, pl.gpus, booked, pl.cpu_milli, pl.memory_mib)
        return replace(decision, placement=placement, explanation={**decision.explanation, "slice": info})

    def apply(self, view: ClusterState, decision: Decision) -> None:
        self.ledger.apply(decision)

    def release(self, view: ClusterState, decision: Decision) -> None:
        self.ledger.release(decision)
