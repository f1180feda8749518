"""Parsers for the real text output of ``nvidia-smi -L``, ``nvidia-smi mig -lgi``, ``mig -lci`` and ``-q``.

The kind of a file is recognised from its content (:func:`detect_kind`), so an operator can hand
the audit whatever they captured on a node. Formats follow the outputs printed in NVIDIA's MIG
User Guide and in public READMEs (fixtures and their sources: ``tests/trust/fixtures/nvsmi``):

* ``-L``: ``GPU 0: A100-SXM4-40GB (UUID: GPU-…)`` then, indented, one line per MIG device
  ``  MIG 3g.20gb     Device  0: (UUID: MIG-…)``; MIG UUIDs are ``MIG-<uuid>`` on drivers >= R470
  and ``MIG-GPU-<parent uuid>/<gi>/<ci>`` on R450/R460.
* ``mig -lgi``: a box table ``| GPU  Name  Profile ID  Instance ID  Placement Start:Size |``;
  ``No GPU instances found: Not Found`` when MIG is on but no instance exists, ``No MIG-enabled
  devices found.`` when no GPU is in MIG mode.
* ``mig -lci``: ``| GPU  GPU Instance ID  Name  Profile ID  Instance ID [Placement Start:Size] |``
  (older drivers print no Placement column).
* ``-q`` (also ``-a``): the ``NVSMI LOG`` key/value tree; per GPU block ``Product Name``,
  ``MIG Mode / Current / Pending`` and ``GPU UUID`` are read.

Anything else — a truncated table or line, a translated header, a ``-q`` block without its MIG
mode — raises :class:`~seedance.core.errors.InputError` naming the file and line; nothing is
guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from seedance.core.errors import InputError


class OutputKind(StrEnum):
    """The ``nvidia-smi`` command an output came from."""

    LIST = "-L"
    GPU_INSTANCES = "mig -lgi"
    COMPUTE_INSTANCES = "mig -lci"
    QUERY = "-q"


@dataclass(frozen=True, slots=True)
class ListedGpu:
    """A ``GPU i: PRODUCT (UUID: GPU-…)`` line of ``-L``."""

    index: int
    product: str
    uuid: str
    line: int


@dataclass(frozen=True, slots=True)
class ListedMigDevice:
    """An indented ``MIG PROFILE Device d: (UUID: MIG-…)`` line of ``-L``."""

    gpu: int
    profile: str
    device: int
    uuid: str
    line: int


@dataclass(frozen=True, slots=True)
class GpuInstanceRow:
    """One row of ``mig -lgi``: a GPU instance (GI) and its memory-slice placement."""

    gpu: int
    profile: str
    profile_id: int
    gi: int
    start: int
    size: int
    line: int


@dataclass(frozen=True, slots=True)
class ComputeInstanceRow:
    """One row of ``mig -lci``: a compute instance (CI) inside GI ``gi`` (placement in compute slices)."""

    gpu: int
    gi: int
    profile: str
    profile_id: int
    ci: int
    start: int | None
    size: int | None
    line: int


@dataclass(frozen=True, slots=True)
class QueriedGpu:
    """One ``GPU 0000…`` block of ``-q``: position in the output, product, UUID and MIG mode."""

    position: int
    bus_id: str
    product: str
    uuid: str
    mig_current: str
    mig_pending: str
    line: int
    mig_line: int


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """One parsed file.

    Attributes:
        source: File name (in findings).
        kind: Which command produced it.
        gpus / mig_devices: ``-L`` records.
        gpu_instances: ``mig -lgi`` rows.
        compute_instances: ``mig -lci`` rows.
        queried: ``-q`` GPU blocks.
        no_mig: The output says no GPU is in MIG mode (``No MIG-enabled devices found.``).
        empty: The output says MIG is on but nothing exists (``No … instances found``).
        attached: ``Attached GPUs`` of a ``-q`` output.
        driver: ``Driver Version`` of a ``-q`` output.
    """

    source: str
    kind: OutputKind
    gpus: tuple[ListedGpu, ...] = ()
    mig_devices: tuple[ListedMigDevice, ...] = ()
    gpu_instances: tuple[GpuInstanceRow, ...] = ()
    compute_instances: tuple[ComputeInstanceRow, ...] = ()
    queried: tuple[QueriedGpu, ...] = ()
    no_mig: bool = False
    empty: bool = False
    attached: int | None = None
    driver: str | None = None


# ---------------------------------------------------------------------------- detection

_NVSMI_LOG = "==============NVSMI LOG=============="
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)\s*$")
_NO_MIG = "No MIG-enabled devices found"
_NO_GI = "No GPU instances found"
_NO_CI = "No compute instances found"


def _nonblank(lines: list[str]) -> list[tuple[int, str]]:
    return [(i + 1, s) for i, s in enumerate(lines) if s.strip()]


def detect_kind(text: str, source: str = "output") -> OutputKind:
    """Which ``nvidia-smi`` command printed ``text`` (from its content alone).

    Raises:
        InputError: empty, or not one of the four supported outputs (e.g. localized, or ``-lgip``).
    """
    lines = _nonblank(text.splitlines())
    if not lines:
        raise InputError("empty file: expected nvidia-smi -L, mig -lgi, mig -lci or -q output", source=source)
    first_no, first = lines[0]
    body = [s for _, s in lines]
    if first.strip() == _NVSMI_LOG:
        return OutputKind.QUERY
    if any("GPU instance profiles:" in s or "Compute instance profiles:" in s for s in body):
        raise InputError(
            "this is mig -lgip/-lcip (profiles) output; the audit reads -L, mig -lgi, mig -lci and -q",
            source=source,
            line=first_no,
        )
    if any("| GPU instances:" in s for s in body) or first.strip().startswith(_NO_GI):
        return OutputKind.GPU_INSTANCES
    if any("| Compute instances:" in s for s in body) or first.strip().startswith(_NO_CI):
        return OutputKind.COMPUTE_INSTANCES
    if first.strip().startswith(_NO_MIG):
        return OutputKind.GPU_INSTANCES
    if first.startswith("GPU ") and "(UUID:" in first:
        return OutputKind.LIST
    if _BORDER.match(first) and len(lines) > 1:
        title_no, title = lines[1]
        raise InputError(
            f"unrecognised table title {title.strip(' |')[:50]!r} (expected 'GPU instances:' or 'Compute instances:'); "
            "localized or reformatted output is not supported: capture it with LC_ALL=C",
            source=source,
            line=title_no,
        )
    raise InputError(
        f"not nvidia-smi -L, mig -lgi, mig -lci or -q output (first line {first.strip()[:60]!r}); "
        "localized or reformatted output is not supported: capture it with LC_ALL=C",
        source=source,
        line=first_no,
    )


def parse_output(text: str, source: str = "output", *, kind: OutputKind | None = None) -> ParsedOutput:
    """Parse one captured file of any supported kind.

    ``kind`` names the command when the caller ran it (``--live``): ``No MIG-enabled devices found.``
    is the answer of both ``mig -lgi`` and ``mig -lci``, so the content alone cannot tell them apart.
    """
    detected = detect_kind(text, source)
    ambiguous = _placeholder(text, _NO_MIG) and kind in (OutputKind.GPU_INSTANCES, OutputKind.COMPUTE_INSTANCES)
    if not ambiguous:
        kind = detected
    if kind is OutputKind.LIST:
        return parse_list(text, source)
    if kind is OutputKind.GPU_INSTANCES:
        return parse_gpu_instances(text, source)
    if kind is OutputKind.COMPUTE_INSTANCES:
        return parse_compute_instances(text, source)
    return parse_query(text, source)


# ---------------------------------------------------------------------------- -L


def parse_list(text: str, source: str = "nvidia-smi -L") -> ParsedOutput:
    """``nvidia-smi -L``: GPUs and the MIG devices indented under them."""
    gpus: list[ListedGpu] = []
    devices: list[ListedMigDevice] = []
    for no, raw in _nonblank(text.splitlines()):
        m = _GPU_LINE.match(raw)
        if m:
            index = int(m.group(1))
            if any(g.index == index for g in gpus):
                raise InputError(f"GPU {index} is listed twice", source=source, line=no)
            gpus.append(ListedGpu(index, m.group(2).strip(), m.group(3), no))
            continue
        m = _MIG_LINE.match(raw)
        if m:
            if not gpus:
                raise InputError("MIG device line before any GPU line", source=source, line=no)
            devices.append(ListedMigDevice(gpus[-1].index, m.group(1).lower(), int(m.group(2)), m.group(3), no))
            continue
        raise InputError(
            f"unrecognised -L line {raw.strip()[:70]!r} (expected 'GPU i: NAME (UUID: GPU-…)' or "
            "'  MIG PROFILE Device d: (UUID: MIG-…)'; truncated or localized output?)",
            source=source,
            line=no,
        )
    return ParsedOutput(source, OutputKind.LIST, gpus=tuple(gpus), mig_devices=tuple(devices))


# ---------------------------------------------------------------------------- box tables

_BORDER = re.compile(r"^\+-+\+\s*$")
_RULE = re.compile(r"^\|=+\|\s*$")
_GI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|\s*$")
_CI_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?\s+\|\s*$")


def _table_rows(text: str, source: str, title: str, header_words: tuple[str, ...]) -> list[tuple[int, str]]:
    """Data rows of a ``+---+ | title | … |===| rows +---+`` table, after checking its frame."""
    lines = _nonblank(text.splitlines())
    if not _BORDER.match(lines[0][1]):
        raise InputError(
            f"expected the table's top border '+---+', got {lines[0][1].strip()[:60]!r}",
            source=source,
            line=lines[0][0],
        )
    rule = next((i for i, (_, s) in enumerate(lines) if _RULE.match(s)), None)
    if rule is None:
        raise InputError("table header has no '|====|' rule (truncated output?)", source=source, line=lines[-1][0])
    header = " ".join(s for _, s in lines[1:rule])
    if title not in header or not all(w in header for w in header_words):
        raise InputError(
            f"unrecognised table header (expected {title!r} with columns {', '.join(header_words)}; localized?)",
            source=source,
            line=lines[1][0] if len(lines) > 1 else lines[0][0],
        )
    if not _BORDER.match(lines[-1][1]):
        raise InputError(
            "table is not closed by a '+---+' border (truncated output?)", source=source, line=lines[-1][0]
        )
    return [(no, s) for no, s in lines[rule + 1 :] if not _BORDER.match(s)]


def _placeholder(text: str, prefix: str) -> bool:
    lines = _nonblank(text.splitlines())
    return len(lines) == 1 and lines[0][1].strip().startswith(prefix)


def parse_gpu_instances(text: str, source: str = "nvidia-smi mig -lgi") -> ParsedOutput:
    """``nvidia-smi mig -lgi``: one :class:`GpuInstanceRow` per GPU instance."""
    if _placeholder(text, _NO_MIG):
        return ParsedOutput(source, OutputKind.GPU_INSTANCES, no_mig=True)
    if _placeholder(text, _NO_GI):
        return ParsedOutput(source, OutputKind.GPU_INSTANCES, empty=True)
    rows: list[GpuInstanceRow] = []
    for no, s in _table_rows(text, source, "GPU instances:", ("Profile", "Instance", "Placement", "Start:Size")):
        m = _GI_ROW.match(s)
        if m is None:
            raise InputError(
                f"unrecognised GPU-instance row {s.strip()[:70]!r} (expected '| GPU MIG NAME PROFILE-ID "
                "INSTANCE-ID START:SIZE |'; truncated?)",
                source=source,
                line=no,
            )
        g, name, pid, gi, start, size = m.groups()
        rows.append(GpuInstanceRow(int(g), name.lower(), int(pid), int(gi), int(start), int(size), no))
    return ParsedOutput(source, OutputKind.GPU_INSTANCES, gpu_instances=tuple(rows))


def parse_compute_instances(text: str, source: str = "nvidia-smi mig -lci") -> ParsedOutput:
    """``nvidia-smi mig -lci``: one :class:`ComputeInstanceRow` per compute instance."""
    if _placeholder(text, _NO_MIG):
        return ParsedOutput(source, OutputKind.COMPUTE_INSTANCES, no_mig=True)
    if _placeholder(text, _NO_CI):
        return ParsedOutput(source, OutputKind.COMPUTE_INSTANCES, empty=True)
    rows: list[ComputeInstanceRow] = []
    for no, s in _table_rows(text, source, "Compute instances:", ("Profile", "Instance")):
        m = _CI_ROW.match(s)
        if m is None:
            raise InputError(
                f"unrecognised compute-instance row {s.strip()[:70]!r} (expected '| GPU GI MIG NAME PROFILE-ID "
                "INSTANCE-ID [START:SIZE] |'; truncated?)",
                source=source,
                line=no,
            )
        g, gi, name, pid, ci, start, size = m.groups()
        rows.append(
            ComputeInstanceRow(
                int(g),
                int(gi),
                name.lower(),
                int(pid),
                int(ci),
                int(start) if start is not None else None,
                int(size) if size is not None else None,
                no,
            )
        )
    return ParsedOutput(source, OutputKind.COMPUTE_INSTANCES, compute_instances=tuple(rows))


# ---------------------------------------------------------------------------- -q

_KV = re.compile(r"^( *)([^:]*?\S)\s+: ?(.*?)\s*$")
_BLOCK = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_MIG_MODES = ("Enabled", "Disabled", "N/A")


def parse_query(text: str, source: str = "nvidia-smi -q") -> ParsedOutput:
    """``nvidia-smi -q``: per GPU block, product, UUID and MIG mode (current and pending)."""
    lines = text.splitlines()
    attached: int | None = None
    driver: str | None = None
    blocks: list[tuple[int, str, list[tuple[int, str]]]] = []
    for i, raw in enumerate(lines):
        no = i + 1
        m = _BLOCK.match(raw)
        if m:
            blocks.append((no, m.group(1), []))
            continue
        if blocks:
            blocks[-1][2].append((no, raw))
            continue
        kv = _KV.match(raw)
        if kv and not kv.group(1):
            if kv.group(2) == "Attached GPUs":
                if not kv.group(3).isdigit():
                    raise InputError(f"Attached GPUs is {kv.group(3)!r}, not a number", source=source, line=no)
                attached = int(kv.group(3))
            elif kv.group(2) == "Driver Version":
                driver = kv.group(3)
    if attached is None:
        raise InputError(
            "no 'Attached GPUs' line before the GPU blocks (truncated or localized -q output?)", source=source, line=1
        )
    if not blocks:
        if attached:
            raise InputError(
                f"'Attached GPUs : {attached}' but no GPU block follows (truncated?)", source=source, line=len(lines)
            )
        return ParsedOutput(source, OutputKind.QUERY, attached=attached, driver=driver)
    if len(blocks) > attached:
        raise InputError(
            f"{len(blocks)} GPU blocks but 'Attached GPUs : {attached}'", source=source, line=blocks[attached][0]
        )
    queried = tuple(_query_block(pos, no, bus, body, source) for pos, (no, bus, body) in enumerate(blocks))
    return ParsedOutput(source, OutputKind.QUERY, queried=queried, attached=attached, driver=driver)


def _query_block(pos: int, no: int, bus: str, body: list[tuple[int, str]], source: str) -> QueriedGpu:
    top: dict[str, tuple[int, str]] = {}
    mig: dict[str, tuple[int, str]] = {}
    section: str | None = None
    sections: set[str] = set()
    for line_no, raw in body:
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        kv = _KV.match(raw)
        if indent == 4:
            if kv:
                top.setdefault(kv.group(2), (line_no, kv.group(3)))
                section = None
            else:
                section = raw.strip()
                sections.add(section)
        elif indent == 8 and section == "MIG Mode" and kv:
            mig[kv.group(2)] = (line_no, kv.group(3))
    for key in ("Product Name", "GPU UUID"):
        if key not in top:
            raise InputError(
                f"GPU block {bus} has no {key!r} (truncated, localized, or captured with -d?)", source=source, line=no
            )
    if "Current" not in mig or "Pending" not in mig:
        raise InputError(
            f"GPU block {bus} has no 'MIG Mode' Current/Pending values (truncated, localized, or captured with -d?)",
            source=source,
            line=no,
        )
    if "Processes" not in top and "Processes" not in sections:
        raise InputError(
            f"GPU block {bus} ends before its 'Processes' entry (truncated output?)",
            source=source,
            line=body[-1][0] if body else no,
        )
    for key in ("Current", "Pending"):
        line_no, value = mig[key]
        if value not in _MIG_MODES:
            raise InputError(
                f"MIG mode {key} is {value!r}; expected one of {', '.join(_MIG_MODES)}", source=source, line=line_no
            )
    uuid = top["GPU UUID"][1]
    if not uuid.startswith("GPU-"):
        raise InputError(f"GPU UUID {uuid!r} does not start with 'GPU-'", source=source, line=top["GPU UUID"][0])
    return QueriedGpu(
        position=pos,
        bus_id=bus,
        product=top["Product Name"][1],
        uuid=uuid,
        mig_current=mig["Current"][1],
        mig_pending=mig["Pending"][1],
        line=no,
        mig_line=mig["Current"][0],
    )
