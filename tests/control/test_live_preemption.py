"""Live preemption with an in-process backend: exact victims on a tiny cluster, Gold never a victim,
min-runtime respected, a restart in the middle of a preemption neither stops twice nor loses a job.
The victims are checked against the tiered replay's own stage on the same snapshot (one code path)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from seedance.backends.dispatch import BackendStatus, Dispatcher, DispatchRequest
from seedance.control.db.models import Cluster, DecisionRecord, EventRecord, Job
from seedance.control.service import ControlService
from seedance.control.services import preemption as preemption_mod
from seedance.control.services.scheduling import SchedulingLoop
from seedance.core.catalog import PriceBook
from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Placement
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import make_policy
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.preemption import RunningPod, RunningPods
from seedance.tiers.scheduler import TieredScheduler
from tests.control.helpers import add_nodes, job_row, settings_for, submit

GOLD = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
BRONZE = {"gpu.sla.level": "bronze"}
PRICE = PriceBook().usd_per_gpu_hour("A100-80GB")


class Backend(Dispatcher):
    """A backend in memory: one live run per job, cancels end it, the test ends runs by hand."""

    name = "in-memory"

    def __init__(self) -> None:
        self.log: list[tuple[str, int | str]] = []
        self.live: dict[int, str] = {}
        self.status: dict[str, BackendStatus] = {}
        self.runs: dict[int, int] = {}
        self.fail_cancels = 0

    def dispatch(self, job: DispatchRequest) -> str:
        if job.job_id in self.live:
            return self.live[job.job_id]
        self.runs[job.job_id] = self.runs.get(job.job_id, 0) + 1
        handle = f"mem:{job.job_id}:{self.runs[job.job_id]}"
        self.live[job.job_id] = handle
        self.log.append(("dispatch", job.job_id))
        return handle

    def cancel(self, handle: str) -> None:
        if self.fail_cancels:
            self.fail_cancels -= 1
            raise RuntimeError("backend unreachable")
        self.log.append(("cancel", handle))
        self.status[handle] = BackendStatus.CANCELLED
        self.live.pop(int(handle.split(":")[1]), None)

    def poll(self, handles: Sequence[str]) -> dict[str, BackendStatus]:
        return {h: self.status.get(h, BackendStatus.RUNNING) for h in handles}

    def finish(self, job_id: int) -> None:
        self.status[self.live.pop(job_id)] = BackendStatus.SUCCEEDED

    def cancels(self) -> list[int | str]:
        return [h for kind, h in self.log if kind == "cancel"]


def bronze_guarded(seconds: float) -> TierConfig:
    """The default tiers with borrowed Bronze capacity protected for ``seconds``."""
    tiers = dict(DEFAULT_TIER_CONFIG.tiers)
    tiers["bronze"] = tiers["bronze"].model_copy(update={"reclaim_min_runtime_s": seconds})
    return DEFAULT_TIER_CONFIG.model_copy(update={"tiers": tiers})


def make(url: str, tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> tuple[ControlService, Backend]:
    backend = Backend()
    svc = ControlService(settings_for(url, tier_pools=True, preemption=True), dispatcher=backend,
                         tier_config=tier_config)
    svc.loop.poll_interval_s = 0.0
    add_nodes(svc, count=1, gpus=2, labels=GOLD, prefix="gold")  # gold-0: the Gold pool, 2 GPUs
    add_nodes(svc, count=1, gpus=1, labels=BRONZE, prefix="bronze")  # bronze-0: the Bronze pool, 1 GPU
    return svc, backend


@pytest.fixture
def world(db_url: str) -> Iterator[tuple[ControlService, Backend]]:
    svc, backend = make(db_url)
    yield svc, backend
    svc.close()


def job(svc: ControlService, name: str, tier: str) -> int:
    return submit(svc, name=name, tier=tier, gpus=1, cpu_milli=1000, memory_mib=1024)


def started(svc: ControlService, ran_s: dict[int, float]) -> None:
    """Pretend the running jobs started ``ran_s`` seconds ago."""
    now = dt.datetime.now(dt.UTC)
    with svc.db.write() as s:
        for jid, sec in ran_s.items():
            s.execute(update(Job).where(Job.id == jid).values(started_at=now - dt.timedelta(seconds=sec)))


def decisions(svc: ControlService, jid: int) -> list[DecisionRecord]:
    with svc.db.read() as s:
        rows = list(s.scalars(select(DecisionRecord).where(DecisionRecord.job_id == jid).order_by(DecisionRecord.id)))
        s.expunge_all()
        return rows


def kinds(svc: ControlService, jid: int) -> list[str]:
    with svc.db.read() as s:
        return list(s.scalars(select(EventRecord.kind).where(EventRecord.job_id == jid).order_by(EventRecord.id)))


def fill(svc: ControlService, backend: Backend, tiers: Sequence[str]) -> list[int]:
    """Submit one 1-GPU job per tier and run them: the first Bronze on bronze-0, the rest on gold-0."""
    ids = [job(svc, f"j{i}-{t}", t) for i, t in enumerate(tiers)]
    svc.loop.run_once()
    assert all(job_row(svc, i).status == "running" for i in ids)
    return ids


def snapshot(svc: ControlService) -> list[Any]:
    """The stored running jobs (what the replay check is built from)."""
    with svc.db.read() as s:
        return list(s.execute(select(Job.id, Job.tier, Job.node_name, Job.gpu_indices, Job.cpu_milli,
                                     Job.memory_mib, Job.started_at).where(Job.status == "running")).all())


def replay_victims(rows: list[Any], gold_id: int, now: float, tier_config: TierConfig) -> list[int]:
    """What the tiered replay's scheduler decides on the same snapshot (built by hand)."""
    spec = ClusterSpec((
        NodeSpec(name="gold-0", cpu_milli=64_000, memory_mib=512_000, gpu_count=2, gpu_model="A100-80GB",
                 labels=GOLD),
        NodeSpec(name="bronze-0", cpu_milli=64_000, memory_mib=512_000, gpu_count=1, gpu_model="A100-80GB",
                 labels=BRONZE),
    ))
    state, running = ClusterState(spec), RunningPods()
    for jid, tier, node, gpus, cpu, mem, start in rows:
        p = Placement(state.node_index(node), tuple(gpus), 1000, cpu, mem)
        state.apply(p)
        t = tier_config.tiers[tier]
        running.add(RunningPod(jid, tier, p, start.timestamp(), borrowed=(node == "gold-0") != (tier == "gold"),
                               checkpoint_s=t.checkpoint_interval_s, usd_per_gpu_hour=PRICE))
    d = TieredScheduler(make_policy("best-fit"), tier_config).decide(
        state, ResourceRequest(cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=1000),
        gold_id, tier="gold", running=running, now=now)
    return [p.victim for p in d.preemptions]


