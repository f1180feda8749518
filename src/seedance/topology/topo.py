"""Parser of ``nvidia-smi topo -m`` output into a per-node topology graph.

The matrix ``nvidia-smi topo -m`` prints is already the path class between every pair of devices
(GPUs and NICs): ``X`` (self), ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one PCIe
bridge), ``PXB`` (several PCIe bridges, no host bridge), ``PHB`` (through a PCIe host bridge),
``NODE`` (between host bridges inside one NUMA node), ``SYS`` (across the SMP interconnect between
NUMA nodes; older drivers print ``SOC``). Columns after the devices are ``CPU Affinity``,
``NUMA Affinity`` and (newer drivers) ``GPU NUMA ID``; a ``NIC Legend`` maps ``NIC#`` to device names.

:class:`Topology` keeps that matrix columnar (numpy codes and NVLink counts) and is the graph: the
devices are its vertices and every cell an edge with a kind, a PCIe hop count and, once a GPU model
is known (:mod:`seedance.topology.links`), a bandwidth.

Malformed output raises :class:`~seedance.core.errors.InputError` naming the file, the line and the
column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError

SELF, NVLINK, PIX, PXB, PHB, NODE, SYS = range(7)
KIND_NAMES: tuple[str, ...] = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
"""Path class names by code."""
PCIE_HOPS: tuple[int, ...] = (0, 0, 1, 2, 3, 4, 5)
"""PCIe hops of each path class (an ordinal: PIX one bridge ... SYS across sockets; NVLink none)."""
_CODES = {"X": SELF, "PIX": PIX, "PXB": PXB, "PHB": PHB, "NODE": NODE, "SYS": SYS, "SOC": SYS}
_NV = re.compile(r"NV(\d+)")
_DEVICE = re.compile(r"(GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z][\w.-]*\d)")
_TAIL = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass(frozen=True, slots=True, eq=False)
class Topology:
    """One node's device graph from ``nvidia-smi topo -m``.

    Attributes:
        devices: Device names in matrix order (``GPU0``..., then NICs).
        is_gpu: True for GPU rows.
        kind: ``(n, n)`` path class codes (``SELF``...``SYS``).
        nvlinks: ``(n, n)`` NVLink counts (0 where the path is not NVLink).
        cpu_affinity: Per device, the CPU list string (``""`` for NICs or where absent).
        numa: Per device, the NUMA node (``-1`` where not printed).
        nic_names: ``NIC#`` -> device name from the NIC legend.
        source: Where the output came from.
    """

    devices: tuple[str, ...]
    is_gpu: NDArray[np.bool_]
    kind: NDArray[np.int8]
    nvlinks: NDArray[np.int16]
    cpu_affinity: tuple[str, ...]
    numa: NDArray[np.int16]
    nic_names: dict[str, str]
    source: str

    @property
    def gpus(self) -> list[int]:
        """Indices of the GPU devices."""
        return [int(i) for i in np.flatnonzero(self.is_gpu)]

    @property
    def nics(self) -> list[int]:
        """Indices of the NIC devices."""
        return [int(i) for i in np.flatnonzero(~self.is_gpu)]

    def index(self, device: str) -> int:
        """Index of ``device`` (``GPU3``, ``NIC0`` or a NIC legend name)."""
        names = {v: k for k, v in self.nic_names.items()}
        name = names.get(device, device)
        try:
            return self.devices.index(name)
        except ValueError:
            raise InputError(f"no device {device!r}; devices: {', '.join(self.devices)}", source=self.source) from None

    def link(self, a: int, b: int) -> str:
        """The path class between devices ``a`` and ``b`` as nvidia-smi prints it (``NV12``, ``PIX``...)."""
        k = int(self.kind[a, b])
        return f"NV{int(self.nvlinks[a, b])}" if k == NVLINK else KIND_NAMES[k]

    def hops(self, a: int, b: int) -> int:
        """PCIe hops between ``a`` and ``b`` (0 over NVLink)."""
        return PCIE_HOPS[int(self.kind[a, b])]

    def nearest_nic(self, gpu: int) -> int | None:
        """The NIC closest to ``gpu`` (fewest PCIe hops; first in order on ties); ``None`` without NICs."""
        nics = self.nics
        if not nics:
            return None
        return min(nics, key=lambda n: (int(self.kind[gpu, n]), n))

    def nvlink_islands(self) -> list[list[int]]:
        """GPUs grouped by NVLink connectivity (connected components over NVLink edges)."""
        gpus = self.gpus
        seen: set[int] = set()
        out: list[list[int]] = []
        for g in gpus:
            if g in seen:
                continue
            stack, comp = [g], []
            seen.add(g)
            while stack:
                u = stack.pop()
                comp.append(u)
                for v in gpus:
                    if v not in seen and self.kind[u, v] == NVLINK:
                        seen.add(v)
                        stack.append(v)
            out.append(sorted(comp))
        return out


def _split(line: str) -> list[str]:
    """Cells of a matrix line: tab-separated as nvidia-smi prints, else runs of 2+ spaces or single spaces."""
    if "\t" in line:
        return [c.strip() for c in line.rstrip("\n").split("\t")]
    return [c for c in re.split(r"\s{2,}|\s(?=\S)", line.strip()) if c != ""]


def _header(line: str, src: str, lineno: int) -> tuple[list[str], list[str]]:
    cells = [c for c in (_split(line) if "\t" in line else re.split(r"\s{2,}", line.strip())) if c]
    devices: list[str] = []
    tail: list[str] = []
    for c in cells:
        if c in _TAIL:
            tail.append(c)
        elif tail:
            raise InputError(f"device column {c!r} after the affinity columns", source=src, line=lineno, field=c)
        elif _DEVICE.fullmatch(c):
            devices.append(c)
        else:
            raise InputError(f"unknown column {c!r} in the header", source=src, line=lineno, field=c)
    if not any(d.startswith("GPU") for d in devices):
        raise InputError("the header names no GPU column", source=src, line=lineno)
    return devices, tail


def parse_topo(text: str, *, source: str = "<topo -m>") -> Topology:
    """Parse the text of ``nvidia-smi topo -m``; lines starting with ``#`` are comments."""
    lines = text.splitlines()
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
        i += 1
    if i == len(lines):
        raise InputError("empty topo -m output (no header line)", source=source)
    devices, tail = _header(lines[i], source, i + 1)
    n = len(devices)
    kind = np.full((n, n), -1, dtype=np.int8)
    nvl = np.zeros((n, n), dtype=np.int16)
    aff = [""] * n
    numa = np.full(n, -1, dtype=np.int16)
    seen = 0
    i += 1
    while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith("Legend"):
        lineno = i + 1
        cells = _split(lines[i])
        name, rest = cells[0], cells[1:]
        if seen >= n:
            raise InputError(f"more rows than the {n} devices of the header", source=source, line=lineno, field=name)
        if name != devices[seen]:
            raise InputError(f"row {name!r} where {devices[seen]!r} was expected", source=source, line=lineno,
                             field=name)
        if len(rest) < n:
            raise InputError(f"{len(rest)} cells, the header has {n} devices", source=source, line=lineno,
                             field=devices[len(rest)] if len(rest) < n else name)
        for j, cell in enumerate(rest[:n]):
            m = _NV.fullmatch(cell)
            if m:
                kind[seen, j], nvl[seen, j] = NVLINK, int(m.group(1))
                if nvl[seen, j] <= 0:
                    raise InputError("NVLink count must be >= 1", source=source, line=lineno, field=devices[j])
            elif cell in _CODES:
                kind[seen, j] = _CODES[cell]
            else:
                raise InputError(f"unknown link {cell!r}", source=source, line=lineno, field=devices[j])
            if (j == seen) != (kind[seen, j] == SELF):
                raise InputError("X must be exactly the diagonal", source=source, line=lineno, field=devices[j])
        extra = [c for c in rest[n:] if c != ""]
        if name.startswith("GPU") and extra:
            aff[seen] = extra[0]
            if "NUMA Affinity" in tail and len(extra) > 1 and extra[1].isdigit():
                numa[seen] = int(extra[1])
        seen += 1
        i += 1
    if seen < n:
        raise InputError(f"{seen} rows for {n} devices: row {devices[seen]} missing", source=source,
                         line=i + 1, field=devices[seen])
    bad = np.argwhere((kind != kind.T) | (nvl != nvl.T))
    if len(bad):
        a, b = (int(x) for x in bad[0])
        raise InputError(f"matrix not symmetric: {devices[a]}-{devices[b]} is {KIND_NAMES[kind[a, b]]}, "
                         f"{devices[b]}-{devices[a]} is {KIND_NAMES[kind[b, a]]}", source=source,
                         line=_row_line(lines, devices[max(a, b)]), field=devices[min(a, b)])
    nic_names: dict[str, str] = {}
    for line in lines[i:]:
        m = re.fullmatch(r"\s*(NIC\d+):\s*(\S+)\s*", line)
        if m:
            nic_names[m.group(1)] = m.group(2)
    is_gpu = np.array([d.startswith("GPU") for d in devices], dtype=np.bool_)
    return Topology(tuple(devices), is_gpu, kind, nvl, tuple(aff), numa, nic_names, source)


def _row_line(lines: list[str], name: str) -> int:
    for k, line in enumerate(lines):
        cells = _split(line) if line.strip() else []
        if cells and cells[0] == name:
            return k + 1
    return 0


def load_topo(path: str | Path) -> Topology:
    """Read and parse a ``topo -m`` file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read topo -m output: {exc.strerror}", source=str(p)) from None
    return parse_topo(text, source=str(p))


FIXTURES = Path(__file__).with_name("fixtures")
"""Bundled ``topo -m`` outputs from public posts (each file's header names its source)."""


def fixture(name: str) -> Topology:
    """A bundled topology: ``dgx-a100``, ``hgx-h100``, ``pcie-v100`` or ``pcie-l40s``."""
    path = FIXTURES / f"{name}.txt"
    if not path.is_file():
        known = sorted(p.stem for p in FIXTURES.glob("*.txt"))
        raise InputError(f"unknown topology fixture {name!r}; known: {', '.join(known)}", field="topology")
    return load_topo(path)
