"""The scheduling framework: filter plugins, placement policies, and the scheduler that runs them.

NOTE(seedance): the algorithm, once.
  1. Filter: every filter plugin returns a boolean mask over nodes; a node is feasible when all
     masks hold. Filters are vectorised over the whole cluster (numpy), never per node in Python.
  2. Score: the placement policy scores the feasible nodes with integers (higher is better). With
     exactly one feasible node, scoring is skipped (kube-scheduler does the same).
  3. Select: the node with the highest score wins; ties go to the lowest ``rank`` (a per-cluster
     permutation: the simulator draws it per seed, the control plane uses a stable order). The
     policy then picks the GPUs on that node.
  4. Bind: the driver applies the returned frozen ``Decision`` to its ``ClusterState``.
  ``Scheduler.decide`` answers 1–3 from a per-request ``CandidateIndex`` when every filter and
  the policy are indexable (``seedance.scheduling.index``): the same decision, at the cost of the
  nodes changed since the last decision for that request; ``decide_scored`` is the scan.
  Policies only read the state. A policy may keep *learned* state, fed only through
  ``observe`` with pods that have already arrived, and memo tables keyed on node shapes; neither
  changes what a given snapshot decides.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, ValidationError

from seedance.core.cluster import ClusterState, gpu_level_bound
from seedance.core.decision import Decision, Outcome, Placement
from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.core.resources import MILLI_PER_GPU, ResourceRequest
from seedance.scheduling.feasibility import FeasibilityTable, table_filters
from seedance.scheduling.index import CandidateIndex, RankMaps
from seedance.scheduling.tasktypes import TaskTypes

BoolA = NDArray[np.bool_]
Nodes = NDArray[np.intp]
Scores = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may know when it is built.

    Attributes:
        seed: Seed for policies that draw random numbers (``random``).
        task_types: The target workload's task-type distribution. FGD is *given* this (oracle
            knowledge, as in the paper); online policies must not read it.
        options: Policy-specific options (validated by the policy).
    """

    seed: int = 0
    task_types: TaskTypes | None = None
    options: dict[str, object] = field(default_factory=dict)


#: What can change an indexable filter's answer at a node (:attr:`FilterPlugin.changes_on`).
ChangesOn = Literal["resources", "cordon", "never"]


class FilterPlugin(ABC):
    """A filter stage: which nodes can host a request right now, and why the others cannot.

    Every filter carries its own explanation: :meth:`reason` is the one line a person reads for a
    node it rejects (the extender sends it to kube-scheduler, the simulator and the control plane
    count rejections under :attr:`name`), and :attr:`resolvable` says whether waiting (pods leaving)
    can change its answer. Drivers never keep a table of filter names.
    """

    name: ClassVar[str]
    #: ``False`` when pods leaving cannot change the answer (labels, models, cordons).
    resolvable: ClassVar[bool] = True
    #: ``True`` when the answer for a node depends only on the request and that node's own data in
    #: the state, so it changes only when the node is in the state's change log (the scheduler's
    #: candidate index then re-asks only changed nodes, through :meth:`mask_of`).
    indexable: ClassVar[bool] = False
    #: Of an indexable filter, what can change a node's answer: ``"resources"`` (any change of the
    #: node: binds, releases, cordons), ``"cordon"`` (only cordoning or uncordoning it:
    #: ``ClusterState.set_schedulable``) or ``"never"`` (it reads only fixed data: capacity, GPU
    #: model, labels). The candidate index re-asks a ``"cordon"`` filter only after a cordon change
    #: and a ``"never"`` filter never.
    changes_on: ClassVar[ChangesOn] = "resources"
    #: Of a ``"resources"`` filter whose answer at a node is ``column[node] >= bound`` for every
    #: column :meth:`bounds` names (a conjunction of lower bounds on these state columns): the
    #: columns (attributes of ``ClusterState``). Then one feasibility table answers for every
    #: request at once (``seedance.scheduling.feasibility``). Empty: no such form.
    bound_columns: ClassVar[tuple[str, ...]] = ()

    def bounds(self, req: ResourceRequest) -> dict[str, int]:
        """The lower bound per column of :attr:`bound_columns` for ``req`` (a column left out is
        not bounded); the filter passes a node exactly when every bound holds there."""
        raise NotImplementedError(f"filter {self.name!r} gives no bounds")

    @abstractmethod
    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Called once per scheduling attempt; returns a boolean mask over all nodes."""

    def mask_of(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> BoolA:
        """The mask at ``nodes`` only (indexable filters answer without touching other nodes)."""
        return self.mask(view, req)[nodes]

    def ok_at(self, view: ClusterState, req: ResourceRequest, node: int) -> bool:
        """The mask at one node (indexable filters answer from that node's scalars)."""
        return bool(self.mask_of(view, req, np.array([node], dtype=np.intp))[0])

    def ok_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], bool] | None:
        """:meth:`ok_at` of ``req`` as a function of the node (the candidate index asks it node by
        node), or ``None`` when every node passes whatever changes (a GPU filter of a CPU-only pod)."""
        return lambda node: self.ok_at(view, req, node)

    def reason(self, req: ResourceRequest) -> str:
        """Why a node this filter rejects cannot host ``req`` (one short line)."""
        return f"rejected by {self.name}"


