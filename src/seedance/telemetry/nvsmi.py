"""``nvidia-smi`` collector: the whitepaper's CSV query, per-process memory, lost GPUs.

The whitepaper (§3.2) samples ``nvidia-smi --query-gpu=index,utilization.gpu,temperature.gpu
--format=csv,noheader,nounits`` every 5 s. :data:`QUERY_FIELDS` starts with exactly those three
fields and adds memory used/total, power, SM clock, UUID, name, bus id and MIG mode, so one process
per tick answers both; :func:`parse_query_gpu` also reads the three-field output alone, and CSV
with a header and units (``--format=csv``), which is what real captures record.

Values nvidia-smi cannot give are printed as ``[N/A]`` (``N/A`` on old drivers) or
``[Not Supported]`` and become ``None``; ``[GPU is lost]``, ``[Unknown Error]`` and
``[GPU requires reset]`` mark the GPU as lost, as does a line
``Unable to determine the device handle for GPU <bus id>: <reason>``. A malformed line, a value
with an unknown unit or a negative reading is skipped, counted and logged (``strict=True``
raises :class:`~seedance.core.errors.InputError` with the line and field instead).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from seedance.core.errors import InputError
from seedance.telemetry.readings import GpuProcess, GpuReading, GpuSnapshot, LostGpu, ParseIssues

WHITEPAPER_FIELDS: tuple[str, ...] = ("index", "utilization.gpu", "temperature.gpu")
QUERY_FIELDS: tuple[str, ...] = (
    *WHITEPAPER_FIELDS, "memory.used", "memory.total", "power.draw", "clocks.sm", "uuid", "name", "pci.bus_id",
    "mig.mode.current",
)
APPS_FIELDS: tuple[str, ...] = ("pid", "gpu_uuid", "used_memory")

#: field -> (GpuReading attribute, value kind, unit nvidia-smi prints without ``nounits``)
_GPU_FIELDS: dict[str, tuple[str, str, str | None]] = {
    "index": ("index", "index", None),
    "utilization.gpu": ("util_pct", "pct", "%"),
    "temperature.gpu": ("temp_c", "num", None),
    "memory.used": ("mem_used_mib", "num", "MiB"),
    "memory.total": ("mem_total_mib", "num", "MiB"),
    "power.draw": ("power_w", "num", "W"),
    "clocks.sm": ("sm_clock_mhz", "num", "MHz"),
    "clocks.current.sm": ("sm_clock_mhz", "num", "MHz"),
    "uuid": ("uuid", "str", None),
    "gpu_uuid": ("uuid", "str", None),
    "name": ("name", "str", None),
    "gpu_name": ("name", "str", None),
    "pci.bus_id": ("bus_id", "str", None),
    "gpu_bus_id": ("bus_id", "str", None),
    "mig.mode.current": ("mig", "mode", None),
}
_APP_FIELDS: dict[str, tuple[str, str, str | None]] = {
    "pid": ("pid", "index", None),
    "gpu_uuid": ("gpu_uuid", "str", None),
    "used_memory": ("used_mib", "num", "MiB"),
    "used_gpu_memory": ("used_mib", "num", "MiB"),
}
NA_TOKENS = frozenset({"[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Not Available]", "-", ""})
LOST_TOKENS = {"[GPU is lost]": "GPU is lost", "[Unknown Error]": "Unknown Error",
               "[GPU requires reset]": "GPU requires reset"}
LOST_PREFIX = "Unable to determine the device handle for GPU"
NO_DEVICES = "No devices were found"
DRIVER_DOWN = "NVIDIA-SMI has failed"


class CollectorUnavailable(InputError):
    """The collector cannot run here (no binary, no driver, no NVML)."""


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    attr: str
    kind: str
    unit: str | None  # the unit the header announced (header mode), else the field's


def _columns(names: Sequence[str], table: dict[str, tuple[str, str, str | None]], source: str) -> list[_Column]:
    cols = []
    for raw in names:
        name, _, unit = raw.strip().partition(" [")
        name = name.strip()
        spec = table.get(name)
        if spec is None:
            raise InputError(f"unsupported field {name!r}; supported: {', '.join(sorted(table))}",
                             source=source, field=name)
        cols.append(_Column(name, spec[0], spec[1], unit.rstrip("]") if unit else spec[2]))
    return cols


def lost_gpu_line(line: str) -> LostGpu | None:
    """The lost GPU a ``Unable to determine the device handle ...`` line names, else ``None``.

    >>> lost_gpu_line("Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. "
    ...               "Reboot the system to recover this GPU")
    LostGpu(where='0000:02:00.0', reason='GPU is lost. Reboot the system to recover this GPU')
    >>> lost_gpu_line("Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error")
    LostGpu(where='1: 0000:34:00.0', reason='Unknown Error')
    """
    text = line.strip()
    if not text.startswith(LOST_PREFIX):
        return None
    rest = text[len(LOST_PREFIX):].strip()
    where, sep, reason = rest.rpartition(": ")
    if not sep:
        where, reason = rest, "unknown"
    return LostGpu(where=where.strip().rstrip(":"), reason=reason.strip())


def _numeric(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _value(tok: str, col: _Column) -> tuple[Any, str | None]:
    """Parse one token; returns (value, error message)."""
    if tok in NA_TOKENS:
        return None, None
    if col.kind in ("str",):
        return tok, None
    if col.kind == "mode":
        low = tok.lower()
        if low in ("enabled", "disabled"):
            return low == "enabled", None
        return None, f"{col.name}: not a mode {tok!r}"
    number, _, unit = tok.partition(" ")
    unit = unit.strip()
    if unit and (col.unit is None or unit != col.unit):
        want = f"expected {col.unit}" if col.unit else "expected no unit"
        return None, f"{col.name}: unknown unit {unit!r} in {tok!r} ({want})"
    try:
        v = int(number) if col.kind == "index" else float(number)
    except ValueError:
        return None, f"{col.name}: not a number {tok!r}"
    if v < 0 or (col.kind == "pct" and v > 100):
        return None, f"{col.name}: negative or out-of-range reading {tok!r}"
    return v, None


def _rows(
    text: str, fields: Sequence[str], table: dict[str, tuple[str, str, str | None]], *, source: str, strict: bool,
    issues: ParseIssues, lost: list[LostGpu],
) -> list[dict[str, Any]]:
    lines = text.splitlines()
    cols: list[_Column] | None = None
    col_idx: list[int] = []
    width = 0
    out: list[dict[str, Any]] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith(NO_DEVICES):
            continue
        if line.startswith(DRIVER_DOWN):
            raise CollectorUnavailable(line, source=source, line=lineno)
        gone = lost_gpu_line(line)
        if gone is not None:
            lost.append(gone)
            continue
        tokens = [t.strip() for t in line.split(",")]
        if cols is None:
            names = [t.partition(" [")[0].strip() for t in tokens]
            if not _numeric(names[0]) and any(n in table for n in names):  # a header line
                col_idx = [i for i, n in enumerate(names) if n in table]
                cols = _columns([tokens[i] for i in col_idx], table, source)
                width = len(tokens)
                continue
            cols = _columns(fields, table, source)
            col_idx = list(range(len(cols)))
            width = len(cols)
        if len(tokens) != width:
            msg = f"{source}:{lineno}: expected {width} comma-separated fields, got {len(tokens)}: {line[:120]!r}"
            if strict:
                raise InputError(f"expected {width} fields, got {len(tokens)}", source=source, line=lineno)
            issues.skip("malformed", msg)
            continue
        row: dict[str, Any] = {}
        bad = None
        lost_reason = None
        for col, i in zip(cols, col_idx, strict=True):
            tok = tokens[i]
            if tok in LOST_TOKENS:
                lost_reason = LOST_TOKENS[tok]
                continue
            val, err = _value(tok, col)
            if err is not None:
                bad = (col.name, err)
                break
            if val is not None or col.attr not in row:
                row[col.attr] = val
        if bad is not None:
            if strict:
                raise InputError(bad[1], source=source, line=lineno, field=bad[0])
            kind = "unknown-unit" if "unknown unit" in bad[1] else "bad-value"
            issues.skip(kind, f"{source}:{lineno}: {bad[1]}")
            continue
        key = "index" if "index" in row else "pid"
        if row.get(key) is None:
            if lost_reason is not None:
                lost.append(LostGpu(where=str(row.get("bus_id") or row.get("uuid") or f"line {lineno}"),
                                    reason=lost_reason))
                continue
            if strict:
                raise InputError(f"no {key}", source=source, line=lineno, field=key)
            issues.skip("malformed", f"{source}:{lineno}: no {key} in {line[:120]!r}")
            continue
        if lost_reason is not None:
            lost.append(LostGpu(where=str(row.get("bus_id") or f"GPU {row[key]}"), reason=lost_reason))
            continue
        out.append(row)
    return out


def parse_query_gpu(
    text: str, fields: Sequence[str] = QUERY_FIELDS, *, source: str = "nvidia-smi --query-gpu", strict: bool = False,
    issues: ParseIssues | None = None,
) -> tuple[list[GpuReading], list[LostGpu], ParseIssues]:
    """Parse ``--query-gpu`` CSV output (``noheader,nounits`` in ``fields`` order, or with a header).

    Returns the readings, the lost GPUs and what was skipped.
    """
    issues = issues if issues is not None else ParseIssues()
    lost: list[LostGpu] = []
    rows = _rows(text, fields, _GPU_FIELDS, source=source, strict=strict, issues=issues, lost=lost)
    return [GpuReading(**r) for r in rows], lost, issues


def parse_compute_apps(
    text: str, fields: Sequence[str] = APPS_FIELDS, *, source: str = "nvidia-smi --query-compute-apps",
    strict: bool = False, issues: ParseIssues | None = None,
) -> tuple[list[GpuProcess], ParseIssues]:
    """Parse ``--query-compute-apps`` CSV output (pid, GPU UUID, used memory)."""
    issues = issues if issues is not None else ParseIssues()
    lost: list[LostGpu] = []
    rows = _rows(text, fields, _APP_FIELDS, source=source, strict=strict, issues=issues, lost=lost)
    procs = []
    for r in rows:
        if not r.get("gpu_uuid"):
            issues.skip("malformed", f"{source}: process {r.get('pid')} has no GPU UUID")
            continue
        procs.append(GpuProcess(pid=int(r["pid"]), gpu_uuid=str(r["gpu_uuid"]), used_mib=r.get("used_mib")))
    return procs, issues


def parse_pmon(text: str, *, source: str = "nvidia-smi pmon", issues: ParseIssues | None = None
               ) -> tuple[dict[tuple[int, int], float], ParseIssues]:
    """``nvidia-smi pmon -s u`` → ``{(gpu index, pid): mean sm %}`` over its samples (``-`` cells skipped).

    The header (``# gpu pid type sm ...``) names the columns; rows without a pid (idle GPUs)
    and rows whose SM cell is ``-`` (MIG devices report none) give nothing.
    """
    issues = issues if issues is not None else ParseIssues()
    acc: dict[tuple[int, int], list[float]] = {}
    cols: list[str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            names = line.lstrip("#").split()
            if cols is None and names[:2] == ["gpu", "pid"]:
                cols = names
            continue
        if cols is None:
            issues.skip("malformed", f"{source}:{lineno}: row before the header")
            continue
        tok = line.split()
        if len(tok) < cols.index("sm") + 1:
            issues.skip("malformed", f"{source}:{lineno}: short row {line[:80]!r}")
            continue
        gpu, pid, sm = tok[0], tok[cols.index("pid")], tok[cols.index("sm")]
        if pid == "-" or sm == "-":
            continue
        try:
            g, p, s = int(gpu), int(pid), float(sm)
        except ValueError:
            issues.skip("bad-value", f"{source}:{lineno}: not a number in {line[:80]!r}")
            continue
        if not 0 <= s <= 100:
            issues.skip("bad-value", f"{source}:{lineno}: sm {s} out of range")
            continue
        acc.setdefault((g, p), []).append(s)
    return {k: sum(v) / len(v) for k, v in acc.items()}, issues


Runner = Callable[[Sequence[str], float], tuple[int, str]]


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
    """Run ``argv``; returns (exit code, stdout + stderr)."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise CollectorUnavailable(f"{argv[0]} not found", source=argv[0]) from None
    except subprocess.TimeoutExpired:
        raise CollectorUnavailable(f"timed out after {timeout_s:g} s", source=" ".join(argv[:2])) from None
    return p.returncode, p.stdout + ("\n" + p.stderr if p.stderr else "")


class NvidiaSmiCollector:
    """Reads GPUs and GPU processes by running ``nvidia-smi`` (two calls per tick, three with pmon).

    Args:
        binary: The ``nvidia-smi`` executable.
        fields: ``--query-gpu`` fields (default :data:`QUERY_FIELDS`).
        pmon: Also run ``nvidia-smi pmon -c 1 -s u`` for per-process SM % (blocks about a second).
        timeout_s: Per-call timeout.
        runner: Runs a command (tests pass a fake).
        strict: Raise on the first bad line instead of skipping it.
    """

    name = "nvidia-smi"

    def __init__(self, *, binary: str = "nvidia-smi", fields: Sequence[str] = QUERY_FIELDS, pmon: bool = False,
                 timeout_s: float = 10.0, runner: Runner = run_command, strict: bool = False) -> None:
        self.binary = binary
        self.fields = tuple(fields)
        self.pmon = pmon
        self.timeout_s = timeout_s
        self.runner = runner
        self.strict = strict

    def argv_gpus(self) -> list[str]:
        """The ``--query-gpu`` command line."""
        return [self.binary, f"--query-gpu={','.join(self.fields)}", "--format=csv,noheader,nounits"]

    def argv_apps(self) -> list[str]:
        """The ``--query-compute-apps`` command line."""
        return [self.binary, f"--query-compute-apps={','.join(APPS_FIELDS)}", "--format=csv,noheader,nounits"]

    def collect(self) -> GpuSnapshot:
        """One tick."""
        t = time.time()
        issues = ParseIssues()
        _, out = self.runner(self.argv_gpus(), self.timeout_s)
        gpus, lost, _ = parse_query_gpu(out, self.fields, strict=self.strict, issues=issues)
        _, out = self.runner(self.argv_apps(), self.timeout_s)
        procs, _ = parse_compute_apps(out, strict=self.strict, issues=issues)
        if self.pmon and procs:
            _, out = self.runner([self.binary, "pmon", "-c", "1", "-s", "u"], self.timeout_s + 2)
            sm, _ = parse_pmon(out, issues=issues)
            by_uuid = {g.uuid: g.index for g in gpus}
            procs = [GpuProcess(p.pid, p.gpu_uuid, p.used_mib, sm.get((by_uuid.get(p.gpu_uuid, -1), p.pid)))
                     for p in procs]
        return GpuSnapshot(t=t, gpus=tuple(gpus), processes=tuple(procs), lost=tuple(lost), issues=issues)