def test_gold_preempts_the_cheapest_eligible_bronze_which_is_requeued_and_finishes(
    world: tuple[ControlService, Backend],
) -> None:
    svc, backend = world
    b1, b2, b3 = fill(svc, backend, ["bronze", "bronze", "bronze"])
    assert [job_row(svc, i).node_name for i in (b1, b2, b3)] == ["bronze-0", "gold-0", "gold-0"]
    started(svc, {b1: 50.0, b2: 1000.0, b3: 400.0})  # b3 lost least work: the cheapest of the gold node
    before = snapshot(svc)
    g = job(svc, "gold-job", "gold")
    svc.loop.run_once()

    gold = job_row(svc, g)
    assert (gold.status, gold.node_name, gold.attempt) == ("running", "gold-0", 1)
    victim = job_row(svc, b3)
    assert (victim.status, victim.attempt, victim.node_name, victim.dispatch_handle) == ("pending", 1, None, None)
    assert f"preempted by gold job 'gold-job' (id {g})" in victim.status_reason
    assert victim.status_reason.startswith("re-queued after attempt 1 was stopped")
    assert backend.cancels() == [f"mem:{b3}:1"]
    assert backend.log.index(("cancel", f"mem:{b3}:1")) < backend.log.index(("dispatch", g))  # stop, then start
    assert job_row(svc, b2).status == "running" and job_row(svc, b1).status == "running"

    # the decisions: the preemptor's plan, the victim's "preempted" record naming whom and why
    plan = decisions(svc, g)[-1]
    assert plan.outcome == "bind" and plan.explanation["stage"] == "preempt"
    pre = plan.explanation["preemption"]
    assert [v["pod"] for v in pre["victims"]] == [b3] and pre["node"] == "gold-0"
    assert pre["victims"][0]["kind"] == "reclaim"  # a borrower on the Gold pool
    assert pre["victims"][0]["cost_usd"] == pytest.approx(400.0 / 3600 * PRICE + 0.1, abs=5 * PRICE / 3600)
    rec = [d for d in decisions(svc, b3) if d.outcome == "preempted"]
    assert len(rec) == 1 and rec[0].explanation["by_job"] == g and rec[0].explanation["by_tier"] == "gold"
    assert rec[0].node_name == "gold-0" and rec[0].explanation["attempt"] == 1
    assert rec[0].reason.startswith(f"preempted by gold job 'gold-job' (id {g}): reclaim bronze pod {b3}: ran ")
    assert kinds(svc, b3)[-3:] == ["job.started", "job.preempted", "job.requeued"]
    assert "job.preempting" in kinds(svc, g)

    # the replay's own stage on the same snapshot picks the same victim
    t_decision = plan.created_at.timestamp()
    assert replay_victims(before, g, t_decision, DEFAULT_TIER_CONFIG) == [b3]

    # b2 ends: the re-queued job is placed again (attempt 2) and finishes; nothing is lost
    backend.finish(b2)
    svc.loop.run_once()
    svc.loop.run_once()
    again = job_row(svc, b3)
    assert (again.status, again.attempt, again.node_name) == ("running", 2, "gold-0")
    for jid in (b1, b3, g):
        backend.finish(jid)
    svc.loop.run_once()
    assert sorted(job_row(svc, i).status for i in (b1, b2, b3, g)) == ["succeeded"] * 4


