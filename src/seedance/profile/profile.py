"""``SchedulingProfile``: one ordered pipeline of stages that every driver calls.

NOTE(seedance): the contract every driver relies on.
  * ``decide(view, req, pod, tier=..., running=..., now=..., borrow=..., only=...)`` is a pure
    function of the snapshot (and of what the policy learned through ``observe``): adapters →
    filters (+ the tier's own pool) → score → select → bind-hook annotation; when nothing fits,
    the fallbacks in order; otherwise pending (or reject when no node of the pod's pools could
    ever host it), with every stage's reason.
  * Without tier stages, or for a pod without a tier, the decision is exactly the framework
    ``Scheduler``'s (same reason, same explanation), so wave-1 figures cannot move.
  * ``apply`` / ``release`` are the only way a driver changes state: ``ClusterState`` first, then
    every bind hook (the MIG ledger), so the books never disagree.
  * ``admit`` is the extender's filter verb: the nodes of the first stage that has room, and for
    every other node the reason of the filter that rejects it and whether waiting can help.
  The simulator, the tiered replay, the MIG-pool run, the live loop and the extender all build
  their profile with ``seedance.profile.build_profile`` and call these four methods only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.decision import Decision
from seedance.core.resources import ResourceRequest
from seedance.profile.context import AttemptFilter, Hold, node_reason_texts
from seedance.profile.stages import Attempt, BindHook, Fallback, NodeSubset, RequestAdapter, Scorer, scored_policy
from seedance.scheduling.framework import FilterPlugin, Nodes, PlacementPolicy, Scheduler, Scores

if TYPE_CHECKING:
    from seedance.profile.tiers import TierPools
    from seedance.tiers.preemption import RunningPods

BoolA = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Scored:
    """A decision plus the feasible nodes of the stage that made it and their scores."""

    decision: Decision
    nodes: Nodes
    scores: Scores | None


@dataclass(frozen=True, slots=True)
class Admission:
    """The extender's filter answer over all nodes.

    Attributes:
        ok: Nodes the pod may be bound to now (by the first stage with room).
        code: Per node, the index into ``texts`` of why it is rejected (meaningless where ``ok``).
        texts: The distinct reasons (kube-scheduler groups equal reasons in the pod's events).
        resolvable: Per node, whether waiting can change the answer.
    """

    ok: BoolA
    code: NDArray[np.intp]
    texts: list[str]
    resolvable: BoolA

    def reason(self, node: int) -> str:
        """Why ``node`` is rejected (``""`` when it passes)."""
        return "" if self.ok[node] else self.texts[int(self.code[node])]


class SchedulingProfile:
    """An ordered, typed list of stages (see the module docstring); built by ``build_profile``.

    Args:
        policy: The placement policy (already wrapped by slice stages, if any).
        filters: Base filter stages, in order.
        adapters: Request adapters, in order.
        pools: The tier pool stage (``None``: no tiers).
        fallbacks: Fallback stages, in order.
        hooks: Bind hooks, in order.
        scorers: Scorer stages, in order (the first with an opinion on an attempt scores it).
        explain: Add per-filter rejection counts and runner-up nodes to every decision.
        name: The profile's name (explanations, logs).
    """

    def __init__(
        self,
        policy: PlacementPolicy,
        filters: Sequence[FilterPlugin],
        *,
        adapters: Sequence[RequestAdapter] = (),
        pools: TierPools | None = None,
        fallbacks: Sequence[Fallback] = (),
        hooks: Sequence[BindHook] = (),
        scorers: Sequence[Scorer] = (),
        explain: bool = False,
        name: str = "default",
    ) -> None:
        self.scorers = tuple(scorers)
        self._scored = scored_policy(policy, self.scorers) if self.scorers else None
        self.policy = policy if self._scored is None else self._scored
        self.filters = tuple(filters)
        self.adapters = tuple(adapters)
        self.pools = pools
        self.fallbacks = tuple(fallbacks)
        self.hooks = tuple(hooks)
        self.explain = explain
        self.name = name
        self._plain = Scheduler(self.policy, self.filters, explain=explain)
        self._chains: dict[tuple[str, str], Scheduler] = {}
        # the stage kinds, sorted once (not per attempt)
        self._aware = tuple(f for f in self.filters if isinstance(f, AttemptFilter))
        self._holds = tuple(a for a in self.adapters if isinstance(a, Hold))
        # no adapter and no bind hook: a pod outside the tier stages is exactly the framework's decision
        # (with scorers: for every pod none of them has an opinion on, e.g. one that names no workload)
        self._bare = not self.adapters and not self.hooks and not self._aware  # attempt-aware: need the attempt
        self._direct = self._bare and not self.scorers
        # bind hooks only (the MIG ledger): a pod outside the tier stages is one ``place`` on the base filters
        self._hooked = not self.adapters and not self._aware and not self.scorers and bool(self.hooks)

    # ------------------------------------------------------------------ stage access
    def chain(self, tier: str | None, pool: str = "own") -> tuple[FilterPlugin, ...]:
        """The filters of one stage: the base filters plus the tier's ``own`` or ``borrow`` pool filter."""
        if tier is None or self.pools is None or not self.pools.has(tier):
            return self.filters
        return (*self.filters, *self.pools.filters(tier, pool))

    def scheduler(self, tier: str | None, pool: str = "own") -> Scheduler:
        """The framework scheduler running one stage's filters with the profile's policy (cached)."""
        if tier is None or self.pools is None or not self.pools.has(tier):
            return self._plain
        key = (tier, pool)
        s = self._chains.get(key)
        if s is None:
            s = Scheduler(self.policy, self.chain(tier, pool), explain=self.explain)
            self._chains[key] = s
        return s

    def tiered(self, tier: str | None) -> bool:
        """Whether the tier stages apply to a pod of ``tier``."""
        return tier is not None and self.pools is not None and self.pools.has(tier)

    # ------------------------------------------------------------------ the pipeline
    def observe(self, req: ResourceRequest) -> None:
        """Called once per pod as it arrives (online-learning policies)."""
        self.policy.observe(req)

    def adapt(self, att: Attempt) -> ResourceRequest:
        """The request after every adapter."""
        r = att.req
        for a in self.adapters:
            r = a.adapt(att, r)
        for f in self._aware:  # attempt-aware stages (trust, grades) read the pod's context
            f.begin(att, r)
        if self._scored is not None:
            self._scored.begin(att, r)
        return r

    def hold(self, att: Attempt, req: ResourceRequest) -> Decision | None:
        """The first :class:`Hold` adapter's pending decision (e.g. deferral), or ``None``."""
        for a in self._holds:
            d = a.hold(att, req)
            if d is not None:
                return d
        return None

    def place(self, att: Attempt, req: ResourceRequest, pool: str = "own") -> Scored:
        """Filter → score → select → annotate on one stage's nodes (no fallbacks)."""
        sched = self.scheduler(att.tier, pool)
        if att.only is not None:
            sched = Scheduler(self.policy, (*sched.filters, NodeSubset(att.only)), explain=self.explain)
        d, nodes, scores = sched.decide_scored(att.view, req, att.pod)
        if d.placement is not None:
            for h in self.hooks:
                d = h.annotate(att.view, req, d)
            for sc in self.scorers:
                d = sc.annotate(d)
        return Scored(d, nodes, scores)

    def decide(
        self, view: ClusterState, req: ResourceRequest, pod: int = -1, *, tier: str | None = None,
        running: RunningPods | None = None, now: float = 0.0, borrow: bool = True, only: BoolA | None = None,
    ) -> Decision:
        """Decide where ``req`` goes now, or why it waits (see the module docstring)."""
        if self._hooked and only is None and (tier is None or self.pools is None or not self.pools.has(tier)):
            d = self._plain.decide_scored(view, req, pod)[0]  # ``place`` without building the attempt
            if d.placement is not None:
                for h in self.hooks:
                    d = h.annotate(view, req, d)
            return d
        if self._bare and only is None and (tier is None or self.pools is None or not self.pools.has(tier)):
            if self._scored is None:
                return self._plain.decide(view, req, pod)  # the hot path of the simulators: no stage to run
            att = Attempt(view, req, pod, tier, running, now, borrow, only)
            if not self._scored.begin(att, req):  # no scorer has an opinion: the policy's decision
                d = self._plain.decide(view, req, pod)
                if d.placement is not None:
                    for sc in self.scorers:
                        d = sc.annotate(d)
                return d
            return self.decide_scored(att).decision
        return self.decide_scored(
            Attempt(view, req, pod, tier, running, now, borrow, only)
        ).decision

    def decide_scored(self, att: Attempt) -> Scored:
        """:meth:`decide` for an :class:`Attempt`, with the winning stage's scores."""
        r = self.adapt(att)
        held = self.hold(att, r)
        if held is not None:
            return Scored(held, np.flatnonzero(np.zeros(0, dtype=np.bool_)), None)
        if not self.tiered(att.tier):
            return self.place(att, r)
        pools = self.pools
        assert pools is not None and att.tier is not None
        tier = att.tier
        head: dict[str, Any] = {"tier": tier, "request": pools.request_json(att.req, r, tier)}
        own = self.place(att, r, "own")
        if own.decision.placement is not None:
            return Scored(pools.bound(own.decision, head, "own", att.view), own.nodes, own.scores)
        trail: dict[str, Any] = {"own-pool": pools.pending_json(own.decision, tier, "own")}
        for fb in self.fallbacks:
            d = fb.attempt(self, att, r, head, trail)
            if d is not None:
                return Scored(d, np.flatnonzero(np.zeros(0, dtype=np.bool_)), None)
        return Scored(pools.pending(att, r, head, trail), own.nodes, None)

    # ------------------------------------------------------------------ binding
    def apply(self, view: ClusterState, decision: Decision) -> None:
        """Bind ``decision``: the cluster state first, then every bind hook."""
        if decision.placement is None:
            return
        view.apply(decision.placement)
        if not self.hooks:
            return
        for h in self.hooks:
            h.apply(view, decision)

    def release(self, view: ClusterState, decision: Decision) -> None:
        """Undo :meth:`apply` (a departure or an eviction)."""
        if decision.placement is None:
            return
        view.release(decision.placement)
        for h in self.hooks:
            h.release(view, decision)

    # ------------------------------------------------------------------ the extender's filter
    def admit(self, att: Attempt) -> Admission:
        """Nodes of the first stage with room for the pod, and each other node's reason."""
        view = att.view
        r = self.adapt(att)
        held = self.hold(att, r)
        if held is not None:
            n = view.n_nodes
            return Admission(np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.intp), [held.reason],
                             np.ones(n, dtype=np.bool_))
        texts: list[str] = []
        ok, code, resolvable = self._evaluate(att, r, self.chain(att.tier, "own"), texts)
        only = att.only if att.only is not None else np.ones(view.n_nodes, dtype=np.bool_)
        if (ok & only).any() or not self.tiered(att.tier):
            return Admission(ok & only, code, texts, resolvable)
        assert self.pools is not None and att.tier is not None
        for req, pool in self.pools.borrow_tries(att, r, self):
            bok, bcode, bres = self._evaluate(att, req, self.chain(att.tier, pool), texts)
            in_pool = self.pools.pool_mask(view, att.tier, pool)
            code = np.where(in_pool, bcode, code)
            resolvable = np.where(in_pool, bres, resolvable)
            if (bok & only).any():
                return Admission(bok & only, code, texts, resolvable)
        return Admission(np.zeros(view.n_nodes, dtype=np.bool_), code, texts, resolvable)

    def _evaluate(
        self, att: Attempt, req: ResourceRequest, filters: Sequence[FilterPlugin], texts: list[str]
    ) -> tuple[BoolA, NDArray[np.intp], BoolA]:
        """Per node: passes all filters?, reason code (into ``texts``, extended here), resolvable?"""
        view = att.view
        n = view.n_nodes
        if n == 0:
            return np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.bool_)
        masks = np.stack([f.mask(view, req) for f in filters])
        ok: BoolA = np.asarray(masks.all(axis=0), dtype=np.bool_)
        first = np.argmax(~masks, axis=0)
        base = len(texts)
        texts.extend(f.reason(req) for f in filters)
        texts.append(f"node can never fit {describe_request(req)}")
        res = np.array([f.resolvable for f in filters], dtype=np.bool_)[first]
        ever = view.cpu_capacity >= req.cpu_milli
        ever &= view.mem_capacity >= req.memory_mib
        if req.num_gpu:
            ever &= view.gpu_count >= req.num_gpu
        never = res & ~ever
        code = np.where(never, base + len(filters), base + first).astype(np.intp)
        if self._aware:
            _node_texts(filters, view, req, ~ok & ~never, first, code, texts)
        waiting: BoolA = ~ok & res & ever
        return ok, code, waiting


def describe_request(req: ResourceRequest) -> str:
    """A request in words, e.g. ``4000m CPU, 8192Mi memory, 250 milli GPU``."""
    gpu = ""
    if req.num_gpu:
        gpu = f", {req.gpu_milli} milli GPU" if req.is_sharing else f", {req.num_gpu} GPU"
        if req.gpu_types:
            gpu += f" ({'|'.join(req.gpu_types)})"
    return f"{req.cpu_milli}m CPU, {req.memory_mib}Mi memory{gpu}"


def _node_texts(
    filters: Sequence[FilterPlugin], view: ClusterState, req: ResourceRequest, rejected: BoolA,
    first: NDArray[np.intp], code: NDArray[np.intp], texts: list[str],
) -> None:
    """Per-node reasons of attempt-aware stages (trust, grades) in place of their one-line reason."""
    seen: dict[str, int] = {}
    for k, own in enumerate(node_reason_texts(filters, view, req)):
        if own is None:
            continue
        for i in np.flatnonzero(rejected & (first == k)).tolist():
            text = own[i]
            if text:
                if text not in seen:
                    seen[text] = len(texts)
                    texts.append(text)
                code[i] = seen[text]
