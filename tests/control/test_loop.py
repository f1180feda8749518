"""The live scheduling loop: same framework as the simulator, explanations, concurrency, restarts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from seedance.backends.dispatch import TimerDispatcher
from seedance.control.costing import GpuHoursPrice
from seedance.control.db.models import DecisionRecord, EventRecord, Job, Node
from seedance.control.schemas import NodeUpdate, PolicyCreate
from seedance.control.service import ControlService
from seedance.control.services import clusters, jobs, policies
from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.lifecycle import NodeStatus
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import FilterPlugin, Scheduler, make_policy
from tests.control.helpers import ADMIN_TOKEN, add_nodes, job_row, submit

Svc = Callable[..., ControlService]


def check_no_overcommit(svc: ControlService) -> dict[str, list[int]]:
    """Every GPU ≤ 1000 milli and CPU/memory ≤ capacity, from the stored placements."""
    with svc.db.read() as s:
        nodes = {n.name: n for n in s.scalars(select(Node))}
        per_gpu = {name: [0] * n.gpu_count for name, n in nodes.items()}
        cpu = dict.fromkeys(nodes, 0)
        for job in s.scalars(select(Job).where(Job.status.in_(("bound", "running")))):
            assert job.node_name in nodes, f"job {job.id} bound to unknown node {job.node_name}"
            cpu[job.node_name] += job.cpu_milli
            for g in job.gpu_indices:
                per_gpu[job.node_name][g] += job.placed_gpu_milli or job.gpu_milli
    for name, row in per_gpu.items():
        assert all(x <= 1000 for x in row), f"{name} over-allocated: {row}"
        assert cpu[name] <= nodes[name].cpu_milli
    return per_gpu


def test_exact_best_fit_placements_on_a_tiny_cluster(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=8, prefix="big")
    add_nodes(svc, count=1, gpus=4, model="T4", prefix="small")
    a = submit(svc, gpus=1, cpu_milli=1000)
    b = submit(svc, gpus=0.5, cpu_milli=1000)
    c = submit(svc, gpus=4, cpu_milli=1000)
    stats = svc.loop.run_once()
    assert [(x.considered, x.bound) for x in stats] == [(3, 3)]
    # best-fit: least leftover CPU+GPU. 1 GPU → the 4-GPU node; the share → the same node's next idle
    # GPU (lowest index among equally free); 4 whole GPUs no longer fit there → the 8-GPU node.
    placed = {j: (job_row(svc, j).node_name, job_row(svc, j).gpu_indices) for j in (a, b, c)}
    assert placed == {a: ("small-0", [0]), b: ("small-0", [1]), c: ("big-0", [0, 1, 2, 3])}
    assert all(job_row(svc, j).status == "running" for j in (a, b, c))  # noop dispatcher started them


def test_placements_equal_the_simulator_framework_on_the_same_inputs(make_service: Svc, sqlite_url: str) -> None:
    """The loop is Scheduler.decide over a ClusterState of the stored nodes, nothing else."""
    svc = make_service(sqlite_url)
    add_nodes(svc, count=3, gpus=8, prefix="a")
    add_nodes(svc, count=2, gpus=4, model="T4", prefix="t")
    rng = np.random.default_rng(7)
    shapes = [(0.25, 2000), (0.5, 4000), (1, 8000), (2, 16000), (4, 8000), (8, 32000)]
    reqs = [shapes[int(i)] for i in rng.integers(len(shapes), size=40)]
    ids = [submit(svc, gpus=g, cpu_milli=cpu, memory_mib=1024, tier="bronze") for g, cpu in reqs]
    svc.loop.run_once()
    spec = ClusterSpec(tuple(
        [NodeSpec(f"a-{i}", 64_000, 512_000, 8, "A100-80GB") for i in range(3)]
        + [NodeSpec(f"t-{i}", 64_000, 512_000, 4, "T4") for i in range(2)]
    ))
    state = ClusterState(spec)
    sched = Scheduler(make_policy("best-fit"))
    for jid, (g, cpu) in zip(ids, reqs, strict=True):
        k, milli = (1, round(g * 1000)) if g < 1 else (int(g), 1000)
        d = sched.decide(state, ResourceRequest(cpu_milli=cpu, memory_mib=1024, num_gpu=k, gpu_milli=milli), jid)
        row = job_row(svc, jid)
        if d.bound:
            assert d.placement is not None
            state.apply(d.placement)
            assert (row.node_name, tuple(row.gpu_indices)) == (spec.nodes[d.placement.node].name, d.placement.gpus)
        else:
            assert row.status == "pending" and row.node_name is None


def test_every_pending_job_gets_a_decision_with_an_explanation(make_service: Svc, db_url: str) -> None:
    svc = make_service(db_url)
    add_nodes(svc, count=1, gpus=2)
    fits = submit(svc, gpus=2)
    waits = submit(svc, gpus=2)
    never = submit(svc, gpus=16)
    svc.loop.run_once()
    assert job_row(svc, fits).status == "running"
    assert job_row(svc, waits).status == "pending"
    assert job_row(svc, never).status == "unschedulable"
    with svc.db.read() as s:
        decisions = {d.job_id: d for d in s.scalars(select(DecisionRecord))}
    assert set(decisions) == {fits, waits, never}
    assert decisions[fits].outcome == "bind" and decisions[fits].node_name == "node-0"
    assert decisions[fits].explanation["policy"] == "best-fit"
    assert decisions[waits].outcome == "pending"
    assert decisions[waits].explanation["rejected_by"]["GpuFit"] == 1
    assert "no node fits now" in decisions[waits].reason
    assert decisions[never].outcome == "reject"
    # a second cycle with nothing new neither re-decides nor logs again
    svc.loop.run_once()
    with svc.db.read() as s:
        assert len(s.scalars(select(DecisionRecord)).all()) == 3


def test_cancel_gives_gpus_back_and_the_waiting_job_binds(make_service: Svc, db_url: str) -> None:
    svc = make_service(db_url)
    add_nodes(svc, count=1, gpus=4)
    first = submit(svc, gpus=4)
    second = submit(svc, gpus=4)
    svc.loop.run_once()
    assert job_row(svc, second).status == "pending"
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        jobs.cancel_job(session=s, principal=me, job_id=first)
    svc.loop.run_once()
    assert job_row(svc, first).status == "cancelled"
    row = job_row(svc, second)
    assert (row.status, row.node_name, row.gpu_indices) == ("running", "node-0", [0, 1, 2, 3])
    check_no_overcommit(svc)


def test_unschedulable_job_is_retried_when_a_node_is_added(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=4)
    big = submit(svc, gpus=8)
    svc.loop.run_once()
    assert job_row(svc, big).status == "unschedulable"
    add_nodes(svc, count=1, gpus=8, prefix="large")
    assert job_row(svc, big).status == "pending"
    svc.loop.run_once()
    assert job_row(svc, big).node_name == "large-0"


def test_cordoned_nodes_get_nothing_and_uncordon_retries(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=2, gpus=8)
    me = svc.authenticate(ADMIN_TOKEN)
    for name in ("node-0", "node-1"):
        with svc.db.write() as s:
            clusters.update_node(session=s, principal=me, cluster_name="default", node_name=name,
                                 data=NodeUpdate(status=NodeStatus.CORDONED))
    j = submit(svc, gpus=1)
    svc.loop.run_once()
    assert job_row(svc, j).status == "pending"
    with svc.db.write() as s:
        clusters.update_node(session=s, principal=me, cluster_name="default", node_name="node-1",
                             data=NodeUpdate(status=NodeStatus.READY))
    svc.loop.run_once()
    assert job_row(svc, j).node_name == "node-1"


def test_state_is_rebuilt_from_the_store_after_a_restart(make_service: Svc, db_url: str) -> None:
    first = make_service(db_url)
    add_nodes(first, count=1, gpus=8)
    a = submit(first, gpus=3)
    first.loop.run_once()
    first.close()
    second = make_service(db_url)  # a new process: nothing in memory
    b = submit(second, gpus=5)
    c = submit(second, gpus=1)
    second.loop.run_once()
    assert job_row(second, a).gpu_indices == [0, 1, 2]
    assert job_row(second, b).gpu_indices == [3, 4, 5, 6, 7]
    assert job_row(second, c).status == "pending"
    check_no_overcommit(second)


def test_two_schedulers_on_one_store_never_double_book(make_service: Svc, db_url: str) -> None:
    """Two loops (two engines: as two processes would) racing over one cluster."""
    one = make_service(db_url)
    two = make_service(db_url)
    add_nodes(one, count=4, gpus=8)
    sizes = [0.5, 1, 2, 3, 0.25, 4] * 12
    ids = [submit(one, gpus=g) for g in sizes]
    errors: list[BaseException] = []

    def spin(svc: ControlService) -> None:
        try:
            for _ in range(15):
                svc.loop.run_once()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=spin, args=(svc,)) for svc in (one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    per_gpu = check_no_overcommit(one)
    placed = sum(job_row(one, j).num_gpu * job_row(one, j).gpu_milli for j in ids
                 if job_row(one, j).status == "running")
    assert placed == sum(sum(row) for row in per_gpu.values()) > 0
    # the cluster (32 GPUs) cannot hold all 123 GPUs asked; what is left waits with a reason
    assert all(job_row(one, j).status in ("running", "pending") for j in ids)


def test_filter_plugins_apply_per_tier(make_service: Svc, sqlite_url: str) -> None:
    class GoldOnly(FilterPlugin):
        name = "GoldNodes"

        def mask(self, view: ClusterState, req: ResourceRequest) -> Any:
            return view.label_mask("gpu.sla.level", ["gold"])

    svc = make_service(sqlite_url, filters=lambda tier: [GoldOnly()] if tier == "gold" else [])
    add_nodes(svc, count=1, gpus=4, prefix="plain", labels={"gpu.sla.level": "bronze"})
    add_nodes(svc, count=1, gpus=8, prefix="gold", labels={"gpu.sla.level": "gold"})
    g = submit(svc, gpus=1, tier="gold")
    b = submit(svc, gpus=1, tier="bronze")
    svc.loop.run_once()
    assert job_row(svc, g).node_name == "gold-0"  # best-fit alone would pick the tighter plain-0
    assert job_row(svc, b).node_name == "plain-0"
    with svc.db.read() as s:
        d = s.scalars(select(DecisionRecord).where(DecisionRecord.job_id == g)).one()
    assert "GoldNodes" in d.explanation["rejected_by"]


def test_priority_queue_order_serves_gold_before_earlier_bronze(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=4)
    bronze = submit(svc, gpus=4, tier="bronze")
    gold = submit(svc, gpus=4, tier="gold")
    svc.loop.run_once()
    assert job_row(svc, gold).status == "running"
    assert job_row(svc, bronze).status == "pending"


def test_the_policy_in_force_decides(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=3, gpus=8)
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        policies.create_policy(session=s, principal=me, validator=svc.validator, data=PolicyCreate(
            name="frag", placement="fgd", config_yaml="spec: {queueOrder: fifo}\n", enabled=True))
    ids = [submit(svc, gpus=g) for g in (0.5, 1, 2, 0.25)]
    svc.loop.run_once()
    with svc.db.read() as s:
        used = {d.policy for d in s.scalars(select(DecisionRecord))}
    assert used == {"fgd"}
    assert all(job_row(svc, j).status == "running" for j in ids)
    check_no_overcommit(svc)


def test_timer_dispatcher_finishes_jobs_and_frees_their_gpus(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url, dispatcher=TimerDispatcher(speedup=3600 * 1e6))  # an hour in 3.6 ms
    svc.loop.poll_interval_s = 0.0
    add_nodes(svc, count=1, gpus=8)
    a = submit(svc, gpus=8, duration_hours=1)
    b = submit(svc, gpus=8, duration_hours=1)
    svc.loop.run_once()  # a binds and starts; b waits
    import time

    time.sleep(0.01)
    svc.loop.run_once()  # poll: a succeeded, capacity version moves
    svc.loop.run_once()  # b binds on the freed GPUs
    assert job_row(svc, a).status == "succeeded"
    assert job_row(svc, b).status in ("running", "succeeded")
    with svc.db.read() as s:
        kinds = [e.kind for e in s.scalars(select(EventRecord).where(EventRecord.job_id == a).order_by(EventRecord.id))]
    assert kinds == ["job.submitted", "job.bound", "job.started", "job.succeeded"]


def test_cost_score_is_refined_with_the_bound_gpu_model(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=1, model="T4", prefix="t4")
    add_nodes(svc, count=1, gpus=8, model="A100-80GB", prefix="a100")
    first = submit(svc, gpus=1, duration_hours=10)
    second = submit(svc, gpus=1, duration_hours=10)
    t4, a100 = GpuHoursPrice().catalog["T4"].price_usd_per_hour, GpuHoursPrice().catalog["A100-80GB"].price_usd_per_hour
    assert job_row(svc, first).cost_score == pytest.approx(10 * t4)  # cheapest model present, at submission
    svc.loop.run_once()
    assert job_row(svc, first).node_name == "t4-0"
    assert job_row(svc, first).cost_score == pytest.approx(10 * t4)
    assert job_row(svc, second).node_name == "a100-0"
    assert job_row(svc, second).cost_score == pytest.approx(10 * a100)
    assert "A100-80GB" in job_row(svc, second).cost_basis


# ------------------------------------------------------------------------------------- property
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.sampled_from([0.25, 0.5, 1, 2, 4, 8]), st.sampled_from(["gold", "bronze"])),
        st.tuples(st.just("cancel"), st.integers(0, 30), st.just("")),
        st.tuples(st.just("cordon"), st.integers(0, 2), st.sampled_from(["cordoned", "ready"])),
        st.tuples(st.just("cycle"), st.integers(0, 1), st.just("")),
    ),
    min_size=5, max_size=30,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_property_no_overcommit_under_any_interleaving(
    ops: list[tuple[str, Any, str]], make_service: Svc, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever the order of submissions, cancellations, cordons and cycles of two schedulers,
    no GPU is ever allocated beyond 1000 milli, and the stored placements rebuild a valid state."""
    from seedance.control.errors import Conflict
    from seedance.core.errors import InvalidTransition

    url = f"sqlite:///{tmp_path_factory.mktemp('prop') / 'p.db'}"
    loops = [make_service(url), make_service(url)]
    svc = loops[0]
    add_nodes(svc, count=3, gpus=4)
    me = svc.authenticate(ADMIN_TOKEN)
    ids: list[int] = []
    for op, arg, extra in ops:
        if op == "submit":
            ids.append(submit(svc, gpus=arg, tier=extra))
        elif op == "cancel" and ids:
            target = ids[arg % len(ids)]
            done = job_row(svc, target).status == "cancelled"
            with pytest.raises(Conflict) if done else _nothing(), svc.db.write() as s:
                jobs.cancel_job(session=s, principal=me, job_id=target)
        elif op == "cordon":
            try:
                with svc.db.write() as s:
                    clusters.update_node(session=s, principal=me, cluster_name="default", node_name=f"node-{arg}",
                                         data=NodeUpdate(status=NodeStatus(extra)))
            except InvalidTransition:
                pass
        elif op == "cycle":
            loops[arg].loop.run_once()
        check_no_overcommit(svc)
    fresh = make_service(url)
    fresh.loop.run_once()  # a third scheduler rebuilding from the store agrees and stays valid
    check_no_overcommit(fresh)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