def test_gold_is_never_a_victim_even_when_it_is_the_cheapest(world: tuple[ControlService, Backend]) -> None:
    svc, backend = world
    b1, g0, b2 = fill(svc, backend, ["bronze", "gold", "bronze"])
    assert job_row(svc, g0).node_name == "gold-0" and job_row(svc, b2).node_name == "gold-0"
    started(svc, {b1: 50.0, g0: 5.0, b2: 3000.0})  # g0 would cost least, but Gold is never preempted
    g1 = job(svc, "g1", "gold")
    svc.loop.run_once()
    assert job_row(svc, g1).status == "running" and job_row(svc, g0).status == "running"
    assert backend.cancels() == [f"mem:{b2}:1"]
    # a third Gold job: only Gold runs on the Gold pool now, so it waits and nothing is stopped
    g2 = job(svc, "g2", "gold")
    svc.loop.run_once()
    row = job_row(svc, g2)
    assert row.status == "pending" and "2 never preempted" in row.status_reason
    assert backend.cancels() == [f"mem:{b2}:1"]


def test_min_runtime_protects_a_run_and_the_job_is_retried_when_it_ends(db_url: str) -> None:
    svc, backend = make(db_url, bronze_guarded(300.0))
    try:
        b1, b2, b3 = fill(svc, backend, ["bronze", "bronze", "bronze"])
        started(svc, {b1: 50.0, b2: 1000.0, b3: 100.0})  # b3 is cheaper but still protected
        g = job(svc, "gold-job", "gold")
        svc.loop.run_once()
        assert job_row(svc, g).status == "running"
        assert backend.cancels() == [f"mem:{b2}:1"]
        v = [d for d in decisions(svc, b2) if d.outcome == "preempted"][0]
        assert v.explanation["victim"]["min_runtime_s"] == 300.0 and v.explanation["victim"]["ran_s"] >= 1000.0
        assert v.explanation["plan"]["protected"]["min_runtime"] == 1

        # every candidate protected: the Gold job waits, then is retried when the first protection ends
        b4 = job(svc, "b4", "bronze")  # re-queued b2 and b4 wait for capacity
        backend.finish(b3)
        svc.loop.run_once()
        svc.loop.run_once()
        on_gold = [i for i in (b2, b4) if job_row(svc, i).status == "running"]
        assert len(on_gold) == 1 and job_row(svc, on_gold[0]).node_name == "gold-0"
        started(svc, {on_gold[0]: 299.0})
        handle = job_row(svc, on_gold[0]).dispatch_handle
        g2 = job(svc, "g2", "gold")
        svc.loop.run_once()
        row = job_row(svc, g2)
        assert row.status == "pending" and "1 inside min-runtime" in row.status_reason
        assert len(backend.cancels()) == 1
        with svc.db.read() as s:
            cv = s.scalar(select(Cluster.capacity_version))
        time.sleep(1.2)
        svc.loop.run_once()  # the timer fires: capacity version bumped, the pending jobs are tried again
        with svc.db.read() as s:
            assert s.scalar(select(Cluster.capacity_version)) == cv + 1
        svc.loop.run_once()
        assert job_row(svc, g2).status == "running"
        assert backend.cancels()[-1] == handle
    finally:
        svc.close()


