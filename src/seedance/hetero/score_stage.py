"""Throughput per $ as a profile scorer: ``ThroughputPerDollar`` (and ``Throughput``), for every driver.

NOTE(seedance): the profile form of the hetero stage ``throughput-per-dollar``.
  * The job type comes from the pod's labels in the driver's pod directory (``StageServices``), the
    path ``CudaCompat`` reads ``seedance.io/cuda`` by: ``seedance.io/workload`` names a row family
    of the throughput matrix (``resnet50``, ``ResNet-50``, ``transformer``, ``lm``, ``a3c``, ...,
    case and punctuation ignored), optionally with its batch size (``resnet50-bs64``, or the label
    ``seedance.io/workload-batch: 64``), or the row's full name (``ResNet-50 (batch size 64)``).
    Without a batch size, a family of several rows is scored by the geometric mean of its rows per
    GPU type (the ratio between two GPU types is then the geometric mean of the rows' ratios).
  * A pod without ``seedance.io/workload`` is the policy's alone: the scorer is not asked, the
    decision is the policy's to the byte (no cost on the hot path). A workload the matrix does not
    know (or a GPU count it has no column for) falls back to the policy's score; the explanation
    says why under ``ThroughputPerDollar``.
  * Per feasible node: steps/s of the job type on the node's GPU type (the matrix's column for the
    model's family: ``V100-32GB`` is a ``v100``) x 3600 / ($/GPU-h x GPUs) = steps per $. The price
    is the node label ``seedance.io/price-per-gpu-hour`` when set (a spot or negotiated price), else
    the catalog's (``hetero.fleet.gpu_type``: catalog models and the K80). ``Throughput`` scores
    steps/s alone (a tier that pays for speed). Nodes without a figure (a GPU type the matrix does
    not cover, an unknown model, a price label that does not parse) rank after every node with one,
    in the policy's order, each with its reason in the explanation.
  * Scores are dense ranks (integers, higher wins, ties by node rank as for every policy); the
    explanation carries the figures of the best nodes.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from seedance.core.cluster import ClusterSpec, ClusterState
from seedance.core.decision import Decision
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.hetero.labels import LABEL_PRICE
from seedance.hetero.throughput import ThroughputMatrix, default_matrix
from seedance.profile.build import BuildContext
from seedance.profile.context import StageServices
from seedance.profile.stages import SCORERS, Attempt, Scorer

LABEL_WORKLOAD = "seedance.io/workload"
LABEL_BATCH = "seedance.io/workload-batch"

_BATCH = re.compile(r"^(?P<family>.*?)[\s_-]*(?:\(?\s*(?:bs|batch[\s_-]*size|batch)[\s_-]*(?P<batch>\d+)\s*\)?)?$",
                    re.IGNORECASE)


def _key(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


class NodeFigure:
    """A node's GPU-type column in the matrix and its price, or why it has no figure."""

    __slots__ = ("col", "gpu", "price", "why")

    def __init__(self, col: int | None, gpu: str | None, price: float | None, why: str | None) -> None:
        self.col, self.gpu, self.price, self.why = col, gpu, price, why


def node_figure(matrix: ThroughputMatrix, gpu_model: str | None, labels: dict[str, str] | Any) -> NodeFigure:
    """Column and $/GPU-h of one node (see the module docstring), or the reason it has none."""
    from seedance.hetero.fleet import gpu_type

    if gpu_model is None:
        return NodeFigure(None, None, None, "node has no GPU")
    try:
        g = gpu_type(gpu_model)
    except InputError as exc:
        return NodeFigure(None, gpu_model, None, exc.message)
    cols = {c.lower(): i for i, c in enumerate(matrix.gpu_types)}
    col = cols.get(g.name.lower(), cols.get(g.name.split("-")[0].lower()))
    if col is None:
        return NodeFigure(None, g.name, None, f"no throughput figure for GPU type {g.name} (the matrix has "
                                              f"{', '.join(matrix.gpu_types)})")
    price = g.price_usd_per_hour
    raw = labels.get(LABEL_PRICE)
    if raw is not None:
        try:
            price = float(raw)
        except ValueError:
            price = math.nan
        if not (math.isfinite(price) and price > 0):
            return NodeFigure(None, g.name, None, f"label {LABEL_PRICE} must be a price > 0 in $/GPU-h, got {raw!r}")
    return NodeFigure(col, g.name, price, None)