def test_tier_pools_put_gold_on_gold_exclusive_nodes_as_whole_gpus(make_service: Svc, sqlite_url: str) -> None:
    """With tier_pools, the tiers' TieredScheduler decides: own pool first, then a borrowed one."""
    from seedance.control.settings import ControlSettings
    from tests.control.helpers import settings_for

    svc = ControlService(ControlSettings(**{**settings_for(sqlite_url).model_dump(), "tier_pools": True,
                                            "bootstrap_token": ADMIN_TOKEN}))
    try:
        add_nodes(svc, count=1, gpus=4, prefix="plain", labels={})  # in no pool
        add_nodes(svc, count=1, gpus=2, prefix="bronze", model="T4", labels={"gpu.sla.level": "bronze"})
        add_nodes(svc, count=1, gpus=8, prefix="gold", labels={"gpu.sla.level": "gold", "gpu.mode": "exclusive"})
        share = submit(svc, gpus=0.25, tier="gold")
        b1, b2 = submit(svc, gpus=2, tier="bronze"), submit(svc, gpus=2, tier="bronze")
        silver = submit(svc, gpus=1, tier="silver", gpu_types=["T4"])
        svc.loop.run_once()
        g = job_row(svc, share)
        assert (g.node_name, g.gpu_indices, g.gpu_milli, g.placed_gpu_milli) == ("gold-0", [0], 250, 1000)
        assert job_row(svc, b1).node_name == "bronze-0"  # its own pool first
        assert job_row(svc, b2).node_name == "gold-0"  # then borrowed: bronze may borrow gold nodes
        assert job_row(svc, silver).status == "unschedulable"  # no silver pool; the gold pool it borrows has no T4
        with svc.db.read() as s:
            d = {x.job_id: x for x in s.scalars(select(DecisionRecord))}
        assert d[share].explanation["stage"] == "own-pool"
        assert d[share].explanation["request"]["rounded_up_from_milli"] == 250
        assert d[b2].explanation["stage"] == "borrow" and d[b2].explanation["borrowed"] is True
        assert d[silver].reason == "silver: no node of its pool(s) could ever host the request"
        per_gpu = check_no_overcommit(svc)
        assert per_gpu["gold-0"][0] == 1000  # the share holds the whole GPU in the rebuilt state too
        svc.loop._caches.clear()  # rebuild from the store: the placed milli is what is re-applied
        add_nodes(svc, count=1, gpus=8, prefix="gold2", labels={"gpu.sla.level": "gold", "gpu.mode": "exclusive"})
        svc.loop.run_once()
        assert check_no_overcommit(svc)["gold-0"][0] == 1000
    finally:
        svc.close()


