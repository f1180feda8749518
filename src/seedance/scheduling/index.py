"""The scheduler's candidate index: per request, which nodes pass the filters and which one wins.

NOTE(seedance): what the index keeps, per (cluster state, request), and why it decides alike.
  * Per filter, the node mask (how many nodes pass is counted from it when a request fits
    nowhere); the feasible mask (all filters), its count and its count per block of ``BLOCK``
    nodes in node order. Only *indexable* filters are used:
    a filter whose answer for a node changes only when that node appears in the state's change
    log (the default filters: cordon, CPU/memory fit, GPU model, GPU fit).
  * Per node, its score for the request, stored at the node's *rank* position, with the maximum
    per block of positions. The winner is the first position of the first block holding the
    maximum: the highest score, ties to the lowest rank, exactly the scan's choice.
  * A read recomputes only the nodes changed since the previous read of this request (the change
    log); scores are computed only for feasible nodes and only when the policy scores (two or
    more feasible nodes), so a policy is called at the same points, with the same state, as by
    the scan. A few changed nodes are rescored with the policy's one-node score when it has one
    (``LocalScorePolicy.node_score_one``: the same integer with Python scalars). A policy whose
    scores depend on more than the node (a refreshed learned model) names an *epoch*; a new epoch
    rescores every feasible node.
  Cost per decision: the changed nodes plus ``n / BLOCK`` block entries, not the cluster's size.
  With the scheduler's feasibility table (``seedance.scheduling.feasibility``: the default filters
  are lower bounds on node columns), an index reads its feasible mask, counts and rejections from
  the table's column for its request, which every change updates for all requests at once, and
  keeps only its scores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest

if TYPE_CHECKING:
    from seedance.scheduling.feasibility import FeasibilityTable
    from seedance.scheduling.framework import FilterPlugin

Nodes = NDArray[np.intp]
Scores = NDArray[np.int64]
ScoreFn = Callable[[Nodes], Scores]
OneFn = Callable[[int], int]

#: Nodes (or rank positions) per block of the block counts and block maxima.
BLOCK = 64
_MIN = np.iinfo(np.int64).min
#: Up to this many distinct changed nodes, a refresh updates node by node with Python scalars (a
#: node costs a few scalar reads per filter it re-asks; an array refresh costs a dozen or more
#: array passes whatever its size).
_FEW = 8
#: With the feasibility table, up to this many changed nodes are rescored node by node (no
#: feasibility work comes with them there).
_FEW_SCORE = 32
#: Change logs up to this long are deduplicated with a Python set (array passes cost more there).
_SHORT_LOG = 48


def distinct_nodes(nodes: NDArray[np.int64], stamp: NDArray[np.int32]) -> Nodes:
    """``np.unique(nodes)`` in linear passes (a change log holds repeats; sorting them all costs more).

    ``stamp`` is scratch of one entry per node. Each node's stamp is set to one of its positions
    (whichever write lands), and exactly that position is kept: one occurrence per node, whatever
    the order of repeated writes.
    """
    if nodes.size <= 1:
        return nodes.astype(np.intp, copy=False)
    at = np.arange(nodes.size, dtype=np.int32)
    stamp[nodes] = at
    return np.sort(nodes[stamp[nodes] == at]).astype(np.intp, copy=False)


class RankMaps:
    """A state's tie-break rank as rank positions by node and nodes by rank position, and a scratch
    array of one entry per node (:func:`distinct_nodes`): one copy for every candidate index of the
    state instead of one per request (at 19,408 nodes and 151 requests, 58 MB less to keep and to
    miss in the caches).

    Args:
        view: The cluster state.
    """

    __slots__ = ("_epoch", "_view", "node_at", "pos_of", "stamp")

    def __init__(self, view: ClusterState) -> None:
        self._view = view
        self._epoch = -1
        self.pos_of: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.node_at: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.stamp: NDArray[np.int32] = np.zeros(view.n_nodes, dtype=np.int32)

    def get(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(pos_of, node_at)`` for the state's rank now (recomputed after a rank change only)."""
        view = self._view
        if self._epoch != view.rank_epoch:
            self._epoch = view.rank_epoch
            self.pos_of = view.rank.astype(np.int64, copy=True)
            self.node_at = np.argsort(self.pos_of).astype(np.int64)
        return self.pos_of, self.node_at