def workload_rows(matrix: ThroughputMatrix, labels: dict[str, str] | Any) -> tuple[str, list[int]] | str:
    """``(job type, matrix rows)`` the pod's labels name, or why they name none."""
    raw = str(labels.get(LABEL_WORKLOAD, "")).strip()
    for i, name in enumerate(matrix.job_types):
        if raw.lower() == name.lower():
            return name, [i]
    m = _BATCH.match(raw)
    fam = _key(m.group("family")) if m else ""
    batch = m.group("batch") if m else None
    extra = labels.get(LABEL_BATCH)
    if extra is not None:
        if not str(extra).strip().isdigit():
            return f"label {LABEL_BATCH} must be a batch size (an integer), got {extra!r}"
        batch = str(int(str(extra).strip()))
    rows = [i for i, name in enumerate(matrix.job_types) if fam and _key(name.split(" (", 1)[0]) == fam]
    families = sorted({name.split(" (", 1)[0] for name in matrix.job_types})
    if not rows:
        return f"workload {raw!r} is not in the throughput matrix (known: {', '.join(families)})"
    if batch is not None:
        sized = [i for i in rows if re.search(rf"\(batch size {int(batch)}\)$", matrix.job_types[i])]
        if not sized:
            have = ", ".join(matrix.job_types[i] for i in rows)
            return f"workload {raw!r} has no row for batch size {batch} (rows: {have})"
        return matrix.job_types[sized[0]], sized
    family = matrix.job_types[rows[0]].split(" (", 1)[0]
    return (family if len(rows) > 1 else matrix.job_types[rows[0]]), rows


