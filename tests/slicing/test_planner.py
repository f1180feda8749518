"""The MIG geometry planner: exact plans, drain trade-offs, replanning, and legality of every plan."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.slicing.mig import Instance, enumerate_layouts, is_legal, mig_gpu
from seedance.slicing.planner import (
    DemandClass,
    GpuSlot,
    PlannerOptions,
    demand_from_shares,
    fit_instances,
    fixed_geometry_fit,
    plan_geometries,
    pool_of,
    rank_fixed_geometries,
)

A100 = "A100-80GB"
FAST = PlannerOptions(time_limit_s=5.0, workers=1)


def lay(*items: str) -> tuple[Instance, ...]:
    return tuple(Instance.parse(x) for x in items)


def test_fit_instances_is_an_exact_assignment() -> None:
    demand = [DemandClass("a", 250, 2), DemandClass("b", 100, 1), DemandClass("big", 600, 1)]
    fit = fit_instances({(A100, "2g.20gb"): 1, (A100, "1g.10gb"): 2}, demand)
    assert dict(fit.served) == {"a": 1, "b": 1, "big": 0}
    assert (fit.served_requests, fit.served_milli, fit.demand_requests, fit.demand_milli) == (2, 350, 4, 1200)
    # a 7g can serve anything; by milli the 600 request is worth more than a 250
    fit2 = fit_instances({(A100, "7g.80gb"): 1}, demand)
    assert dict(fit2.served) == {"a": 0, "b": 0, "big": 1}
    # with memory needs, only instances with enough memory count
    mem = [DemandClass("m", 100, 2, gpu_memory_gib=15.0)]
    assert fit_instances({(A100, "1g.10gb"): 5, (A100, "1g.20gb"): 1}, mem).served_requests == 1


def test_fixed_geometries_are_ranked_by_what_they_serve() -> None:
    demand = [DemandClass("four", 470, 4), DemandClass("three", 300, 4)]
    ranked = rank_fixed_geometries(mig_gpu(A100), 4, demand)
    assert ranked[0].name == "4g.40gb+3g.40gb"
    assert ranked[0].fit.served_requests == 8
    assert fixed_geometry_fit(mig_gpu(A100), lay("7g.80gb@0"), 4, demand).served_requests == 4


def test_fresh_plan_for_a_two_gpu_pool() -> None:
    demand = [DemandClass("four", 470, 2), DemandClass("three", 300, 2)]
    plan = plan_geometries(pool_of(A100, 2), demand, FAST)
    assert plan.status == "OPTIMAL"
    assert [g.layout for g in plan.gpus] == [lay("4g.40gb@0", "3g.40gb@4")] * 2
    assert [g.action for g in plan.gpus] == ["repartition", "repartition"]
    assert plan.fit.served_requests == 4 and plan.change_cost == 2 * 8  # 1000 * 30 s / 3600 s each
    assert plan.gpus[0].serves == {"four": 1, "three": 1}


def test_a_mixed_plan_beats_every_single_geometry() -> None:
    # two 7g-size requests and six 2g-size ones on three GPUs: one geometry cannot serve both shapes
    demand = [DemandClass("big", 800, 2), DemandClass("small", 250, 6)]
    plan = plan_geometries(pool_of(A100, 3), demand, FAST)
    best_fixed = rank_fixed_geometries(mig_gpu(A100), 3, demand)[0]
    assert plan.fit.served_milli == 2 * 800 + 3 * 250
    assert best_fixed.fit.served_milli < plan.fit.served_milli
    assert plan.best_fixed_value == best_fixed.fit.served_milli
    assert sum(1 for g in plan.gpus if g.layout == lay("7g.80gb@0")) == 2
    third = next(g for g in plan.gpus if g.layout != lay("7g.80gb@0"))
    assert third.serves == {"small": 3}  # three 2g instances on one GPU


@pytest.mark.parametrize(
    ("drain_s", "allow", "action"), [(600, True, "drain-repartition"), (1200, True, "keep"), (600, False, "keep")]
)
def test_draining_a_busy_gpu_is_worth_it_only_when_cheap(drain_s: float, allow: bool, action: str) -> None:
    busy = GpuSlot("busy", A100, lay("7g.80gb@0"), lay("7g.80gb@0"), drain_s=drain_s)
    idle = GpuSlot("idle", A100)
    demand = [DemandClass("s", 250, 4)]
    plan = plan_geometries([busy, idle], demand, PlannerOptions(time_limit_s=5.0, workers=1, allow_drain=allow))
    assert plan.gpus[0].action == action
    assert plan.gpus[1].action == "repartition"
    # draining gains one 250 request; it costs 1000 * (drain + 30 s) / 3600 s: 175 at 600 s, 342 at 1200 s
    assert plan.fit.served_requests == (4 if action == "drain-repartition" else 3)
    assert plan.change_cost == (8 + 175 if action == "drain-repartition" else 8)


def test_replan_as_the_mix_changes_keeps_busy_gpus_and_reshapes_idle_ones() -> None:
    first = plan_geometries(pool_of(A100, 3), [DemandClass("three", 300, 6)], FAST)
    assert first.fit.served_requests == 6
    assert all(sorted(i.start for i in g.layout) == [0, 4] for g in first.gpus)  # 3g+3g or 4g+3g
    # GPU 0 now runs work in its instance at slice 0; the mix moves to small shares
    slots = [
        GpuSlot(g.name, A100, g.layout, g.layout[:1] if i == 0 else (), drain_s=7200.0)
        for i, g in enumerate(first.gpus)
    ]
    second = plan_geometries(slots, [DemandClass("tiny", 100, 15)], FAST)
    assert second.gpus[0].action == "keep"  # draining for two hours is not worth one GPU
    assert second.gpus[0].layout == first.gpus[0].layout
    assert [g.action for g in second.gpus[1:]] == ["repartition", "repartition"]
    assert all(len(g.layout) == 7 and {i.profile[:2] for i in g.layout} == {"1g"} for g in second.gpus[1:])
    assert second.fit.served_requests == 15  # 14 x 1g, plus GPU 0's free 3g instance
    assert second.gpus[0].serves == {"tiny": 1}


def test_per_gpu_model_proves_the_same_optimum_as_the_aggregate_model() -> None:
    demand = demand_from_shares([470] * 5 + [320] * 4 + [230] * 6 + [110] * 5 + [810] * 2)
    plan = plan_geometries(pool_of(A100, 6), demand, PlannerOptions(time_limit_s=20.0, workers=1))
    assert plan.status == "OPTIMAL" and plan.aggregate_status == "OPTIMAL"
    assert plan.objective == plan.aggregate_objective
    assert plan.fit.served_milli >= plan.best_fixed_value


def test_bad_slots_and_demand_are_input_errors() -> None:
    with pytest.raises(InputError, match="may start only"):
        plan_geometries([GpuSlot("g", A100, lay("3g.40gb@2"))], [DemandClass("a", 100, 1)])
    with pytest.raises(InputError, match="busy instances not in the layout"):
        plan_geometries([GpuSlot("g", A100, lay("7g.80gb@0"), lay("3g.40gb@0"))], [DemandClass("a", 100, 1)])
    with pytest.raises(InputError, match="unique"):
        plan_geometries(pool_of(A100, 1), [DemandClass("a", 100, 1), DemandClass("a", 200, 1)])
    with pytest.raises(ValueError, match="1..1000"):
        DemandClass("z", 0, 1)


# ---------------------------------------------------------------------------- every plan is legal

_LAYOUTS = {m: enumerate_layouts(mig_gpu(m)) for m in ("A100-40GB", A100, "H100-80GB", "H200")}


@st.composite
def slots(draw: st.DrawFn) -> GpuSlot:
    model = draw(st.sampled_from(sorted(_LAYOUTS)))
    layout = tuple(draw(st.sampled_from(_LAYOUTS[model])))
    busy = tuple(i for i in layout if draw(st.booleans()))
    return GpuSlot(f"g{draw(st.integers(0, 10**6))}", model, layout, busy, draw(st.sampled_from([0.0, 300.0, 3600.0])))


DEMAND = st.lists(
    st.tuples(
        st.sampled_from([50, 140, 250, 300, 470, 550, 810]), st.integers(0, 6), st.sampled_from([None, 9.0, 30.0])
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpus=st.lists(slots(), min_size=1, max_size=4),
    demand=DEMAND,
    allow=st.booleans(),
    objective=st.sampled_from(["milli", "requests"]),
)
def test_every_planned_layout_is_legal_and_never_worse_than_one_fixed_geometry(
    gpus: list[GpuSlot], demand: list[tuple[int, int, float | None]], allow: bool, objective: str
) -> None:
    gpus = [GpuSlot(f"gpu-{i}", s.model, s.layout, s.busy, s.drain_s) for i, s in enumerate(gpus)]
    classes = [DemandClass(f"c{i}", m, n, mem) for i, (m, n, mem) in enumerate(demand)]
    opts = PlannerOptions(time_limit_s=3.0, workers=1, allow_drain=allow, objective=objective)  # type: ignore[arg-type]
    plan = plan_geometries(gpus, classes, opts)
    for slot, g in zip(gpus, plan.gpus, strict=True):
        assert is_legal(mig_gpu(slot.model), g.layout), g.layout
        if slot.busy and not allow:
            assert g.action == "keep"
        if g.action == "keep":
            assert g.layout == tuple(sorted(slot.layout, key=lambda i: i.start))
        assert g.action != "drain-repartition" or slot.busy
    for c in classes:
        assert 0 <= plan.fit.served[c.name] <= c.count
    value = plan.fit.served_milli if objective == "milli" else 1000 * plan.fit.served_requests
    assert plan.objective == value - plan.change_cost
    assert plan.objective >= plan.aggregate_objective


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 5),
    model=st.sampled_from(sorted(_LAYOUTS)),
    demand=DEMAND,
    objective=st.sampled_from(["milli", "requests"]),
)
def test_on_idle_pools_the_plan_fits_at_least_as_much_as_every_fixed_geometry(
    n: int, model: str, demand: list[tuple[int, int, float | None]], objective: str
) -> None:
    classes = [DemandClass(f"c{i}", m, k, mem) for i, (m, k, mem) in enumerate(demand)]
    opts = PlannerOptions(time_limit_s=3.0, workers=1, objective=objective, reconfig_s=0.0)  # type: ignore[arg-type]
    plan = plan_geometries(pool_of(model, n), classes, opts)
    for fixed in rank_fixed_geometries(mig_gpu(model), n, classes, objective=objective):  # type: ignore[arg-type]
        if objective == "milli":
            assert plan.fit.served_milli >= fixed.fit.served_milli
        else:
            assert plan.fit.served_requests >= fixed.fit.served_requests
    assert all(is_legal(mig_gpu(model), g.layout) for g in plan.gpus)
