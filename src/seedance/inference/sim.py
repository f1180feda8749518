"""The serving simulator: replicas, batchers and a request trace on the tuple-heap event loop.

NOTE(seedance): the engine, once. Arrivals stream from the sorted trace into
:class:`seedance.sim.engine.EventLoop`; the heap holds one wake-up per replica. At a wake-up the
replica applies what its last iteration (or span of iterations) did, asks its batcher for a
plan, and schedules its next wake-up. A *span* is a run of pure decode iterations of an unchanged
batch: step times are linear in the KV tokens attended (:class:`StepTimes`), so a span of ``n``
steps costs a closed form and the engine jumps straight to its end, which is the first of: the
next completion, the step at which the KV pool runs out, a batcher timer, or, for iteration-level
batchers, the first iteration boundary after an arrival to the replica's queue (the span is cut
short when that arrival comes). Nothing is touched per token: a decoding request's KV length is
``counter + base`` (``counter``: the replica's decode steps so far), and the replica keeps the
block count of all its decoders as ``B * q + sum(q_i) + #{residues}`` over the residues of
``base mod block_tokens``, so "blocks after n more steps" is O(block_tokens). A request's true
output length is the engine's alone; batchers see predictions, and the predictor learns from a
request only once its completion time has passed.

The engine's parts, by job: :mod:`engine_core` (shared state, block accounting),
:mod:`engine_steps` (iterations, spans, completions, preemption), :mod:`engine_front` (arrivals,
routing, admission, KV transfers); this module builds the simulator, runs it and decides at each
wake-up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.inference.audit import BlockAudit
from seedance.inference.batchers.base import PoolPlan, ReplicaView, RequestBook, RequestHistory, make_batcher
from seedance.inference.disagg import Disaggregation
from seedance.inference.engine_core import EV_ARRIVAL, RUN_IDLE, RUN_ITER, RUN_SPAN, Replica
from seedance.inference.engine_front import FrontEnd
from seedance.inference.memory import KVBudget
from seedance.inference.memseries import mark, memory_series
from seedance.inference.model import MIB, ModelShape
from seedance.inference.perf import StepTimes
from seedance.inference.prefix import PrefixCache, PrefixStructure
from seedance.inference.profiles import DecodeLengthPredictor, kv_growth_feature
from seedance.inference.routing import Admission, RouteQuery, make_router
from seedance.inference.run import DECODE, DONE, DROPPED, FUTURE, PREFILL, REJECTED, SENDING, WAITING, ServingRun
from seedance.inference.trace import RequestTrace
from seedance.inference.workloads import reusable_tokens
from seedance.sim.engine import EventLoop

__all__ = ["DECODE", "DONE", "DROPPED", "FUTURE", "PREFILL", "REJECTED", "SENDING", "WAITING", "ServingRun",
           "ServingSimulator"]


class ServingSimulator(FrontEnd):
    """Replays a request trace on ``replicas`` replicas, each driven by its own batcher instance.

    Args:
        trace: The requests.
        step: Iteration-time tables of one replica.
        shape: The model (KV bytes per token).
        budget: The KV pool of one replica.
        batcher: Registered batcher name.
        options: Batcher options.
        replicas: Replicas (all of the same GPU type and tensor-parallel degree).
        router: Router name (default: the batcher's).
        history: Requests completed before the trace (pool sizing, predictor warm start).
        predictor_prior: The predictor's answer before it has seen any completion.
        ttft_ms, tpot_ms: SLO targets shown to the batchers (``inf``: none).
        audit: Mirror every block into a :class:`~seedance.inference.memory.BlockAllocator` with ids
            and check it after each event (:mod:`audit`; slow; tests).
        prefix_cache: Block-level prefix caching on every replica (:mod:`prefix`; iteration-level
            batchers only), driven by the trace's prefix structure.
        router_options: Options of the router.
        admission: Early admission control at the front end (``None``: admit everything).
        disaggregate: Separate prefill and decode pools (:mod:`disagg`); ``None``: co-located.
        perfect_cache: The ceiling of prefix caching, not a mechanism: every request arrives with
            the KV of its reusable prefix (:func:`~seedance.inference.workloads.reusable_tokens`:
            full blocks of its conversation history or system prompt) already computed, on
            whichever replica it lands, and keeps it through preemptions; those blocks still take
            GPU memory. Excludes ``prefix_cache`` and ``disaggregate``.

    Closed-loop sessions (the trace's prefix structure has ``think_s``): a follow-up turn is sent
    at the later of its trace arrival and its previous turn's completion plus its think time; its
    ``arrival`` in the run is that send time. A follow-up whose previous turn was dropped or
    rejected is never sent (it ends dropped).
    """


    def __init__(
        self, trace: RequestTrace, *, step: StepTimes, shape: ModelShape, budget: KVBudget, batcher: str,
        options: dict[str, Any] | None = None, replicas: int = 1, router: str | None = None,
        history: RequestHistory | None = None, predictor_prior: float = 128.0,
        ttft_ms: float = math.inf, tpot_ms: float = math.inf, audit: bool = False, prefix_cache: bool = False,
        router_options: dict[str, Any] | None = None, admission: Admission | None = None,
        disaggregate: Disaggregation | None = None, perfect_cache: bool = False,
    ) -> None:
        if replicas < 1:
            raise InputError(f"must be >= 1, got {replicas}", source="--replicas")
        self.trace = trace
        self.step = step
        self.shape = shape
        self.budget = budget
        self.disagg = disaggregate
        if disaggregate is not None and not 1 <= disaggregate.prefill < replicas:
            raise InputError(f"prefill replicas must be in [1, {replicas - 1}], got {disaggregate.prefill}",
                             source="--prefill-replicas")
        batchers = [make_batcher(batcher, {**(options or {}), **disaggregate.prefill_options}
                                 if disaggregate is not None and r < disaggregate.prefill else options)
                    for r in range(replicas)]
        cls = type(batchers[0])
        if disaggregate is not None and cls.request_level:
            raise InputError(f"{cls.name} is request-level: disaggregation needs an iteration-level batcher",
                             source="--policy")
        self.policy = cls.name
        self.request_level = cls.request_level
        self.router = make_router(router or cls.default_router, router_options)
        self.admission = admission
        hist = history or RequestHistory(np.zeros(0, np.int64), np.zeros(0, np.int64))
        plan = cls.pool_plan(batchers[0].opts, hist, replicas) if disaggregate is None else None
        self.pools = plan if plan is not None else PoolPlan((), (replicas,))
        if disaggregate is not None:  # pool 0 prefills (every arrival goes there), pool 1 decodes
            self.pools = PoolPlan((math.inf,), (disaggregate.prefill, replicas - disaggregate.prefill))
        if sum(self.pools.replicas) != replicas:
            raise ValueError("pool plan does not cover the replicas")
        if perfect_cache and (prefix_cache or disaggregate is not None):
            raise InputError("the perfect-cache ceiling replaces prefix caching and co-located serving",
                             source="--perfect-cache")
        self._perfect = perfect_cache
        self.predictor = DecodeLengthPredictor(prior=predictor_prior)
        for p_, o_ in zip(hist.prompt.tolist(), hist.output.tolist(), strict=True):
            self.predictor.observe(p_, o_)
        self.audit = audit
        n = len(trace)
        self._gen = np.maximum(trace.output.astype(np.int64), 1)
        self.book = RequestBook(
            arrival=trace.arrival_s.astype(np.float64), prompt=trace.prompt.astype(np.int64),
            predicted=np.zeros(n), features=np.zeros((n, 3)), out=np.zeros(n, np.int64),
            computed=np.zeros(n, np.int64), first_token=np.full(n, np.nan),
            ready=np.zeros(n, np.int64) if disaggregate is not None else None,
        )
        if perfect_cache:
            self.book.ready = reusable_tokens(trace, budget.block_tokens)
        self.state = np.full(n, FUTURE, np.int8)
        self.finish = np.full(n, np.nan)
        self.preempt = np.zeros(n, np.int32)
        self.kvbase = np.zeros(n, np.int64)
        self.held = np.zeros(n, np.int64)
        self.baseline_pred = np.zeros(n)
        self.hit = np.zeros(n, np.int64)  # blocks of a running request that the prefix cache holds
        self.cached_first = np.full(n, -1, np.int64)  # prefix-cache hit tokens at first admission
        self.qtok = np.zeros(n, np.int64)  # uncached prompt tokens a waiting request adds to its queue
        self.reason = {}  # rejected at the front end: why
        self._slo_class = trace.slo_class
        structure = trace.prefix if trace.prefix is not None else None
        self._trace_arrival = self.book.arrival.copy()  # the trace's slots (book.arrival: send times)
        closed = structure is not None and structure.think_s is not None
        self._parent = structure.previous_turn() if closed and structure is not None else None
        self._think = structure.think_s if closed and structure is not None else None
        self._parked = {}  # unfinished previous turn -> its follow-up waiting for it
        use_cache = prefix_cache and not self.request_level
        self._kv_feature = kv_growth_feature(shape.kv_bytes_per_token)
        self._observe = []
        self._bs = budget.block_tokens
        self._total = budget.total_blocks
        self._tok_mib = shape.kv_bytes_per_token / MIB
        self._blk_mib = budget.block_bytes / MIB
        self._iterations = 0
        self._delta_lo, self._delta_hi = math.inf, -math.inf
        self._track_delta = hasattr(batchers[0], "last_delta")
        self.replicas = []
        self._pool_members = []
        for k, count in enumerate(self.pools.replicas):
            shared: list[int] = []
            members = []
            for _ in range(count):
                r = len(self.replicas)
                view = ReplicaView(
                    replica=r, book=self.book, total_blocks=self._total, block_tokens=self._bs,
                    waiting=shared if self.router.shared else [], free_blocks=self._total,
                    step=step, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                )
                replica = Replica(r, k, batchers[r], view, self._bs)
                if use_cache and (disaggregate is None or k == 0):
                    replica.cache = view.prefix = PrefixCache(
                        structure if structure is not None else PrefixStructure.none(n), self.book.prompt, self._bs)
                self.replicas.append(replica)
                members.append(r)
            self._pool_members.append(members)
        self._nrep = len(self.replicas)
        self._audit = BlockAudit(self._nrep, self._total) if audit else None
        self._query = RouteQuery()
        handlers: list[Callable[[float, int], None]] = [self._on_arrival, self._on_wake, self._on_sent,
                                                         self._on_send]
        self.loop = EventLoop(handlers, arrival_kind=EV_ARRIVAL)

    def run(self) -> ServingRun:
        """Simulate to the end; every request ends done or dropped."""
        import gc

        t0 = time.perf_counter()
        arr = self.book.arrival
        gc_was = gc.isenabled()
        gc.disable()
        try:
            # requests arriving at the same instant form one event, so a replica woken by the first
            # sees them all
            starts = np.flatnonzero(np.r_[True, np.diff(arr) > 0]) if len(arr) else np.zeros(0, np.int64)
            self.loop.run(zip(arr[starts].tolist(), starts.tolist(), strict=True))
        finally:
            if gc_was:
                gc.enable()
        mem_t, mem_v, peaks = memory_series([(r.mem_t, r.mem_v) for r in self.replicas],
                                            float(arr[0]) if len(arr) else 0.0)
        left = (self.state != DONE) & (self.state != DROPPED) & (self.state != REJECTED)
        self.state[left] = DROPPED  # never served: a batcher kept them waiting to the end
        seen = (self._delta_lo, self._delta_hi) if self._delta_lo <= self._delta_hi else None
        models = [r.batcher.step_model for r in self.replicas  # type: ignore[attr-defined]
                  if getattr(r.batcher, "opts", {}).get("step_model") == "online"]
        step_err = models[0].merge_errors(models[1:]) if models else None
        return ServingRun(
            policy=self.policy, trace=self.trace.source, arrival=self.book.arrival, prompt=self.book.prompt,
            output=self._gen, predicted=self.book.predicted, baseline_pred=self.baseline_pred,
            first_token=self.book.first_token, finish=self.finish, state=self.state,
            preemptions=self.preempt, mem_t=mem_t, mem_mib=mem_v, replica_peak_mib=peaks,
            iterations=self._iterations,
            events=self.loop.processed, wall_s=time.perf_counter() - t0, pools=self.pools.replicas,
            kv_pool_mib=self.budget.total_mib, delta_seen=seen, step_model_error=step_err,
            cached_tokens=self.cached_first if any(r.cache is not None for r in self.replicas) else None,
            reject_reason=dict(self.reason), slo_class=self._slo_class,
        )

    def _on_wake(self, now: float, token: int) -> None:
        nrep = self._nrep
        rep = self.replicas[token % nrep]
        if token // nrep != rep.wake_seq:
            return  # superseded by a later schedule
        busy = rep.busy
        rep.busy = RUN_IDLE
        if busy != RUN_IDLE:  # the end of an iteration or span: its memory peak, before anything is freed
            rep.mem_t.append(now)
            rep.mem_v.append(rep.kv_end)
        if busy == RUN_SPAN:
            self._finish_span(rep, now)
        elif busy == RUN_ITER:
            self._finish_iteration(rep, now)
        self._next(rep, now)
        if self._audit is not None:
            self._audit.check(self, rep)

    def _next(self, rep: Replica, now: float) -> None:
        """Ask the batcher and start the next iteration or span (or go idle)."""
        view = rep.view
        view.now = now
        if self.request_level and (rep.pad_b or not rep.queue):
            if not rep.pad_b:
                rep.timer = None
                rep.kv_start = rep.kv_end = 0.0
                mark(rep, now)
            return
        b0 = self._blocks_after(rep, 0)
        view.free_blocks = self._total - b0
        cache = rep.cache
        if cache is not None and cache.unpinned > view.free_blocks:  # (fit() would do nothing)
            cache.fit(view.free_blocks)
        view.kv_tokens = len(rep.decoding) * rep.counter + rep.sumbase
        plan = rep.batcher.plan(view)
        if self._track_delta:
            d = rep.batcher.last_delta  # type: ignore[attr-defined]
            if d < self._delta_lo:
                self._delta_lo = d
            if d > self._delta_hi:
                self._delta_hi = d
        if plan.reject:
            gone = set(plan.reject)
            rep.queue[:] = [j for j in rep.queue if j not in gone]
            self.state[list(gone)] = DROPPED
            rep.qtok -= int(self.qtok[list(gone)].sum())
        rep.timer = plan.wake_at
        if plan.prefill:
            self._start_iteration(rep, now, plan)
        elif rep.decoding and plan.decode and not self.request_level:
            self._start_span(rep, now, -1 if plan.reject else b0)
        else:
            rep.kv_start = rep.kv_end = self._kv_mib(rep, 0)
            if plan.wake_at is not None:
                self._schedule(rep, max(plan.wake_at, now))
            mark(rep, now)
