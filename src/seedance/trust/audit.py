"""MIG configuration audit: the outputs of one node, checked together.

NOTE(seedance): the checks, once.
  A node's captured outputs (any of ``-L``, ``mig -lgi``, ``mig -lci``, ``-q``; kinds recognised
  from content) are joined per GPU: ``-L`` and ``mig`` tables by GPU index, ``-q`` blocks by GPU
  UUID (by position when no ``-L`` is given). The GPU model comes from the product name, else
  from the profile names. Checks (``Check``), each finding with its severity, file and line, and a
  fix (the ``nvidia-smi mig`` commands, or a planner re-plan):
    * duplicate-uuid — a GPU or MIG UUID appears twice (or a R450 MIG UUID names another parent);
    * duplicate-id — a GI id twice on one GPU, or a CI id twice in one GI;
    * gi-illegal-placement — unknown profile for the model, profile ID or size not the profile's,
      a start not in the profile's legal starts (``-lgipp``), more instances than the profile
      allows, or MIG devices in ``-L`` that no legal layout can hold together;
    * gi-overlap — two GIs of one GPU share a memory slice;
    * ci-exceeds-gi — a CI larger than its GI, CIs whose compute slices add up to more than the
      GI has, a CI placement past the GI's slices or overlapping another CI, a CI of another GI's
      profile, or a profile ID that is not the CI's size; ci-orphan — a CI of a GI that does not exist;
    * gi-without-ci (warning) — a GI without a compute instance is invisible to CUDA;
    * mig-pending-reset — ``-q`` MIG mode Current differs from Pending;
    * mig-no-instances (warning) — a GPU in MIG mode with no GPU instance;
    * view-mismatch — the files disagree (another node's ``-q``, ``-L`` devices vs ``-lci``, MIG
      rows for a GPU whose ``-q`` says MIG is disabled);
    * drift — GIs differ from the layout the planner planned for the GPU;
    * unsupported-model (info) — MIG rows on a model without a MIG table (placements unchecked).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from seedance.core.errors import InputError, UnknownNameError
from seedance.slicing.mig import Instance, enumerate_layouts, format_layout
from seedance.trust.findings import SEVERITY, AuditReport, Check, Finding, Severity
from seedance.trust.models import ci_slices_of, gi_profile_of, model_of_product, models_of_profiles
from seedance.trust.node import GpuView, NodeView
from seedance.trust.nvsmi import ComputeInstanceRow, GpuInstanceRow, OutputKind, ParsedOutput
from seedance.trust.render import CI_PROFILE_ID, CI_PROFILE_SLICES

__all__ = [
    "SEVERITY",
    "AuditReport",
    "Check",
    "Finding",
    "Severity",
    "audit",
    "model_of_product",
    "models_of_profiles",
]

# ---------------------------------------------------------------------------- checks


def _cmd_create(gpu: int, profile_id: int, start: int) -> str:
    return f"nvidia-smi mig -i {gpu} -cgi {profile_id}:{start} -C"


def _cmd_destroy(gpu: int, gi: int) -> str:
    return f"nvidia-smi mig -i {gpu} -dci -gi {gi} && nvidia-smi mig -i {gpu} -dgi -gi {gi}"


def _replan(gpu: int) -> str:
    return f"re-plan GPU {gpu} with `seedancectl mig plan` and recreate its instances"


def _check_uuids(node: NodeView) -> None:
    seen: dict[str, tuple[str, int]] = {}
    listing = node.outputs.get(OutputKind.LIST)
    entries: list[tuple[str, int | None, str, int]] = []
    if listing:
        entries += [(g.uuid, g.index, listing.source, g.line) for g in listing.gpus]
        entries += [(d.uuid, d.gpu, listing.source, d.line) for d in listing.mig_devices]
    query = node.outputs.get(OutputKind.QUERY)
    if query and not listing:
        entries += [(q.uuid, q.position, query.source, q.line) for q in query.queried]
    for uuid, gpu, source, line in entries:
        if uuid in seen:
            first = seen[uuid]
            node.add(
                Check.DUPLICATE_UUID,
                gpu,
                source,
                line,
                f"UUID {uuid} appears twice ({first[0]}:{first[1]} and line {line})",
                "UUIDs come from the driver: re-capture `nvidia-smi -L` on the node; if the driver itself repeats it, "
                "drain the node and reset the GPU (`nvidia-smi -i N -r`)",
            )
        else:
            seen[uuid] = (source, line)
    if listing:
        parents = {g.index: g.uuid for g in listing.gpus}
        for d in listing.mig_devices:
            m = re.match(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)$", d.uuid)
            if m and m.group(1) != parents.get(d.gpu):
                node.add(
                    Check.DUPLICATE_UUID,
                    d.gpu,
                    listing.source,
                    d.line,
                    f"MIG device UUID {d.uuid} names parent {m.group(1)}, not GPU {d.gpu} ({parents.get(d.gpu)})",
                    "re-capture `nvidia-smi -L`; R450/R460 MIG UUIDs must carry their own GPU's UUID",
                )


def _check_gis(node: NodeView, v: GpuView, source: str) -> None:
    ids: dict[int, GpuInstanceRow] = {}
    for r in v.gis:
        if r.gi in ids:
            node.add(
                Check.DUPLICATE_ID,
                v.index,
                source,
                r.line,
                f"GPU {v.index}: GPU instance id {r.gi} appears twice (line {ids[r.gi].line} and {r.line})",
                "re-capture `nvidia-smi mig -lgi`; the driver never repeats a GI id",
            )
        ids.setdefault(r.gi, r)
    g = v.model
    if g is None:
        if v.product is not None or v.model_note == "unknown":
            node.add(
                Check.UNSUPPORTED,
                v.index,
                source,
                v.gis[0].line,
                f"GPU {v.index}: {v.model_note}: MIG placements are not checked for this model",
                "none needed; add the model's MIG table to seedance.slicing.mig to audit it",
            )
        return
    used = 0
    counts: Counter[str] = Counter()
    placed: list[tuple[GpuInstanceRow, int]] = []
    for r in sorted(v.gis, key=lambda x: x.line):
        try:
            p = g.profile(r.profile)
        except UnknownNameError:
            node.add(
                Check.GI_ILLEGAL,
                v.index,
                source,
                r.line,
                f"GPU {v.index} ({g.model}): profile {r.profile} does not exist; valid: {', '.join(g.names())}",
                f"{_cmd_destroy(v.index, r.gi)}; {_replan(v.index)}",
            )
            continue
        problems: list[str] = []
        if r.profile_id != p.profile_id:
            problems.append(f"profile ID {r.profile_id} is not {p.name}'s ({p.profile_id})")
        if r.size != p.memory_slices:
            problems.append(f"size {r.size} is not {p.name}'s {p.memory_slices} memory slices")
        if r.start not in p.starts:
            problems.append(f"start {r.start} is not a legal start of {p.name} {{{','.join(map(str, p.starts))}}}")
        mask = p.mask(r.start) if r.start in p.starts else ((1 << r.size) - 1) << r.start
        counts[p.name] += 1
        if counts[p.name] > p.max_instances:
            problems.append(f"{counts[p.name]} x {p.name} exceed its limit of {p.max_instances} per GPU")
        if problems:
            others = 0
            for _, m in placed:
                others |= m
            free = [s for s in p.starts if not p.mask(s) & others]
            fix = (
                f"{_cmd_destroy(v.index, r.gi)} && {_cmd_create(v.index, p.profile_id, free[-1])}"
                if free and counts[p.name] <= p.max_instances
                else f"{_cmd_destroy(v.index, r.gi)}; {_replan(v.index)}"
            )
            node.add(
                Check.GI_ILLEGAL,
                v.index,
                source,
                r.line,
                f"GPU {v.index} ({g.model}) GI {r.gi} {p.name} at {r.start}:{r.size}: " + "; ".join(problems),
                fix,
            )
        if used & mask:
            other = next(q for q, m in placed if m & mask)
            node.add(
                Check.GI_OVERLAP,
                v.index,
                source,
                r.line,
                f"GPU {v.index} ({g.model}) GI {r.gi} {p.name} at {r.start}:{r.size} overlaps GI {other.gi} "
                f"{other.profile} at {other.start}:{other.size}",
                f"{_cmd_destroy(v.index, r.gi)}; {_replan(v.index)}",
            )
        used |= mask
        placed.append((r, mask))


def _check_devices_fit(node: NodeView, v: GpuView, source: str, layouts: dict[str, list[Counter[str]]]) -> None:
    """Without ``-lgi``: the MIG devices of ``-L`` must be a multiset some legal layout holds."""
    g = v.model
    if g is None or not v.devices:
        return
    for d in v.devices:
        if gi_profile_of(d.profile) not in g.names():
            node.add(
                Check.GI_ILLEGAL,
                v.index,
                source,
                d.line,
                f"GPU {v.index} ({g.model}): MIG device profile {d.profile} does not exist on this model",
                _replan(v.index),
            )
            return
    if any(gi_profile_of(d.profile) != d.profile for d in v.devices):
        return  # compute-instance devices: several can share one GI
    if g.model not in layouts:
        layouts[g.model] = [Counter(i.profile for i in lay) for lay in enumerate_layouts(g, media=True)]
    want = Counter(d.profile for d in v.devices)
    if not any(all(c[k] >= n for k, n in want.items()) for c in layouts[g.model]):
        shown = ", ".join(f"{n} x {k}" for k, n in sorted(want.items()))
        node.add(
            Check.GI_ILLEGAL,
            v.index,
            source,
            v.devices[-1].line,
            f"GPU {v.index} ({g.model}): no legal MIG layout holds {shown} together",
            f"nvidia-smi mig -i {v.index} -dci && nvidia-smi mig -i {v.index} -dgi; {_replan(v.index)}",
        )


def _check_cis(node: NodeView, v: GpuView, source: str, have_lgi: bool) -> None:
    gis = {r.gi: r for r in v.gis}
    by_gi: dict[int, list[ComputeInstanceRow]] = {}
    seen: set[tuple[int, int]] = set()
    for c in v.cis:
        if (c.gi, c.ci) in seen:
            node.add(
                Check.DUPLICATE_ID,
                v.index,
                source,
                c.line,
                f"GPU {v.index} GI {c.gi}: compute instance id {c.ci} appears twice",
                "re-capture `nvidia-smi mig -lci`; the driver never repeats a CI id within a GI",
            )
        seen.add((c.gi, c.ci))
        by_gi.setdefault(c.gi, []).append(c)
    for gi, rows in sorted(by_gi.items()):
        parent = gis.get(gi)
        if parent is None and have_lgi:
            for c in rows:
                node.add(
                    Check.CI_ORPHAN,
                    v.index,
                    source,
                    c.line,
                    f"GPU {v.index}: compute instance {c.ci} ({c.profile}) belongs to GI {gi}, "
                    "which -lgi does not list",
                    f"nvidia-smi mig -i {v.index} -dci -gi {gi} -ci {c.ci} (or re-capture both tables together)",
                )
            continue
        gi_profile = parent.profile if parent else gi_profile_of(rows[0].profile)
        gi_slices = None
        if v.model is not None and gi_profile in v.model.names():
            gi_slices = v.model.profile(gi_profile).compute_slices
        else:
            head = re.match(r"^(\d+)g\.", gi_profile)
            gi_slices = int(head.group(1)) if head else None
        if gi_slices is None:
            continue
        total = 0
        occupied = 0
        for c in sorted(rows, key=lambda x: x.line):
            problems: list[str] = []
            n = ci_slices_of(c.profile)
            if gi_profile_of(c.profile) != gi_profile:
                problems.append(f"{c.profile} is not a compute instance of a {gi_profile} GI")
            if n is None:
                problems.append(f"cannot read a size from {c.profile}")
                n = 0
            if n > gi_slices:
                problems.append(f"{n} compute slices, more than the GI's {gi_slices}")
            pid_slices = CI_PROFILE_SLICES.get(c.profile_id)
            if pid_slices != n:
                problems.append(f"profile ID {c.profile_id} is a {pid_slices}-slice CI, not {n}")
            total += n
            if total > gi_slices >= total - n and n <= gi_slices:
                problems.append(f"the GI's compute instances add up to {total} slices, more than its {gi_slices}")
            if c.start is not None and c.size is not None:
                if c.size != n:
                    problems.append(f"placement size {c.size} is not its {n} slices")
                if c.start + c.size > gi_slices:
                    problems.append(f"placement {c.start}:{c.size} runs past the GI's {gi_slices} slices")
                m = ((1 << c.size) - 1) << c.start
                if occupied & m:
                    problems.append(f"placement {c.start}:{c.size} overlaps another compute instance")
                occupied |= m
            if problems:
                node.add(
                    Check.CI_EXCEEDS_GI,
                    v.index,
                    source,
                    c.line,
                    f"GPU {v.index} GI {gi} ({gi_profile}) CI {c.ci} {c.profile}: " + "; ".join(problems),
                    f"nvidia-smi mig -i {v.index} -dci -gi {gi} -ci {c.ci}, then recreate it within the GI's "
                    f"{gi_slices} slices: nvidia-smi mig -i {v.index} -gi {gi} -cci ID "
                    f"(ID {', '.join(f'{k}c={i}' for k, i in sorted(CI_PROFILE_ID.items()) if k <= gi_slices)})",
                )
    if node.outputs.get(OutputKind.COMPUTE_INSTANCES) and have_lgi:
        lgi_source = node.outputs[OutputKind.GPU_INSTANCES].source
        for r in v.gis:
            if r.gi not in by_gi:
                slices = v.model.profile(r.profile).compute_slices if v.model and r.profile in v.model.names() else None
                ci_pid = CI_PROFILE_ID.get(slices or 0, "<id>")
                node.add(
                    Check.GI_WITHOUT_CI,
                    v.index,
                    lgi_source,
                    r.line,
                    f"GPU {v.index} GI {r.gi} ({r.profile}) has no compute instance: no MIG device, nothing can use it",
                    f"nvidia-smi mig -i {v.index} -gi {r.gi} -cci {ci_pid}",
                )


def _check_modes(node: NodeView, v: GpuView) -> None:
    q = v.query
    lgi = node.outputs.get(OutputKind.GPU_INSTANCES)
    listing = node.outputs.get(OutputKind.LIST)
    hopper = v.model is not None and v.model.model.startswith(("H100", "H200"))
    if q is not None and q.mig_current in ("Enabled", "Disabled") and q.mig_pending != q.mig_current:
        want = 1 if q.mig_pending == "Enabled" else 0
        fix = (
            f"a client held the GPU while MIG mode was changed (Hopper applies it without a reset): stop GPU clients "
            f"(nvsm, dcgm, dcgm-exporter, jobs) and run `nvidia-smi -i {v.index} -mig {want}` again"
            if hopper
            else f"drain the GPU, stop its clients (nvsm, dcgm, dcgm-exporter) and run `nvidia-smi -i {v.index} "
            f"--gpu-reset` (in a VM with GPU passthrough: reboot the VM)"
        )
        node.add(
            Check.MIG_PENDING,
            v.index,
            v.query_source,
            q.mig_line,
            f"GPU {v.index}: MIG mode is {q.mig_current} but {q.mig_pending} is pending a GPU reset",
            fix,
        )
    mig_on = q.mig_current == "Enabled" if q is not None else None
    if mig_on is False and v.mig_rows:
        where = v.gis[0] if v.gis else (v.devices[0] if v.devices else v.cis[0])
        src = lgi.source if v.gis and lgi else (listing.source if v.devices and listing else None)
        node.add(
            Check.VIEW_MISMATCH,
            v.index,
            src,
            where.line,
            f"GPU {v.index} has MIG instances but {v.query_source} says MIG mode is {q.mig_current if q else '?'}",
            "capture all outputs on the same node, in one go",
        )
    if lgi is not None and lgi.no_mig and v.devices:
        node.add(
            Check.VIEW_MISMATCH,
            v.index,
            listing.source if listing else None,
            v.devices[0].line,
            f"GPU {v.index} lists MIG devices but {lgi.source} says no GPU is in MIG mode",
            "capture all outputs on the same node, in one go",
        )
    if mig_on and not v.gis and not v.devices:
        if lgi is not None and lgi.no_mig:
            node.add(
                Check.VIEW_MISMATCH,
                v.index,
                lgi.source,
                1,
                f"{lgi.source} says no GPU is in MIG mode, but {v.query_source} has GPU {v.index} Enabled",
                "capture all outputs on the same node, in one go",
            )
        elif lgi is not None or (listing is not None and not node.outputs.get(OutputKind.COMPUTE_INSTANCES)):
            node.add(
                Check.MIG_NO_INSTANCES,
                v.index,
                v.query_source,
                q.mig_line if q else None,
                f"GPU {v.index} is in MIG mode with no GPU instance: it can run nothing",
                f"create the planned layout (`seedancectl mig plan`, then nvidia-smi mig -i {v.index} -cgi "
                f"<profile:start,...> -C) or leave MIG mode: nvidia-smi -i {v.index} -mig 0",
            )
    devices = Counter(d.profile for d in v.devices)
    cis = Counter(c.profile for c in v.cis)
    if listing and node.outputs.get(OutputKind.COMPUTE_INSTANCES) and devices != cis and (v.devices or v.cis):
        line = v.devices[0].line if v.devices else None
        node.add(
            Check.VIEW_MISMATCH,
            v.index,
            listing.source,
            line,
            f"GPU {v.index}: -L lists MIG devices {dict(devices)} but -lci lists compute instances {dict(cis)}",
            "capture -L and mig -lci together on the node (an instance was created or destroyed in between)",
        )


def _check_drift(node: NodeView, plan: Mapping[int, Sequence[Instance]], plan_source: str) -> None:
    lgi = node.outputs.get(OutputKind.GPU_INSTANCES)
    if lgi is None:
        raise InputError("drift needs the node's `nvidia-smi mig -lgi` output next to --plan", source=plan_source)
    for index, planned in sorted(plan.items()):
        v = node.gpus.get(index)
        actual = Counter(Instance(r.profile, r.start) for r in (v.gis if v else []))
        want = Counter(Instance(i.profile.lower(), i.start) for i in planned)
        if actual == want:
            continue
        missing = list((want - actual).elements())
        extra = list((actual - want).elements())
        cmds: list[str] = []
        if v is not None:
            cmds += [_cmd_destroy(index, r.gi) for r in v.gis if Instance(r.profile, r.start) in extra]
        g = v.model if v is not None and v.model is not None else None
        for inst in missing:
            pid = g.profile(inst.profile).profile_id if g and inst.profile in g.names() else inst.profile
            cmds.append(f"nvidia-smi mig -i {index} -cgi {pid}:{inst.start} -C")
        line = v.gis[0].line if v and v.gis else None
        node.add(
            Check.DRIFT,
            index,
            lgi.source,
            line,
            f"GPU {index}: GPU instances {format_layout(actual.elements())} differ from the planned "
            f"{format_layout(want.elements())} (missing: {format_layout(missing)}; unexpected: {format_layout(extra)})",
            " && ".join(cmds) + " (or re-plan with `seedancectl mig plan` from the current layout)",
        )


def audit(
    outputs: Sequence[ParsedOutput],
    plan: Mapping[int, Sequence[Instance]] | None = None,
    *,
    plan_source: str = "plan",
) -> AuditReport:
    """Audit the parsed outputs of one node (and, with ``plan``, drift from the planned GI layouts).

    Args:
        outputs: At most one parsed output of each kind.
        plan: Planned GPU instances by GPU index (:func:`seedance.trust.plan.load_planned_layouts`).
        plan_source: Name of the plan file (in findings).
    """
    node = NodeView(outputs)
    _check_uuids(node)
    lgi = node.outputs.get(OutputKind.GPU_INSTANCES)
    lci = node.outputs.get(OutputKind.COMPUTE_INSTANCES)
    listing = node.outputs.get(OutputKind.LIST)
    layouts: dict[str, list[Counter[str]]] = {}
    for index in sorted(node.gpus):
        v = node.gpus[index]
        if lgi is not None and v.gis:
            _check_gis(node, v, lgi.source)
        elif listing is not None and lgi is None:
            _check_devices_fit(node, v, listing.source, layouts)
        if lci is not None and v.cis:
            _check_cis(node, v, lci.source, lgi is not None)
        elif lci is not None and lgi is not None and v.gis:
            _check_cis(node, v, lci.source, True)
        _check_modes(node, v)
    if lgi is not None and lgi.empty and not any(v.query for v in node.gpus.values()):
        node.add(
            Check.MIG_NO_INSTANCES,
            None,
            lgi.source,
            1,
            "nvidia-smi reports a GPU in MIG mode with no GPU instance ('No GPU instances found')",
            "create the planned layout (`seedancectl mig plan`, then nvidia-smi mig -cgi ... -C) or leave MIG "
            "mode (nvidia-smi -i N -mig 0)",
        )
    if plan is not None:
        _check_drift(node, plan, plan_source)
    order = {c: i for i, c in enumerate(Check)}
    findings = sorted(
        node.findings,
        key=lambda f: (f.gpu if f.gpu is not None else -1, f.source or "", f.line or 0, order[f.check]),
    )
    return AuditReport(
        findings=tuple(findings),
        files=tuple((o.source, o.kind.value) for o in outputs),
        gpus=tuple((i, node.gpus[i].model_note or "-") for i in sorted(node.gpus)),
    )
