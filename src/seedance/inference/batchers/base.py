"""The batcher interface: what a replica runs in its next iteration.

NOTE(seedance): the batching algorithm, once. A replica alternates iterations; before each one
the engine asks its batcher for a :class:`Plan`: which requests get how many prefill tokens, and
whether the running requests decode one token in the same iteration. Each request carries two
counters, its output tokens so far (``out``) and the prefill tokens already computed of its
current prefill (``computed``); a prefill covers ``prompt + out`` tokens (``out > 0`` after a
preemption: recompute). A request-level batcher (``request_level = True``: static, dynamic)
is asked only when its replica is idle: the batch it admits is padded to its longest prompt,
keeps its rows until the last member finishes, and reserves its KV for ``max_new_tokens`` up
front. An iteration-level batcher is asked at every iteration boundary at which something
changed (an arrival, a completion, a timer, the end of a prefill) and shares the replica's paged
KV pool with elastic reuse: a finished request's blocks serve the next allocation at once.
Batchers read the view and return a plan; they never change engine state, and they never see a
request's true output length.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.inference.perf import StepTimes
from seedance.inference.prefix import PrefixCache


@dataclass(frozen=True, slots=True)
class Plan:
    """One iteration's decision.

    Attributes:
        prefill: ``(request, tokens)`` pairs: prefill work this iteration. A waiting request
            listed here is admitted (its blocks for the whole prefill are allocated now).
        decode: Whether the running requests also decode one token in this iteration.
        wake_at: Ask again at the first iteration boundary at or after this time (a timer).
        reject: Waiting requests the batcher can never serve (reported dropped).
    """

    prefill: tuple[tuple[int, int], ...] = ()
    decode: bool = True
    wake_at: float | None = None
    reject: tuple[int, ...] = ()


IDLE = Plan()


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """Replica pools by request class: class ``k`` holds the requests whose routing key (prompt
    plus predicted output tokens: the KV footprint in tokens) is in ``[bounds[k-1], bounds[k])``.

    Attributes:
        bounds: Increasing class boundaries (``len(replicas) - 1`` of them).
        replicas: Replicas in each pool (each >= 1).
    """

    bounds: tuple[float, ...]
    replicas: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.bounds) != len(self.replicas) - 1 or any(r < 1 for r in self.replicas):
            raise ValueError("need one bound fewer than pools, and >= 1 replica per pool")
        if any(b1 <= b0 for b0, b1 in zip(self.bounds, self.bounds[1:], strict=False)):
            raise ValueError("pool bounds must increase")

    def pool_of(self, key: float) -> int:
        """The pool of a request with routing key ``key``."""
        k = 0
        while k < len(self.bounds) and key >= self.bounds[k]:
            k += 1
        return k


@dataclass(slots=True)
class RequestBook:
    """What a batcher may know about requests (never their true output length).

    Arrays are indexed by request id and owned by the engine; batchers only read them. ``ready``
    (disaggregated serving): KV tokens a request brings with it (transferred from a prefill pool).
    """

    arrival: NDArray[np.float64]
    prompt: NDArray[np.int64]
    predicted: NDArray[np.float64]
    features: NDArray[np.float64]
    out: NDArray[np.int64]
    computed: NDArray[np.int64]
    first_token: NDArray[np.float64]
    ready: NDArray[np.int64] | None = None

    def prefill_len(self, i: int) -> int:
        """Tokens of ``i``'s (next) prefill: prompt plus output so far (recompute)."""
        return int(self.prompt[i]) + int(self.out[i])


