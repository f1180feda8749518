"""The serving engine's state and block accounting, shared by its parts (:mod:`sim`).

NOTE(seedance): the engine is one class, :class:`~seedance.inference.sim.ServingSimulator`, built
from parts by job: this module (each replica's engine-side state, the block accounting, the
wake-up schedule), :mod:`engine_steps` (prefill iterations, decode spans, completions,
preemption), :mod:`engine_front` (arrivals, closed-loop follow-ups, routing, admission control,
KV transfers to the decode pool) and :mod:`sim` (construction, the run, the decisions at a
wake-up). :class:`EngineCore` declares the state all parts share; only the simulator assigns it.

Blocks are counted, never listed: a decoding request's KV length is ``counter + base``
(``counter``: the replica's decode steps so far), and the replica keeps the block count of all
its decoders as ``B * q + sum(q_i) + #{residues}`` over the residues of ``base mod block_tokens``,
so "blocks after n more steps" is O(block_tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seedance.inference.batchers.base import Batcher, PoolPlan, ReplicaView, RequestBook
from seedance.inference.prefix import PrefixCache

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from seedance.inference.audit import BlockAudit
    from seedance.inference.disagg import Disaggregation
    from seedance.inference.memory import KVBudget
    from seedance.inference.model import ModelShape
    from seedance.inference.perf import StepTimes
    from seedance.inference.profiles import DecodeLengthPredictor
    from seedance.inference.routing import Admission, RouteQuery, Router
    from seedance.inference.trace import RequestTrace
    from seedance.sim.engine import EventLoop

#: Event kinds of the loop.
EV_ARRIVAL, EV_WAKE, EV_SENT, EV_SEND = 0, 1, 2, 3
#: What a replica is running.
RUN_IDLE, RUN_ITER, RUN_SPAN = 0, 1, 2


def remove_all(members: list[int], gone: list[int]) -> None:
    """Remove ``gone`` (distinct members) from ``members``, keeping the order of the rest: a few
    ``list.remove`` calls (in C) where few go, one filtering pass where many do."""
    if len(gone) <= 8:
        for i in gone:
            members.remove(i)
    else:
        out = set(gone)
        members[:] = [j for j in members if j not in out]


class Replica:
    """Engine-side state of one replica (columnar request state lives in the simulator)."""

    __slots__ = (
        "batcher", "busy", "cache", "counter", "dec_hit", "decoding", "heap", "held", "idx", "kv_end", "kv_start",
        "mem_t", "mem_v", "obs", "pad_b", "pad_len", "pf_left", "pf_rate", "pool", "prefilling", "qtok", "queue", "res",
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
        self.pf_left = 0  # prefill tokens its prefilling requests have still to compute
        self.cache: PrefixCache | None = None
        self.dec_hit = 0  # decoders' blocks held by the prefix cache (not theirs alone)
        self.qtok = 0  # uncached prompt tokens of the queue
        self.sending: list[int] = []  # prefilled requests whose KV is being sent to a decode replica
        self.pf_rate = 0.0  # measured prefill tokens per ms (admission control's estimate)
        self.busy = RUN_IDLE
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


class EngineCore:
    """The state the engine's parts share (assigned by :class:`~seedance.inference.sim.ServingSimulator`),
    the block accounting and the wake-up schedule."""

    trace: RequestTrace
    step: StepTimes
    shape: ModelShape
    budget: KVBudget
    disagg: Disaggregation | None
    policy: str
    request_level: bool
    router: Router
    admission: Admission | None
    pools: PoolPlan
    predictor: DecodeLengthPredictor
    audit: bool
    book: RequestBook
    state: NDArray[np.int8]
    finish: NDArray[np.float64]
    preempt: NDArray[np.int32]
    kvbase: NDArray[np.int64]
    held: NDArray[np.int64]
    baseline_pred: NDArray[np.float64]
    hit: NDArray[np.int64]
    cached_first: NDArray[np.int64]
    qtok: NDArray[np.int64]
    reason: dict[int, str]
    replicas: list[Replica]
    loop: EventLoop
    _gen: NDArray[np.int64]
    _slo_class: NDArray[np.int64] | None
    _trace_arrival: NDArray[np.float64]
    _parent: NDArray[np.int64] | None
    _think: NDArray[np.float64] | None
    _parked: dict[int, int]
    _perfect: bool
    _kv_feature: float
    _observe: list[tuple[float, int]]
    _bs: int
    _total: int
    _tok_mib: float
    _blk_mib: float
    _iterations: int
    _delta_lo: float
    _delta_hi: float
    _track_delta: bool
    _pool_members: list[list[int]]
    _nrep: int
    _audit: BlockAudit | None
    _query: RouteQuery

    def _next(self, rep: Replica, now: float) -> None:
        """Ask the batcher and start the next iteration or span (or go idle): :mod:`sim`."""
        raise NotImplementedError

    def _answered(self, p: int) -> None:
        """Turn ``p``'s completion time is known: :mod:`engine_front`."""
        raise NotImplementedError

    def _schedule(self, rep: Replica, t: float) -> None:
        rep.wake_seq += 1
        rep.t_end = t
        self.loop.schedule(t, EV_WAKE, rep.wake_seq * self._nrep + rep.idx)

    def _dec_blocks(self, rep: Replica, n: int) -> int:
        """Blocks the decoders hold after ``n`` more steps."""
        b = len(rep.decoding)
        if not b:
            return 0
        bs = self._bs
        q, r = divmod(rep.counter + n + bs - 1, bs)
        return b * q + rep.sumq + (sum(rep.res[bs - r:]) if r else 0)

    def _blocks_after(self, rep: Replica, n: int) -> int:
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

    def _add_decoder(self, rep: Replica, i: int, base: int) -> None:
        self.kvbase[i] = base
        rep.dec_hit += int(self.hit[i])
        rep.decoding.append(i)
        rep.sumbase += base
        q, r = divmod(base, self._bs)
        rep.sumq += q
        rep.res[r] += 1

    def _drop_decoder_stats(self, rep: Replica, i: int) -> None:
        rep.dec_hit -= int(self.hit[i])
        base = int(self.kvbase[i])
        rep.sumbase -= base
        q, r = divmod(base, self._bs)
        rep.sumq -= q
        rep.res[r] -= 1

    def blocks_after(self, rep: Replica, n: int) -> int:
        """Blocks ``rep`` holds after its decoders take ``n`` more steps (the audit's view)."""
        return self._blocks_after(rep, n)

    def decoder_blocks(self, rep: Replica, n: int) -> int:
        """Blocks ``rep``'s decoders hold after ``n`` more steps (the audit's view)."""
        return self._dec_blocks(rep, n)

    def _kv_mib(self, rep: Replica, n: int) -> float:
        """KV MiB ``rep`` holds after ``n`` more decode steps (blocks, or the padded rectangle)."""
        if rep.pad_b:
            return rep.pad_b * (rep.pad_len + rep.counter + n) * self._tok_mib
        return self._blocks_after(rep, n) * self._blk_mib
