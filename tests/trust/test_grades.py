"""Isolation grades: pair grades, per job/node/tenant grades, and the grade-requirement stage in the scheduler."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.errors import UnknownNameError
from seedance.core.resources import ResourceRequest, SliceBackend
from seedance.scheduling.framework import DEFAULT_FILTERS, Scheduler, make_policy
from seedance.slicing.slices import resolve_slice
from seedance.tiers.filters import GpuModeFit, offered_backends
from seedance.trust.grades import (
    Grade,
    GradePolicy,
    IsolationGradeFilter,
    SliceShare,
    adapt_request,
    backend_grade,
    backends_for_grade,
    grade_shares,
    pair_grade,
)

B = SliceBackend


def share(job: str, tenant: str, backend: SliceBackend, gpu: int = 0, node: str = "n0", **kw: object) -> SliceShare:
    return SliceShare(job, tenant, node, gpu, backend, **kw)  # type: ignore[arg-type]


def test_pair_grades() -> None:
    cases = [
        (share("a", "x", B.MIG, gi=1, ci=0), share("b", "y", B.MIG, gi=2, ci=0), Grade.HARDWARE),
        (share("a", "x", B.MIG, gi=1, ci=0), share("b", "y", B.MIG, gi=1, ci=1), Grade.DRIVER),
        (share("a", "x", B.MIG, gi=1, ci=0), share("b", "y", B.MIG, gi=1, ci=0), Grade.RUNTIME),
        (share("a", "x", B.MPS, mps_limited=True), share("b", "y", B.MPS, mps_limited=True), Grade.DRIVER),
        (share("a", "x", B.MPS, mps_limited=True), share("b", "y", B.MPS), Grade.NONE),
        (share("a", "x", B.MPS, mps_limited=True), share("b", "y", B.TIME_SLICING), Grade.RUNTIME),
        (share("a", "x", B.TIME_SLICING), share("b", "y", B.TIME_SLICING), Grade.RUNTIME),
        (share("a", "x", B.WHOLE), share("b", "y", B.TIME_SLICING), Grade.NONE),
        (share("a", "x", B.MIG, gi=1), share("b", "y", B.MPS), Grade.NONE),
    ]
    for a, b, want in cases:
        assert pair_grade(a, b)[0] is want
        assert pair_grade(b, a)[0] is want  # symmetric


def test_backend_grades_and_allowed_backends() -> None:
    assert [backend_grade(b) for b in (B.WHOLE, B.MIG, B.MPS, B.TIME_SLICING)] == [
        Grade.HARDWARE,
        Grade.HARDWARE,
        Grade.NONE,
        Grade.RUNTIME,
    ]
    assert backend_grade(B.MPS, mps_limited=True) is Grade.DRIVER
    assert backends_for_grade(Grade.HARDWARE) == (B.WHOLE, B.MIG)
    assert backends_for_grade(Grade.DRIVER, mps_limited=True) == (B.WHOLE, B.MIG, B.MPS)
    assert backends_for_grade(Grade.RUNTIME) == (B.WHOLE, B.MIG, B.TIME_SLICING)
    assert Grade.parse(" Hardware ") is Grade.HARDWARE
    with pytest.raises(UnknownNameError, match="valid names: hardware, driver, runtime, none"):
        Grade.parse("exclusive")


def test_grades_per_job_node_and_tenant() -> None:
    shares = [
        share("a1", "acme", B.MIG, gpu=0, gi=1, ci=0),
        share("b1", "bank", B.MIG, gpu=0, gi=2, ci=0),
        share("a2", "acme", B.TIME_SLICING, gpu=1),
        share("a3", "acme", B.TIME_SLICING, gpu=1),  # same tenant: does not weaken a2
        share("c1", "corp", B.MPS, gpu=0, node="n1", mps_limited=True),
        share("d1", "dev", B.MPS, gpu=0, node="n1"),
        share("e1", "edu", B.TIME_SLICING, gpu=1, node="n1"),
    ]
    report = grade_shares(shares)
    got = {j.job: (j.grade, j.slice_grade, j.weakest_with) for j in report.jobs}
    assert got == {
        "a1": (Grade.HARDWARE, Grade.HARDWARE, None),
        "b1": (Grade.HARDWARE, Grade.HARDWARE, None),
        "a2": (Grade.HARDWARE, Grade.RUNTIME, None),  # time-sliced, but only with its own tenant's job
        "a3": (Grade.HARDWARE, Grade.RUNTIME, None),
        "c1": (Grade.NONE, Grade.DRIVER, "d1"),  # its MPS neighbour has no memory limit
        "d1": (Grade.NONE, Grade.NONE, "c1"),
        "e1": (Grade.HARDWARE, Grade.RUNTIME, None),
    }
    assert report.nodes == {"n0": Grade.HARDWARE, "n1": Grade.NONE}
    assert report.tenants == {
        "acme": Grade.HARDWARE,
        "bank": Grade.HARDWARE,
        "corp": Grade.NONE,
        "dev": Grade.NONE,
        "edu": Grade.HARDWARE,
    }
    assert report.to_json()["jobs"][4] == {  # type: ignore[index]
        "job": "c1",
        "tenant": "corp",
        "node": "n1",
        "gpu": 0,
        "backend": "mps",
        "grade": "none",
        "slice_grade": "driver",
        "weakest_with": "d1",
        "reason": "MPS clients without a memory limit (faults reach every client)",
    }


def test_grade_policy_takes_the_stronger_of_tier_and_tenant() -> None:
    policy = GradePolicy.from_mapping(
        {"tiers": {"gold": "hardware", "bronze": "runtime"}, "tenants": {"bank": "driver"}}
    )
    assert policy.required("gold", "acme") is Grade.HARDWARE
    assert policy.required("bronze", "bank") is Grade.DRIVER
    assert policy.required("silver", None) is Grade.NONE
    with pytest.raises(UnknownNameError):
        GradePolicy.from_mapping({"tiers": {"gold": "strong"}})


MODES = ("exclusive", "mig", "shared", None)
MODELS = ("A100-80GB", "T4", "H100-80GB")


def cluster(layout: list[tuple[str | None, str]]) -> ClusterState:
    nodes = tuple(
        NodeSpec(f"n{i}", 64000, 262144, 4, model, {"gpu.mode": mode} if mode else {})
        for i, (mode, model) in enumerate(layout)
    )
    return ClusterState(ClusterSpec(nodes))


def offered(view: ClusterState, node: int) -> tuple[SliceBackend, ...]:
    masks = offered_backends(view)
    return tuple(b for b in SliceBackend if masks[b][node])


def test_filter_mask_and_reasons_on_a_mixed_cluster() -> None:
    view = cluster(
        [("exclusive", "A100-80GB"), ("mig", "A100-80GB"), ("shared", "A100-80GB"), (None, "T4"), ("mig", "T4")]
    )
    req = ResourceRequest(4000, 8192, 1, 300, backends=(B.MIG, B.MPS, B.TIME_SLICING))  # no whole GPU accepted
    f = IsolationGradeFilter(Grade.HARDWARE)
    assert f.mask(view, req).tolist() == [False, True, False, False, False]
    reasons = f.reasons(view, req)
    assert reasons[1] is None
    assert reasons[2] == ("pool offers mps/time-slicing; the request may use only mig to get hardware isolation")
    assert IsolationGradeFilter(Grade.RUNTIME).mask(view, req).tolist() == [False, True, True, True, False]
    whole = ResourceRequest(4000, 8192, 2, 1000)
    assert f.mask(view, whole).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.lists(st.tuples(st.sampled_from(MODES), st.sampled_from(MODELS)), min_size=1, max_size=8),
    milli=st.integers(50, 999),
    accepted=st.sets(st.sampled_from(list(SliceBackend))),
    required=st.sampled_from(list(Grade)),
)
def test_scheduler_with_the_grade_stage_never_places_below_the_required_grade(
    layout: list[tuple[str | None, str]], milli: int, accepted: set[SliceBackend], required: Grade
) -> None:
    """A tier requiring "hardware" is never placed on a time-sliced (or MPS) share, whatever the pools offer."""
    view = cluster(layout)
    req = ResourceRequest(4000, 8192, 1, milli, backends=tuple(sorted(accepted)))
    adapted = adapt_request(req, required)
    stage = IsolationGradeFilter(required)
    sched = Scheduler(make_policy("best-fit"), filters=(*DEFAULT_FILTERS, GpuModeFit(), stage))
    decision = sched.decide(view, adapted)
    if not stage.mask(view, adapted).any():
        assert decision.placement is None  # e.g. a request accepting only MPS, when "runtime" is required
    if decision.placement is None:
        return
    node = decision.placement.node
    model = view.spec.nodes[node].gpu_model
    assert model is not None
    got = resolve_slice(adapted, model, offered(view, node))
    assert got is not None  # the stage only passes nodes where a slice of the grade exists
    assert backend_grade(got.backend) >= required
    if required is Grade.HARDWARE:
        assert got.backend not in (B.TIME_SLICING, B.MPS)


def test_the_grade_filter_and_gpu_mode_fit_read_one_rule_of_what_a_pool_offers() -> None:
    """Exhaustive over one node of every mode x model and every accepted set: with no grade required,
    ``IsolationGrade`` passes exactly the nodes ``GpuModeFit`` passes (they once had twin rules that
    disagreed: a share accepting whole GPUs passed an ``exclusive`` or ``shared`` node in one, not the other)."""
    view = cluster([(mode, model) for mode in MODES for model in MODELS])
    backends = list(SliceBackend)
    for k in range(1, len(backends) + 1):
        for accepted in itertools.combinations(backends, k):
            req = ResourceRequest(4000, 8192, 1, 300, backends=accepted)
            assert IsolationGradeFilter(Grade.NONE).mask(view, req).tolist() == GpuModeFit().mask(view, req).tolist()
    share = ResourceRequest(4000, 8192, 1, 300, backends=(B.WHOLE,))
    # only unlabelled GPU nodes give a share a whole-GPU slice; exclusive/mig/shared pools do not
    assert GpuModeFit().mask(view, share).tolist() == [mode is None for mode in MODES for _ in MODELS]