def _restart(svc: ControlService, backend: Backend) -> SchedulingLoop:
    """A new scheduling loop on the same store and backend (the old process died)."""
    loop = SchedulingLoop(svc.db, scorer=svc.scorer, dispatcher=backend, tier_pools=True, preemption=True)
    loop.poll_interval_s = 0.0
    return loop


@pytest.mark.parametrize("crash", ["before-stop", "after-stop"])
def test_a_restart_mid_preemption_stops_once_and_loses_no_job(
    crash: str, world: tuple[ControlService, Backend], monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc, backend = world
    b1, b2, b3 = fill(svc, backend, ["bronze", "bronze", "bronze"])
    started(svc, {b1: 50.0, b2: 1000.0, b3: 400.0})
    g = job(svc, "gold-job", "gold")

    def dies(*args: Any) -> int:
        raise RuntimeError("process killed between the stop and the re-queue")

    with monkeypatch.context() as mp:
        if crash == "before-stop":
            backend.fail_cancels = 1
        else:
            mp.setattr(preemption_mod, "_requeue", dies)
        with pytest.raises(RuntimeError):
            svc.loop.run_once()
    assert job_row(svc, b3).status == "preempted" and job_row(svc, g).status == "bound"
    assert ("dispatch", g) not in backend.log  # the preemptor never starts before its victim is stopped
    assert backend.cancels() == ([] if crash == "before-stop" else [f"mem:{b3}:1"])

    loop = _restart(svc, backend)
    loop.run_once()
    loop.run_once()
    assert backend.cancels() == [f"mem:{b3}:1"]  # stopped exactly once
    assert backend.log.count(("dispatch", g)) == 1
    assert kinds(svc, b3).count("job.requeued") == 1 and kinds(svc, b3).count("job.preempted") == 1
    assert len([d for d in decisions(svc, b3) if d.outcome == "preempted"]) == 1
    assert job_row(svc, g).status == "running" and job_row(svc, b3).status == "pending"

    for jid in (b1, b2, g):
        backend.finish(jid)
    for _ in range(3):
        loop.run_once()
    backend.finish(b3)
    loop.run_once()
    with svc.db.read() as s:
        statuses = sorted(s.scalars(select(Job.status)))
    assert statuses == ["succeeded"] * 4  # 4 submitted, 4 finished
    assert job_row(svc, b3).attempt == 2


def svc_db(tmp_path: Path) -> Any:
    from seedance.control.db.session import Database

    return Database(f"sqlite:///{tmp_path / 'loop.db'}")


def test_preemption_needs_tier_pools(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs tier_pools"):
        settings_for(f"sqlite:///{tmp_path / 's.db'}", preemption=True)
    with pytest.raises(ValueError, match="needs tier_pools"):
        SchedulingLoop(svc_db(tmp_path), scorer=None, preemption=True)  # type: ignore[arg-type]


def test_a_preemptor_cancelled_before_the_commit_drops_the_plan_and_stops_nothing(
    world: tuple[ControlService, Backend], monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc, backend = world
    b1, b2, b3 = fill(svc, backend, ["bronze", "bronze", "bronze"])
    started(svc, {b1: 50.0, b2: 1000.0, b3: 400.0})
    g = job(svc, "gold-job", "gold")
    b4 = job(svc, "b4", "bronze")  # decided after the preemption in the same cycle
    decide = preemption_mod.CyclePreemption.decide

    def then_cancel(self: Any, *args: Any, **kw: Any) -> Any:
        d = decide(self, *args, **kw)
        if d.preemptions:  # the user cancels the Gold job while the cycle is deciding
            with svc.db.write() as s:
                s.execute(update(Job).where(Job.id == g).values(status="cancelled", version=Job.version + 1))
        return d

    with monkeypatch.context() as mp:
        mp.setattr(preemption_mod.CyclePreemption, "decide", then_cancel)
        stats = svc.loop.run_once()
    assert stats[0].conflicts == 1 and stats[0].bound == 0
    assert [job_row(svc, i).status for i in (b1, b2, b3, b4)] == ["running", "running", "running", "pending"]
    assert backend.cancels() == []
    svc.loop.run_once()
    assert [job_row(svc, i).status for i in (b1, b2, b3, b4)] == ["running", "running", "running", "pending"]
    assert backend.cancels() == [] and ("dispatch", b4) not in backend.log
