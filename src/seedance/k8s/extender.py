"""kube-scheduler extender backed by Seedance's ``Scheduler`` and placement policies.

Wire format: k8s.io/kube-scheduler/extender/v1 types.go (kubernetes/kubernetes,
staging/src/k8s.io/kube-scheduler/extender/v1/types.go) and the caller, pkg/scheduler/extender.go
(``HTTPExtender``). Those Go structs carry no JSON tags, so the field names on the wire are the
Go names: ``ExtenderArgs {Pod, Nodes, NodeNames}``, ``ExtenderFilterResult {Nodes, NodeNames,
FailedNodes, FailedAndUnresolvableNodes, Error}``, ``HostPriorityList [{Host, Score}]``,
``ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node}``, ``ExtenderBindingResult {Error}``.
Go decodes field names case-insensitively, and so do we. With ``nodeCacheCapable: true`` the
scheduler sends ``NodeNames`` (and ``"Nodes": null``) and expects ``NodeNames`` back; otherwise it
sends full Node objects in ``Nodes.items`` and expects the passing ones back in ``Nodes``.
Scores are 0..``MaxExtenderPriority`` (10); kube-scheduler multiplies them by the configured
weight and by MaxNodeScore/MaxExtenderPriority (100/10).

NOTE(seedance): the extender keeps one ``ClusterState`` of the nodes it knows (from its node
cache, or from the ``Nodes`` sent with each request) and of every pod bound on them (pods it bound
itself, plus pods an informer reports), and one ``SchedulingProfile`` over it (``build_profile``,
the same stages as the simulator and the live loop: tier rounding, own pool, borrow, MIG). Invariants:
  * filter = ``SchedulingProfile.admit``: the candidates of the first stage with room; every other
    node with the reason of the filter that rejects it (filters carry their own reasons and
    whether waiting can resolve them); nothing is mutated;
  * prioritize = ``SchedulingProfile.decide_scored`` once: the policy's integer scores of the
    winning stage's feasible nodes rescaled to 1..9, the node the profile picks gets 10, others 0;
  * bind = the profile's decision over the candidates filter saw (the same decision, explanation
    included, as the simulator's), or restricted to the node kube-scheduler chose when it chose
    another; ``SchedulingProfile.apply`` of it, then the Kubernetes binding through the injected
    ``Binder``; a failed binding releases the placement again, so the state never holds a pod the
    API does not;
  * a pod (by UID) is accounted at most once; rebuilding the state (node set changed) re-applies
    every accounted pod on its node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.decision import Decision, Outcome, Placement
from seedance.core.errors import InputError, SeedanceError
from seedance.core.resources import ResourceRequest
from seedance.hetero.labels import HETERO_NODE_LABELS
from seedance.k8s import keys
from seedance.k8s.objects import Doc, PodInfo, node_spec, node_unschedulable, pod_info
from seedance.k8s.trust import TRUST_NODE_LABELS, ExtenderStages
from seedance.profile import Admission, Attempt, ProfileConfig, SchedulingProfile, build_profile, profile_of_policy
from seedance.profile.config import TiersConfig
from seedance.scheduling.framework import FilterPlugin, PlacementPolicy
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig
from seedance.tiers.filters import LABEL_MODE

log = logging.getLogger(__name__)

BoolA = NDArray[np.bool_]

#: kube-scheduler's score range for extenders (extender/v1: MinExtenderPriority, MaxExtenderPriority).
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class Binder(Protocol):
    """Binds a pod to a node in the Kubernetes API (``pods/binding``); injected, mocked in tests."""

    def bind(self, *, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        """Called once per successful extender bind, after the placement is recorded; raises on failure."""


PodLookup = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(slots=True)
class _PodRecord:
    namespace: str
    name: str
    node: str
    request: ResourceRequest
    gpus: tuple[int, ...] | None
    placement: Placement | None = None
    since: float = field(default_factory=time.monotonic)
    tier: str | None = None
    decision: Decision | None = None  # the decision this extender bound the pod with


class Extender:
    """Filter / prioritize / bind over a Seedance ``ClusterState``; thread-safe.

    Args:
        policy: Placement policy (e.g. ``make_policy("best-fit")``).
        tier_config: SLA tiers (labels a tier's pods need on their node).
        binder: Performs the Kubernetes binding; without one, ``bind`` answers an error.
        pod_lookup: ``(namespace, name) -> Pod document`` for binds of pods this process never
            filtered (e.g. after a restart); optional.
        filters: Extra filter plug-ins, run after the profile's own.
        catalog: GPU catalog for model names.
        gpu_resource: Extended resource name of whole GPUs.
        pending_capacity: How many filtered-but-unbound pods to remember for ``bind``.
        profile: The scheduling profile (default: ``policy`` with the tier stages and borrowing, as
            the live loop's tier pools).
        stages: Trust wiring (``seedance.k8s.trust.ExtenderStages``: attestation registry, clock);
            default: no registry, so no node is eligible for a pod labelled sensitive.
    """

    def __init__(
        self,
        policy: PlacementPolicy,
        *,
        tier_config: TierConfig = DEFAULT_TIER_CONFIG,
        binder: Binder | None = None,
        pod_lookup: PodLookup | None = None,
        filters: Sequence[FilterPlugin] = (),
        catalog: GpuCatalog = CATALOG,
        gpu_resource: str = keys.GPU_RESOURCE,
        pending_capacity: int = 4096,
        profile: ProfileConfig | None = None,
        stages: ExtenderStages | None = None,
    ) -> None:
        self.policy = policy
        self.tier_config = tier_config
        self.binder = binder
        self.pod_lookup = pod_lookup
        self.filters = tuple(filters)
        self.catalog = catalog
        self.gpu_resource = gpu_resource
        self.pending_capacity = pending_capacity
        self.synced = False
        self._lock = threading.RLock()
        self._specs: dict[str, NodeSpec] = {}
        self._cordoned: set[str] = set()
        self._node_rv: dict[str, str] = {}
        self._state: ClusterState | None = None
        self._index: dict[str, int] = {}
        self._cand_cache: OrderedDict[tuple[str, ...], NDArray[np.intp]] = OrderedDict()
        self._pods: dict[str, _PodRecord] = {}
        self._pending: OrderedDict[str, PodInfo] = OrderedDict()
        self._seen: dict[str, BoolA | None] = {}  # candidates filter saw, per pending pod
        self._scored: dict[str, tuple[int, Decision]] = {}  # prioritize's decision per pod, with the epoch
        self._epoch = 0  # bumped by every change of the state (a decision made before is then stale)
        self.unaccounted = 0
        self.stages = stages or ExtenderStages()
        self.config = self.stages.configure(profile or default_extender_profile(policy.name))
        if self.config.tiers.enabled:  # load the tier stages with the extender, not on its first request
            import seedance.profile.tiers  # noqa: F401
        self._profile: SchedulingProfile | None = None
        self._label_keys = frozenset(
            {keys.NODE_LABEL_GPU_MODEL, keys.NODE_LABEL_GPU_PRODUCT, LABEL_MODE, *TRUST_NODE_LABELS,
             *HETERO_NODE_LABELS}
            | {k for t in tier_config.tiers.values() for k in (*t.node_labels, *t.borrow_labels)}
        )

    # ------------------------------------------------------------------ node cache
    def _node_spec(self, node: Doc) -> NodeSpec:
        """The node's spec with only the labels scheduling reads (tier and GPU-model labels).

        Other labels churn (GPU feature discovery rewrites a timestamp label every minute) and must
        not force a rebuild of the state.
        """
        spec = node_spec(node, gpu_resource=self.gpu_resource, catalog=self.catalog)
        return replace(spec, labels={k: v for k, v in spec.labels.items() if k in self._label_keys})

    def set_nodes(self, nodes: Iterable[Doc]) -> None:
        """Replace the whole node cache (an informer's initial list)."""
        parsed = [(self._node_spec(n), n) for n in nodes]
        with self._lock:
            self._specs = {spec.name: spec for spec, _ in parsed}
            self._cordoned = {spec.name for spec, n in parsed if node_unschedulable(n)}
            self._node_rv = {spec.name: _rv(n) for spec, n in parsed if _rv(n)}
            self._state = None

    def upsert_node(self, node: Doc) -> bool:
        """Add or update one node; returns whether anything the scheduler uses changed."""
        spec = self._node_spec(node)
        cordon = node_unschedulable(node)
        with self._lock:
            rv = _rv(node)
            if rv:
                self._node_rv[spec.name] = rv
            changed = False
            if self._specs.get(spec.name) != spec:
                self._specs[spec.name] = spec
                self._state = None
                changed = True
            if cordon != (spec.name in self._cordoned):
                (self._cordoned.add if cordon else self._cordoned.discard)(spec.name)
                if self._state is not None:
                    self._state.set_schedulable(self._index[spec.name], not cordon)
                    self._epoch += 1
                changed = True
            return changed

    def remove_node(self, name: str) -> bool:
        """Forget a node (its pods stay recorded and come back if the node does)."""
        with self._lock:
            self._cordoned.discard(name)
            self._node_rv.pop(name, None)
            if self._specs.pop(name, None) is None:
                return False
            self._state = None
            return True

    def node_names(self) -> list[str]:
        """Names of the cached nodes."""
        with self._lock:
            return list(self._specs)

    @property
    def profile(self) -> SchedulingProfile:
        """The scheduling profile over the current state."""
        with self._lock:
            self._ensure_state()
            assert self._profile is not None
            return self._profile

    def decision_of(self, uid: str) -> Decision | None:
        """The decision this extender bound pod ``uid`` with, else its last ``prioritize`` decision
        (why it waits); ``None`` when it has neither."""
        with self._lock:
            rec = self._pods.get(uid)
            if rec is not None and rec.decision is not None:
                return rec.decision
            scored = self._scored.get(uid)
            return None if scored is None else scored[1]

    @property
    def state(self) -> ClusterState:
        """The current cluster state (rebuilt lazily after node changes)."""
        with self._lock:
            return self._ensure_state()

    def _ensure_state(self) -> ClusterState:
        state = self._state
        if state is None:
            state = ClusterState(ClusterSpec(tuple(self._specs.values())), catalog=self.catalog)
            self._index = {n.name: i for i, n in enumerate(state.spec.nodes)}
            self._cand_cache.clear()
            for name in self._cordoned:
                state.set_schedulable(self._index[name], False)
            self._state = state
            self._profile = build_profile(self.config, state, policy=self.policy, tier_config=self.tier_config,
                                          extra_filters=self.filters, services=self.stages.services)
            self._epoch += 1
            self.unaccounted = 0
            for rec in self._pods.values():
                rec.placement = self._place(state, rec)
        return state

    # ------------------------------------------------------------------ pod accounting
    def observe_pod(self, pod: Doc) -> None:
        """Account a pod the API reports bound (``spec.nodeName``) and unfinished; idempotent per UID.

        Finished pods (``Succeeded`` / ``Failed``) are forgotten instead.
        """
        phase = (pod.get("status") or {}).get("phase")
        info = self._parse_pod(pod)
        if phase in _TERMINAL_PHASES:
            self.forget_pod(info.uid)
            return
        if not info.node:
            return
        with self._lock:
            if info.uid in self._pods:
                return
            rec = _PodRecord(info.namespace, info.name, info.node, info.request, info.gpu_hint, tier=info.tier)
            self._pods[info.uid] = rec
            if self._state is not None:
                rec.placement = self._place(self._state, rec)
                self._epoch += 1

    def forget_pod(self, uid: str) -> bool:
        """Release a pod's resources (deleted or finished); returns whether it was accounted."""
        with self._lock:
            self._pending.pop(uid, None)
            self._seen.pop(uid, None)
            rec = self._pods.pop(uid, None)
            if rec is None:
                return False
            self._scored.pop(uid, None)
            if rec.placement is not None and self._state is not None and self._profile is not None:
                self._profile.release(self._state, _as_decision(rec))
                self._epoch += 1
            return True

    def retain_pods(self, uids: Iterable[str], listed_at: float) -> int:
        """Forget pods missing from a fresh list (started at monotonic ``listed_at``); returns how many.

        Pods recorded after the list started are kept: the list cannot have seen them.
        """
        keep = set(uids)
        with self._lock:
            gone = [u for u, rec in self._pods.items() if u not in keep and rec.since < listed_at]
        for uid in gone:
            self.forget_pod(uid)
        return len(gone)

    def placement_of(self, uid: str) -> tuple[str, tuple[int, ...]] | None:
        """``(node, GPU indices)`` recorded for a pod, or ``None``."""
        with self._lock:
            self._ensure_state()
            rec = self._pods.get(uid)
            if rec is None or rec.placement is None:
                return None
            return rec.node, rec.placement.gpus

    def _place(self, state: ClusterState, rec: _PodRecord) -> Placement | None:
        idx = self._index.get(rec.node)
        profile = self._profile
        if idx is None or profile is None:
            return None
        req = profile.adapt(Attempt(state, rec.request, tier=rec.tier))
        if rec.gpus is not None and len(rec.gpus) == req.num_gpu:
            booked = rec.decision.placement.gpu_milli if rec.decision and rec.decision.placement else req.gpu_milli
            p = Placement(idx, rec.gpus, booked, req.cpu_milli, req.memory_mib)
            try:
                profile.apply(state, _as_decision(rec, p))
                return p
            except SeedanceError:
                pass
        d = profile.decide(state, rec.request, tier=rec.tier, only=self._one_node(state, idx))
        if d.placement is None:
            self.unaccounted += 1
            log.warning("pod %s/%s on %s does not fit the extender's view: %s", rec.namespace, rec.name,
                        rec.node, d.reason)
            return None
        profile.apply(state, d)
        rec.gpus = d.placement.gpus
        rec.decision = d
        return d.placement

    # ------------------------------------------------------------------ verbs
    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The ``filter`` verb: ``ExtenderArgs`` → ``ExtenderFilterResult``."""
        pod, names, items = self._args(args)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        try:
            info = self._remember(pod)
        except InputError as exc:
            unresolvable = dict.fromkeys(names, f"Seedance: {exc}")
            return _filter_result([], None if items is None else [], failed, unresolvable)
        with self._lock:
            if items is not None:
                self._ingest(items)
            state = self._ensure_state()
            cand = self._candidates(names)
            only = self._only(state, cand)
            self._seen[info.uid] = only
            adm = self.profile.admit(self._attempt(state, info, only))
            known = cand >= 0
            safe = np.where(known, cand, 0)
            ok = known & adm.ok[safe] if state.n_nodes else np.zeros(cand.size, dtype=np.bool_)
            passing = np.flatnonzero(ok).tolist()
            if len(passing) < len(names):
                failed, unresolvable = _failures(adm, names, cand, ok, known)
            passed = [names[j] for j in passing]
            self._remember_candidates(passed, cand[ok])  # prioritize usually gets exactly these next
        return _filter_result(passed, None if items is None else [items[j] for j in passing], failed, unresolvable)

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ``prioritize`` verb: ``ExtenderArgs`` → ``HostPriorityList`` (scores 0..10), scoring once."""
        pod, names, items = self._args(args)
        scores = np.zeros(len(names), dtype=np.int64)
        try:
            info = self._remember(pod)
        except InputError:
            return _priorities(names, scores)
        with self._lock:
            if items is not None:
                self._ingest(items)
            state = self._ensure_state()
            cand = self._candidates(names)
            # decide over the candidates filter saw (kube-scheduler sends prioritize only the nodes that
            # passed), so the decision is the one filter's stages lead to, as in every other driver
            only = self._seen[info.uid] if info.uid in self._seen else self._only(state, cand)
            scored = self.profile.decide_scored(self._attempt(state, info, only))
            self._scored[info.uid] = (self._epoch, scored.decision)
            if scored.decision.placement is not None:
                node_score = np.zeros(state.n_nodes, dtype=np.int64)
                raw, nodes = scored.scores, scored.nodes
                if raw is not None and nodes.size > 1:
                    lo, hi = int(raw.min()), int(raw.max())
                    node_score[nodes] = 1 + (8 * (raw - lo)) // (hi - lo) if hi > lo else 9
                node_score[scored.decision.placement.node] = MAX_EXTENDER_PRIORITY
                scores = np.where(cand >= 0, node_score[np.maximum(cand, 0)], MIN_EXTENDER_PRIORITY)
        return _priorities(names, scores)

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The ``bind`` verb: ``ExtenderBindingArgs`` → ``ExtenderBindingResult``."""
        a = _fold(args)
        ns, name, uid, node = (str(a.get(k) or "") for k in ("podnamespace", "podname", "poduid", "node"))
        if not name or not node:
            raise InputError("ExtenderBindingArgs needs PodName and Node", source="request body")
        ns = ns or "default"
        if self.binder is None:
            return {"Error": "Seedance extender has no Kubernetes binder configured"}
        with self._lock:
            info = self._pending.get(uid) if uid else None
        if info is None:
            doc = self.pod_lookup(ns, name) if self.pod_lookup is not None else None
            if doc is None:
                return {"Error": f"Seedance: pod {ns}/{name} (uid {uid}) was never filtered and cannot be looked up"}
            info = self._parse_pod(doc)
        uid = uid or info.uid
        with self._lock:
            state = self._ensure_state()
            idx = self._index.get(node)
            if idx is None:
                return {"Error": f"Seedance: node {node} is not in the extender's cache"}
            rec = self._pods.get(uid)
            if rec is None or rec.node != node or rec.placement is None:
                if rec is not None:
                    self.forget_pod(uid)
                    state = self._ensure_state()
                profile = self.profile
                epoch, d = self._scored.get(uid, (-1, None))
                if d is None or epoch != self._epoch:
                    d = profile.decide_scored(self._attempt(state, info, self._seen.get(uid))).decision
                if d.placement is None or d.placement.node != idx:
                    d = profile.decide_scored(self._attempt(state, info, self._one_node(state, idx))).decision
                if d.placement is None:
                    return {"Error": f"Seedance: pod {ns}/{name} no longer fits node {node}: {d.reason}"}
                profile.apply(state, d)
                self._epoch += 1
                rec = _PodRecord(ns, name, node, info.request, d.placement.gpus, d.placement, tier=info.tier,
                                 decision=d)
                self._pods[uid] = rec
            gpus = rec.gpus or ()
        annotations = {keys.ANN_GPU_INDEX: ",".join(str(g) for g in gpus)} if gpus else {}
        try:
            self.binder.bind(namespace=ns, name=name, uid=uid, node=node, annotations=annotations)
        except Exception as exc:  # the API said no: undo the placement, report to kube-scheduler
            self.forget_pod(uid)
            return {"Error": f"Seedance: binding {ns}/{name} to {node} failed: {exc}"}
        with self._lock:
            self._pending.pop(uid, None)
            self._seen.pop(uid, None)
            self._scored.pop(uid, None)
        return {"Error": ""}

    # ------------------------------------------------------------------ internals
    def _parse_pod(self, pod: Doc) -> PodInfo:
        return pod_info(pod, gpu_resource=self.gpu_resource, catalog=self.catalog, tier_config=self.tier_config)

    def _remember(self, pod: Doc) -> PodInfo:
        info = self._parse_pod(pod)
        with self._lock:
            if info.uid in self._pending:
                self._pending.move_to_end(info.uid)
            else:
                self.policy.observe(info.request)  # once per pod, as it arrives
                if len(self._pending) >= self.pending_capacity:
                    old, _ = self._pending.popitem(last=False)
                    self._seen.pop(old, None)
                    self._scored.pop(old, None)
            self._pending[info.uid] = info
        return info

    def _args(self, args: Mapping[str, Any]) -> tuple[Doc, list[str], list[Doc] | None]:
        a = _fold(args)
        pod = a.get("pod")
        if not isinstance(pod, Mapping):
            raise InputError("ExtenderArgs.Pod is missing", source="request body", field="Pod")
        node_names = a.get("nodenames")
        nodes = a.get("nodes")
        if node_names is not None:
            if not isinstance(node_names, list):
                raise InputError("ExtenderArgs.NodeNames must be a list of names", source="request body",
                                 field="NodeNames")
            return pod, node_names, None
        if isinstance(nodes, Mapping):
            items = nodes.get("items") or []
            if not isinstance(items, list):
                raise InputError("ExtenderArgs.Nodes.items must be a list", source="request body", field="Nodes")
            try:
                names = [str(n["metadata"]["name"]) for n in items]
            except (KeyError, TypeError):
                raise InputError("a node in ExtenderArgs.Nodes has no metadata.name", source="request body",
                                 field="Nodes.items") from None
            return pod, names, items
        raise InputError("ExtenderArgs needs Nodes or NodeNames", source="request body", field="NodeNames")

    def _ingest(self, items: list[Doc]) -> None:
        for node in items:
            name = node["metadata"]["name"]
            rv = _rv(node)
            if rv and self._node_rv.get(name) == rv and name in self._specs:
                continue
            self.upsert_node(node)

    def _candidates(self, names: list[str]) -> NDArray[np.intp]:
        """Node index of each candidate name (-1: not cached); memoised per candidate list."""
        try:
            key = tuple(names)
            hit = self._cand_cache.get(key)
            if hit is not None:
                self._cand_cache.move_to_end(key)
                return hit
            index = self._index
            out = np.array([index.get(n, -1) for n in names], dtype=np.intp)
        except TypeError:  # an unhashable entry: not a list of names
            raise InputError("node names must be strings", source="request body", field="NodeNames") from None
        self._remember_candidates(key, out)
        return out

    def _remember_candidates(self, names: Sequence[str], idx: NDArray[np.intp]) -> None:
        idx.flags.writeable = False  # shared by later requests
        self._cand_cache[tuple(names)] = idx
        if len(self._cand_cache) > 64:
            self._cand_cache.popitem(last=False)

    def _attempt(self, state: ClusterState, info: PodInfo, only: BoolA | None) -> Attempt:
        return Attempt(state, info.request, self.stages.attempt_id(info), info.tier, None, 0.0, info.borrow, only)

    @staticmethod
    def _only(state: ClusterState, cand: NDArray[np.intp]) -> BoolA | None:
        """The candidate mask (``None`` when every node is a candidate)."""
        m = np.zeros(state.n_nodes, dtype=np.bool_)
        m[cand[cand >= 0]] = True
        return None if m.all() else m

    @staticmethod
    def _one_node(state: ClusterState, idx: int) -> BoolA:
        m = np.zeros(state.n_nodes, dtype=np.bool_)
        m[idx] = True
        return m


def _failures(
    adm: Admission, names: list[str], cand: NDArray[np.intp], ok: BoolA, known: BoolA
) -> tuple[dict[str, str], dict[str, str]]:
    """FailedNodes and FailedAndUnresolvableNodes of the rejected candidates, each with its reason."""
    texts = [*(f"Seedance: {t}" for t in adm.texts), "Seedance: node not in the extender's cache yet"]
    bad = np.flatnonzero(~ok)
    kb = known[bad]
    if not kb.any():  # no rejected node is cached (e.g. an empty cache): all wait for the cache
        return dict.fromkeys((names[j] for j in bad.tolist()), texts[-1]), {}
    idx = np.maximum(cand[bad], 0)
    text = np.where(kb, adm.code[idx], len(texts) - 1)
    wait = adm.resolvable[idx] | ~kb  # a node not cached yet may be there next time
    failed = {names[j]: texts[t] for j, t in zip(bad[wait].tolist(), text[wait].tolist(), strict=True)}
    hard = ~wait
    unresolvable = {names[j]: texts[t] for j, t in zip(bad[hard].tolist(), text[hard].tolist(), strict=True)}
    return failed, unresolvable


def _rv(node: Doc) -> str:
    return str((node.get("metadata") or {}).get("resourceVersion") or "")


def _fold(args: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level field names folded to lower case (Go's encoding/json matches them case-insensitively)."""
    if not isinstance(args, Mapping):
        raise InputError("request body must be a JSON object", source="request body")
    return {str(k).lower(): v for k, v in args.items()}


def default_extender_profile(policy: str) -> ProfileConfig:
    """The extender's default profile: ``policy`` with the tier stages, borrowing (no preemption:
    kube-scheduler preempts itself)."""
    return profile_of_policy(policy, tiers=TiersConfig(enabled=True, fallbacks=("borrow",)))


def _as_decision(rec: _PodRecord, placement: Placement | None = None) -> Decision:
    """The decision a record stands for (re-indexed ``placement`` after a rebuild)."""
    p = placement or rec.placement
    expl = rec.decision.explanation if rec.decision is not None else {}
    slice_info = expl.get("slice")
    return Decision(-1, Outcome.BIND, p, explanation={"slice": slice_info} if slice_info is not None else {})


def _filter_result(
    names: list[str], items: list[Doc] | None, failed: dict[str, str], unresolvable: dict[str, str]
) -> dict[str, Any]:
    if items is None:  # nodeCacheCapable: names only
        return {"Nodes": None, "NodeNames": names, "FailedNodes": failed,
                "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
    return {"Nodes": {"metadata": {}, "items": items}, "NodeNames": None, "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable, "Error": ""}


def _priorities(names: list[str], scores: NDArray[np.int64]) -> list[dict[str, Any]]:
    return [{"Host": n, "Score": int(s)} for n, s in zip(names, scores.tolist(), strict=True)]


__all__ = ["MAX_EXTENDER_PRIORITY", "Binder", "Extender", "default_extender_profile"]
