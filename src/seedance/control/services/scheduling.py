"""The live scheduling loop: the simulator's framework and registry over the stored cluster.

NOTE(seedance): one cycle over one cluster, the invariant it keeps.
  1. Read (no lock): the cluster's ``sched_version`` v and ``capacity_version`` cv, the policy in
     force, and the pending jobs not yet tried at cv, ordered by the policy's queue order
     (``QUEUE_ORDERS``; the item's priority is the tier priority plus the job's own; ``cost-score``
     takes the lowest stored ``cost_score`` first inside every tier's guaranteed ``min_share``).
  2. State: a ``ClusterState`` built from the stored nodes (id order) with every bound and running
     job applied. It is kept between cycles while (v, cv, policy) are the ones this loop last
     committed, and rebuilt from the store otherwise (so a restart needs nothing but the store).
  3. Decide: the policy's profile (``build_profile``: its stored ``kind: SchedulingProfile``, or
     the placement policy with the default stages; tier stages with ``tier_pools``)
     ``.decide(state, req, id, tier=...)`` for each job, applying every bind through the profile
     (state and bind hooks, e.g. the MIG ledger) before the next decision.
  4. Commit in one transaction: bump ``sched_version`` from v to v+1 (zero rows: another scheduler
     or a node change got there first; drop the plan and re-plan), lock and re-read the jobs'
     versions (a job cancelled meanwhile is skipped), then write statuses, placements,
     ``cost_score`` at bind, the decisions with their explanations, and the events.
  5. Dispatch the bound jobs not yet dispatched (also those left over by a crash) and poll the
     running ones; finished jobs give their resources back (cv moves). A run the backend lost
     (``PREEMPTED``: its node died) is re-queued (running -> preempted -> pending), and a node the
     backend reports dead goes down (v moves), in the same transaction, so it is never re-placed there.
  6. Live preemption (``preemption=True``, with tier pools; ``services/preemption.py``): a job that
     cannot be placed gets the replay's preemption stage; its victims are marked preempted in the
     bind's transaction, stopped through the dispatcher before anything is dispatched, and re-queued.
  No two schedulers can bind the same free GPU (step 4's compare-and-swap on v), a job is never
  bound and cancelled at once (versions), and a crash at any point leaves the store consistent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from seedance.backends.dispatch import BackendStatus, Dispatcher, DispatchRequest
from seedance.control.costing import CostInput, CostScorer
from seedance.control.db.models import ALLOC_MILLI, Cluster, DecisionRecord, EventRecord, Job, Node, utcnow
from seedance.control.db.session import Database
from seedance.control.observability import ControlMetrics
from seedance.control.services import clusters as cluster_svc
from seedance.control.services import policies as policy_svc
from seedance.control.services.preemption import LivePreemption
from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Decision, Outcome, Placement
from seedance.core.errors import SeedanceError
from seedance.core.lifecycle import JOB_TRANSITIONS, NODE_TRANSITIONS, JobStatus, NodeStatus, transition
from seedance.core.resources import ResourceRequest
from seedance.costmodel.deferral_stage import DEFERRAL_KEY
from seedance.profile import ProfileConfig, SchedulingProfile, build_profile, profile_of_policy
from seedance.scheduling.framework import PLACEMENT_POLICIES, FilterPlugin, PlacementPolicy, PolicyContext, make_policy
from seedance.scheduling.queueing import QUEUE_ORDERS, QueueItem, QueueOrder
from seedance.scheduling.tasktypes import TaskTypes
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.preemption import RunningPods

if TYPE_CHECKING:
    from seedance.control.services.attestation import LiveStages

log = logging.getLogger("seedance.control.scheduler")

FilterProvider = Callable[[str], Sequence[FilterPlugin]]
"""Extra filter plug-ins for a tier name, run after the default filters (e.g. tier node affinity)."""

_ACTIVE = (JobStatus.BOUND.value, JobStatus.RUNNING.value)
_MAX_FETCH_FACTOR = 8  # pending rows read per cycle, as a multiple of the batch size
_JOBS = cast(Table, Job.__table__)


def static_filters(filters: Sequence[FilterPlugin]) -> FilterProvider:
    """A provider giving the same extra filters to every tier."""
    fixed = tuple(filters)
    return lambda _tier: fixed


@dataclass(slots=True)
class CycleStats:
    """What one cycle over one cluster did."""

    cluster: str
    considered: int = 0
    bound: int = 0
    pending: int = 0
    rejected: int = 0
    skipped: int = 0
    conflicts: int = 0
    dispatched: int = 0
    finished: int = 0
    decide_s: float = 0.0
    total_s: float = 0.0


@dataclass(slots=True)
class _Cache:
    """In-memory state of one cluster, valid for (sched_version, capacity_version, policy key)."""

    sched_version: int
    capacity_version: int
    policy_key: tuple[str, int]
    state: ClusterState
    node_models: list[str | None]
    profile: SchedulingProfile | None = None
    extra: dict[str, SchedulingProfile] = field(default_factory=dict)  # tiers with extra filter plug-ins
    observed: int | None = None  # last job id a learning policy observed (None: the policy does not learn)
    queue: QueueOrder | None = None


@dataclass(slots=True)
class _Job:
    """The columns of a pending job the loop needs."""

    id: int
    tenant_id: int
    tier: str
    priority: int
    req: ResourceRequest
    version: int
    reason: str
    created: float
    duration_hours: float | None
    flexibility_hours: float
    gpu_types: tuple[str, ...]
    deadline: float | None = None
    cost_score: float = 0.0


class SchedulingLoop:
    """Runs scheduling cycles over every stored cluster, in a thread or one call at a time.

    Args:
        db: The store.
        scorer: Computes ``cost_score`` at bind (with the bound GPU model).
        dispatcher: Backend receiving bound jobs (``None``: jobs stay bound).
        filters: Extra filter plug-ins: a list for every tier, or a provider ``tier -> list``.
        metrics: Where to observe latencies and outcomes.
        default_placement: Placement policy when no scheduling policy is enabled.
        default_queue: Queue order when no scheduling policy is enabled.
        batch: Most jobs decided per cycle and cluster.
        explain: Record filter counts and runner-up nodes in every decision.
        interval_s: Seconds between cycles when nothing wakes the loop.
        min_gap_s: Seconds the thread waits before a cycle it was woken for (or a busy one's next; 0: none):
            submissions arriving meanwhile are decided together, so the cycle's fixed cost (its reads,
            two commits, the dispatch query) is paid less often and the loop holds the GIL less.
        poll_interval_s: Seconds between polls of the dispatcher.
        tier_config: Tier priorities (and pools, with ``tier_pools``).
        tier_pools: Place each job only in its tier's node pool, or one it may borrow (``gpu.sla.level``
            and ``gpu.mode`` labels; Gold on gold + exclusive nodes, a Gold share as a whole GPU),
            with the profile's tier stages. Extra ``filters`` do not apply then.
        profile: The scheduling profile when no stored policy names one (default: ``default_placement``
            with the default stages).
        task_types: The target workload given to policies that need one (FGD); default: the task
            types of the cluster's live jobs, read when the state is rebuilt.
        stages: Trust and deferral wiring (``LiveStages``): the attestation sweep each cycle, the
            ``AttestedTEE`` stage in every profile, the pod directory, the deferral stage.
        preemption: With ``tier_pools``: a job that cannot be placed may preempt running jobs of the tiers
            it may preempt, chosen by the replay's preemption stage (``services/preemption.py``).
    """

    def __init__(
        self, db: Database, *, scorer: CostScorer, dispatcher: Dispatcher | None = None,
        filters: Sequence[FilterPlugin] | FilterProvider = (), metrics: ControlMetrics | None = None,
        default_placement: str = "best-fit", default_queue: str = "priority", batch: int = 1024,
        explain: bool = True, interval_s: float = 0.5, min_gap_s: float = 0.0, poll_interval_s: float = 1.0,
        tier_config: TierConfig = DEFAULT_TIER_CONFIG, tier_pools: bool = False, preemption: bool = False,
        profile: ProfileConfig | None = None, task_types: TaskTypes | None = None,
        stages: LiveStages | None = None,
    ) -> None:
        self.db = db
        self.stages = stages  # trust sweep, pod directory, deferral (control/services/attestation.py)
        self.scorer = scorer
        self.dispatcher = dispatcher
        self.filters: FilterProvider = filters if callable(filters) else static_filters(filters)
        self.metrics = metrics
        self.default_placement = default_placement
        self.default_queue = default_queue
        self.batch = batch
        self.explain = explain
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.poll_interval_s = poll_interval_s
        self.tier_priority = {name: spec.priority for name, spec in tier_config.tiers.items()}
        self.tier_shares = {name: spec.min_share for name, spec in tier_config.tiers.items()}
        # tier pools: the profile's tier stages (own pool, then borrowed pools); preemption is
        # switched off here and applied, when asked, by ``self.preemption`` for jobs left pending
        self.tier_pools = tier_pools
        self.profile = profile
        self.task_types = task_types
        self.tiers = tier_config
        self.tier_config: TierConfig | None = tier_config if tier_pools else None
        if preemption and not tier_pools:
            raise ValueError("preemption needs tier_pools (victims are chosen inside a tier's own pool)")
        # live preemption (services/preemption.py): the replay's preemption stage with the full tier rights
        self.preemption = LivePreemption(tier_config, explain=explain) if preemption else None
        self._caches: dict[int, _Cache] = {}
        self._last_poll = 0.0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one cycle at a time in this process

    # ---------------------------------------------------------------------------- thread control
    def start(self) -> None:
        """Run cycles in a daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="seedance-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread (finishing the cycle in progress)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        """True while the loop's thread runs (between :meth:`start` and :meth:`stop`)."""
        return self._thread is not None

    def wake(self) -> None:
        """Start the next cycle now (called after a submission or a cancellation)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            try:
                stats = self.run_once()
                busy = any(s.conflicts or s.considered >= self.batch for s in stats)
            except Exception:  # keep the loop alive; the next cycle rebuilds from the store
                log.exception("scheduling cycle failed")
                self._caches.clear()
            woken = busy or self._wake.wait(self.interval_s)
            if woken and self.min_gap_s > 0:  # let the submissions of the next moments join the next cycle
                self._stop.wait(self.min_gap_s)
            self._wake.clear()

    # ---------------------------------------------------------------------------------- cycles
    def run_once(self) -> list[CycleStats]:
        """One cycle over every cluster (plus dispatch and polling)."""
        with self._lock:
            with self.db.read() as s:
                ids = list(s.scalars(select(Cluster.id).order_by(Cluster.id)))
            out = [self.schedule_cluster(cid) for cid in ids]
            now = time.monotonic()
            if self.dispatcher is not None and now - self._last_poll >= self.poll_interval_s:
                self._last_poll = now
                finished = self._poll()
                if out and finished:
                    out[0].finished += finished
            return out

    def schedule_cluster(self, cluster_id: int) -> CycleStats:
        """One cycle over one cluster: read, decide, commit, dispatch."""
        t_start = time.perf_counter()
        if self.stages is not None:
            self.stages.sweep(self.db, cluster_id)
        with self.db.read() as s:
            row = s.execute(
                select(Cluster.name, Cluster.sched_version, Cluster.capacity_version).where(Cluster.id == cluster_id)
            ).first()
            if row is None:
                return CycleStats(cluster=str(cluster_id))
            name, v, cv = row
            stats = CycleStats(cluster=name)
            policy = policy_svc.active_policy(
                session=s, cluster_id=cluster_id, default_placement=self.default_placement,
                default_queue=self.default_queue,
            )
            pending = self._pending(s, cluster_id, cv)
            if self.stages is not None:
                self.stages.load(s, cluster_id, [j.id for j in pending])
            cache = self._caches.get(cluster_id)
            if pending and (
                cache is None or (cache.sched_version, cache.capacity_version, cache.policy_key)
                != (v, cv, (policy.name, policy.version))
            ):
                cache = self._build(s, cluster_id, v, cv, policy)
                self._caches[cluster_id] = cache
        if pending:
            assert cache is not None
            self._decide_and_commit(cluster_id, cache, policy, pending, stats)
        if self.preemption is not None and self.dispatcher is not None:  # live preemption: stop victims first
            self.preemption.tick(self.db, self.dispatcher, cluster_id)
        stats.dispatched = self._dispatch(cluster_id, name)
        stats.total_s = time.perf_counter() - t_start
        if self.metrics is not None and stats.considered:
            self.metrics.cycle_seconds.observe(stats.total_s)
        return stats

    def _pending(self, s: Session, cluster_id: int, cv: int) -> list[_Job]:
        rows = s.execute(
            select(Job.id, Job.tenant_id, Job.tier, Job.priority, Job.cpu_milli, Job.memory_mib, Job.num_gpu,
                   Job.gpu_milli, Job.gpu_types, Job.version, Job.status_reason, Job.created_at,
                   Job.duration_hours, Job.flexibility_hours, Job.deadline, Job.cost_score)
            .where(Job.cluster_id == cluster_id, Job.status == JobStatus.PENDING.value,
                   Job.attempt_capacity_version < cv)
            .order_by(Job.id).limit(self.batch * _MAX_FETCH_FACTOR)
        ).all()
        out = []
        for r in rows:
            types = tuple(r[8])
            out.append(_Job(
                id=r[0], tenant_id=r[1], tier=r[2], priority=r[3],
                req=ResourceRequest(cpu_milli=r[4], memory_mib=r[5], num_gpu=r[6], gpu_milli=r[7], gpu_types=types),
                version=r[9], reason=r[10], created=r[11].timestamp(), duration_hours=r[12],
                flexibility_hours=r[13], gpu_types=types,
                deadline=r[14].timestamp() if r[14] is not None else None,
                cost_score=float(r[15]) if r[15] is not None else 0.0,
            ))
        return out

    def _build(self, s: Session, cluster_id: int, v: int, cv: int, policy: policy_svc.ActivePolicy) -> _Cache:
        nodes = list(s.scalars(select(Node).where(Node.cluster_id == cluster_id).order_by(Node.id)))
        spec = ClusterSpec(tuple(
            NodeSpec(name=n.name, cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, gpu_count=n.gpu_count,
                     gpu_model=n.gpu_model, labels={str(k): str(x) for k, x in n.labels.items()})
            for n in nodes
        ))
        state = ClusterState(spec)
        for i, n in enumerate(nodes):
            if n.status != NodeStatus.READY.value:
                state.set_schedulable(i, False)
        active = s.execute(
            select(Job.id, Job.node_name, Job.gpu_indices, ALLOC_MILLI, Job.cpu_milli, Job.memory_mib)
            .where(Job.cluster_id == cluster_id, Job.status.in_(_ACTIVE)).order_by(Job.id)
        ).all()
        cache = _Cache(v, cv, (policy.name, policy.version), state, [n.gpu_model for n in nodes])
        cfg = self.profile_config(policy)
        cls = PLACEMENT_POLICIES.get(cfg.placement.policy)
        types = (self.task_types or _live_task_types(s, cluster_id)) if cls.needs_task_types else None
        placement = make_policy(cfg.placement.policy, PolicyContext(seed=0, task_types=types,
                                                                    options=dict(cfg.placement.options)))
        services = self.stages.services if self.stages is not None else None
        cache.profile = build_profile(cfg, state, policy=placement, tier_config=self.tiers, explain=self.explain,
                                      services=services)
        for tier in self.tier_priority:
            extra = tuple(self.filters(tier))
            if extra and not cfg.tiers.enabled:
                cache.extra[tier] = build_profile(
                    cfg, state, policy=placement, tier_config=self.tiers,
                    explain=self.explain, extra_filters=extra, services=services,
                )
        self._replay_active(s, cache, active)
        if type(placement).observe is not PlacementPolicy.observe:  # a policy that learns: every job so far
            cache.observed = -1
            for jid, req in _requests(s, cluster_id):
                cache.profile.observe(req)
                cache.observed = jid
        cache.queue = QUEUE_ORDERS.get(cfg.queue)(self.tier_shares)
        return cache

    def profile_config(self, policy: policy_svc.ActivePolicy) -> ProfileConfig:
        """The profile of the policy in force: its stored ``SchedulingProfile`` or its placement policy.

        ``tier_pools`` switches the tier stages on; preemption stays off in the live loop (it does
        not evict running jobs), so the tier fallbacks are ``borrow`` only.
        """
        if policy.profile:
            cfg = ProfileConfig.model_validate(policy.profile)
        elif self.profile is not None and policy.version == 0:  # no stored policy: the loop's own profile
            cfg = self.profile
        else:
            cfg = profile_of_policy(policy.placement, queue=policy.queue_order)
        if self.tier_pools and not cfg.tiers.enabled:
            cfg = cfg.model_copy(update={"tiers": cfg.tiers.model_copy(update={"enabled": True})})
        if cfg.tiers.enabled:
            fallbacks = tuple(f for f in cfg.tiers.fallbacks if f != "preempt")
            cfg = cfg.model_copy(update={"tiers": cfg.tiers.model_copy(update={"fallbacks": fallbacks})})
        return cfg if self.stages is None else self.stages.configure(cfg)

    def _replay_active(self, s: Session, cache: _Cache, active: Sequence[Any]) -> None:
        """Apply every bound and running job to the fresh state (and the profile's bind hooks)."""
        state, profile = cache.state, cache.profile
        assert profile is not None
        slices: dict[int, Any] = {}
        if profile.hooks and active:
            ids = [int(r[0]) for r in active]
            for jid, expl in s.execute(
                select(DecisionRecord.job_id, DecisionRecord.explanation)
                .where(DecisionRecord.job_id.in_(ids), DecisionRecord.outcome == Outcome.BIND.value)
                .order_by(DecisionRecord.id)
            ):
                if isinstance(expl, dict) and "slice" in expl:
                    slices[int(jid)] = expl["slice"]
                else:
                    slices.pop(int(jid), None)
        for jid, node_name, gpus, milli, cpu, mem in active:
            try:
                node = state.node_index(node_name or "")
                p = Placement(node, tuple(gpus), milli if gpus else 0, cpu, mem)
                info = slices.get(int(jid))
                profile.apply(state, Decision(int(jid), Outcome.BIND, p,
                                              explanation={"slice": info} if info is not None else {}))
            except (KeyError, SeedanceError) as exc:  # never expected: the store is inconsistent
                log.error("job %s: stored placement on %s cannot be applied: %s", jid, node_name, exc)

    def _decide_and_commit(
        self, cluster_id: int, cache: _Cache, policy: policy_svc.ActivePolicy, pending: list[_Job],
        stats: CycleStats,
    ) -> None:
        queue = cache.queue
        assert queue is not None
        items = [
            QueueItem(j.id, j.created, j.id, self.tier_priority.get(j.tier, 0) + j.priority, j.req.total_gpu_milli,
                      j.tier, j.cost_score)
            for j in pending
        ]
        order = [pending[i] for i in queue.order(items)][: self.batch]
        state = cache.state
        plan: list[tuple[_Job, Decision, int]] = []
        t0 = time.perf_counter()
        profile = cache.profile
        assert profile is not None
        if cache.observed is not None:  # learning policies see each job once, in arrival (id) order
            for job in sorted(pending, key=lambda j: j.id):
                if job.id > cache.observed:
                    profile.observe(job.req)
                    cache.observed = job.id
        tiered = profile.pools is not None
        wall = time.time()
        pre = self.preemption.cycle(self.db, cluster_id, profile.policy) if self.preemption and tiered else None
        for job in order:
            t = time.perf_counter()
            prof = cache.extra.get(job.tier, profile)
            d = prof.decide(state, job.req, job.id, tier=job.tier if tiered else None, running=_NOBODY, now=wall)
            if pre is not None and d.outcome is Outcome.PENDING:  # live preemption (services/preemption.py)
                d = pre.decide(state, job.id, job.tier, job.req, d, now=wall)
            if d.outcome is Outcome.BIND:
                assert d.placement is not None
                prof.apply(state, d)
            plan.append((job, d, int((time.perf_counter() - t) * 1e6)))
        stats.decide_s = time.perf_counter() - t0
        stats.considered = len(plan)
        committed = self._commit(cluster_id, cache, policy, plan, stats)
        if not committed:
            self._caches.pop(cluster_id, None)
            return
        if self.metrics is not None:
            now = time.time()
            for job, d, us in plan:
                self.metrics.decision_seconds.labels(policy.placement).observe(us / 1e6)
                self.metrics.decisions.labels(d.outcome.value, policy.placement).inc()
                if d.outcome is Outcome.BIND:
                    self.metrics.scheduling_latency.labels(job.tier).observe(max(0.0, now - job.created))

    def _commit(
        self, cluster_id: int, cache: _Cache, policy: policy_svc.ActivePolicy,
        plan: list[tuple[_Job, Decision, int]], stats: CycleStats,
    ) -> bool:
        v = cache.sched_version
        state = cache.state
        now = utcnow()
        wall = now.timestamp()
        with self.db.write() as s:
            won = s.execute(
                update(Cluster).where(Cluster.id == cluster_id, Cluster.sched_version == v)
                .values(sched_version=v + 1)
            ).rowcount  # type: ignore[attr-defined]
            if won != 1:
                stats.conflicts += 1
                return False
            ids = [j.id for j, _, _ in plan]
            q = select(Job.id, Job.version, Job.status).where(Job.id.in_(ids))
            if not self.db.is_sqlite:
                q = q.with_for_update()
            current = {r[0]: (r[1], r[2]) for r in s.execute(q)}
            if self.preemption is not None and not self.preemption.intact(plan, current):  # live preemption
                stats.conflicts += 1  # a preemptor changed meanwhile: later binds may rely on its victims
                return False
            binds: list[dict[str, Any]] = []
            waits: list[dict[str, Any]] = []
            decisions: list[dict[str, Any]] = []
            evts: list[dict[str, Any]] = []
            dirty = False
            for job, d, us in plan:
                if current.get(job.id) != (job.version, JobStatus.PENDING.value):
                    stats.skipped += 1
                    dirty = dirty or d.outcome is Outcome.BIND
                    continue
                explanation = _jsonable(d.explanation)
                node_name = gpus = None
                cost = None
                if d.outcome is Outcome.BIND:
                    assert d.placement is not None
                    transition(JobStatus.PENDING, JobStatus.BOUND, JOB_TRANSITIONS)
                    node_name = state.spec.nodes[d.placement.node].name
                    gpus = list(d.placement.gpus)
                    model = cache.node_models[d.placement.node]
                    est = self.scorer.at_bind(CostInput(
                        num_gpu=job.req.num_gpu, gpu_milli=job.req.gpu_milli, gpu_types=job.gpu_types,
                        cluster_models=(), duration_hours=job.duration_hours, tier=job.tier,
                        flexibility_hours=job.flexibility_hours,
                        deadline_in_s=job.deadline - wall if job.deadline is not None else None,
                    ), model)
                    cost = est.score
                    placed = d.placement.gpu_milli if gpus else 0
                    binds.append({
                        "b_id": job.id, "b_status": JobStatus.BOUND.value, "b_reason": d.reason, "b_node": node_name,
                        "b_gpus": gpus, "b_cost": est.score, "b_basis": est.basis[:200], "b_at": now,
                        "b_placed": placed if placed != job.req.gpu_milli else None,
                    })
                    evts.append({"tenant_id": job.tenant_id, "job_id": job.id, "cluster_id": cluster_id,
                                 "kind": "job.bound", "message": f"{node_name} GPUs {gpus}",
                                 "data": {"policy": policy.placement}, "created_at": now})
                    stats.bound += 1
                elif d.outcome is Outcome.REJECT:
                    transition(JobStatus.PENDING, JobStatus.UNSCHEDULABLE, JOB_TRANSITIONS)
                    waits.append({"w_id": job.id, "w_status": JobStatus.UNSCHEDULABLE.value, "w_reason": d.reason,
                                  "w_cv": cache.capacity_version})
                    evts.append({"tenant_id": job.tenant_id, "job_id": job.id, "cluster_id": cluster_id,
                                 "kind": "job.unschedulable", "message": d.reason, "data": {}, "created_at": now})
                    stats.rejected += 1
                else:
                    waits.append({"w_id": job.id, "w_status": JobStatus.PENDING.value, "w_reason": d.reason,
                                  "w_cv": -1 if DEFERRAL_KEY in d.explanation else cache.capacity_version})
                    stats.pending += 1
                    if d.reason == job.reason:
                        continue  # same answer as last time: the log already says so
                decisions.append({
                    "job_id": job.id, "tenant_id": job.tenant_id, "cluster_id": cluster_id,
                    "outcome": d.outcome.value, "node_name": node_name, "gpu_indices": gpus or [],
                    "score": d.score, "policy": policy.placement, "reason": d.reason, "explanation": explanation,
                    "cost_score": cost, "latency_us": us, "created_at": now,
                })
            jt = _JOBS
            conn = s.connection()
            if binds:
                conn.execute(
                    update(jt).where(jt.c.id == bindparam("b_id")).values(
                        status=bindparam("b_status"), status_reason=bindparam("b_reason"),
                        node_name=bindparam("b_node"), gpu_indices=bindparam("b_gpus"),
                        placed_gpu_milli=bindparam("b_placed"),
                        cost_score=bindparam("b_cost"), cost_basis=bindparam("b_basis"),
                        bound_at=bindparam("b_at"), updated_at=bindparam("b_at"), version=jt.c.version + 1,
                    ),
                    binds,
                )
            if waits:
                conn.execute(
                    update(jt).where(jt.c.id == bindparam("w_id")).values(
                        status=bindparam("w_status"), status_reason=bindparam("w_reason"),
                        attempt_capacity_version=bindparam("w_cv"), version=jt.c.version + 1,
                    ),
                    waits,
                )
            if self.preemption is not None:  # live preemption: the victims of the binds written here
                bound = {b["b_id"] for b in binds}
                dirty = not self.preemption.commit(s, cluster_id, [
                    (j.id, j.tenant_id, j.tier, d) for j, d, _ in plan if j.id in bound], policy.placement, now,
                ) or dirty
            if decisions:
                s.execute(insert(DecisionRecord), decisions)
            if evts:
                s.execute(insert(EventRecord), evts)
        if dirty:
            self._caches.pop(cluster_id, None)
        else:
            cache.sched_version = v + 1
        return True

    # -------------------------------------------------------------------------- dispatch and poll
    def _dispatch(self, cluster_id: int, cluster_name: str) -> int:
        if self.dispatcher is None:
            return 0
        with self.db.read() as s:
            jobs = s.execute(
                select(Job.id, Job.tenant_id, Job.name, Job.kind, Job.tier, Job.node_name, Job.gpu_indices,
                       ALLOC_MILLI, Job.cpu_milli, Job.memory_mib, Job.duration_hours, Job.labels, Job.version)
                .where(Job.cluster_id == cluster_id, Job.status == JobStatus.BOUND.value,
                       Job.dispatch_handle.is_(None)).order_by(Job.id).limit(self.batch)
            ).all()
            if not jobs:
                return 0
            node_rows = s.execute(
                select(Node.name, Node.gpu_model, Node.labels).where(Node.cluster_id == cluster_id)
            ).all()
            models = {n: m for n, m, _ in node_rows}
            node_labels = {n: {str(k): str(x) for k, x in (lb or {}).items()} for n, _, lb in node_rows}
        started: list[dict[str, Any]] = []
        transition(JobStatus.BOUND, JobStatus.RUNNING, JOB_TRANSITIONS)
        for jid, tenant_id, name, kind, tier, node, gpus, milli, cpu, mem, hours, labels, version in jobs:
            handle = self.dispatcher.dispatch(DispatchRequest(
                job_id=jid, tenant_id=tenant_id, name=name, kind=kind, tier=tier, cluster=cluster_name,
                node=node or "", gpu_model=models.get(node or ""), gpu_indices=tuple(gpus), gpu_milli=milli,
                cpu_milli=cpu, memory_mib=mem, duration_hours=hours,
                labels={str(k): str(x) for k, x in labels.items()}, node_labels=node_labels.get(node or "", {}),
            ))
            started.append({"r_id": jid, "r_version": version, "r_handle": handle[:200], "tenant_id": tenant_id})
        now = utcnow()
        jt = _JOBS
        with self.db.write() as s:
            conn = s.connection()
            conn.execute(
                update(jt).where(jt.c.id == bindparam("r_id"), jt.c.version == bindparam("r_version"),
                                 jt.c.status == JobStatus.BOUND.value).values(
                    status=JobStatus.RUNNING.value, dispatch_handle=bindparam("r_handle"), started_at=now,
                    updated_at=now, version=jt.c.version + 1, attempt=jt.c.attempt + 1,
                ),
                [{k: x for k, x in r.items() if k != "tenant_id"} for r in started],
            )
            s.execute(insert(EventRecord), [
                {"tenant_id": r["tenant_id"], "job_id": r["r_id"], "cluster_id": cluster_id, "kind": "job.started",
                 "message": f"dispatched: {r['r_handle']}", "data": {}, "created_at": now}
                for r in started
            ])
        return len(started)

    def _poll(self) -> int:
        assert self.dispatcher is not None
        with self.db.read() as s:
            running = s.execute(
                select(Job.id, Job.version, Job.dispatch_handle, Job.tenant_id, Job.cluster_id, Job.node_name)
                .where(Job.status == JobStatus.RUNNING.value, Job.dispatch_handle.is_not(None))
            ).all()
        status = self.dispatcher.poll([str(r[2]) for r in running]) if running else {}
        health = self.dispatcher.node_health()  # after poll: a node death seen there is reported here
        dead = sorted(name for name, alive in health.items() if not alive)
        if dead:  # only those not marked down yet (a read; the write below re-checks)
            with self.db.read() as s:
                dead = list(s.scalars(select(Node.name).where(
                    Node.name.in_(dead), Node.status != NodeStatus.DOWN.value).distinct()))
        ended = (BackendStatus.SUCCEEDED, BackendStatus.FAILED, BackendStatus.CANCELLED, BackendStatus.PREEMPTED)
        done = [(r, status[str(r[2])]) for r in running if status.get(str(r[2]), BackendStatus.UNKNOWN) in ended]
        if not done and not dead:
            return 0
        now = utcnow()
        n = 0
        with self.db.write() as s:
            if dead:
                self._mark_down(s, dead, now)
            for (jid, version, handle, tenant_id, cluster_id, node_name), st in done:
                why = self.dispatcher.reason(str(handle)) or f"backend reported {st.value}"
                if st is BackendStatus.PREEMPTED:
                    n += self._requeue(s, jid, version, tenant_id, cluster_id, node_name, str(handle), why, now)
                    continue
                new = {BackendStatus.SUCCEEDED: JobStatus.SUCCEEDED, BackendStatus.FAILED: JobStatus.FAILED,
                       BackendStatus.CANCELLED: JobStatus.CANCELLED}[st]
                transition(JobStatus.RUNNING, new, JOB_TRANSITIONS)
                rows = s.execute(
                    update(Job).where(Job.id == jid, Job.version == version, Job.status == JobStatus.RUNNING.value)
                    .values(status=new.value, status_reason=why[:2000], finished_at=now,
                            updated_at=now, version=Job.version + 1)
                ).rowcount  # type: ignore[attr-defined]
                if rows == 1:
                    n += 1
                    cluster_svc.bump(session=s, cluster_id=cluster_id, sched=False, capacity=True)
                    s.execute(insert(EventRecord).values(
                        tenant_id=tenant_id, job_id=jid, cluster_id=cluster_id, kind=f"job.{new.value}",
                        message=f"{handle}" if new is JobStatus.SUCCEEDED else f"{handle}: {why}"[:2000],
                        data={}, created_at=now,
                    ))
        return n

    @staticmethod
    def _requeue(
        s: Session, jid: int, version: int, tenant_id: int, cluster_id: int, node: str | None, handle: str,
        why: str, now: Any,
    ) -> int:
        """The backend lost a running job (its node died): back to pending, to be placed again."""
        transition(transition(JobStatus.RUNNING, JobStatus.PREEMPTED, JOB_TRANSITIONS), JobStatus.PENDING,
                   JOB_TRANSITIONS)
        rows = s.execute(
            update(Job).where(Job.id == jid, Job.version == version, Job.status == JobStatus.RUNNING.value)
            .values(status=JobStatus.PENDING.value, status_reason=f"re-queued: {why}"[:2000], node_name=None,
                    gpu_indices=[], placed_gpu_milli=None, dispatch_handle=None, attempt_capacity_version=-1,
                    bound_at=None, started_at=None, updated_at=now, version=Job.version + 1)
        ).rowcount  # type: ignore[attr-defined]
        if rows != 1:
            return 0
        cluster_svc.bump(session=s, cluster_id=cluster_id, sched=False, capacity=True)
        s.execute(insert(EventRecord), [
            {"tenant_id": tenant_id, "job_id": jid, "cluster_id": cluster_id, "kind": "job.preempted",
             "message": f"{handle} on {node}: {why}"[:2000], "data": {"node": node, "handle": handle},
             "created_at": now},
            {"tenant_id": tenant_id, "job_id": jid, "cluster_id": cluster_id, "kind": "job.requeued",
             "message": f"{handle} lost on {node}", "data": {}, "created_at": now},
        ])
        return 1

    @staticmethod
    def _mark_down(s: Session, names: Sequence[str], now: Any) -> None:
        """Nodes the backend reports dead become ``down`` (no new placements; an operator brings them back)."""
        rows = s.execute(
            select(Node.id, Node.cluster_id, Node.name, Node.status, Node.version)
            .where(Node.name.in_(list(names)), Node.status != NodeStatus.DOWN.value)
        ).all()
        for nid, cluster_id, name, status, version in rows:
            transition(NodeStatus(status), NodeStatus.DOWN, NODE_TRANSITIONS)
            changed = s.execute(
                update(Node).where(Node.id == nid, Node.version == version)
                .values(status=NodeStatus.DOWN.value, version=Node.version + 1)
            ).rowcount  # type: ignore[attr-defined]
            if changed == 1:
                cluster_svc.bump(session=s, cluster_id=cluster_id, sched=True, capacity=False)
                s.execute(insert(EventRecord).values(
                    tenant_id=None, job_id=None, cluster_id=cluster_id, kind="node.down",
                    message=f"node {name}: the backend lost it", data={"was": status}, created_at=now,
                ))


_NOBODY = RunningPods()  # preemption is off in the live loop: no victim candidates


def _requests(s: Session, cluster_id: int) -> list[tuple[int, ResourceRequest]]:
    """Every job of the cluster (any status) as ``(id, request)``, in id order."""
    q = select(Job.id, Job.cpu_milli, Job.memory_mib, Job.num_gpu, Job.gpu_milli, Job.gpu_types).where(
        Job.cluster_id == cluster_id)
    return [
        (int(r[0]), ResourceRequest(cpu_milli=r[1], memory_mib=r[2], num_gpu=r[3], gpu_milli=r[4],
                                    gpu_types=tuple(r[5])))
        for r in s.execute(q.order_by(Job.id))
    ]


def _live_task_types(s: Session, cluster_id: int) -> TaskTypes:
    """FGD's target workload in the live loop: the task types of the cluster's live jobs."""
    counts: dict[tuple[int, int, int, str], int] = {}
    spec_types: dict[str, tuple[str, ...]] = {}
    rows = s.execute(
        select(Job.cpu_milli, Job.gpu_milli, Job.num_gpu, Job.gpu_types)
        .where(Job.cluster_id == cluster_id,
               Job.status.in_((JobStatus.PENDING.value, JobStatus.BOUND.value, JobStatus.RUNNING.value)))
    )
    for cpu, milli, k, types in rows:
        spec = ",".join(types)
        spec_types[spec] = tuple(types)
        key = (int(cpu), int(milli), int(k), spec)
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        counts[(0, 1000, 1, "")] = 1
    return TaskTypes.from_counts(counts.items(), spec_types)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _jsonable(x) for k, x in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(x) for x in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