class Schedulable(FilterPlugin):
    """Nodes not cordoned."""

    name = "NodeSchedulable"
    resolvable = False
    indexable = True
    changes_on = "cordon"

    def reason(self, req: ResourceRequest) -> str:
        return "node is cordoned"

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        return view.schedulable

    def mask_of(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> BoolA:
        return view.schedulable[nodes]

    def ok_at(self, view: ClusterState, req: ResourceRequest, node: int) -> bool:
        return bool(view.schedulable[node])


class ResourcesFit(FilterPlugin):
    """Free CPU and memory cover the request (kube-scheduler's NodeResourcesFit)."""

    name = "NodeResourcesFit"
    indexable = True
    bound_columns = ("cpu_free", "mem_free")

    def bounds(self, req: ResourceRequest) -> dict[str, int]:
        return {"cpu_free": req.cpu_milli, "mem_free": req.memory_mib}

    def reason(self, req: ResourceRequest) -> str:
        return "insufficient free CPU or memory"

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        return view.fit_mask(req.cpu_milli, req.memory_mib)

    def mask_of(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> BoolA:
        return (view.cpu_free[nodes] >= req.cpu_milli) & (view.mem_free[nodes] >= req.memory_mib)

    def ok_at(self, view: ClusterState, req: ResourceRequest, node: int) -> bool:
        return view.cpu_free.item(node) >= req.cpu_milli and view.mem_free.item(node) >= req.memory_mib

    def ok_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], bool] | None:
        cpu, mem, c, m = view.cpu_free.item, view.mem_free.item, req.cpu_milli, req.memory_mib
        return lambda node: cpu(node) >= c and mem(node) >= m


class GpuModelMatch(FilterPlugin):
    """The node's GPU model is one the request accepts (GPU requests only)."""

    name = "GpuModelMatch"
    resolvable = False
    indexable = True
    changes_on = "never"

    def reason(self, req: ResourceRequest) -> str:
        return f"GPU model not in {', '.join(req.gpu_types)}" if req.gpu_types else "node has no GPU"

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        if req.num_gpu == 0:
            return view.all_nodes
        return view.model_mask(req.gpu_types)

    def mask_of(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> BoolA:
        if req.num_gpu == 0:
            return np.ones(nodes.size, dtype=np.bool_)
        return view.model_mask(req.gpu_types)[nodes]

    def ok_at(self, view: ClusterState, req: ResourceRequest, node: int) -> bool:
        return req.num_gpu == 0 or bool(view.model_mask(req.gpu_types)[node])

    def ok_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], bool] | None:
        if req.num_gpu == 0:
            return None
        mask = view.model_mask(req.gpu_types).item
        return lambda node: bool(mask(node))


