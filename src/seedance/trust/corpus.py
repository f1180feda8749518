"""The MIG audit corpus: clean node captures (real fixtures, planner layouts rendered), one-fault twins, scoring.

Clean cases are the real fixtures (each alone, and the consistent pairs) plus nodes whose layouts
the geometry planner chose, rendered in the drivers' layouts with the planner's JSON plan as the
drift reference. Faulty cases come from ``seedance.trust.faults``' injectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedance.slicing.mig import format_layout, mig_gpu
from seedance.trust.faults import FAULT_CLASSES, INJECTORS, Case
from seedance.trust.findings import Check
from seedance.trust.render import (
    RenderGpu,
    compute_instance_rows,
    fake_uuid,
    gpu_instance_rows,
    render_compute_instances,
    render_gpu_instances,
    render_list,
    render_query,
)

#: Product names as the drivers print them (see the fixtures).
PRODUCTS: dict[str, str] = {
    "A100-40GB": "NVIDIA A100-SXM4-40GB",
    "A100-80GB": "NVIDIA A100-SXM4-80GB",
    "H100-80GB": "NVIDIA H100 80GB HBM3",
    "H200": "NVIDIA H200",
}

#: Demand mixes for the planner, one per generated node (GPU-milli per request, count).
_MIXES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((250, 6), (470, 2)),
    ((120, 8), (300, 2)),
    ((560, 2), (140, 4)),
    ((400, 3), (250, 2), (130, 3)),
)


def generated_nodes(q_templates: dict[str, str], *, time_limit_s: float = 2.0) -> list[Case]:
    """Nodes of 3 GPUs per MIG model whose layouts the planner chose (two mixes each), rendered clean.

    GPU 2 of each node stays out of MIG mode (whole), so ``-q`` has MIG Disabled there. ``q_templates``
    maps a model to a real ``-q`` text used as the template (``render_query``).
    """
    from seedance.slicing.planner import DemandClass, GpuSlot, PlannerOptions, plan_geometries

    cases: list[Case] = []
    for m, model in enumerate(PRODUCTS):
        g = mig_gpu(model)
        for k in range(2):
            mix = _MIXES[(2 * m + k) % len(_MIXES)]
            node = f"{model.lower()}-node-{k}"
            slots = [GpuSlot(f"{node}/gpu-{i}", g.model) for i in range(2)]
            demand = [DemandClass(f"c{j}", milli, n) for j, (milli, n) in enumerate(mix)]
            plan = plan_geometries(slots, demand, PlannerOptions(time_limit_s=time_limit_s, workers=1, seed=k))
            layouts = {int(p.name.rsplit("-", 1)[1]): tuple(p.layout) for p in plan.gpus}
            gpus = [
                RenderGpu(
                    i, g, PRODUCTS[model], fake_uuid("GPU", node, i), layouts.get(i, ()), mig=bool(layouts.get(i))
                )
                for i in range(3)
            ]
            files = (
                (f"{node}.L.txt", render_list(gpus, padded=k == 0 or model != "A100-40GB")),
                (f"{node}.lgi.txt", render_gpu_instances(gpu_instance_rows(gpus), wide=k == 1)),
                (f"{node}.lci.txt", render_compute_instances(compute_instance_rows(gpus), placement=True)),
                (f"{node}.q.txt", render_query(q_templates[model], gpus)),
            )
            shown = {i: format_layout(lay) for i, lay in sorted(layouts.items())}
            cases.append(Case(node, files, plan.to_json(), node, None, f"planner layouts {shown}"))
    return cases


def fixture_cases(fixtures: Path) -> list[Case]:
    """The real fixtures: each clean file alone, and the consistent pairs."""
    out = [
        Case(f.stem, ((f.name, f.read_text()),))
        for f in sorted(fixtures.glob("*.txt"))
        if f.name != "mig-lgi_none.txt"  # a real fault (MIG on, no instance): not a clean case
    ]
    for a, b in (
        ("a100-40gb_L_guide.txt", "a100-40gb_mig-lgi_guide-3g3g.txt"),
        ("a100-40gb_mig-lgi_howto.txt", "a100-40gb_mig-lci_howto.txt"),
    ):
        out.append(Case(f"{a}+{b}", ((a, (fixtures / a).read_text()), (b, (fixtures / b).read_text()))))
    return out


def build_corpus(fixtures: Path, *, time_limit_s: float = 2.0) -> tuple[list[Case], list[Case]]:
    """``(clean, faulty)``: every clean case and one faulty twin of it (one injected fault each).

    Each twin takes, among the injectors that apply to its clean case, one of the fault class seen
    least so far, so the classes are spread over the corpus. Twins keep the drift reference only
    for drift faults (moving a GI would also drift).
    """
    templates = {
        "A100-40GB": (fixtures / "a100-80gb_q_4gpu.txt").read_text(),
        "A100-80GB": (fixtures / "a100-80gb_q_4gpu.txt").read_text(),
        "H100-80GB": (fixtures / "h100-80gb_q_della.txt").read_text(),
        "H200": (fixtures / "h100-80gb_q_della.txt").read_text(),
    }
    clean = fixture_cases(fixtures) + generated_nodes(templates, time_limit_s=time_limit_s)
    seen: dict[Check, int] = dict.fromkeys(FAULT_CLASSES, 0)
    faulty: list[Case] = []
    for c in clean:
        options = [(seen[check], k, f) for k, (check, inject) in enumerate(INJECTORS) if (f := inject(c)) is not None]
        if not options:
            continue
        _, _, twin = min(options, key=lambda o: (o[0], o[1]))
        assert twin.fault is not None
        seen[twin.fault] += 1
        faulty.append(twin)
    # clean cases no injector applies to (a -L with one device, "No MIG-enabled devices"): their twins come
    # from the generated nodes, with a fault class that node has no twin of yet
    names = {f.name for f in faulty}
    spare = [f for c in clean if c.plan is not None for _, inject in INJECTORS if (f := inject(c)) is not None]
    for f in sorted(spare, key=lambda f: seen[f.fault] if f.fault else 0):
        if len(faulty) >= len(clean):
            break
        if f.name not in names and f.fault is not None:
            names.add(f.name)
            seen[f.fault] += 1
            faulty.append(f)
    return clean, faulty


def all_faults(clean: Sequence[Case]) -> list[Case]:
    """Every injector applied to every clean case it applies to (the exhaustive variant of the corpus)."""
    return [f for _, inject in INJECTORS for c in clean if (f := inject(c)) is not None]


@dataclass(frozen=True, slots=True)
class CorpusResult:
    """What the audit found on a corpus."""

    clean_cases: int
    clean_files: int
    faulty_cases: int
    faulty_files: int
    false_findings: tuple[tuple[str, str], ...]
    missed: tuple[tuple[str, str], ...]
    extra: tuple[tuple[str, str], ...]
    by_class: dict[str, tuple[int, int]]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "clean_cases": self.clean_cases,
            "clean_files": self.clean_files,
            "faulty_cases": self.faulty_cases,
            "faulty_files": self.faulty_files,
            "false_findings_on_clean": [list(x) for x in self.false_findings],
            "missed_faults": [list(x) for x in self.missed],
            "extra_findings_on_faulty": [list(x) for x in self.extra],
            "found_by_class": {k: {"found": f, "injected": n} for k, (f, n) in self.by_class.items()},
        }


def audit_case(case: Case) -> Any:
    """Audit one case as ``seedancectl mig audit --from ... [--plan ... --node ...]`` would."""
    from seedance.trust.audit import audit
    from seedance.trust.nvsmi import parse_output
    from seedance.trust.plan import parse_plan_document, planned_by_index

    outputs = [parse_output(t, n) for n, t in case.files]
    plan = None
    if case.plan is not None:
        plan = planned_by_index(parse_plan_document(case.plan, "plan.json"), node=case.node, source="plan.json")
    return audit(outputs, plan, plan_source="plan.json")


def evaluate_corpus(clean: Sequence[Case], faulty: Sequence[Case]) -> CorpusResult:
    """Audit every case: findings on clean cases are false; a faulty case is found when its class fires."""
    false: list[tuple[str, str]] = []
    for c in clean:
        false += [(c.name, f"{f.check.value}: {f.message}") for f in audit_case(c).findings]
    missed: list[tuple[str, str]] = []
    extra: list[tuple[str, str]] = []
    by_class: dict[str, list[int]] = {k.value: [0, 0] for k in FAULT_CLASSES}
    for c in faulty:
        assert c.fault is not None
        report = audit_case(c)
        by_class[c.fault.value][1] += 1
        if c.fault in report.checks():
            by_class[c.fault.value][0] += 1
        else:
            missed.append((c.name, c.note))
        extra += [(c.name, f"{f.check.value}: {f.message}") for f in report.findings if f.check is not c.fault]
    return CorpusResult(
        clean_cases=len(clean),
        clean_files=sum(len(c.files) for c in clean),
        faulty_cases=len(faulty),
        faulty_files=sum(len(c.files) for c in faulty),
        false_findings=tuple(false),
        missed=tuple(missed),
        extra=tuple(extra),
        by_class={k: (v[0], v[1]) for k, v in by_class.items()},
    )