class CandidateIndex:
    """The feasible nodes of one request on one state, and the best of them (see module notes).

    Args:
        view: The cluster state.
        req: The request.
        filters: Indexable filter plugins (``FilterPlugin.indexable``).
        table: The scheduler's feasibility table for the state, if any.
        ranks: The rank maps shared by the state's indexes (its own when not given).
    """

    __slots__ = (
        "_bcount", "_bits", "_bmax", "_cordons", "_count", "_dyn", "_epoch", "_feas", "_filters", "_fixed",
        "_fixed_idx", "_fn", "_n", "_node_at", "_oks", "_pending", "_pending_all", "_pending_few", "_pending_size",
        "_one", "_pos", "_pos_of", "_rank_epoch", "_req", "_rows", "_stamp", "_vals", "_view",
        "_dyn_fns", "_dyn_rows", "_feas_mv", "_fixed_mv", "_mv", "_col", "_spos", "_table", "_ranks", "_top",
    )

    def __init__(
        self, view: ClusterState, req: ResourceRequest, filters: Sequence[FilterPlugin],
        table: FeasibilityTable | None = None, ranks: RankMaps | None = None,
    ) -> None:
        n = view.n_nodes
        nb = max(1, -(-n // BLOCK))
        self._view = view
        self._req = req
        self._filters = tuple(filters)
        self._n = n
        self._table = table
        self._vals: Scores = np.full(nb * BLOCK, _MIN, dtype=np.int64)
        self._bmax: Scores = np.full(nb, _MIN, dtype=np.int64)
        self._top = -1  # rank position of the best score (lowest position among equals), -1: unknown
        self._fn: ScoreFn | None = None
        self._one: OneFn | None = None
        self._epoch: object = None
        self._pending_all = True
        self._rank_epoch = -1
        self._ranks = RankMaps(view) if ranks is None else ranks
        self._stamp = self._ranks.stamp  # scratch of _distinct
        if table is not None:  # feasibility from the shared table; only the scores are this index's own
            self._col = table.add(req)
            self._spos = view.change_count
            self._count = int(table.count[self._col])
            self._set_rank()
            return
        nf = len(self._filters)
        # the bits, the feasible mask and the fixed filters' AND live in byte buffers: arrays for the
        # array passes, memoryviews for the node-by-node refresh (a memoryview item costs a fraction
        # of an array scalar)
        buf = bytearray(nf * n + nb * BLOCK + n)
        self._bits: NDArray[np.bool_] = np.frombuffer(buf, dtype=np.bool_, count=nf * n).reshape(nf, n)
        self._feas: NDArray[np.bool_] = np.frombuffer(buf, dtype=np.bool_, count=nb * BLOCK, offset=nf * n)
        self._fixed: NDArray[np.bool_] = np.frombuffer(buf, dtype=np.bool_, count=n, offset=nf * n + nb * BLOCK)
        self._fixed[:] = True
        mv = self._mv = memoryview(buf)
        self._feas_mv = mv[nf * n : nf * n + nb * BLOCK]
        self._fixed_mv = mv[nf * n + nb * BLOCK :]
        self._bcount: NDArray[np.int64] = np.zeros(nb, dtype=np.int64)
        self._pending: list[Nodes] = []
        self._pending_few: list[int] = []  # nodes of node-by-node refreshes since the last scoring
        self._pending_size = 0
        self._count = 0
        self._pos = view.change_count
        # filters whose answers change with a node's resources (re-asked for every changed node),
        # and the others (cordon-only or fixed), whose bits are ANDed into ``_fixed`` and re-asked
        # only after a cordon change
        self._dyn = tuple(i for i, f in enumerate(self._filters) if f.changes_on == "resources")
        self._fixed_idx = tuple(i for i in range(len(self._filters)) if i not in self._dyn)
        self._cordons = view.cordon_count
        self._oks = tuple(f.ok_at for f in self._filters)
        self._rows = tuple(mv[i * n : (i + 1) * n] for i in range(nf))
        # the resource filters this request can fail, each with its one-node answer
        self._dyn_fns = tuple((i, fn) for i in self._dyn if (fn := self._filters[i].ok_fn(view, req)) is not None)
        self._dyn_rows = tuple((self._rows[i], fn) for i, fn in self._dyn_fns)
        self._set_rank()
        self._update(np.arange(n, dtype=np.intp), first=True)

    # ------------------------------------------------------------------ reads
    @property
    def count(self) -> int:
        """Number of feasible nodes (as of the last :meth:`refresh`)."""
        return self._count

    def refresh(self) -> int:
        """Bring the feasible mask up to date with the state; returns the number of feasible nodes."""
        view = self._view
        if self._rank_epoch != view.rank_epoch:
            self._set_rank()
        table = self._table
        if table is not None:
            table.catch_up()
            self._count = c = table.count.item(self._col)
            return c
        end = view.change_count
        if self._pos < end:
            log = view.change_log(self._pos)
            self._pos = end
            # without a cordon change since the last refresh, only the resource filters can differ
            every = view.cordon_count != self._cordons
            self._cordons = view.cordon_count
            if log.size <= _SHORT_LOG:
                nodes = sorted(set(log.tolist()))
                if len(nodes) <= _FEW:
                    self._update_few(nodes, every=every)
                else:
                    self._update(np.array(nodes, dtype=np.intp), every=every)
            else:
                self._update(self._changed(log), every=every)
        return self._count

    def nth_feasible(self, j: int) -> int:
        """The ``j``-th feasible node in node order (``0 <= j < count``)."""
        table = self._table
        bcount, feas = (self._bcount, self._feas) if table is None else (
            table.bcount[:, self._col], table.feas[:, self._col]
        )
        cs = bcount.cumsum()  # array methods: no dispatch through numpy's function wrappers
        b = int(cs.searchsorted(j, side="right"))
        before = cs.item(b - 1) if b else 0
        lo = b * BLOCK
        return lo + int(feas[lo : lo + BLOCK].nonzero()[0][j - before])

    def feasible_nodes(self) -> Nodes:
        """Every feasible node, in node order."""
        if self._table is not None:
            return np.flatnonzero(self._table.feas[: self._n, self._col])
        return np.flatnonzero(self._feas[: self._n])

    def best(
        self, epoch: object, score_fn: Callable[[], ScoreFn], one_fn: Callable[[], OneFn | None] | None = None
    ) -> tuple[int, int]:
        """The feasible node with the highest score (ties: lowest rank) and its score.

        ``score_fn()`` gives the policy's node-local score function (asked once per index), and
        ``one_fn()``, when given, the same score of one node with Python scalars (or ``None``);
        ``epoch`` changes when the policy's scores change for reasons other than nodes changing.
        """
        if self._fn is None:
            self._fn = score_fn()
            self._one = one_fn() if one_fn is not None else None
        if epoch != self._epoch:
            self._epoch = epoch
            self._pending_all = True
        if self._table is not None:
            return self._best_table()
        if self._pending_all:
            todo: Nodes = np.arange(self._n, dtype=np.intp)
        elif self._pending:
            if self._pending_few:
                self._pending.append(np.array(self._pending_few, dtype=np.intp))
            todo = self._pending[0] if len(self._pending) == 1 else self._distinct(np.concatenate(self._pending))
        elif self._pending_few:
            few = self._pending_few
            nodes = few if len(few) == 1 else sorted(set(few))
            if len(nodes) <= _FEW:
                self._pending_few = []
                self._pending_size = 0
                return self._best_few(nodes, self._feas_mv)
            todo = np.array(nodes, dtype=np.intp)
        else:
            todo = np.zeros(0, dtype=np.intp)
        self._pending = []
        self._pending_few = []
        self._pending_size = 0
        self._pending_all = False
        return self._rescore(todo, self._feas)

    def _best_table(self) -> tuple[int, int]:
        """:meth:`best` with feasibility from the table: rescore the nodes changed since the
        last scoring (every node after a new epoch or rank)."""
        assert self._table is not None
        view = self._view
        end = view.change_count
        feas = self._table.feas[:, self._col]
        if self._pending_all:
            self._pending_all = False
            self._spos = end
            return self._rescore(np.arange(self._n, dtype=np.intp), feas)
        log = view.change_log(self._spos)
        self._spos = end
        if log.size <= _SHORT_LOG:
            nodes = log.tolist()
            if len(nodes) > 1:
                nodes = sorted(set(nodes))
            if len(nodes) <= _FEW_SCORE:
                return self._best_few(nodes, feas)
            return self._rescore(np.array(nodes, dtype=np.intp), feas)
        todo = self._changed(log)
        if todo.size <= _FEW_SCORE:
            return self._best_few(todo.tolist(), feas)
        return self._rescore(todo, feas)

    def _rescore(self, todo: Nodes, feas_of: NDArray[np.bool_]) -> tuple[int, int]:
        """Rescore the distinct nodes ``todo`` (their feasibility read from ``feas_of``) and
        return the best node and its score."""
        assert self._fn is not None
        if todo.size:
            ok = feas_of[todo]
            feas = todo[ok]
            pos = self._pos_of[todo]
            vals = self._vals
            vals[pos[~ok]] = _MIN
            if feas.size:
                vals[self._pos_of[feas]] = self._fn(feas)
            if todo.size == 1:
                b0 = int(pos[0]) // BLOCK
                self._bmax[b0] = vals[b0 * BLOCK : (b0 + 1) * BLOCK].max()
            else:
                if todo.size <= BLOCK:  # a block named twice gets the same maximum twice: no sort needed
                    blocks = pos // BLOCK
                elif todo.size < self._n:
                    mark = np.zeros(self._bmax.size, dtype=np.bool_)
                    mark[pos // BLOCK] = True
                    blocks = np.flatnonzero(mark)
                else:
                    blocks = np.arange(self._bmax.size)
                self._bmax[blocks] = vals.reshape(-1, BLOCK)[blocks].max(axis=1)
        p = self._argbest()
        return int(self._node_at[p]), int(self._vals[p])

    def _argbest(self) -> int:
        """The rank position of the best score (the lowest among equals), from the block maxima;
        kept as the best known to :meth:`_best_few`."""
        b = int(self._bmax.argmax())
        lo = b * BLOCK
        p = self._top = lo + int(self._vals[lo : lo + BLOCK].argmax())
        return p

    def _best_few(self, nodes: list[int], feas: memoryview | NDArray[np.bool_]) -> tuple[int, int]:
        """:meth:`best` after a few distinct changed ``nodes``, with Python scalars: the same
        scores (one call of the score function on the feasible ones, in node order) and the same
        block maxima, a block's maximum recomputed only where its old maximum was lowered
        (``feas``: the feasible mask, indexed by node)."""
        pos_of, vals, bmax = self._pos_of, self._vals, self._bmax
        one = self._one
        if one is None:
            ok = [n for n in nodes if feas[n]]
            assert self._fn is not None
            scores = iter(self._fn(np.array(ok, dtype=np.intp)).tolist() if ok else ())
        stale: list[int] = []
        # the best so far stays the best unless it was lowered or a raised score passes it
        best = self._top
        up_v, up_p = _MIN, -1  # the best raised score (lowest position among equals)
        for n in nodes:
            if not feas[n]:
                v = _MIN
            else:
                v = one(n) if one is not None else next(scores)
            p = pos_of.item(n)
            was = vals.item(p)
            if v == was:
                continue
            vals[p] = v
            if v > was:
                if v > up_v or (v == up_v and p < up_p):
                    up_v, up_p = v, p
            elif p == best:
                best = -1
            b = p // BLOCK
            top = bmax.item(b)
            if v > top:
                bmax[b] = v
            elif was == top:
                stale.append(b)
        for b in stale:
            bmax[b] = np.maximum.reduce(vals[b * BLOCK : (b + 1) * BLOCK])  # (no wrapper around the reduce)
        if best < 0:
            best = self._argbest()
        else:
            v = vals.item(best)
            if up_v > v or (up_v == v and up_p < best):
                best = self._top = up_p
        return int(self._node_at[best]), int(vals[best])

    def rejections(self) -> dict[str, int]:
        """How many nodes each filter rejects on its own (the scan's ``Scheduler.rejections``)."""
        # counted here, from the per-filter bits, not kept per refresh: only a request that fits
        # nowhere asks (one pass over the bits instead of two counts per filter and refresh)
        if self._table is not None:
            return self._table.rejections(self._col)
        passes = [int(np.count_nonzero(row)) for row in self._bits]  # (row by row: a fifth of ``axis=1``'s cost)
        return {f.name: self._n - c for f, c in zip(self._filters, passes, strict=True)}

    # ------------------------------------------------------------------ internals
    def _distinct(self, nodes: NDArray[np.int64]) -> Nodes:
        """``np.unique(nodes)`` in linear passes (:func:`distinct_nodes`)."""
        return distinct_nodes(nodes, self._stamp)

    def _changed(self, log: NDArray[np.int64]) -> Nodes:
        """The distinct nodes of a long change ``log``, or every node where a quarter of them or
        more changed (one pass over all nodes costs less than picking them out). A long log names
        few nodes more often than not (binds packing the same nodes: at 16x the default fleet, logs
        of 4,872-42,394 changes named 597-11,150 nodes, median 1,193), so it is deduplicated unless
        it holds twice as many changes as there are nodes."""
        if log.size < 2 * self._n:
            nodes = self._distinct(log)
            if 4 * nodes.size < self._n:
                return nodes
        return np.arange(self._n, dtype=np.intp)

    def _set_rank(self) -> None:
        view = self._view
        self._rank_epoch = view.rank_epoch
        self._pos_of, self._node_at = self._ranks.get()
        self._vals[:] = _MIN
        self._bmax[:] = _MIN
        self._top = -1
        self._pending_all = True

    def _update_few(self, nodes: list[int], *, every: bool) -> None:
        """:meth:`_update` of a few distinct nodes, node by node with Python scalars."""
        rows, feas, fixed = self._rows, self._feas_mv, self._fixed_mv
        if every:  # a cordon changed: re-ask the fixed and cordon-only filters too
            view, req, oks = self._view, self._req, self._oks
            for n in nodes:
                ok_all = True
                for i in self._fixed_idx:
                    ok = oks[i](view, req, n)
                    rows[i][n] = ok
                    ok_all = ok_all and ok
                fixed[n] = ok_all
        dyn = self._dyn_rows
        for n in nodes:
            feasible = fixed[n] == 1
            for row, fn in dyn:
                ok = fn(n)
                row[n] = ok
                feasible = feasible and ok
            if feasible != feas[n]:
                feas[n] = feasible
                self._bcount[n // BLOCK] += 1 if feasible else -1
                self._count += 1 if feasible else -1
        if not self._pending_all:
            self._pending_few.extend(nodes)
            self._pending_size += len(nodes)
            if 4 * self._pending_size >= self._n:
                self._pending_all = True
                self._pending = []
                self._pending_few = []
                self._pending_size = 0

    def _update(self, dirty: Nodes, *, first: bool = False, every: bool = True) -> None:
        """Re-ask the filters at the distinct nodes ``dirty`` (only the resource filters unless
        ``every``) and bring the bits, counts and feasible mask up to date."""
        view, req, rows = self._view, self._req, self._bits
        if first:
            new = np.array([f.mask_of(view, req, dirty) for f in self._filters], dtype=np.bool_)
            self._bits[:, dirty] = new
            for i in self._fixed_idx:
                self._fixed[dirty] &= new[i]
            nf = np.asarray(new.all(axis=0), dtype=np.bool_)
            self._feas[dirty] = nf
            self._bcount[:] = self._feas.reshape(-1, BLOCK).sum(axis=1)
            self._count = int(nf.sum())
            return
        if every and self._fixed_idx:
            fixed = None
            for i in self._fixed_idx:
                m = self._filters[i].mask_of(view, req, dirty)
                rows[i][dirty] = m
                fixed = m if fixed is None else fixed & m
            self._fixed[dirty] = fixed
            nf = np.array(fixed, dtype=np.bool_)
        else:
            nf = self._fixed[dirty]
        for i, _ in self._dyn_fns:
            m = self._filters[i].mask_of(view, req, dirty)
            rows[i][dirty] = m
            nf &= m
        of = self._feas[dirty]
        if dirty.size == 1:
            a, b = bool(nf[0]), bool(of[0])
            if a != b:
                self._feas[dirty] = nf
                self._bcount[int(dirty[0]) // BLOCK] += 1 if a else -1
                self._count += 1 if a else -1
        else:
            flip = nf != of
            moved = np.flatnonzero(flip)
            if moved.size:  # the nodes whose feasibility flipped (often none)
                self._feas[dirty] = nf
                bcount = self._bcount
                if moved.size <= _FEW:
                    for n, up in zip(dirty[moved].tolist(), nf[moved].tolist(), strict=True):
                        bcount[n // BLOCK] += 1 if up else -1
                        self._count += 1 if up else -1
                else:  # many flips (nodes filling up): one signed count per block
                    up = nf[moved]
                    sign = up.astype(np.int64) * 2 - 1
                    np.add.at(bcount, dirty[moved] // BLOCK, sign)
                    self._count += int(sign.sum())
        if not self._pending_all:
            self._pending.append(dirty)
            self._pending_size += dirty.size
            if 4 * self._pending_size >= self._n:
                self._pending_all = True
                self._pending = []
                self._pending_few = []
                self._pending_size = 0