class GpuFit(FilterPlugin):
    """Enough GPU: one GPU with ``gpu_milli`` free for a share, ``num_gpu`` idle GPUs otherwise."""

    name = "GpuFit"
    indexable = True
    bound_columns = ("gpu_level",)

    def bounds(self, req: ResourceRequest) -> dict[str, int]:
        if req.num_gpu == 0:
            return {}
        return {"gpu_level": gpu_level_bound(req.num_gpu, req.gpu_milli, req.is_sharing)}

    def reason(self, req: ResourceRequest) -> str:
        return f"no GPU with {req.gpu_milli} milli free" if req.is_sharing else f"fewer than {req.num_gpu} idle GPU(s)"

    def mask(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        return view.gpu_fit_mask(req)

    def mask_of(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> BoolA:
        if req.num_gpu == 0:
            return np.ones(nodes.size, dtype=np.bool_)
        if req.is_sharing:
            return view.max_free[nodes] >= req.gpu_milli
        return view.n_full[nodes] >= req.num_gpu

    def ok_at(self, view: ClusterState, req: ResourceRequest, node: int) -> bool:
        if req.num_gpu == 0:
            return True
        if req.is_sharing:
            return view.max_free.item(node) >= req.gpu_milli
        return view.n_full.item(node) >= req.num_gpu

    def ok_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], bool] | None:
        if req.num_gpu == 0:
            return None
        if req.is_sharing:
            max_free, milli = view.max_free.item, req.gpu_milli
            return lambda node: max_free(node) >= milli
        n_full, k = view.n_full.item, req.num_gpu
        return lambda node: n_full(node) >= k


DEFAULT_FILTERS: tuple[FilterPlugin, ...] = (Schedulable(), ResourcesFit(), GpuModelMatch(), GpuFit())


