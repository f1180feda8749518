"""Unit prices for allocation: $/GPU-h by model, $/core-h, $/GiB-h, overhead, node contracts.

Defaults: GPU list prices from the catalog (:class:`seedance.core.catalog.PriceBook`); CPU and RAM
from OpenCost's default custom pricing (``configs/default.json`` in opencost/opencost, "Default
prices based on GCP us-central1": CPU 0.031611 $/vCPU-h, RAM 0.004237 $/GiB-h, GPU 0.95 $/h for a
GPU the catalog does not know).

A price book file (YAML or JSON) overrides any of them::

    cpu: 0.0316            # $ per core-hour
    ram_gib: 0.0042        # $ per GiB-hour
    gpu: {H100-80GB: 9.80, A100-80GB: 3.20}
    gpu_default: 0.95
    shared_overhead_per_hour: 0.10   # e.g. a managed control plane fee, shared by every tenant
    nodes: {"gpu-node-*": 41.0}      # a cluster's own contract: $ per node-hour (glob on node name)

A node with a contract price is priced as OpenCost's specification (Appendix A) says: the base
rates keep their ratio and are scaled so that cpu + ram + gpu equals the node's price.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seedance.core.catalog import CATALOG, PriceBook
from seedance.core.errors import InputError, UnknownNameError

OPENCOST_CPU_CORE_H = 0.031611
OPENCOST_RAM_GIB_H = 0.004237
OPENCOST_GPU_H = 0.95
GIB = float(2**30)


@dataclass(frozen=True, slots=True)
class NodeRates:
    """Rates that apply to one node: $/core-h, $/GiB-h and $/GPU-h per model."""

    cpu: float
    ram_gib: float
    gpu: Mapping[str, float]

    def gpu_rate(self, model: str) -> float:
        """$/GPU-h of ``model`` on this node."""
        return self.gpu.get(model, next(iter(self.gpu.values()), OPENCOST_GPU_H) if self.gpu else OPENCOST_GPU_H)


@dataclass(frozen=True, slots=True)
class PriceSheet:
    """Where every unit price comes from.

    Attributes:
        gpu: $/GPU-h overrides by model (canonical catalog names or aliases).
        cpu: $/core-h.
        ram_gib: $/GiB-h.
        gpu_default: $/GPU-h for a model the catalog does not know.
        shared_overhead_per_hour: $/h of the cluster not tied to a node (shared by every tenant).
        nodes: Contract prices $/node-h by node-name glob.
        source: Where the sheet came from (shown in reports).
    """

    gpu: Mapping[str, float] = field(default_factory=dict)
    cpu: float = OPENCOST_CPU_CORE_H
    ram_gib: float = OPENCOST_RAM_GIB_H
    gpu_default: float = OPENCOST_GPU_H
    shared_overhead_per_hour: float = 0.0
    nodes: Mapping[str, float] = field(default_factory=dict)
    source: str = "catalog list prices; CPU/RAM: OpenCost default pricing (GCP us-central1)"

    def gpu_h(self, model: str) -> float:
        """$/GPU-h of ``model`` (override, else catalog list price, else ``gpu_default``)."""
        if not model:
            return self.gpu_default
        try:
            canon = CATALOG.resolve(model).name
        except (UnknownNameError, KeyError):
            return float(self.gpu.get(model, self.gpu_default))
        return PriceBook(overrides=dict(self.gpu)).usd_per_gpu_hour(canon)

    def contract(self, node: str) -> float | None:
        """The node's contract price ($/h), if a glob matches it."""
        for pattern, price in self.nodes.items():
            if fnmatch.fnmatchcase(node, pattern):
                return float(price)
        return None

    def node_rates(self, node: str, cpu_cores: float, ram_bytes: float, gpus: Mapping[str, float]) -> NodeRates:
        """The rates of ``node``: the base rates, scaled to its contract price when it has one."""
        gpu = {m: self.gpu_h(m) for m in gpus}
        price = self.contract(node)
        if price is None:
            return NodeRates(self.cpu, self.ram_gib, gpu)
        base = cpu_cores * self.cpu + ram_bytes / GIB * self.ram_gib + sum(n * gpu[m] for m, n in gpus.items())
        if base <= 0:
            raise InputError(f"node {node} has a contract price but no capacity to spread it on",
                             source="price book", field="nodes")
        k = price / base
        return NodeRates(self.cpu * k, self.ram_gib * k, {m: r * k for m, r in gpu.items()})

    @classmethod
    def load(cls, path: str | Path) -> PriceSheet:
        """Read a price book file (YAML or JSON); bad content raises :class:`InputError`."""
        src = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            raise InputError("cannot open file", source=src) from None
        if src.endswith(".json"):
            try:
                doc = json.loads(text)
            except ValueError as exc:
                raise InputError(f"not valid JSON/YAML: {exc}", source=src) from None
        else:  # bad YAML: an InputError with the line
            from seedance.core.yamldoc import compose

            doc = compose(text, source=src, what="price book", allow_empty=True)[1]
        return cls.from_mapping(doc, source=src)

    @classmethod
    def from_mapping(cls, doc: Any, *, source: str = "price book") -> PriceSheet:
        """Build from a parsed document."""
        if not isinstance(doc, Mapping):
            raise InputError("must be a mapping", source=source)
        known = {"cpu", "ram_gib", "gpu", "gpu_default", "shared_overhead_per_hour", "nodes"}
        extra = set(doc) - known
        if extra:
            raise InputError(f"unknown keys {sorted(extra)}; valid: {sorted(known)}", source=source)

        def price(v: Any, name: str) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise InputError(f"must be a price >= 0, got {v!r}", source=source, field=name)
            return float(v)

        gpu = doc.get("gpu") or {}
        nodes = doc.get("nodes") or {}
        if not isinstance(gpu, Mapping) or not isinstance(nodes, Mapping):
            raise InputError("gpu and nodes must be mappings", source=source)
        gpu_out = {}
        for m, v in gpu.items():
            try:
                canon = CATALOG.resolve(str(m)).name
            except (UnknownNameError, KeyError):
                canon = str(m)
            gpu_out[canon] = price(v, f"gpu.{m}")
        return cls(
            gpu=gpu_out, cpu=price(doc.get("cpu", OPENCOST_CPU_CORE_H), "cpu"),
            ram_gib=price(doc.get("ram_gib", OPENCOST_RAM_GIB_H), "ram_gib"),
            gpu_default=price(doc.get("gpu_default", OPENCOST_GPU_H), "gpu_default"),
            shared_overhead_per_hour=price(doc.get("shared_overhead_per_hour", 0.0), "shared_overhead_per_hour"),
            nodes={str(k): price(v, f"nodes.{k}") for k, v in nodes.items()}, source=source,
        )
