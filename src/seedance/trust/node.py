"""One node's outputs joined per GPU (``-L`` / ``mig`` tables by index, ``-q`` by UUID); findings collect here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from seedance.core.errors import InputError
from seedance.slicing.mig import MigGpu
from seedance.trust.findings import Check, Finding
from seedance.trust.models import gi_profile_of, model_of_product, models_of_profiles, row_matches
from seedance.trust.nvsmi import (
    ComputeInstanceRow,
    GpuInstanceRow,
    ListedMigDevice,
    OutputKind,
    ParsedOutput,
    QueriedGpu,
)


@dataclass
class GpuView:
    index: int
    uuid: str | None = None
    uuid_where: tuple[str, int] | None = None
    product: str | None = None
    model: MigGpu | None = None
    model_note: str = ""
    query: QueriedGpu | None = None
    query_source: str | None = None
    gis: list[GpuInstanceRow] = field(default_factory=list)
    cis: list[ComputeInstanceRow] = field(default_factory=list)
    devices: list[ListedMigDevice] = field(default_factory=list)

    @property
    def mig_rows(self) -> bool:
        return bool(self.gis or self.cis or self.devices)


class NodeView:
    """The joined view of one node's outputs and the findings gathered while checking it."""

    def __init__(self, outputs: Sequence[ParsedOutput]) -> None:
        by_kind: dict[OutputKind, ParsedOutput] = {}
        for o in outputs:
            if o.kind in by_kind:
                raise InputError(
                    f"two {o.kind.value} outputs ({by_kind[o.kind].source}, {o.source}): audit one node at a time",
                    source=o.source,
                )
            by_kind[o.kind] = o
        self.outputs = by_kind
        self.findings: list[Finding] = []
        self.gpus: dict[int, GpuView] = {}
        self._join()

    def add(self, check: Check, gpu: int | None, source: str | None, line: int | None, message: str, fix: str) -> None:
        self.findings.append(Finding(check, gpu, source, line, message, fix))

    def gpu(self, index: int) -> GpuView:
        if index not in self.gpus:
            self.gpus[index] = GpuView(index)
        return self.gpus[index]

    def _join(self) -> None:
        listing = self.outputs.get(OutputKind.LIST)
        if listing:
            for g in listing.gpus:
                v = self.gpu(g.index)
                v.uuid, v.uuid_where, v.product = g.uuid, (listing.source, g.line), g.product
            for d in listing.mig_devices:
                self.gpu(d.gpu).devices.append(d)
        lgi = self.outputs.get(OutputKind.GPU_INSTANCES)
        if lgi:
            for r in lgi.gpu_instances:
                self.gpu(r.gpu).gis.append(r)
        lci = self.outputs.get(OutputKind.COMPUTE_INSTANCES)
        if lci:
            for c in lci.compute_instances:
                self.gpu(c.gpu).cis.append(c)
        query = self.outputs.get(OutputKind.QUERY)
        if query:
            by_uuid = {v.uuid: v for v in self.gpus.values() if v.uuid}
            for q in query.queried:
                if listing:
                    v_or_none = by_uuid.get(q.uuid)
                    if v_or_none is None:
                        self.add(
                            Check.VIEW_MISMATCH,
                            None,
                            query.source,
                            q.line,
                            f"-q GPU {q.bus_id} ({q.uuid}) is not in {listing.source}: "
                            "the files come from different nodes",
                            "capture all outputs on the same node, in one go (nvidia-smi -L; nvidia-smi mig -lgi; "
                            "nvidia-smi mig -lci; nvidia-smi -q)",
                        )
                        continue
                    v = v_or_none
                else:
                    v = self.gpu(q.position)
                    if v.uuid is None:
                        v.uuid, v.uuid_where = q.uuid, (query.source, q.line)
                v.query, v.query_source = q, query.source
                v.product = v.product or q.product
            if listing and query.attached == len(query.queried):
                seen = {q.uuid for q in query.queried}
                for v in self.gpus.values():
                    if v.uuid and v.uuid not in seen and v.uuid_where:
                        self.add(
                            Check.VIEW_MISMATCH,
                            v.index,
                            v.uuid_where[0],
                            v.uuid_where[1],
                            f"GPU {v.index} ({v.uuid}) is missing from the full -q output {query.source}",
                            "capture all outputs on the same node, in one go",
                        )
        for v in self.gpus.values():
            self._model(v)

    def _model(self, v: GpuView) -> None:
        if v.product:
            v.model = model_of_product(v.product)
            v.model_note = v.model.model if v.model else f"{v.product} (no MIG table)"
            return
        names = sorted(
            {r.profile for r in v.gis}
            | {gi_profile_of(c.profile) for c in v.cis}
            | {gi_profile_of(d.profile) for d in v.devices}
        )
        if not names:
            return
        cands = models_of_profiles(names)
        exact = [g for g in cands if all(row_matches(g, r) for r in v.gis)]  # 1g.10gb: A100-40GB or -80GB
        cands = exact or cands
        v.model = cands[0] if cands else None
        v.model_note = (" or ".join(c.model for c in cands) + " (from profile names)") if cands else "unknown"
