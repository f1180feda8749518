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
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from seedance.core.errors import InputError
from seedance.inference.audit import BlockAudit
from seedance.inference.batchers.base import (
    Batcher,
    Plan,
    PoolPlan,
    ReplicaView,
    RequestBook,
    RequestHistory,
    make_batcher,
)
from seedance.inference.disagg import Disaggregation
from seedance.inference.memory import KVBudget
from seedance.inference.memseries import mark, memory_series
from seedance.inference.model import MIB, ModelShape
from seedance.inference.perf import StepTimes
from seedance.inference.prefix import PrefixCache, PrefixStructure
from seedance.inference.profiles import DecodeLengthPredictor, kv_growth_feature
from seedance.inference.routing import Admission, RouteQuery, Router, make_router
from seedance.inference.run import DECODE, DONE, DROPPED, FUTURE, PREFILL, REJECTED, SENDING, WAITING, ServingRun
from seedance.inference.trace import RequestTrace
from seedance.inference.workloads import reusable_tokens
from seedance.sim.engine import EventLoop

__all__ = ["DECODE", "DONE", "DROPPED", "FUTURE", "PREFILL", "REJECTED", "SENDING", "WAITING", "ServingRun",
           "ServingSimulator"]

_ARRIVAL, _WAKE, _SENT, _SEND = 0, 1, 2, 3
_IDLE, _ITER, _SPAN = 0, 1, 2


def _remove_all(members: list[int], gone: list[int]) -> None:
    """Remove ``gone`` (distinct members) from ``members``, keeping the order of the rest: a few
    ``list.remove`` calls (in C) where few go, one filtering pass where many do."""
    if len(gone) <= 8:
        for i in gone:
            members.remove(i)
    else:
        out = set(gone)
        members[:] = [j for j in members if j not in out]


class _Replica:
    """Engine-side state of one replica (columnar request state lives in the simulator)."""

    __slots__ = (
        "batcher", "busy", "cache", "counter", "dec_hit", "decoding", "heap", "held", "idx", "kv_end", "kv_start",
        "mem_t", "mem_v", "obs", "pad_b", "pad_len", "pf_rate", "pool", "prefilling", "qtok", "queue", "res",
        "sending", "span_b", "span_k0", "span_n", "span_t0", "sumbase", "sumq", "t_end", "timer", "view", "wake_seq",
    )

    def __init__(self, idx: int, pool: int, batcher: Batcher, view: ReplicaView, block_tokens: int) -> None:
        self.idx = idx
        self.pool = pool
        self.batcher = batcher
        self.view = view
        self.queue = view.waiting
        self.decoding = view.decoding
        self.prefilling = view.prefilling
        self.heap: list[tuple[int, int]] = []  # (counter at which it finishes, request)
        self.counter = 0
        self.sumbase = 0  # sum of decoders' base (KV tokens = counter + base)
        self.sumq = 0  # sum of base // block_tokens
        self.res = [0] * block_tokens  # decoders per base % block_tokens
        self.held = 0  # blocks held by prefilling requests (private ones)
        self.cache: PrefixCache | None = None
        self.dec_hit = 0  # decoders' blocks held by the prefix cache (not theirs alone)
        self.qtok = 0  # uncached prompt tokens of the queue
        self.sending: list[int] = []  # prefilled requests whose KV is being sent to a decode replica
        self.pf_rate = 0.0  # measured prefill tokens per ms (admission control's estimate)
        self.busy = _IDLE
        self.wake_seq = 0
        self.timer: float | None = None
        self.span_t0 = 0.0
        self.span_k0 = 0
        self.span_b = 0
        self.span_n = 0
        self.t_end = 0.0
        self.kv_start = 0.0
        self.kv_end = 0.0
        self.pad_b = 0
        self.pad_len = 0
        self.obs: tuple[int, float, int, float] = (0, 0.0, 0, 0.0)  # the running iteration's shape
        self.mem_t: list[float] = []  # KV MiB held: linear between consecutive points
        self.mem_v: list[float] = []


