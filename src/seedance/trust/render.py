"""Render MIG layouts as ``nvidia-smi`` would print them (``-L``, ``mig -lgi``, ``mig -lci``, ``-q``).

Used to build audit corpora and property tests from legal layouts of the MIG tables. The column
layouts are the drivers' own: ``mig -lgi`` in the narrow (MIG User Guide) and wide layouts, and
``mig -lci`` with and without the Placement column; the tests check that these reproduce the real
fixtures byte for byte. A ``-q`` output is made from a real ``-q`` file used as a template: its
first GPU block is repeated with the product, UUID, bus id and MIG mode of each rendered GPU.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass

from seedance.slicing.mig import Instance, MigGpu

#: CI profile IDs of ``nvidia-smi mig -lci`` by compute slices (NVML ``NVML_COMPUTE_INSTANCE_PROFILE_*``:
#: 1, 2, 3, 4, 7, 8, 6 slices = 0, 1, 2, 3, 4, 5, 6; ``1_SLICE_REV1`` = 7).
CI_PROFILE_ID: dict[int, int] = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
CI_PROFILE_SLICES: dict[int, int] = {**{v: k for k, v in CI_PROFILE_ID.items()}, 7: 1}

_NS = uuidlib.UUID("6f1d3c1e-2b9a-4c57-9e4e-3a0b5d7c9e21")


def fake_uuid(prefix: str, *parts: object) -> str:
    """A deterministic ``GPU-…`` / ``MIG-…`` UUID for rendered outputs."""
    return f"{prefix}-{uuidlib.uuid5(_NS, '/'.join(str(p) for p in parts))}"


@dataclass(frozen=True, slots=True)
class RenderedGi:
    """A rendered GPU instance: profile, id, placement, compute instances ``(name, pid, ci, start, size)``."""

    profile: str
    profile_id: int
    gi: int
    start: int
    size: int
    cis: tuple[tuple[str, int, int, int, int], ...]
    mig_uuids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RenderGpu:
    """One GPU to render.

    Attributes:
        index: ``nvidia-smi`` index.
        gpu: MIG geometry of its model.
        product: Product name as the driver prints it (``NVIDIA A100-SXM4-80GB``).
        uuid: ``GPU-…`` UUID.
        layout: GPU instances (empty with MIG enabled = a GPU with no instance).
        mig: MIG mode current.
        mig_pending: MIG mode pending (defaults to ``mig``).
    """

    index: int
    gpu: MigGpu
    product: str
    uuid: str
    layout: tuple[Instance, ...] = ()
    mig: bool = True
    mig_pending: bool | None = None

    def instances(self) -> tuple[RenderedGi, ...]:
        """The GPU instances with driver-like ids and one full compute instance each."""
        out: list[RenderedGi] = []
        used: set[int] = set()
        for inst in sorted(self.layout, key=lambda x: (x.start, x.profile)):
            p = self.gpu.profile(inst.profile)
            gi = _gi_id(p.compute_slices, p.memory_slices, inst.start)
            while gi in used:
                gi += 1
            used.add(gi)
            ci_name = p.name
            ci = (ci_name, CI_PROFILE_ID[p.compute_slices], 0, 0, p.compute_slices)
            out.append(
                RenderedGi(
                    p.name, p.profile_id, gi, inst.start, p.memory_slices, (ci,), (fake_uuid("MIG", self.uuid, gi, 0),)
                )
            )
        return tuple(sorted(out, key=lambda r: r.gi))


def _gi_id(compute: int, memory: int, start: int) -> int:
    """GI ids as the driver hands them out in the MIG User Guide's examples (1g@s = 7+s, 2g@s = 3+s/2, ...)."""
    if compute == 7:
        return 0
    if compute == 4:
        return 1
    if compute == 3:
        return 2 if start == 0 else 1
    if compute == 2 or memory == 2:
        return 3 + start // 2
    return 7 + start


# ---------------------------------------------------------------------------- -L


def render_list(gpus: Sequence[RenderGpu], *, padded: bool = True) -> str:
    """``nvidia-smi -L``; ``padded=False`` gives the R450 layout of the MIG User Guide (no column padding)."""
    lines: list[str] = []
    for g in gpus:
        lines.append(f"GPU {g.index}: {g.product} (UUID: {g.uuid})")
        if not g.mig:
            continue
        dev = 0
        for gi in g.instances():
            for (name, *_), mig_uuid in zip(gi.cis, gi.mig_uuids, strict=True):
                if padded:
                    lines.append(f"  MIG {name:<12}Device {dev:>2}: (UUID: {mig_uuid})")
                else:
                    lines.append(f"  MIG {name} Device {dev}: (UUID: {mig_uuid})")
                dev += 1
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- mig -lgi / -lci