@dataclass(slots=True)
class ReplicaView:
    """A replica as its batcher sees it at an iteration boundary (updated in place by the engine).

    Attributes:
        replica: Replica index.
        now: Simulation time (s).
        waiting: Requests queued for this replica, oldest first (shared with the pool's other
            replicas when the router is ``shared``).
        prefilling: Admitted requests whose prefill is not finished (chunked prefill).
        decoding: Requests that decode one token per iteration.
        free_blocks: Free KV blocks.
        total_blocks: KV blocks of the replica.
        block_tokens: Tokens per block.
        kv_tokens: KV tokens held by running requests.
        book: Request attributes.
        step: The replica's iteration-time model (``None`` where none is known).
        ttft_ms, tpot_ms: The deployment's SLO targets (batchers may plan against them).
        prefix: The replica's prefix cache (``None``: no prefix caching).
    """

    replica: int
    book: RequestBook
    total_blocks: int
    block_tokens: int
    now: float = 0.0
    waiting: list[int] = field(default_factory=list)
    prefilling: list[int] = field(default_factory=list)
    decoding: list[int] = field(default_factory=list)
    free_blocks: int = 0
    kv_tokens: int = 0
    step: StepTimes | None = None
    ttft_ms: float = math.inf
    tpot_ms: float = math.inf
    prefix: PrefixCache | None = None

    def cached_tokens(self, i: int) -> int:
        """Tokens of waiting request ``i``'s prefill that need no compute: KV it brought with it,
        else its prefix-cache hit (at least one token is always computed)."""
        n = self.book.prefill_len(i)
        ready = self.book.ready
        if ready is not None and ready[i] > 0:
            return min(int(ready[i]), n - 1)
        if self.prefix is not None:
            return self.prefix.hit_blocks(i, n) * self.block_tokens
        return 0

    def admit_blocks(self, i: int) -> int:
        """Free blocks that admitting waiting request ``i`` takes."""
        n = self.book.prefill_len(i)
        ready = self.book.ready
        if self.prefix is not None and (ready is None or ready[i] <= 0):
            return self.prefix.admit_blocks(i, n)
        return self.blocks_for(n)

    def admission(self, i: int) -> tuple[int, int, int]:
        """``(prefill tokens, cached_tokens(i), admit_blocks(i))`` of waiting request ``i`` in one lookup."""
        book = self.book
        n = int(book.prompt[i]) + int(book.out[i])
        ready = book.ready
        if ready is not None:
            r = int(ready[i])
            if r > 0:
                return n, min(r, n - 1), -(-n // self.block_tokens)
        if self.prefix is not None:
            h, need = self.prefix.admission(i, n)
            return n, h * self.block_tokens, need
        return n, 0, -(-n // self.block_tokens)

    @property
    def kv_usage(self) -> float:
        """Share of the KV pool in use (0..1)."""
        return 1.0 - self.free_blocks / self.total_blocks

    @property
    def running(self) -> int:
        """Requests admitted and not finished."""
        return len(self.decoding) + len(self.prefilling)

    def blocks_for(self, tokens: int) -> int:
        """Blocks that ``tokens`` tokens occupy."""
        return -(-tokens // self.block_tokens)


@dataclass(frozen=True, slots=True)
class RequestHistory:
    """Completed requests from before a run (prompt and output tokens), for sizing pools."""

    prompt: NDArray[np.int64]
    output: NDArray[np.int64]


class Batcher(ABC):
    """A batching policy for one replica; built once per replica from validated options.

    Class attributes:
        name: Registry name.
        summary: One line for ``seedancectl inference batchers``.
        request_level: True for batchers that run a padded batch to completion.
        options: Default option values; ``make_batcher`` rejects unknown keys and wrong types.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    request_level: ClassVar[bool] = False
    default_router: ClassVar[str] = "least-loaded"
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, **opts: Any) -> None:
        self.opts = dict(opts)

    @abstractmethod
    def plan(self, view: ReplicaView) -> Plan:
        """Called at an iteration boundary (for request-level batchers: when the replica is idle);
        returns what the next iteration does."""

    @classmethod
    def pool_plan(cls, opts: dict[str, Any], history: RequestHistory, replicas: int) -> PoolPlan | None:
        """Called once before a run: split the replicas into class pools (``None``: one pool).
        ``history`` holds only requests seen before the run's first arrival."""
        return None

    def observe_iteration(self, prefill_tokens: int, sq_tokens: float, decoders: int, kv_tokens: float,
                          ms: float) -> None:
        """Called by the engine after each iteration it ran with its measured duration (a span of
        pure decode steps: once, with its mean step). Default: ignored."""
        return

    def victims(self, view: ReplicaView, blocks_needed: int) -> list[int]:
        """Called when the next decode step needs ``blocks_needed`` more blocks than are free;
        returns running requests to preempt (recompute later). Default: newest arrival first, as
        vLLM does."""
        run = sorted([*view.decoding, *view.prefilling], key=lambda i: (view.book.arrival[i], i), reverse=True)
        out: list[int] = []
        freed = 0
        for i in run:
            if freed >= blocks_needed and out:
                break
            out.append(i)
            freed += view.blocks_for(int(view.book.prompt[i] + view.book.out[i]))
        return out


BATCHERS: Registry[type[Batcher]] = Registry("batcher", plugins="seedance.inference.batchers")


def _coerce(name: str, key: str, default: Any, value: Any) -> Any:
    kind = type(default)
    try:
        if kind is bool:
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return low in ("true", "1", "yes")
            return bool(value)
        if kind is int:
            f = float(value)
            if not f.is_integer():
                raise ValueError(value)
            return int(f)
        if kind is float:
            return float(value)
        if kind is tuple:
            parts = value.split(":") if isinstance(value, str) else list(value)
            return tuple(float(p) for p in parts)
        return kind(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: option {key} must be a {kind.__name__}, got {value!r}",
                         source="--batcher-option", field=key) from None


def resolve_options(cls: type[Batcher], given: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults of ``cls`` overridden by ``given`` (validated)."""
    opts = dict(cls.options)
    for key, value in (given or {}).items():
        if key not in cls.options:
            valid = ", ".join(cls.options) or "none"
            raise InputError(f"{cls.name}: unknown option {key!r}; valid options: {valid}",
                             source="--batcher-option", field=key)
        opts[key] = _coerce(cls.name, key, cls.options[key], value)
    return opts


def make_batcher(name: str, options: dict[str, Any] | None = None) -> Batcher:
    """Build the batcher registered as ``name`` (unknown names list the valid ones)."""
    cls = BATCHERS.get(name)
    return cls(**resolve_options(cls, options))


def fcfs_fit(view: ReplicaView, candidates: Sequence[int], *, max_seqs: int, max_tokens: int,
             watermark_blocks: int = 0) -> list[int]:
    """The longest FCFS prefix of ``candidates`` whose prefills fit (vLLM v0's admission rule).

    Stops at the first request that does not fit: blocks for its whole prefill (keeping
    ``watermark_blocks`` free), the running-sequence cap ``max_seqs`` and the per-iteration prefill
    token cap ``max_tokens``.
    """
    free = view.free_blocks - watermark_blocks
    seqs = view.running
    tokens = 0
    out: list[int] = []
    for i in candidates:
        length, cached, need = view.admission(i)
        n = length - cached
        if seqs + 1 > max_seqs or need > free or (out and tokens + n > max_tokens):
            break
        out.append(i)
        free -= need
        seqs += 1
        tokens += n
    return out


class ChunkFill:
    """Fills one iteration's prefill-token budget with chunks (vLLM v1's rule, shared by the
    chunked batchers): :meth:`continue_prefills` first, then :meth:`admit` new requests one by
    one until one does not fit (budget, running-sequence cap, or blocks for its whole prefill
    above ``watermark_blocks``).
    """

    __slots__ = ("budget", "free", "max_seqs", "seqs", "view", "work")

    def __init__(self, view: ReplicaView, budget: int, *, max_seqs: int, watermark_blocks: int) -> None:
        self.view = view
        self.budget = budget
        self.free = view.free_blocks - watermark_blocks
        self.seqs = view.running
        self.max_seqs = max_seqs
        self.work: list[tuple[int, int]] = []

    def continue_prefills(self) -> None:
        """Give the prefills under way their next chunks, oldest admission first."""
        book = self.view.book
        for i in self.view.prefilling:
            if self.budget <= 0:
                return
            t = min(book.prefill_len(i) - int(book.computed[i]), self.budget)
            self.work.append((i, t))
            self.budget -= t

    def admit(self, i: int) -> bool:
        """Start waiting request ``i`` with a chunk; ``False`` (nothing taken) when it does not fit."""
        length, cached, need = self.view.admission(i)
        n = length - cached
        if self.budget <= 0 or self.seqs + 1 > self.max_seqs or need > self.free:
            return False
        t = min(n, self.budget)
        self.work.append((i, t))
        self.budget -= t
        self.free -= need
        self.seqs += 1
        return True

    def plan(self) -> Plan:
        """The plan: the chunks, and every running request decodes."""
        return Plan(prefill=tuple(self.work), decode=True)