class ServingSimulator:
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
        self.router: Router = make_router(router or cls.default_router, router_options)
        self.admission = admission
        hist = history or RequestHistory(np.zeros(0, np.int64), np.zeros(0, np.int64))
        plan = cls.pool_plan(batchers[0].opts, hist, replicas) if disaggregate is None else None
        self.pools: PoolPlan = plan if plan is not None else PoolPlan((), (replicas,))
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
        self.reason: dict[int, str] = {}  # rejected at the front end: why
        self._slo_class = trace.slo_class
        structure = trace.prefix if trace.prefix is not None else None
        self._trace_arrival = self.book.arrival.copy()  # the trace's slots (book.arrival: send times)
        closed = structure is not None and structure.think_s is not None
        self._parent = structure.previous_turn() if closed and structure is not None else None
        self._think = structure.think_s if closed and structure is not None else None
        self._parked: dict[int, int] = {}  # unfinished previous turn -> its follow-up waiting for it
        use_cache = prefix_cache and not self.request_level
        self._kv_feature = kv_growth_feature(shape.kv_bytes_per_token)
        self._observe: list[tuple[float, int]] = []
        self._bs = budget.block_tokens
        self._total = budget.total_blocks
        self._tok_mib = shape.kv_bytes_per_token / MIB
        self._blk_mib = budget.block_bytes / MIB
        self._iterations = 0
        self._delta_lo, self._delta_hi = math.inf, -math.inf
        self._track_delta = hasattr(batchers[0], "last_delta")
        self.replicas: list[_Replica] = []
        self._pool_members: list[list[int]] = []
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
                replica = _Replica(r, k, batchers[r], view, self._bs)
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
        self.loop = EventLoop(handlers, arrival_kind=_ARRIVAL)

    # ------------------------------------------------------------------ run
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

    # ------------------------------------------------------------- arrivals
    def _on_arrival(self, now: float, first: int) -> None:
        arr = self._trace_arrival
        parent = self._parent
        i = first
        while i < len(arr) and arr[i] == now:
            if parent is None or parent[i] < 0:
                self._arrive(now, i)
            else:
                self._follow_up(now, i, int(parent[i]))
            i += 1

    def _follow_up(self, now: float, i: int, p: int) -> None:
        """Closed loop: ``i``'s trace slot came; it is sent once turn ``p`` has answered and the
        user has thought (the engine's knowledge of ``p``'s completion, never a batcher's)."""
        assert self._think is not None
        f = self.finish[p]
        if not math.isnan(f):  # answered (request-level batchers know the time of their batch's end)
            t = float(f) + float(self._think[i])
            if t > now:
                self.book.arrival[i] = t
                self.loop.schedule(t, _SEND, i)
            else:
                self._arrive(now, i)
        elif self.state[p] == DROPPED or self.state[p] == REJECTED:
            self.state[i] = DROPPED  # the conversation ended without an answer
        else:
            self._parked[p] = i

    def _answered(self, p: int) -> None:
        """Turn ``p``'s completion time is known: send its parked follow-up after the think time."""
        i = self._parked.pop(p, -1)
        if i >= 0:
            assert self._think is not None
            t = max(float(self.finish[p]) + float(self._think[i]), self.loop.now)
            self.book.arrival[i] = t
            self.loop.schedule(t, _SEND, i)

    def _on_send(self, now: float, i: int) -> None:
        self._arrive(now, i)

    def _arrive(self, now: float, i: int) -> None:
        obs = self._observe
        pred = self.predictor
        book = self.book
        while obs and obs[0][0] <= now:
            _, j = heapq.heappop(obs)
            pred.observe(int(book.prompt[j]), int(self._gen[j]))
        p = int(book.prompt[i])
        guess = pred.predict(p)
        self.baseline_pred[i] = pred.mean
        book.predicted[i] = guess
        f = book.features[i]
        f[0] = math.log2(p)
        f[1] = math.log2(max(guess, 1.0))
        f[2] = self._kv_feature
        if -(-(p + 1) // self._bs) > self._total:
            self.state[i] = DROPPED  # its prompt and first decode step can never fit
            return
        self.state[i] = WAITING
        members = self._pool_members[self.pools.pool_of(p + guess)]
        reps = self.replicas
        if self.router.shared:
            reps[members[0]].queue.append(i)
            for r in members:
                self._notify(reps[r], now)
        else:
            q = self._query
            q.request, q.prompt = i, p
            q.slo_class = int(self._slo_class[i]) if self._slo_class is not None else 0
            pool = [reps[r] for r in members]
            q.outstanding = [len(x.queue) + len(x.decoding) + len(x.prefilling) for x in pool]
            bs = self._bs
            q.matched = [x.cache.hit_blocks(i, p) * bs if x.cache is not None else 0 for x in pool] \
                if self.router.uses_prefix else [0] * len(members)
            k = members.index(self.router.pick(members, q))
            if self.admission is not None:
                k = self._admit(i, q, members, k)
                if k < 0:
                    return
            rep = reps[members[k]]
            own = p - (q.matched[k] if self.router.uses_prefix else 0)
            self.qtok[i] = own
            rep.qtok += own
            rep.queue.append(i)
            self._notify(rep, now)

    def _admit(self, i: int, q: RouteQuery, members: list[int], k: int) -> int:
        """Admission control: the chosen replica if its predicted TTFT keeps the target, else the
        first other replica that does, else -1 (rejected, with the reason)."""
        adm = self.admission
        assert adm is not None
        target = adm.slack * adm.target(q.slo_class)
        reps = self.replicas
        best = math.inf
        prompt, out, computed = self.book.prompt, self.book.out, self.book.computed
        for j in [k, *(x for x in range(len(members)) if x != k)]:
            r = reps[members[j]]
            own = q.prompt - q.matched[j]
            t = adm.predicted_ttft_ms(r.qtok + sum(int(prompt[x]) + int(out[x]) - int(computed[x])
                                                   for x in r.prefilling), own, r.pf_rate)
            if t <= target:
                return j
            best = min(best, t)
        self.state[i] = REJECTED
        self.reason[i] = f"predicted TTFT {best:.0f} ms > {target:.0f} ms on every replica"
        return -1

    def _notify(self, rep: _Replica, now: float) -> None:
        """A request joined ``rep``'s queue at ``now``: wake an idle replica, or end a decode span
        at its next iteration boundary (iteration-level batchers only)."""
        if rep.busy == _IDLE:
            self._schedule(rep, now)
        elif rep.busy == _SPAN and not self.request_level and now < rep.t_end:
            k = self.step.steps_within(rep.span_b, rep.span_k0, (now - rep.span_t0) * 1000.0)
            if k < rep.span_n:
                self._set_span(rep, k)

    # ---------------------------------------------------------------- wakes
    def _schedule(self, rep: _Replica, t: float) -> None:
        rep.wake_seq += 1
        rep.t_end = t
        self.loop.schedule(t, _WAKE, rep.wake_seq * self._nrep + rep.idx)

    def _on_wake(self, now: float, token: int) -> None:
        nrep = self._nrep
        rep = self.replicas[token % nrep]
        if token // nrep != rep.wake_seq:
            return  # superseded by a later schedule
        busy = rep.busy
        rep.busy = _IDLE
        if busy != _IDLE:  # the end of an iteration or span: its memory peak, before anything is freed
            rep.mem_t.append(now)
            rep.mem_v.append(rep.kv_end)
        if busy == _SPAN:
            self._finish_span(rep, now)
        elif busy == _ITER:
            self._finish_iteration(rep, now)
        self._next(rep, now)
        if self._audit is not None:
            self._audit.check(self, rep)

    # -------------------------------------------------- block accounting
    def _dec_blocks(self, rep: _Replica, n: int) -> int:
        """Blocks the decoders hold after ``n`` more steps."""
        b = len(rep.decoding)
        if not b:
            return 0
        bs = self._bs
        q, r = divmod(rep.counter + n + bs - 1, bs)
        return b * q + rep.sumq + (sum(rep.res[bs - r:]) if r else 0)

    def _blocks_after(self, rep: _Replica, n: int) -> int:
        """Blocks ``rep`` holds after its decoders take ``n`` more steps (``_dec_blocks`` inlined: hot)."""
        if rep.pad_b:
            return rep.pad_b * (-(-(rep.pad_len + rep.counter + n) // self._bs))
        b = len(rep.decoding)
        if b:
            bs = self._bs
            q, r = divmod(rep.counter + n + bs - 1, bs)
            used = b * q + rep.sumq + (sum(rep.res[bs - r:]) if r else 0) + rep.held
        else:
            used = rep.held
        cache = rep.cache
        return used if cache is None else used - rep.dec_hit + cache.pinned

    def _add_decoder(self, rep: _Replica, i: int, base: int) -> None:
        self.kvbase[i] = base
        rep.dec_hit += int(self.hit[i])
        rep.decoding.append(i)
        rep.sumbase += base
        q, r = divmod(base, self._bs)
        rep.sumq += q
        rep.res[r] += 1

    def _drop_decoder_stats(self, rep: _Replica, i: int) -> None:
        rep.dec_hit -= int(self.hit[i])
        base = int(self.kvbase[i])
        rep.sumbase -= base
        q, r = divmod(base, self._bs)
        rep.sumq -= q
        rep.res[r] -= 1

    def blocks_after(self, rep: _Replica, n: int) -> int:
        """Blocks ``rep`` holds after its decoders take ``n`` more steps (the audit's view)."""
        return self._blocks_after(rep, n)

    def decoder_blocks(self, rep: _Replica, n: int) -> int:
        """Blocks ``rep``'s decoders hold after ``n`` more steps (the audit's view)."""
        return self._dec_blocks(rep, n)

    def _kv_mib(self, rep: _Replica, n: int) -> float:
        """KV MiB ``rep`` holds after ``n`` more decode steps (blocks, or the padded rectangle)."""
        if rep.pad_b:
            return rep.pad_b * (rep.pad_len + rep.counter + n) * self._tok_mib
        return self._blocks_after(rep, n) * self._blk_mib

    # ------------------------------------------------------------ decisions
    def _next(self, rep: _Replica, now: float) -> None:
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

    # -------------------------------------------------- prefill iterations
    def _start_iteration(self, rep: _Replica, now: float, plan: Plan) -> None:
        book = self.book
        bs = self._bs
        tokens = 0
        sq = 0.0
        admitted: list[int] = []
        view = rep.view
        starts: dict[int, tuple[int, int, int]] = {}
        state = self.state
        for i, t in plan.prefill:
            st = state[i]
            if st == WAITING:
                admitted.append(i)
                length, c, blocks = view.admission(i)
                starts[i] = (c, blocks, length)
            elif st != PREFILL or i not in rep.prefilling:
                raise RuntimeError(f"batcher scheduled prefill for request {i} in state {st}")
            else:
                c = int(book.computed[i])
                length = book.prefill_len(i)
            if t < 1 or c + t > length:
                raise RuntimeError(f"bad prefill chunk {t} for request {i} ({c}/{length} done)")
            tokens += t
            sq += t * t + 2.0 * t * c
        if admitted:
            gone = set(admitted)
            queue = rep.queue
            k = len(admitted)
            if len(gone) == k and set(queue[:k]) == gone:
                del queue[:k]  # the usual case: the queue's head (a request is queued once)
            elif len(gone) != k or not gone.issubset(queue):
                raise RuntimeError("batcher admitted requests that are not in its queue")
            else:
                queue[:] = [j for j in queue if j not in gone]
            need = 0
            cache = rep.cache
            ready = book.ready
            for i in admitted:
                state[i] = PREFILL
                c0, blocks, length = starts[i]
                book.computed[i] = c0
                rep.qtok -= int(self.qtok[i])
                rep.prefilling.append(i)
                if not self.request_level:
                    h = -(-length // bs)
                    if cache is not None and (ready is None or ready[i] <= 0):
                        first = bool(self.cached_first[i] < 0)
                        hit = cache.acquire(i, length, first=first)
                        if first:
                            self.cached_first[i] = hit * bs
                        self.hit[i] = hit
                        h -= hit
                    self.held[i] = h
                    rep.held += h
                    need += blocks
            if self._audit is not None and not self.request_level:
                self._audit.sync(self, rep)
            if need > rep.view.free_blocks:
                raise RuntimeError(f"batcher admitted {need} blocks with {rep.view.free_blocks} free")
        if self.request_level:
            lens = [book.prefill_len(i) for i, _ in plan.prefill]
            rep.pad_b, rep.pad_len, rep.counter = len(lens), max(lens), 0
            if self._blocks_after(rep, 0) > self._total:
                raise RuntimeError("request-level batch does not fit the KV pool")
            tokens = rep.pad_b * rep.pad_len  # padded to the longest prompt
            sq = float(rep.pad_b * rep.pad_len * rep.pad_len)
        for i, t in plan.prefill:
            book.computed[i] += t
        decode = plan.decode and bool(rep.decoding) and not self.request_level
        b1 = -1  # blocks after this iteration's decode step, where known
        if decode:
            b1 = self._blocks_after(rep, 1)
            if b1 > self._total:
                self._preempt(rep, now, 1)
                decode = bool(rep.decoding)
                b1 = -1
        b = len(rep.decoding) if decode else 0
        kv = b * rep.counter + rep.sumbase if b else 0
        ms = self.step.iteration_ms(tokens, sq, b, kv)
        rep.obs = (tokens, sq, b, float(kv))
        rep.span_n = 1 if decode else 0
        if rep.pad_b:
            if rep.cache is not None:
                rep.cache.fit(self._total - self._blocks_after(rep, rep.span_n))
            rep.kv_start = self._kv_mib(rep, 0)
            rep.kv_end = self._kv_mib(rep, rep.span_n)
        else:  # (the cache's eviction moves no pinned block: the counts hold across fit)
            b0 = self._blocks_after(rep, 0)
            if not decode:
                b1 = b0
            elif b1 < 0:
                b1 = self._blocks_after(rep, 1)
            cache = rep.cache
            if cache is not None and cache.unpinned > self._total - b1:  # (fit() would do nothing)
                cache.fit(self._total - b1)
            rep.kv_start = b0 * self._blk_mib
            rep.kv_end = b1 * self._blk_mib
        self._iterations += 1
        rep.span_t0 = now
        rep.busy = _ITER
        self._schedule(rep, now + ms / 1000.0)
        mark(rep, now)

    def _finish_iteration(self, rep: _Replica, now: float) -> None:
        book = self.book
        ms = (now - rep.span_t0) * 1000.0
        rep.batcher.observe_iteration(*rep.obs, ms)
        if self.admission is not None:
            rep.pf_rate = self.admission.update_rate(rep.pf_rate, rep.obs[0], ms)
        if rep.span_n:
            rep.counter += 1
            self._complete_due(rep, now)
        finished = [i for i in rep.prefilling if book.computed[i] >= book.prefill_len(i)]
        if finished:
            _remove_all(rep.prefilling, finished)
        for i in finished:
            length = book.prefill_len(i)
            if math.isnan(book.first_token[i]):
                book.first_token[i] = now
            book.out[i] += 1
            book.computed[i] = 0
            rep.held -= int(self.held[i])
            self.held[i] = 0
            if rep.cache is not None:
                self.hit[i] += rep.cache.publish(i, length)
            if book.out[i] >= self._gen[i]:
                self._done(rep, i, now)
                continue
            if self.disagg is not None and rep.pool == 0:  # send the KV to the decode pool
                self.state[i] = SENDING
                self.held[i] = -(-length // self._bs) - int(self.hit[i])
                rep.held += int(self.held[i])
                rep.sending.append(i)
                self.loop.schedule(now + self.disagg.transfer_s(length, self.shape.kv_bytes_per_token), _SENT,
                                   i * len(self.replicas) + rep.idx)
                continue
            self.state[i] = DECODE
            if self.request_level:
                rep.decoding.append(i)
            else:
                self._add_decoder(rep, i, length - rep.counter)
            heapq.heappush(rep.heap, (rep.counter + int(self._gen[i] - book.out[i]), i))
        if self.request_level:
            self._start_padded_span(rep, now)

    def _on_sent(self, now: float, token: int) -> None:
        """A KV transfer ended: free it on the prefill replica, queue the request at a decode replica."""
        nrep = len(self.replicas)
        i, src = divmod(token, nrep)
        rep = self.replicas[src]
        rep.sending.remove(i)
        rep.held -= int(self.held[i])
        self.held[i] = 0
        if rep.cache is not None:
            rep.cache.release(i, now)
        self.hit[i] = 0
        if self._audit is not None:
            self._audit.free(rep.idx, i)
        book = self.book
        assert book.ready is not None
        book.ready[i] = book.prefill_len(i) - 1
        self.state[i] = WAITING
        members = self._pool_members[1]
        reps = self.replicas
        dst = reps[members[0]]  # the least loaded (queued plus running); ties: the lowest index
        load = len(dst.queue) + len(dst.decoding) + len(dst.prefilling)
        for r in members[1:]:
            x = reps[r]
            n = len(x.queue) + len(x.decoding) + len(x.prefilling)
            if n < load or (n == load and r < dst.idx):
                dst, load = x, n
        self.qtok[i] = 1
        dst.qtok += 1
        dst.queue.append(i)
        self._notify(dst, now)
        if rep.busy == _IDLE:
            self._schedule(rep, now)  # its freed blocks may admit waiting work

    # ------------------------------------------------------ decode spans
    def _start_span(self, rep: _Replica, now: float, b0: int = -1) -> None:
        """A run of pure decode steps; ``b0``: ``_blocks_after(rep, 0)`` where the caller knows it."""
        n = rep.heap[0][0] - rep.counter
        total = self._total
        bn = self._blocks_after(rep, n)  # blocks at the span's end
        if bn > total:
            lo, hi = 0, n  # the largest m < n with blocks_after(m) <= total
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._blocks_after(rep, mid) <= total:
                    lo = mid
                else:
                    hi = mid
            n = lo
            bn = -1
            if n == 0:
                self._preempt(rep, now, 1)
                if rep.decoding:
                    self._start_span(rep, now)
                else:
                    self._next(rep, now)
                return
        b = len(rep.decoding)
        rep.span_b = b
        rep.span_k0 = b * rep.counter + rep.sumbase
        if rep.timer is not None and rep.timer > now:
            m = self.step.steps_within(b, rep.span_k0, (rep.timer - now) * 1000.0)
            if m < n:
                n, bn = m, -1
        rep.span_t0 = now
        rep.kv_start = (b0 if b0 >= 0 else self._blocks_after(rep, 0)) * self._blk_mib
        rep.busy = _SPAN
        self._set_span(rep, n, bn)
        mark(rep, now)

    def _start_padded_span(self, rep: _Replica, now: float) -> None:
        """Decode a padded batch to its end; members finish at their own steps (streamed)."""
        b = rep.pad_b
        k0 = b * rep.pad_len
        rep.span_b, rep.span_k0, rep.span_t0 = b, k0, now
        rep.kv_start = self._kv_mib(rep, 0)
        rep.busy = _SPAN
        if rep.heap:
            ids = np.asarray([i for _, i in rep.heap])
            steps = np.asarray([f for f, _ in rep.heap], dtype=np.float64) - rep.counter
            a, c = self.step.decode_base(b), self.step.kv_ms_per_token
            t_ms = steps * a + c * (steps * k0 + b * steps * (steps - 1) / 2.0)
            self.finish[ids] = now + t_ms / 1000.0
            for i in ids.tolist():
                heapq.heappush(self._observe, (float(self.finish[i]), i))
                if self._parked:
                    self._answered(i)
            n = max(f for f, _ in rep.heap) - rep.counter
        else:
            n = 0
        self._set_span(rep, n)
        mark(rep, now)

    def _set_span(self, rep: _Replica, n: int, blocks: int = -1) -> None:
        """The span ends after ``n`` steps (``blocks``: ``_blocks_after(rep, n)`` where known)."""
        rep.span_n = n
        rep.kv_end = blocks * self._blk_mib if blocks >= 0 else self._kv_mib(rep, n)
        self._schedule(rep, rep.span_t0 + self.step.decode_span_ms(rep.span_b, rep.span_k0, n) / 1000.0)

    def _finish_span(self, rep: _Replica, now: float) -> None:
        n = rep.span_n
        if n > 0 and not self.request_level:
            rep.batcher.observe_iteration(0, 0.0, rep.span_b, rep.span_k0 + rep.span_b * (n - 1) / 2.0,
                                          (now - rep.span_t0) * 1000.0 / n)
        self._iterations += n
        rep.counter += n
        rep.kv_start = rep.kv_end
        if not self.request_level:
            if rep.heap and rep.heap[0][0] <= rep.counter:
                self._complete_due(rep, now)
            return
        done = [i for _, i in rep.heap]  # their finish times were set when the span started
        self.state[done] = DONE
        self.book.out[done] = self._gen[done]
        rep.heap.clear()
        rep.decoding.clear()
        rep.pad_b = rep.pad_len = rep.counter = 0
        rep.kv_start = rep.kv_end = 0.0

    def _complete_due(self, rep: _Replica, now: float) -> None:
        heap = rep.heap
        if not heap or heap[0][0] > rep.counter:
            return
        finished = []
        while heap and heap[0][0] <= rep.counter:
            finished.append(heapq.heappop(heap)[1])
        _remove_all(rep.decoding, finished)
        for i in finished:
            self._drop_decoder_stats(rep, i)
            self.book.out[i] = self._gen[i]
            self._done(rep, i, now)

    def _done(self, rep: _Replica, i: int, now: float) -> None:
        self.state[i] = DONE
        self.finish[i] = now
        if self._parked:
            self._answered(i)
        if rep.cache is not None:
            rep.cache.publish(i, int(self.book.prompt[i] + self._gen[i]) - 1)
            rep.cache.release(i, now)
            self.hit[i] = 0
        heapq.heappush(self._observe, (now, i))
        if self._audit is not None:
            self._audit.free(rep.idx, i)

    # ------------------------------------------------------- preemption
    def _preempt(self, rep: _Replica, now: float, steps: int) -> None:
        """Free blocks until the decoders' next ``steps`` steps fit; victims go back to the queue
        head and are recomputed when readmitted. A decoder that cannot take the steps even alone
        can never finish: it is dropped."""
        total = self._total
        bs = self._bs
        book = self.book
        for i in list(rep.decoding):
            if -(-(rep.counter + int(self.kvbase[i]) + steps) // bs) > total:
                self._evict(rep, i)
                rep.queue.remove(i)
                self.state[i] = DROPPED
        while rep.decoding or rep.prefilling:
            need = self._blocks_after(rep, steps) - total
            if need <= 0:
                return
            if rep.decoding:  # batchers read output counts: bring the decoders' up to date
                idx = np.asarray(rep.decoding)
                book.out[idx] = rep.counter + self.kvbase[idx] - book.prompt[idx] + 1
            rep.view.now = now
            rep.view.free_blocks = total - self._blocks_after(rep, 0)
            victims = rep.batcher.victims(rep.view, need)
            if not victims:
                raise RuntimeError("batcher returned no victim while memory is short")
            for i in victims:
                self._evict(rep, i)

    def _evict(self, rep: _Replica, i: int) -> None:
        st = self.state[i]
        book = self.book
        if st == DECODE:
            rep.decoding.remove(i)
            self._drop_decoder_stats(rep, i)
            book.out[i] = rep.counter + self.kvbase[i] - book.prompt[i] + 1
            rep.heap[:] = [(f, j) for f, j in rep.heap if j != i]
            heapq.heapify(rep.heap)
        elif st == PREFILL:
            rep.prefilling.remove(i)
            rep.held -= int(self.held[i])
            self.held[i] = 0
        else:
            raise RuntimeError(f"cannot preempt request {i} in state {st}")
        book.computed[i] = 0
        if book.ready is not None and not self._perfect:
            book.ready[i] = 0  # recomputed where it is
        if rep.cache is not None:
            rep.cache.release(i, rep.view.now)
            self.hit[i] = 0
        self.state[i] = WAITING
        self.preempt[i] += 1
        rep.queue.insert(0, i)
        self.qtok[i] = book.prefill_len(i)
        rep.qtok += int(self.qtok[i])
        if self._audit is not None:
            self._audit.free(rep.idx, i)