class ThroughputPerDollar(Scorer):
    """Scorer stage ``ThroughputPerDollar`` (see the module docstring).

    Args:
        services: The driver's services (the pod directory gives the job's labels).
        matrix: The throughput matrix (default: Gavel's, loaded at the first pod naming a workload).
    """

    name: ClassVar[str] = "ThroughputPerDollar"
    objective: ClassVar[str] = "steps per $"

    def __init__(self, services: StageServices, matrix: ThroughputMatrix | None = None) -> None:
        self.services = services
        self._matrix = matrix
        self._spec: ClusterSpec | None = None
        self._nodes: list[NodeFigure] = []
        self._job: str | None = None
        self._rows: list[int] = []
        self._note: dict[str, Any] | None = None
        self._best: float | None = None
        self._memo: dict[tuple[str, str | None], tuple[str, list[int]] | str] = {}
        self._rates: dict[tuple[tuple[int, ...], int], NDArray[np.float64]] = {}
        self._cols: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._prices: NDArray[np.float64] = np.zeros(0)

    @property
    def matrix(self) -> ThroughputMatrix:
        """The throughput matrix (loaded once, on first use)."""
        if self._matrix is None:
            self._matrix = default_matrix()
        return self._matrix

    def begin(self, att: Attempt, req: ResourceRequest) -> bool:
        self._note, self._job, self._best = None, None, None
        info = self.services.info(att)
        if info is None or LABEL_WORKLOAD not in info.labels:
            return False  # no job type: the policy's decision, untouched
        key = (info.labels[LABEL_WORKLOAD], info.labels.get(LABEL_BATCH))
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = workload_rows(self.matrix, info.labels)
        if isinstance(got, str):
            self._note = {"fallback": "policy score", "reason": got}
            return False
        if req.num_gpu not in self.matrix.scales:
            self._note = {"job_type": got[0], "fallback": "policy score",
                          "reason": f"the matrix has no figure for {req.num_gpu} GPU(s) (it has {self.matrix.scales})"}
            return False
        self._job, self._rows = got
        self._note = {"job_type": got[0], "objective": self.objective}
        return True

    def _figures(self, view: ClusterState) -> tuple[list[NodeFigure], NDArray[np.intp], NDArray[np.float64]]:
        if self._spec is not view.spec:  # node models and labels are static per spec
            self._spec = view.spec
            self._nodes = [node_figure(self.matrix, n.gpu_model, n.labels) for n in view.spec.nodes]
            self._cols = np.array([-1 if f.col is None else f.col for f in self._nodes], dtype=np.intp)
            self._prices = np.array([np.nan if f.price is None else f.price for f in self._nodes])
        return self._nodes, self._cols, self._prices

    def values(self, rates: NDArray[np.float64], prices: NDArray[np.float64], gpus: int) -> NDArray[np.float64]:
        """The objective per node: steps per $ (``Throughput``: steps/s)."""
        return rates * 3600.0 / (prices * gpus)

    def per_column(self, scale: int) -> NDArray[np.float64]:
        """Steps/s of the attempt's job type per matrix column at ``scale`` GPUs (geometric mean over rows)."""
        key = (tuple(self._rows), scale)
        got = self._rates.get(key)
        if got is None:
            s = self.matrix.scale_index(scale)
            block = self.matrix.steps_per_s[self._rows, s, :]
            with np.errstate(divide="ignore"):
                got = np.exp(np.log(block).mean(axis=0)) if len(self._rows) > 1 else block[0].copy()
            self._rates[key] = got
        return got

    def score(self, view: ClusterState, req: ResourceRequest, nodes: NDArray[np.intp],
              policy: Any) -> NDArray[np.int64]:
        figs, cols, prices = self._figures(view)
        c = cols[nodes]
        rates = np.where(c >= 0, self.per_column(req.num_gpu)[np.maximum(c, 0)], np.nan)
        known = rates > 0
        vals = np.where(known, self.values(rates, prices[nodes], max(req.num_gpu, 1)), np.nan)
        note = self._note if self._note is not None else {}
        for key in ("unscored", "fallback", "reason", "top"):  # a second stage of the attempt scores afresh
            note.pop(key, None)
        self._best = None
        if not known.all():
            note["unscored"] = {
                view.spec.nodes[i].name: figs[i].why or f"the matrix has no figure for {self._job} on {figs[i].gpu}"
                for i in nodes[~known].tolist()}
        if not known.any():
            note["fallback"] = "policy score"
            note["reason"] = "no feasible node has a throughput figure"
            return np.asarray(policy(), dtype=np.int64)
        out = np.zeros(nodes.size, dtype=np.int64)
        levels = 0
        if not known.all():
            ps = np.asarray(policy(), dtype=np.int64)[~known]
            upv = np.unique(ps)
            out[~known] = 1 + np.searchsorted(upv, ps)
            levels = int(upv.size)
        kv = vals[known]
        uv = np.unique(kv)
        out[known] = levels + 1 + np.searchsorted(uv, kv)
        kn, kr = nodes[known], rates[known]
        order = np.lexsort((view.rank[kn], -kv))[:3]
        note["top"] = [{"node": view.spec.nodes[int(kn[o])].name, "gpu": figs[int(kn[o])].gpu,
                        "steps_per_s": round(float(kr[o]), 6), "usd_per_gpu_hour": figs[int(kn[o])].price,
                        "value": round(float(kv[o]), 6)} for o in order.tolist()]
        self._best = float(uv[-1])
        return out

    def annotate(self, decision: Decision) -> Decision:
        if self._note is None:
            return decision
        expl = {**decision.explanation, self.name: dict(self._note)}
        reason = decision.reason
        if self._best is not None and "fallback" not in self._note:
            feas = decision.explanation.get("feasible_nodes")
            reason = (f"{self.name}: best of {feas} feasible node(s) for {self._job}, "
                      f"{self._best:.6g} {self.objective}")
        return replace(decision, reason=reason, explanation=expl)


class Throughput(ThroughputPerDollar):
    """Scorer stage ``Throughput``: steps/s of the job type, whatever the price (a tier paying for speed)."""

    name: ClassVar[str] = "Throughput"
    objective: ClassVar[str] = "steps/s"

    def values(self, rates: NDArray[np.float64], prices: NDArray[np.float64], gpus: int) -> NDArray[np.float64]:
        return rates


def _per_dollar(b: BuildContext) -> ThroughputPerDollar:
    return ThroughputPerDollar(b.services)


def _throughput(b: BuildContext) -> Throughput:
    return Throughput(b.services)


SCORERS.add("ThroughputPerDollar", _per_dollar)
SCORERS.add("Throughput", _throughput)