class NoOptions(BaseModel):
    """Options of a policy that takes none (any option given is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PlacementPolicy(ABC):
    """Scores feasible nodes and picks GPUs inside the chosen one.

    Subclasses register with ``@PLACEMENT_POLICIES.register("name")`` and set ``name``. A policy
    with options declares them as a pydantic model in ``Options`` (``extra="forbid"``): a
    profile's ``placement.options`` are validated against it, so a misspelled option is an error
    naming the valid ones.
    """

    name: ClassVar[str]
    #: One line on what the policy does, shown by ``seedancectl policies``.
    summary: ClassVar[str] = ""
    #: Typed options of the policy (validated by :func:`make_policy`).
    Options: ClassVar[type[BaseModel]] = NoOptions
    #: Whether the policy must be *given* the target workload (``PolicyContext.task_types``);
    #: drivers compute it only for such policies.
    needs_task_types: ClassVar[bool] = False
    #: Whether :meth:`pick` may choose from the scheduler's candidate index instead of
    #: :meth:`score` over the feasible nodes (same choice, same calls into the policy's state).
    indexable: ClassVar[bool] = False

    def __init__(self, ctx: PolicyContext) -> None:
        self.ctx = ctx

    def observe(self, req: ResourceRequest) -> None:  # noqa: B027 - optional hook, default no-op
        """Called once for every pod as it arrives, before its decision (online learning)."""

    @abstractmethod
    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        """Called once per pod with two or more feasible ``nodes``; returns one integer per node."""

    def select_gpus(self, view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
        """Called once per bound pod, on the chosen node; the default is best-fit."""
        return best_fit_gpus(view, req, node)

    def pick(self, view: ClusterState, req: ResourceRequest, index: CandidateIndex) -> tuple[int, int]:
        """With two or more feasible nodes in ``index``: the node :meth:`score` + select would
        choose, and its score (indexable policies only)."""
        raise NotImplementedError(f"placement policy {self.name!r} is not indexable")


class LocalScorePolicy(PlacementPolicy):
    """A policy whose score of a node depends only on the request and that node's own data.

    Subclasses give :meth:`node_score_fn`; :meth:`score` reads it through a state-owned
    :class:`~seedance.core.cluster.NodeColumn` and :meth:`pick` through the candidate index.
    """

    indexable = True

    @abstractmethod
    def node_score_fn(self, view: ClusterState, req: ResourceRequest) -> Callable[[Nodes], Scores]:
        """``fn(nodes)``: the scores of ``nodes`` for ``req`` from their data as it is now."""

    def node_score_one(self, view: ClusterState, req: ResourceRequest) -> Callable[[int], int] | None:
        """``fn(node)``: :meth:`node_score_fn`'s score of one node with Python scalars, the same
        integer bit for bit; the candidate index rescores a few changed nodes with it (an array
        call costs more there). ``None`` (the default): the index calls :meth:`node_score_fn`."""
        return None

    def score_key(self, req: ResourceRequest) -> Hashable:
        """What of the request the scores depend on (the key of their state-owned column)."""
        return (self.name, req)

    def score_epoch(self, view: ClusterState) -> object:
        """Changes when every score changes at once (a refreshed model); called where ``score`` is."""
        return 0

    def score(self, view: ClusterState, req: ResourceRequest, nodes: Nodes) -> Scores:
        if view.n_nodes < view.index_min_nodes or not view.indexed:
            # the column would scan (``NodeColumn.take``): the same call, without its bookkeeping
            return self.node_score_fn(view, req)(nodes)
        # the scores of every node, kept current where binds change nodes (the hot-path index)
        return view.column_of(self.score_key(req), self.node_score_fn(view, req)).take(nodes)

    def pick(self, view: ClusterState, req: ResourceRequest, index: CandidateIndex) -> tuple[int, int]:
        return index.best(
            self.score_epoch(view), lambda: self.node_score_fn(view, req), lambda: self.node_score_one(view, req)
        )


PLACEMENT_POLICIES: Registry[type[PlacementPolicy]] = Registry(
    "placement policy", plugins="seedance.scheduling.policies"
)


def validate_options(
    cls: type[PlacementPolicy], options: Mapping[str, object], *, source: str = "options", line: int | None = None
) -> dict[str, object]:
    """``options`` checked against ``cls.Options``; an unknown or ill-typed option raises ``InputError``.

    Returns the options as given (only those set), so policies keep reading their defaults.
    """
    try:
        model = cls.Options.model_validate(dict(options))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        valid = ", ".join(cls.Options.model_fields) or "none"
        if err["type"] == "extra_forbidden":
            msg = f"unknown option {key!r} of placement policy {cls.name!r}; valid options: {valid}"
        else:
            msg = f"option {key!r} of placement policy {cls.name!r}: {err['msg']}; valid options: {valid}"
        raise InputError(msg, source=source, line=line, field=f"options.{key}" if key else "options") from None
    return {k: getattr(model, k) for k in model.model_fields_set}


def make_policy(name: str, ctx: PolicyContext | None = None) -> PlacementPolicy:
    """Build the policy registered as ``name`` (unknown names list the valid ones; options are validated)."""
    cls = PLACEMENT_POLICIES.get(name)
    ctx = ctx or PolicyContext()
    if ctx.options:
        validate_options(cls, ctx.options)
    return cls(ctx)


def best_fit_gpus(view: ClusterState, req: ResourceRequest, node: int) -> tuple[int, ...]:
    """GPU choice shared by most policies.

    A share goes to the fitting GPU with the least free milli (lowest index on ties); whole
    GPUs are the lowest-index idle ones; a CPU-only request takes none.
    """
    if req.num_gpu == 0:
        return ()
    row = view.gpu_free[node].tolist()  # a node's few GPUs: Python ints cost less than array passes
    if req.is_sharing:
        milli = req.gpu_milli
        return (min(((v, g) for g, v in enumerate(row) if v >= milli), default=(0, 0))[1],)
    idle = [g for g, v in enumerate(row) if v == MILLI_PER_GPU]
    return tuple(idle[: req.num_gpu])


class Scheduler:
    """Runs filter → score → select for one request at a time; returns frozen decisions.

    Args:
        policy: The placement policy.
        filters: Filter plugins (defaults: schedulable, CPU/memory fit, GPU model, GPU fit).
        explain: Add per-filter rejection counts and the runner-up nodes to every decision.
        index_min_nodes: Smallest cluster ``decide`` answers from candidate indexes; below it the
            plain vectorised scan costs less than the index's bookkeeping (same decisions).
    """

    #: Default of ``index_min_nodes``: the default trace's 1,213 nodes scan, its k = 4 scale-up indexes.
    INDEX_MIN_NODES: ClassVar[int] = 2048
    #: Requests whose feasibility one shared table keeps (each bind updates all of them at once;
    #: its cost per bind grows with their number). Later requests keep their own index.
    TABLE_MAX: ClassVar[int] = 512
    #: The table's cost is per node change (all requests at once), a request's own index's per
    #: decision (its changed nodes in one batch): the scheduler uses the table while node changes
    #: per decision stay at most ``TABLE_ON`` and its own indexes once they pass ``TABLE_OFF``,
    #: measured over windows of ``TABLE_WINDOW`` decisions (the same decisions either way).
    TABLE_ON: ClassVar[float] = 1.0
    TABLE_OFF: ClassVar[float] = 1.4
    TABLE_WINDOW: ClassVar[int] = 4096

    def __init__(
        self,
        policy: PlacementPolicy,
        filters: Sequence[FilterPlugin] = DEFAULT_FILTERS,
        *,
        explain: bool = False,
        index_min_nodes: int | None = None,
    ) -> None:
        self.policy = policy
        self.filters = tuple(filters)
        self.explain = explain
        self.index_min_nodes = self.INDEX_MIN_NODES if index_min_nodes is None else index_min_nodes
        #: whether ``decide`` answers from candidate indexes (indexable filters and policy)
        self.indexed = policy.indexable and all(f.indexable for f in self.filters)
        self._index_view: ClusterState | None = None
        self._indexes: dict[ResourceRequest, CandidateIndex] = {}
        self._by_id: dict[int, tuple[ResourceRequest, CandidateIndex]] = {}
        #: one feasibility table for the indexes of up to ``TABLE_MAX`` requests (when the filters allow)
        self._tabled = self.indexed and table_filters(self.filters)
        self._table: FeasibilityTable | None = None
        self._ranks: RankMaps | None = None  # shared by the indexes of ``_index_view``
        self._table_on = self._tabled
        self._window = 0  # decisions in the current window, and the change count at its start
        self._window_pos = 0

    def feasible(self, view: ClusterState, req: ResourceRequest) -> BoolA:
        """Mask of nodes that pass every filter."""
        mask = self.filters[0].mask(view, req)
        for f in self.filters[1:]:
            mask = mask & f.mask(view, req)
        return mask

    def decide(self, view: ClusterState, req: ResourceRequest, pod: int = -1) -> Decision:
        """Decide where ``req`` goes now (or why it cannot go anywhere).

        With indexable filters and policy (and the state's index on), the answer comes from the
        request's :class:`~seedance.scheduling.index.CandidateIndex`: the same decision as
        :meth:`decide_scored`'s scan, at the cost of the nodes changed since the last such request.
        """
        if view.n_nodes < self.index_min_nodes or not self.indexed or self.explain or not view.indexed:
            return self.decide_scored(view, req, pod)[0]
        index = self.index(view, req)
        count = index.refresh()
        if count == 0:
            return self._no_fit(view, req, pod, index.rejections())
        if count == 1:
            return self._bound(view, req, pod, index.nth_feasible(0), None, 1)
        node, score = self.policy.pick(view, req, index)
        return self._bound(view, req, pod, node, score, count)

    def index(self, view: ClusterState, req: ResourceRequest) -> CandidateIndex:
        """The candidate index of ``req`` on ``view`` (built on first use, kept per request)."""
        if view is not self._index_view:
            self._index_view = view
            self._indexes = {}
            self._by_id = {}
            self._table = None
            self._ranks = None
            self._window, self._window_pos = 0, view.change_count
        if self._tabled:
            self._window += 1
            if self._window >= self.TABLE_WINDOW:
                rate = (view.change_count - self._window_pos) / self._window
                self._window, self._window_pos = 0, view.change_count
                if rate > self.TABLE_OFF if self._table_on else rate <= self.TABLE_ON:
                    self._table_on = not self._table_on  # the indexes are built again in the other kind
                    self._indexes = {}
                    self._by_id = {}
                    self._table = None
        # drivers pass the same request objects again and again: find them by identity first (the
        # entry keeps the object alive, so its id is not reused) instead of hashing their fields
        hit = self._by_id.get(id(req))
        if hit is not None and hit[0] is req:
            return hit[1]
        index = self._indexes.get(req)
        if index is None:
            table = self._table
            if table is None and self._table_on:
                table = self._table = FeasibilityTable(view, self.filters, max_size=self.TABLE_MAX)
            if table is not None and table.size >= table.max_size:
                table = None  # past the table's size: the request's own index (its cost is its own)
            if self._ranks is None:
                self._ranks = RankMaps(view)
            index = self._indexes[req] = CandidateIndex(view, req, self.filters, table, self._ranks)
        if len(self._by_id) >= 4 * len(self._indexes) + 1024:  # fresh objects per call (a server): stay bounded
            self._by_id = {}
        self._by_id[id(req)] = (req, index)
        return index

    def decide_scored(
        self, view: ClusterState, req: ResourceRequest, pod: int = -1
    ) -> tuple[Decision, Nodes, Scores | None]:
        """:meth:`decide`, plus the feasible nodes and their scores (``None``: fewer than two nodes).

        The Kubernetes extender's ``prioritize`` reports these scores, so every node is scored once.
        """
        nodes = np.flatnonzero(self.feasible(view, req))
        if nodes.size == 0:
            return self._no_fit(view, req, pod), nodes, None
        score: int | None = None
        if nodes.size == 1:
            node = int(nodes[0])
            scores = None
        else:
            scores = self.policy.score(view, req, nodes)
            best = scores.max()
            cand = nodes[scores == best]
            node = int(cand[np.argmin(view.rank[cand])]) if cand.size > 1 else int(cand[0])
            score = int(best)
        details = self._details(view, req, nodes, scores, node) if self.explain else None
        return self._bound(view, req, pod, node, score, int(nodes.size), details), nodes, scores

    def _bound(
        self, view: ClusterState, req: ResourceRequest, pod: int, node: int, score: int | None, feasible: int,
        details: dict[str, object] | None = None,
    ) -> Decision:
        gpus = self.policy.select_gpus(view, req, node)
        placement = Placement(node, gpus, req.gpu_milli, req.cpu_milli, req.memory_mib)
        explanation: dict[str, object] = {"policy": self.policy.name, "feasible_nodes": feasible}
        if details is not None:
            explanation.update(details)
        reason = f"{self.policy.name}: best of {feasible} feasible node(s)"
        if score is not None:
            reason += f", score {score}"
        return Decision(pod, Outcome.BIND, placement, score=score, reason=reason, explanation=explanation)

    def rejections(self, view: ClusterState, req: ResourceRequest) -> dict[str, int]:
        """How many nodes each filter rejects on its own (explanations of pending pods)."""
        return {f.name: int((~f.mask(view, req)).sum()) for f in self.filters}

    def _no_fit(
        self, view: ClusterState, req: ResourceRequest, pod: int, rej: dict[str, int] | None = None
    ) -> Decision:
        ever = view.fits_anywhere_ever(req)
        outcome = Outcome.PENDING if ever else Outcome.REJECT
        rej = self.rejections(view, req) if rej is None else rej
        worst = max(rej, key=lambda k: rej[k])
        reason = (
            f"no node fits now ({worst} rejects {rej[worst]} of {view.n_nodes})"
            if ever
            else "no node of this cluster could ever fit the request"
        )
        return Decision(
            pod,
            outcome,
            reason=reason,
            explanation={"policy": self.policy.name, "feasible_nodes": 0, "rejected_by": rej},
        )

    def _details(
        self, view: ClusterState, req: ResourceRequest, nodes: Nodes, scores: Scores | None, node: int
    ) -> dict[str, object]:
        out: dict[str, object] = {"rejected_by": self.rejections(view, req)}
        if scores is not None:
            order = np.lexsort((view.rank[nodes], -scores))[:5]
            out["top"] = [
                {
                    "node": view.spec.nodes[int(nodes[i])].name,
                    "score": int(scores[i]),
                    "rank": int(view.rank[nodes[i]]),
                }
                for i in order
            ]
            out["tie"] = int((scores == scores.max()).sum())
        out["node"] = view.spec.nodes[node].name
        return out
