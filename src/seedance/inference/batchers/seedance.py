"""Seedance: task-profile batching with an adaptive δ, SLO-bounded iterations and elastic KV.

NOTE(seedance): the algorithm, once (whitepaper §2.1, read in SPEC-MAP.md).
  1. Profiles. Every request has a profile ``(log2 prompt, log2 predicted decode steps, log2 KV
     growth per step)`` (see :mod:`seedance.inference.profiles`); distances are in octaves.
  2. δ. ``δ = delta`` while the replica's KV pool is at most ``shrink_at`` (85%) full, and
     ``shrink_to * delta`` (0.3 of it) above: under memory pressure only near-identical requests
     join a batch together.
  3. Iteration budget. Every iteration decodes all running requests and may add prefill work
     (chunks, as in Sarathi). The prefill tokens are capped so that the iteration's predicted time
     (the batch size and the KV tokens the decodes attend to, priced by an
     :class:`~seedance.inference.stepmodel.OnlineStepModel` fitted to the durations of the
     iterations this replica has run: ``step_model="online"``, the default; or by the replica's
     step-time profile, ``step_model="profile"``, which in the simulator *is* the ground truth and
     so is an oracle kept only for comparison) stays within ``iteration_share`` of the TPOT target.
     Before the online model has ``warmup`` observations, the budget is ``min_chunk``. Every running request's TPOT
     is a mean of iteration times, so it stays within the target while the decodes alone fit;
     load turns into queueing (TTFT), which is where the SLO leaves room. When the oldest waiting
     request has used ``ttft_guard`` of its TTFT target, at least ``min_chunk`` tokens are
     prefilled per iteration regardless.
  4. Clustering. Prefills already under way continue first. New requests are then taken in
     clusters: the oldest waiting request anchors a cluster of the waiting requests within δ of its
     profile (queue order); the next oldest request outside it anchors the next, and so on until
     the budget is spent. Above ``shrink_at`` only the first cluster is admitted.
  5. Elastic KV. Blocks are allocated as tokens arrive and freed at completion, where the next
     admission takes them at once; a request is admitted when its prefill's blocks fit above a
     watermark. When a decode step finds no free block, the newest request is preempted and
     recomputed later (vLLM's rule).
  6. Pools (optional, ``pools > 1``). Requests are routed by class (prompt plus predicted output
     tokens, i.e. KV footprint) to replica pools sized by each class's share of past token work.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from seedance.inference.batchers.base import (
    BATCHERS,
    IDLE,
    Batcher,
    ChunkFill,
    Plan,
    PoolPlan,
    ReplicaView,
    RequestHistory,
)
from seedance.inference.stepmodel import OnlineStepModel


def adaptive_delta(base: float, usage: float, *, shrink_at: float = 0.85, shrink_to: float = 0.3) -> float:
    """δ for a KV pool ``usage`` (0..1): ``base`` up to ``shrink_at``, ``shrink_to * base`` above.

    >>> adaptive_delta(1.0, 0.5), adaptive_delta(1.0, 0.9)
    (1.0, 0.3)
    """
    return base * shrink_to if usage > shrink_at else base


def clusters(features: np.ndarray[Any, Any], candidates: list[int], delta: float) -> Iterator[list[int]]:
    """Greedy anchored clusters of ``candidates`` (queue order), computed lazily: each cluster is
    the oldest request not yet clustered and every later one within L2 distance ``delta`` of it.

    >>> f = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.2, 0.0]])
    >>> list(clusters(f, [0, 1, 2, 3], 1.0))
    [[0, 1], [2, 3]]
    """
    if len(candidates) <= 1:
        if candidates:
            yield list(candidates)
        return
    idx = np.asarray(candidates)
    pts = features[idx]
    left = np.ones(len(idx), dtype=bool)
    d2 = delta * delta
    k = 0
    while k < len(idx):
        near = left & (np.sum((pts - pts[k]) ** 2, axis=1) <= d2)
        near[k] = True
        yield idx[near].tolist()
        left &= ~near
        rest = np.flatnonzero(left)
        if not rest.size:
            return
        k = int(rest[0])


def admit_clusters(features: np.ndarray[Any, Any], candidates: list[int], delta: float,
                   admit: Callable[[int], bool], *, first_only: bool = False) -> None:
    """Offer ``candidates`` to ``admit`` cluster by cluster, in the order of :func:`clusters`,
    stopping at the first refusal (and after the first cluster with ``first_only``).

    Lazy: a candidate's distance is computed only when the offers reach it (an iteration usually
    admits a few requests of a long queue, so most of the window is never looked at). The squared
    distance is summed left to right, as numpy sums a row of a few features, so the clusters
    and the offers are exactly those of :func:`clusters`.

    >>> f = np.array([[0.0, 0.0], [0.5, 0.0], [3.0, 0.0], [3.2, 0.0]])
    >>> seen = []
    >>> admit_clusters(f, [0, 1, 2, 3], 1.0, lambda i: seen.append(i) or i != 2)
    >>> seen
    [0, 1, 2]
    """
    left = list(candidates)
    d2 = delta * delta
    while left:
        anchor = features[left[0]].tolist()
        if not admit(left[0]):
            return
        rest: list[int] = []
        for j in left[1:]:
            d = 0.0
            for x, a in zip(features[j].tolist(), anchor, strict=True):
                d += (x - a) * (x - a)
            if d <= d2:
                if not admit(j):
                    return
            else:
                rest.append(j)
        if first_only:
            return
        left = rest


@BATCHERS.register("seedance")
class SeedanceBatcher(Batcher):
    """Profile-clustered, SLO-bounded iteration-level batching with elastic paged KV."""

    name = "seedance"
    summary = "task-profile clusters (adaptive δ), TPOT-bounded iterations, elastic paged KV, optional pools"
    options = {
        "delta": 1.0,
        "shrink_at": 0.85,
        "shrink_to": 0.3,
        "iteration_share": 0.9,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "min_chunk": 256,
        "ttft_guard": 0.5,
        "watermark": 0.01,
        "window": 64,
        "pools": 1,
        "step_model": "online",
    }

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        for key in ("delta", "iteration_share"):
            if not float(self.opts[key]) > 0:
                from seedance.core.errors import InputError

                raise InputError(f"seedance: option {key} must be > 0", source="--batcher-option", field=key)
        if not 0 < float(self.opts["shrink_to"]) <= 1 or not 0 < float(self.opts["shrink_at"]) <= 1:
            from seedance.core.errors import InputError

            raise InputError("seedance: shrink_at and shrink_to must be in (0, 1]", source="--batcher-option",
                             field="shrink_to")
        if self.opts["step_model"] not in ("online", "profile"):
            from seedance.core.errors import InputError

            raise InputError(f"seedance: step_model must be online or profile, got {self.opts['step_model']!r}",
                             source="--batcher-option", field="step_model")
        self.last_delta = float(self.opts["delta"])
        self.step_model = OnlineStepModel()
        # the options as the hot path reads them (converted once; ``opts`` stays the record)
        self._cap = int(self.opts["max_num_batched_tokens"])
        self._share = float(self.opts["iteration_share"])
        self._profile = self.opts["step_model"] == "profile"
        self._min_chunk = int(self.opts["min_chunk"])
        self._guard = float(self.opts["ttft_guard"])
        self._max_seqs = int(self.opts["max_num_seqs"])
        self._watermark = float(self.opts["watermark"])
        self._window = int(self.opts["window"])
        self._delta = float(self.opts["delta"])
        self._shrink_at = float(self.opts["shrink_at"])
        self._shrink_to = float(self.opts["shrink_to"])

    def observe_iteration(self, prefill_tokens: int, sq_tokens: float, decoders: int, kv_tokens: float,
                          ms: float) -> None:
        """The engine measured one iteration (a decode span: its mean step)."""
        self.step_model.observe(prefill_tokens, sq_tokens, decoders, kv_tokens, ms)

    def delta(self, view: ReplicaView) -> float:
        """δ at the view's KV usage."""
        return adaptive_delta(self._delta, view.kv_usage, shrink_at=self._shrink_at, shrink_to=self._shrink_to)

    def budget(self, view: ReplicaView) -> int:
        """Prefill tokens the next iteration may add without exceeding the TPOT bound."""
        cap = self._cap
        b = len(view.decoding)
        if b == 0 or not math.isfinite(view.tpot_ms):
            return cap
        limit = self._share * view.tpot_ms
        if self._profile:
            step = view.step
            if step is None:
                return cap
            limit -= step.kv_ms_per_token * view.kv_tokens
            if step.decode_base(b) > limit:
                tokens = 0
            else:
                tokens = max(step.max_prefill_tokens(limit, cap + b) - b, 0)
        else:
            est = self.step_model.max_prefill_tokens(limit, b, view.kv_tokens, cap)
            tokens = self._min_chunk if est is None else est
        if tokens < self._min_chunk and view.waiting and math.isfinite(view.ttft_ms):
            waited = (view.now - float(view.book.arrival[view.waiting[0]])) * 1000.0
            if waited >= self._guard * view.ttft_ms or view.prefilling:
                tokens = self._min_chunk
        return min(tokens, cap)

    def plan(self, view: ReplicaView) -> Plan:
        if not view.waiting and not view.prefilling:
            return IDLE
        fill = ChunkFill(view, self.budget(view), max_seqs=self._max_seqs,
                         watermark_blocks=int(self._watermark * view.total_blocks))
        fill.continue_prefills()
        if fill.budget > 0 and view.waiting:
            self.last_delta = self.delta(view)
            admit_clusters(view.book.features, view.waiting[: self._window], self.last_delta, fill.admit,
                           first_only=view.kv_usage > self._shrink_at)
        return fill.plan()

    @classmethod
    def pool_plan(cls, opts: dict[str, Any], history: RequestHistory, replicas: int) -> PoolPlan | None:
        """Two or more pools: class bounds at equal-count quantiles of past KV footprints, replicas
        in proportion to each class's past token work (at least one each)."""
        k = int(opts["pools"])
        if k <= 1 or replicas < k or len(history.prompt) < 10 * k:
            return None
        foot = (history.prompt + history.output).astype(np.float64)
        bounds = tuple(float(b) for b in np.quantile(foot, [j / k for j in range(1, k)]))
        cls_of = np.searchsorted(np.asarray(bounds), foot, side="right")
        work = np.array([foot[cls_of == j].sum() for j in range(k)])
        share = work / work.sum()
        reps = np.maximum(1, np.floor(share * replicas)).astype(int)
        while reps.sum() < replicas:
            reps[int(np.argmax(share * replicas - reps))] += 1
        while reps.sum() > replicas:
            reps[int(np.argmax(reps))] -= 1
        return PoolPlan(bounds, tuple(int(r) for r in reps))