def test_costmodel_scorer_prices_energy_carbon_and_delay(make_service: Svc, sqlite_url: str) -> None:
    from seedance.control.costing import CostInput, CostModelScorer

    svc = make_service(sqlite_url, cost_scorer="costmodel")  # region: the settings' default, US-CAL-CISO
    scorer = svc.scorer
    assert isinstance(scorer, CostModelScorer) and svc.loop.scorer is scorer
    add_nodes(svc, count=1, gpus=8)
    j = submit(svc, gpus=4, duration_hours=6, flexibility_hours=12, tier="bronze")
    row = job_row(svc, j)
    direct = scorer.estimate(CostInput(num_gpu=4, gpu_milli=1000, gpu_types=(), cluster_models=("A100-80GB",),
                                       duration_hours=6, tier="bronze", flexibility_hours=12))
    assert row.cost_score == pytest.approx(direct.score) and row.cost_score > 0
    assert row.cost_basis.startswith("costmodel US-CAL-CISO: energy+carbon+delay")
    svc.loop.run_once()
    assert job_row(svc, j).cost_basis.startswith("costmodel US-CAL-CISO")


def test_cost_score_queue_order_binds_the_cheapest_job_first(make_service: Svc, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    add_nodes(svc, count=1, gpus=4)
    me = svc.authenticate(ADMIN_TOKEN)
    with svc.db.write() as s:
        policies.create_policy(session=s, principal=me, validator=svc.validator, data=PolicyCreate(
            name="cheap-first", placement="best-fit", config_yaml="spec: {queueOrder: cost-score}\n", enabled=True))
    long_job = submit(svc, gpus=4, tier="bronze", duration_hours=5)
    short_job = submit(svc, gpus=4, tier="bronze", duration_hours=1)
    middle_job = submit(svc, gpus=4, tier="bronze", duration_hours=3)
    costs = [job_row(svc, j).cost_score for j in (long_job, short_job, middle_job)]
    assert costs[1] < costs[2] < costs[0]  # gpu-hours x list price
    svc.loop.run_once()
    assert [job_row(svc, j).status for j in (long_job, short_job, middle_job)] == ["pending", "running", "pending"]
    with svc.db.read() as s:
        tried = [(d.job_id, d.outcome) for d in s.scalars(select(DecisionRecord).order_by(DecisionRecord.id))]
    assert tried == [(short_job, "bind"), (middle_job, "pending"), (long_job, "pending")]  # cheapest first
