"""Live preemption: the tier preemption stage of the replay, applied to the stored cluster.

NOTE(seedance): how the live loop preempts, and why a restart at any point loses nothing.
  * Decide (in the loop's decide step, only for a job that could not be placed): the replay's
    ``TieredScheduler`` with the tiers' full rights (own pool, borrow, then ``select_victims``)
    over the loop's ``ClusterState`` and a ``RunningPods`` built from the stored running jobs
    (start = ``started_at``; a job on a node outside its own pool is a borrower, protected for
    ``reclaim_min_runtime_s``; price = the node's GPU model in the ``PriceBook``). So victims are
    chosen exactly as in the replay: explained, never a non-preemptible tier (Gold), never inside
    min-runtime, cheapest set first. Victims are released from the cycle's state at once, so a
    later decision of the same cycle never counts them twice.
  * Commit (the loop's bind transaction): with the preemptor's bind, each victim still running
    the same run goes running -> preempted (``status_reason`` names the preemptor and why), one
    ``preempted`` decision (by whom, cost, the victim's account, the plan) and one
    ``job.preempted`` event. From then on the victim holds nothing in the store.
  * Stop (before the loop dispatches anything): every preempted job that still has a dispatch
    handle is a stop in progress. Poll it; a run that is still live is stopped with
    ``Dispatcher.cancel`` (after ``cancel`` returns, the backend starts a new run on the next
    dispatch of the job); then, in its own transaction, the job goes preempted -> pending with its
    handle cleared (``job.requeued``, the stopped attempt recorded). A run that ended on its own
    before the stop reached it keeps its end (succeeded or failed). The preemptor's dispatch
    comes after, in the same cycle, so it never races the run it replaces.
  * Restart: the store alone says what is in progress. Crash after the commit: the next loop
    polls, stops, re-queues. Crash after the stop: the poll says the run is over, so it is not
    stopped twice, only re-queued. The preemptor is bound, so no second plan is made for it.
  * Retry: a job pending only because victims are inside their protection is retried when the
    first protection ends (``retry_at``): the cluster's capacity version is bumped then (and once
    at the start of a loop, since that timer lives in memory).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from seedance.backends.dispatch import BackendStatus, Dispatcher
from seedance.control.db.models import ALLOC_MILLI, DecisionRecord, EventRecord, Job, utcnow
from seedance.control.db.session import Database
from seedance.control.services import clusters as cluster_svc
from seedance.core.catalog import PriceBook
from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision, Outcome, Placement
from seedance.core.errors import SeedanceError
from seedance.core.lifecycle import JOB_TRANSITIONS, JobStatus, transition
from seedance.core.resources import ResourceRequest
from seedance.scheduling.framework import PlacementPolicy
from seedance.tiers.config import TierConfig
from seedance.tiers.filters import TierFilter
from seedance.tiers.preemption import RunningPod, RunningPods
from seedance.tiers.scheduler import TieredScheduler

log = logging.getLogger("seedance.control.preemption")

#: ``decisions.outcome`` of the record written for a victim.
PREEMPTED_OUTCOME = "preempted"
_ANY = ResourceRequest(cpu_milli=0, memory_mib=0)
_ENDED_ON_ITS_OWN = {BackendStatus.SUCCEEDED: JobStatus.SUCCEEDED, BackendStatus.FAILED: JobStatus.FAILED}
_STOPPED = (BackendStatus.CANCELLED, BackendStatus.PREEMPTED)


class LivePreemption:
    """The live loop's preemption: plans with the replay's stage, commits, stops and re-queues.

    Args:
        tier_config: The tiers with their full rights (``may_preempt``, protections, penalties).
        prices: GPU prices (the cost of a victim's lost work).
        explain: Add filter counts and runner-up nodes to the decisions.
        clock: Wall clock (seconds) of the retry timer.
    """

    def __init__(
        self, tier_config: TierConfig, *, prices: PriceBook | None = None, explain: bool = True,
        clock: Any = time.time,
    ) -> None:
        self.tier_config = tier_config
        self.prices = prices or PriceBook()
        self.explain = explain
        self.clock = clock
        self.preempting_tiers = frozenset(n for n, s in tier_config.tiers.items() if s.may_preempt)
        self._sched: TieredScheduler | None = None
        self._retry: dict[int, float] = {}  # cluster id -> earliest time a protection ends
        self._seen: set[int] = set()  # clusters whose pending jobs were retried once since start

    def scheduler(self, policy: PlacementPolicy) -> TieredScheduler:
        """The replay's tiered scheduler with preemption on, over ``policy`` (kept while it is the same)."""
        if self._sched is None or self._sched.policy is not policy:
            self._sched = TieredScheduler(policy, self.tier_config, explain=self.explain)
        return self._sched

    def cycle(self, db: Database, cluster_id: int, policy: PlacementPolicy) -> CyclePreemption:
        """The preemption stage of one decide step of one cluster."""
        return CyclePreemption(self, db, cluster_id, self.scheduler(policy))

    def note_retry(self, cluster_id: int, at: float) -> None:
        """Retry the cluster's pending jobs at ``at`` (a protection ends then)."""
        self._retry[cluster_id] = min(at, self._retry.get(cluster_id, at))

    # -------------------------------------------------------------------------------- commit
    @staticmethod
    def intact(plan: Iterable[tuple[Any, Decision, int]], current: Mapping[int, tuple[int, str]]) -> bool:
        """Every preemptor of ``plan`` is still the pending job it was (else the plan must be dropped).

        Binds decided after a preemption may use what its victims give back; if the preemptor's
        bind were skipped, its victims would keep running under them.
        """
        return all(
            current.get(job.id) == (job.version, JobStatus.PENDING.value)
            for job, d, _ in plan if d.preemptions
        )

    def commit(
        self, s: Session, cluster_id: int, binds: Iterable[tuple[int, int, str, Decision]], policy: str,
        now: Any,
    ) -> bool:
        """Mark the victims of the binds written in this transaction preempted; False if one had left.

        Args:
            s: The loop's commit transaction.
            cluster_id: The cluster.
            binds: ``(job id, tenant id, tier, decision)`` of every bind written, with or without victims.
            policy: Placement policy name (decision records).
            now: Commit time.
        """
        intact = True
        for jid, tenant_id, tier, d in binds:
            if not d.preemptions:
                continue
            name = s.scalar(select(Job.name).where(Job.id == jid))
            victims_json = {v["pod"]: v for v in d.explanation.get("preemption", {}).get("victims", [])}
            stopped: list[int] = []
            for p in d.preemptions:
                row = s.execute(
                    select(Job.tenant_id, Job.version, Job.status, Job.dispatch_handle, Job.node_name,
                           Job.gpu_indices, Job.attempt).where(Job.id == p.victim)
                ).first()
                if row is None or row[2] != JobStatus.RUNNING.value:
                    intact = False  # it ended or was re-queued meanwhile: its resources are free already
                    continue
                v_tenant, version, _, handle, node, gpus, attempt = row
                transition(JobStatus.RUNNING, JobStatus.PREEMPTED, JOB_TRANSITIONS)
                why = f"preempted by {tier} job {name!r} (id {jid}): {p.reason}"
                changed = s.execute(
                    update(Job).where(Job.id == p.victim, Job.version == version,
                                      Job.status == JobStatus.RUNNING.value)
                    .values(status=JobStatus.PREEMPTED.value, status_reason=why[:2000], updated_at=now,
                            version=Job.version + 1)
                ).rowcount  # type: ignore[attr-defined]
                if changed != 1:
                    intact = False
                    continue
                stopped.append(p.victim)
                account = {
                    "stage": "preempted", "by_job": jid, "by_name": name, "by_tier": tier, "cost_usd": p.cost,
                    "attempt": attempt, "handle": handle, "victim": victims_json.get(p.victim, {}),
                    "plan": dict(d.explanation.get("preemption", {})),
                }
                s.execute(insert(DecisionRecord).values(
                    job_id=p.victim, tenant_id=v_tenant, cluster_id=cluster_id, outcome=PREEMPTED_OUTCOME,
                    node_name=node, gpu_indices=list(gpus), score=None, policy=policy, reason=why[:4000],
                    explanation=_jsonable(account), cost_score=None, latency_us=0, created_at=now,
                ))
                s.execute(insert(EventRecord).values(
                    tenant_id=v_tenant, job_id=p.victim, cluster_id=cluster_id, kind="job.preempted",
                    message=why[:2000], data={"by": jid, "cost_usd": p.cost, "handle": handle, "node": node,
                                              "attempt": attempt}, created_at=now,
                ))
            if stopped:
                s.execute(insert(EventRecord).values(
                    tenant_id=tenant_id, job_id=jid, cluster_id=cluster_id, kind="job.preempting",
                    message=f"stopping {len(stopped)} job(s) {stopped}: {d.reason}"[:2000],
                    data={"victims": stopped}, created_at=now,
                ))
        return intact

    # ---------------------------------------------------------------------------- stop + timer
    def tick(self, db: Database, dispatcher: Dispatcher, cluster_id: int) -> int:
        """Stop and re-queue the victims still running on the backend; fire a due retry. Returns re-queued."""
        with db.read() as s:
            rows = s.execute(
                select(Job.id, Job.version, Job.dispatch_handle, Job.tenant_id, Job.node_name, Job.attempt,
                       Job.status_reason)
                .where(Job.cluster_id == cluster_id, Job.status == JobStatus.PREEMPTED.value,
                       Job.dispatch_handle.is_not(None)).order_by(Job.id)
            ).all()
        requeued = 0
        if rows:
            status = dispatcher.poll([str(r[2]) for r in rows])
            for jid, version, handle, tenant_id, node, attempt, reason in rows:
                st = status.get(str(handle), BackendStatus.UNKNOWN)
                ended = _ENDED_ON_ITS_OWN.get(st)
                if ended is not None:
                    _finish(db, cluster_id, jid, version, tenant_id, str(handle), ended,
                            dispatcher.reason(str(handle)) or st.value)
                    continue
                if st not in _STOPPED:
                    dispatcher.cancel(str(handle))
                requeued += _requeue(db, cluster_id, jid, version, tenant_id, node, str(handle), attempt, reason)
        self._fire_retry(db, cluster_id)
        return requeued

    def _fire_retry(self, db: Database, cluster_id: int) -> None:
        now = self.clock()
        if cluster_id not in self._seen:
            self._seen.add(cluster_id)
            due = True  # a loop that just started has no timers: retry once
        else:
            at = self._retry.get(cluster_id)
            due = at is not None and now >= at
        if not due:
            return
        self._retry.pop(cluster_id, None)
        with db.write() as s:
            waiting = s.scalar(select(Job.id).where(
                Job.cluster_id == cluster_id, Job.status == JobStatus.PENDING.value,
                Job.tier.in_(sorted(self.preempting_tiers))).limit(1))
            if waiting is not None:
                cluster_svc.bump(session=s, cluster_id=cluster_id, sched=False, capacity=True)


class CyclePreemption:
    """The preemption stage inside one decide step (running jobs read once, when first needed)."""

    __slots__ = ("_running", "cluster_id", "db", "owner", "scheduler")

    def __init__(self, owner: LivePreemption, db: Database, cluster_id: int, scheduler: TieredScheduler) -> None:
        self.owner = owner
        self.db = db
        self.cluster_id = cluster_id
        self.scheduler = scheduler
        self._running: RunningPods | None = None

    def decide(self, state: ClusterState, job_id: int, tier: str, req: ResourceRequest, pending: Decision,
               *, now: float) -> Decision:
        """``pending`` (the job could not be placed), or the replay's decision with preemption on.

        A bind with victims has them released from ``state`` already; the caller applies the bind.
        """
        if tier not in self.owner.preempting_tiers:
            return pending
        running = self.running(state)
        d = self.scheduler.decide(state, req, job_id, tier=tier, running=running, now=now)
        if d.outcome is Outcome.BIND and d.placement is not None:
            if d.preemptions and not self._release(state, running, [p.victim for p in d.preemptions]):
                return pending
            return d
        retry = d.explanation.get("retry_at")
        if retry is not None:
            self.owner.note_retry(self.cluster_id, float(retry))
        return d if d.outcome is Outcome.PENDING else pending

    def running(self, state: ClusterState) -> RunningPods:
        """The cluster's running jobs as the preemption stage sees them (read on first use)."""
        if self._running is None:
            self._running = load_running(self.db, self.cluster_id, state, self.owner.tier_config, self.owner.prices)
        return self._running

    @staticmethod
    def _release(state: ClusterState, running: RunningPods, victims: list[int]) -> bool:
        done: list[RunningPod] = []
        try:
            for v in victims:
                rp = running.get(v)
                if rp is None:
                    raise SeedanceError(f"victim {v} is not running")
                state.release(rp.placement)
                done.append(running.remove(v))
        except SeedanceError as exc:  # never expected: the state and the store disagree
            log.error("preemption plan %s cannot be applied: %s", victims, exc)
            for rp in done:
                state.apply(rp.placement)
                running.add(rp)
            return False
        return True


def load_running(
    db: Database, cluster_id: int, state: ClusterState, tier_config: TierConfig, prices: PriceBook,
) -> RunningPods:
    """``RunningPods`` of the cluster's running jobs (tiers outside ``tier_config`` are never victims)."""
    with db.read() as s:
        rows = s.execute(
            select(Job.id, Job.tier, Job.node_name, Job.gpu_indices, ALLOC_MILLI, Job.cpu_milli, Job.memory_mib,
                   Job.started_at)
            .where(Job.cluster_id == cluster_id, Job.status == JobStatus.RUNNING.value,
                   Job.dispatch_handle.is_not(None), Job.started_at.is_not(None)).order_by(Job.id)
        ).all()
    own: dict[str, Any] = {
        name: TierFilter.own(name, spec).mask(state, _ANY) for name, spec in tier_config.tiers.items()
    }
    price: dict[str | None, float] = {}
    out = RunningPods()
    for jid, tier, node_name, gpus, milli, cpu, mem, started in rows:
        spec = tier_config.tiers.get(tier)
        if spec is None or started is None:
            continue
        try:
            node = state.node_index(node_name or "")
        except KeyError:
            continue
        model = state.spec.nodes[node].gpu_model
        if model not in price:
            price[model] = prices.usd_per_gpu_hour(model) if model else 0.0
        out.add(RunningPod(
            int(jid), str(tier), Placement(node, tuple(gpus), milli if gpus else 0, cpu, mem), started.timestamp(),
            borrowed=not bool(own[tier][node]), checkpoint_s=spec.checkpoint_interval_s,
            usd_per_gpu_hour=price[model],
        ))
    return out


def _requeue(
    db: Database, cluster_id: int, jid: int, version: int, tenant_id: int, node: str | None, handle: str,
    attempt: int, reason: str,
) -> int:
    """A stopped victim goes back to pending (its attempt recorded in the event)."""
    transition(JobStatus.PREEMPTED, JobStatus.PENDING, JOB_TRANSITIONS)
    now = utcnow()
    why = f"re-queued after attempt {attempt} was stopped: {reason}"
    with db.write() as s:
        rows = s.execute(
            update(Job).where(Job.id == jid, Job.version == version, Job.status == JobStatus.PREEMPTED.value)
            .values(status=JobStatus.PENDING.value, status_reason=why[:2000], node_name=None, gpu_indices=[],
                    placed_gpu_milli=None, dispatch_handle=None, attempt_capacity_version=-1, bound_at=None,
                    started_at=None, updated_at=now, version=Job.version + 1)
        ).rowcount  # type: ignore[attr-defined]
        if rows != 1:
            return 0
        s.execute(insert(EventRecord).values(
            tenant_id=tenant_id, job_id=jid, cluster_id=cluster_id, kind="job.requeued",
            message=f"{handle} stopped on {node} (attempt {attempt}); waiting to be placed again",
            data={"attempt": attempt, "handle": handle, "node": node, "reason": reason[:1000]}, created_at=now,
        ))
    return 1


def _finish(
    db: Database, cluster_id: int, jid: int, version: int, tenant_id: int, handle: str, new: JobStatus, why: str,
) -> None:
    """A victim whose run ended on its own before the stop reached it keeps that end."""
    transition(JobStatus.PREEMPTED, new, JOB_TRANSITIONS)
    now = utcnow()
    with db.write() as s:
        rows = s.execute(
            update(Job).where(Job.id == jid, Job.version == version, Job.status == JobStatus.PREEMPTED.value)
            .values(status=new.value, status_reason=f"{why} (ended before its preemption took effect)"[:2000],
                    finished_at=now, updated_at=now, version=Job.version + 1)
        ).rowcount  # type: ignore[attr-defined]
        if rows == 1:
            s.execute(insert(EventRecord).values(
                tenant_id=tenant_id, job_id=jid, cluster_id=cluster_id, kind=f"job.{new.value}",
                message=f"{handle}: ended before its preemption took effect", data={}, created_at=now,
            ))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(x) for k, x in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(x) for x in value]
    if isinstance(value, float) and value != value:  # NaN
        return None
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
