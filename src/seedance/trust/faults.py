"""Fault injection for the MIG audit: one fault in one file of a clean node capture.

Each injector copies a clean case (``seedance.trust.corpus``) and changes one thing in one file,
the way the fault shows up in real output:

* duplicate-uuid — a MIG device line of ``-L`` gets the UUID of another device;
* gi-overlap — a GI row of ``-lgi`` moves to another *legal* start of its profile that overlaps
  a neighbour;
* gi-illegal-placement — a GI row gets the wrong size (or, variant 2, the wrong profile ID);
* ci-exceeds-gi — a CI row of ``-lci`` grows past its GI (placement size, or name ``Nc.`` > GI);
* mig-pending-reset — one ``-q`` GPU block gets Pending != Current;
* mig-no-instances — a whole (non-MIG) GPU's ``-q`` block says MIG Enabled;
* drift — one GI row disappears from ``-lgi`` while the plan still has it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from seedance.slicing.mig import MigGpu
from seedance.trust.findings import Check
from seedance.trust.nvsmi import OutputKind, detect_kind, parse_gpu_instances


@dataclass(frozen=True, slots=True)
class Case:
    """One node capture: files ``(name, text)``, the planner's plan it should match, the fault injected (if any).

    Attributes:
        name: Case name.
        files: ``(file name, text)`` of each captured output.
        plan: The planner's JSON plan (``MigPlan.to_json()``) for the drift check, or ``None``.
        node: Node name the plan's GPUs are listed under (``NODE/gpu-I``).
        fault: The injected fault's check class (``None``: a clean case).
        note: What was changed, in words.
    """

    name: str
    files: tuple[tuple[str, str], ...]
    plan: dict[str, Any] | None = field(default=None, compare=False)
    node: str | None = None
    fault: Check | None = None
    note: str = ""

    def text(self, kind: OutputKind) -> tuple[int, str] | None:
        """Position and text of the file of ``kind``."""
        for i, (name, t) in enumerate(self.files):
            if detect_kind(t, name) is kind:
                return i, t
        return None

    def with_file(self, i: int, text: str) -> tuple[tuple[str, str], ...]:
        """The files with file ``i`` replaced."""
        files = list(self.files)
        files[i] = (files[i][0], text)
        return tuple(files)


Injector = Callable[[Case], "Case | None"]


def _faulty(
    case: Case, suffix: str, files: tuple[tuple[str, str], ...], check: Check, note: str, *, keep_plan: bool = False
) -> Case:
    return Case(f"{case.name}+{suffix}", files, case.plan if keep_plan else None, case.node, check, note)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _join(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def inject_duplicate_uuid(case: Case) -> Case | None:
    """A MIG device (``-L``) takes the UUID of the device before it."""
    found = case.text(OutputKind.LIST)
    if found is None:
        return None
    i, text = found
    lines = _lines(text)
    pat = re.compile(r"\(UUID: (MIG-[^)]+)\)")
    hits = [(n, pat.search(s)) for n, s in enumerate(lines)]
    uuids = [(n, m.group(1)) for n, m in hits if m]
    if len(uuids) < 2:
        return None
    (_, first), (n2, second) = uuids[0], uuids[1]
    lines[n2] = lines[n2].replace(second, first)
    return _faulty(
        case,
        "duplicate-uuid",
        case.with_file(i, _join(lines)),
        Check.DUPLICATE_UUID,
        f"{case.files[i][0]} line {n2 + 1}: MIG UUID repeated",
    )


def _gi_rows(case: Case) -> tuple[int, str, MigGpu | None] | None:
    found = case.text(OutputKind.GPU_INSTANCES)
    if found is None:
        return None
    i, text = found
    parsed = parse_gpu_instances(text)
    if not parsed.gpu_instances:
        return None
    from seedance.trust.models import models_of_profiles

    models = models_of_profiles(sorted({r.profile for r in parsed.gpu_instances}))
    return i, text, models[0] if models else None


def _set_placement(text: str, line: int, start: int, size: int) -> str:
    lines = _lines(text)
    s = lines[line - 1]
    m = re.search(r"(\s)(\d+):(\d+)(\s+\|)\s*$", s)
    assert m is not None
    new = f"{start}:{size}"
    old = f"{m.group(2)}:{m.group(3)}"
    pad = len(old) - len(new)
    body = s[: m.start(2)]
    if pad > 0:
        body = body + " " * pad
    elif pad < 0:
        body = body[: len(body) + pad]
    lines[line - 1] = body + new + m.group(4)
    return _join(lines)


def inject_gi_overlap(case: Case) -> Case | None:
    """A GI moves to another legal start of its profile that overlaps another GI of the same GPU."""
    got = _gi_rows(case)
    if got is None or got[2] is None:
        return None
    i, text, model = got
    assert model is not None
    rows = parse_gpu_instances(text).gpu_instances
    for r in rows:
        p = model.profile(r.profile)
        others = [o for o in rows if o.gpu == r.gpu and o is not r]
        taken = 0
        for o in others:
            taken |= ((1 << o.size) - 1) << o.start
        for s in p.starts:
            if s != r.start and p.mask(s) & taken:
                return _faulty(
                    case,
                    "gi-overlap",
                    case.with_file(i, _set_placement(text, r.line, s, r.size)),
                    Check.GI_OVERLAP,
                    f"{case.files[i][0]} line {r.line}: {r.profile} moved to {s}",
                )
    return None


def inject_gi_illegal(case: Case, *, variant: int = 0) -> Case | None:
    """A GI row gets a size that is not its profile's (variant 1: a profile ID that is not its profile's)."""
    got = _gi_rows(case)
    if got is None or got[2] is None:
        return None
    i, text, model = got
    assert model is not None
    r = parse_gpu_instances(text).gpu_instances[-1]
    p = model.profile(r.profile)
    if variant == 0:
        wrong = 2 if p.memory_slices == 1 else p.memory_slices - 1
        new = _set_placement(text, r.line, r.start, wrong)
        note = f"size {p.memory_slices} -> {wrong}"
    else:
        other = next(q for q in model.profiles if q.profile_id != p.profile_id)
        lines = _lines(text)
        m = re.search(rf"(MIG {re.escape(r.profile)}\s+)({p.profile_id})(\s)", lines[r.line - 1])
        assert m is not None
        width = len(m.group(1)) + len(m.group(2))
        head = f"MIG {r.profile}"
        repl = head + str(other.profile_id).rjust(width - len(head))
        lines[r.line - 1] = lines[r.line - 1][: m.start(1)] + repl + lines[r.line - 1][m.end(2) :]
        new = _join(lines)
        note = f"profile ID {p.profile_id} -> {other.profile_id}"
    return _faulty(
        case,
        f"gi-illegal-{variant}",
        case.with_file(i, new),
        Check.GI_ILLEGAL,
        f"{case.files[i][0]} line {r.line}: {note}",
    )


def inject_ci_exceeds(case: Case) -> Case | None:
    """A CI row grows past its GI (its placement size, or its ``Nc.`` name when there is no placement)."""
    found = case.text(OutputKind.COMPUTE_INSTANCES)
    if found is None:
        return None
    i, text = found
    lines = _lines(text)
    for n, s in enumerate(lines):
        m = re.search(r"(\d+):(\d+)(\s+\|)\s*$", s)
        if s.startswith("|") and "MIG " in s and m:
            start, size = int(m.group(1)), int(m.group(2))
            gi_slices = int(re.search(r"MIG (?:\d+c\.)?(\d+)g\.", s).group(1))  # type: ignore[union-attr]
            new = _set_placement(text, n + 1, start, gi_slices - start + 1)
            return _faulty(
                case,
                "ci-exceeds-gi",
                case.with_file(i, new),
                Check.CI_EXCEEDS_GI,
                f"{case.files[i][0]} line {n + 1}: placement {start}:{size} -> {start}:{gi_slices - start + 1}",
            )
        m2 = re.search(r"MIG (\d+)c\.(\d+)g\.", s)
        if s.startswith("|") and m2:
            bigger = int(m2.group(2)) + 1
            lines[n] = s.replace(f"MIG {m2.group(1)}c.", f"MIG {bigger}c.", 1)
            return _faulty(
                case,
                "ci-exceeds-gi",
                case.with_file(i, _join(lines)),
                Check.CI_EXCEEDS_GI,
                f"{case.files[i][0]} line {n + 1}: {m2.group(1)}c -> {bigger}c",
            )
    return None


def _mig_mode_lines(text: str) -> list[tuple[int, int]]:
    lines = _lines(text)
    return [(n + 1, n + 2) for n, s in enumerate(lines) if s == "    MIG Mode" and n + 2 < len(lines)]


def _set_mode(text: str, line: int, value: str) -> str:
    lines = _lines(text)
    lines[line] = re.sub(r"(:\s)\S+$", lambda m: m.group(1) + value, lines[line])
    return _join(lines)


def inject_pending_reset(case: Case) -> Case | None:
    """One ``-q`` GPU block: Pending flips away from Current."""
    found = case.text(OutputKind.QUERY)
    if found is None:
        return None
    i, text = found
    modes = _mig_mode_lines(text)
    if not modes:
        return None
    cur_line, pend_line = modes[-1]
    current = _lines(text)[cur_line].rsplit(":", 1)[1].strip()
    flipped = "Disabled" if current == "Enabled" else "Enabled"
    return _faulty(
        case,
        "mig-pending-reset",
        case.with_file(i, _set_mode(text, pend_line, flipped)),
        Check.MIG_PENDING,
        f"{case.files[i][0]} line {pend_line + 1}: Pending -> {flipped}",
    )


def inject_no_instances(case: Case) -> Case | None:
    """A GPU without instances (MIG off in ``-q``) now says MIG Enabled / Enabled."""
    found = case.text(OutputKind.QUERY)
    if found is None or (case.text(OutputKind.LIST) is None and case.text(OutputKind.GPU_INSTANCES) is None):
        return None
    i, text = found
    lines = _lines(text)
    for cur_line, pend_line in reversed(_mig_mode_lines(text)):
        if lines[cur_line].rstrip().endswith("Disabled"):
            new = _set_mode(_set_mode(text, cur_line, "Enabled"), pend_line, "Enabled")
            return _faulty(
                case,
                "mig-no-instances",
                case.with_file(i, new),
                Check.MIG_NO_INSTANCES,
                f"{case.files[i][0]} line {cur_line + 1}: MIG mode Disabled -> Enabled",
            )
    return None


def inject_drift(case: Case) -> Case | None:
    """One GI row disappears from ``-lgi`` (the plan still has it); ``-lci``/``-L`` are left out of the case."""
    if case.plan is None:
        return None
    found = case.text(OutputKind.GPU_INSTANCES)
    if found is None:
        return None
    i, text = found
    rows = parse_gpu_instances(text).gpu_instances
    if len(rows) < 2:
        return None
    lines = _lines(text)
    gone = rows[0].line
    del lines[gone - 1 : gone + 1]  # the row and the border under it
    keep = tuple(
        (n, t)
        for k, (n, t) in enumerate(case.with_file(i, _join(lines)))
        if k == i or detect_kind(t, n) is OutputKind.QUERY
    )
    return _faulty(
        case, "drift", keep, Check.DRIFT, f"{case.files[i][0]}: GI row at line {gone} removed", keep_plan=True
    )


INJECTORS: tuple[tuple[Check, Injector], ...] = (
    (Check.DUPLICATE_UUID, inject_duplicate_uuid),
    (Check.GI_OVERLAP, inject_gi_overlap),
    (Check.GI_ILLEGAL, inject_gi_illegal),
    (Check.GI_ILLEGAL, lambda c: inject_gi_illegal(c, variant=1)),
    (Check.CI_EXCEEDS_GI, inject_ci_exceeds),
    (Check.MIG_PENDING, inject_pending_reset),
    (Check.MIG_NO_INSTANCES, inject_no_instances),
    (Check.DRIFT, inject_drift),
)

#: Faults the issue asks the audit to find (``view-mismatch``, ``ci-orphan``, ... are extra checks).
FAULT_CLASSES: tuple[Check, ...] = (
    Check.DUPLICATE_UUID,
    Check.GI_OVERLAP,
    Check.GI_ILLEGAL,
    Check.CI_EXCEEDS_GI,
    Check.MIG_PENDING,
    Check.MIG_NO_INSTANCES,
    Check.DRIFT,
)