def render_gpu_instances(rows: Sequence[tuple[int, str, int, int, int, int]], *, wide: bool = False) -> str:
    """``nvidia-smi mig -lgi`` from ``(gpu, profile, profile_id, gi, start, size)`` rows."""
    if not rows:
        return "No GPU instances found: Not Found\n"
    name_w = 19 if wide else 16
    width = 55 if wide else 52
    border = "+" + "-" * width + "+"
    head = (
        [
            "| GPU instances:" + " " * (width - 15) + "|",
            "| GPU   Name             Profile  Instance   Placement  |",
            "|                          ID       ID       Start:Size |",
        ]
        if wide
        else [
            "| GPU instances:" + " " * (width - 15) + "|",
            "| GPU   Name          Profile  Instance   Placement  |",
            "|                       ID       ID       Start:Size |",
        ]
    )
    out = [border, *head, "|" + "=" * width + "|"]
    for g, name, pid, gi, start, size in rows:
        out.append(f"|{g:>4}  {'MIG ' + name:<{name_w}}{pid:>3}{gi:>9}{f'{start}:{size}':>13}     |")
        out.append(border)
    return "\n".join(out) + "\n"


def render_compute_instances(
    rows: Sequence[tuple[int, int, str, int, int, int, int]], *, placement: bool = True
) -> str:
    """``nvidia-smi mig -lci`` from ``(gpu, gi, name, profile_id, ci, start, size)`` rows."""
    if not rows:
        return "No compute instances found: Not Found\n"
    width = 68 if placement else 55
    border = "+" + "-" * width + "+"
    if placement:
        head = [
            "| Compute instances:" + " " * (width - 19) + "|",
            "| GPU     GPU       Name             Profile   Instance   Placement  |",
            "|       Instance                       ID        ID       Start:Size |",
            "|         ID" + " " * (width - 11) + "|",
        ]
    else:
        head = [
            "| Compute instances:" + " " * (width - 19) + "|",
            "| GPU     GPU       Name             Profile   Instance |",
            "|       Instance                       ID        ID     |",
            "|         ID" + " " * (width - 11) + "|",
        ]
    out = [border, *head, "|" + "=" * width + "|"]
    for g, gi, name, pid, ci, start, size in rows:
        tail = f"{f'{start}:{size}':>13}" if placement else ""
        out.append(f"|{g:>4}{gi:>7}       {'MIG ' + name:<20}{pid:>2}{ci:>10}{tail}     |")
        out.append(border)
    return "\n".join(out) + "\n"


def gpu_instance_rows(gpus: Sequence[RenderGpu]) -> list[tuple[int, str, int, int, int, int]]:
    """``-lgi`` rows of every MIG-mode GPU."""
    return [(g.index, r.profile, r.profile_id, r.gi, r.start, r.size) for g in gpus if g.mig for r in g.instances()]


def compute_instance_rows(gpus: Sequence[RenderGpu]) -> list[tuple[int, int, str, int, int, int, int]]:
    """``-lci`` rows of every MIG-mode GPU."""
    return [
        (g.index, r.gi, name, pid, ci, start, size)
        for g in gpus
        if g.mig
        for r in g.instances()
        for name, pid, ci, start, size in r.cis
    ]


# ---------------------------------------------------------------------------- -q

_BLOCK_START = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$", re.M)


def _query_block(block: str, g: RenderGpu) -> str:
    bus = f"00000000:{0x10 + 0x10 * g.index:02X}:00.0"
    cur = "Enabled" if g.mig else "Disabled"
    pend = cur if g.mig_pending is None else ("Enabled" if g.mig_pending else "Disabled")
    b = re.sub(r"^GPU \S+", f"GPU {bus}", block, count=1, flags=re.M)
    b = re.sub(r"(Product Name\s+: ).*", lambda m: m.group(1) + g.product, b, count=1)
    b = re.sub(r"(GPU UUID\s+: ).*", lambda m: m.group(1) + g.uuid, b, count=1)
    b = re.sub(r"(Bus Id\s+: ).*", lambda m: m.group(1) + bus, b, count=1)
    return re.sub(
        r"(    MIG Mode\n        Current\s+: )\S+(\n        Pending\s+: )\S+",
        lambda m: f"{m.group(1)}{cur}{m.group(2)}{pend}",
        b,
        count=1,
    )


def render_query(template: str, gpus: Sequence[RenderGpu]) -> str:
    """``nvidia-smi -q`` for ``gpus``, built from a real ``-q`` output ``template`` (its first GPU block)."""
    starts = [m.start() for m in _BLOCK_START.finditer(template)]
    if not starts:
        raise ValueError("template has no GPU block")
    header = template[: starts[0]]
    end = starts[1] if len(starts) > 1 else len(template)
    block = template[starts[0] : end].rstrip("\n") + "\n"
    header = re.sub(r"(Attached GPUs\s+: )\d+", lambda m: f"{m.group(1)}{len(gpus)}", header)
    out = [header]
    for g in gpus:
        out.append(_query_block(block, g) + "\n")
    return "".join(out).rstrip("\n") + "\n"
