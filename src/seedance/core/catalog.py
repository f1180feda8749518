"""GPU catalog: public specifications and list prices of the GPU models Seedance knows.

Every figure is a vendor datasheet value (dense, i.e. without structured sparsity) or a public
on-demand list price, with its source named on the entry. Prices move; they are defaults that a
user's own price book overrides (``PriceBook``), never constants the scheduler depends on.

The Alibaba GPU trace names three GPU models it does not disclose (``G1``, ``G2``, ``G3``). They
are catalog entries marked ``undisclosed=True``; their figures are those of a stated *proxy*
model so that cost and energy reports have numbers, and every report that uses them says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from seedance.core.errors import UnknownNameError


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model's public specification.

    Attributes:
        name: Canonical catalog name, e.g. ``"A100-80GB"``.
        memory_gib: Device memory in GiB.
        bf16_tflops: Dense BF16 tensor throughput (TFLOPS); ``None`` where the GPU has no BF16.
        fp16_tflops: Dense FP16 throughput (TFLOPS), tensor cores where present.
        memory_bw_gbs: Peak memory bandwidth in GB/s.
        tdp_w: Board power limit (TDP) in watts.
        idle_w: Typical idle power draw in watts (used by the energy model).
        compute_capability: CUDA compute capability, e.g. ``"8.0"``.
        mig: Whether the GPU supports Multi-Instance GPU partitioning.
        price_usd_per_hour: On-demand list price per GPU-hour in USD.
        price_source: Where ``price_usd_per_hour`` comes from.
        spec_source: Where the hardware figures come from.
        aliases: Other names for the model, e.g. model codes used in traces.
        undisclosed: True for trace models whose identity is not public (G1/G2/G3).
        proxy: For undisclosed models, the catalog model whose figures are borrowed.
        power_curve: Measured board power (watts) at GPU utilisation points ``(u, W)``, ``u``
            ascending from 0 to 1; the energy model interpolates it instead of the idle-to-TDP
            line where it is given.
        power_source: Where ``power_curve`` comes from.
    """

    name: str
    memory_gib: float
    bf16_tflops: float | None
    fp16_tflops: float
    memory_bw_gbs: float
    tdp_w: float
    idle_w: float
    compute_capability: str
    mig: bool
    price_usd_per_hour: float
    price_source: str
    spec_source: str
    aliases: tuple[str, ...] = ()
    undisclosed: bool = False
    proxy: str | None = None
    power_curve: tuple[tuple[float, float], ...] = ()
    power_source: str = ""

    @property
    def dense_tflops(self) -> float:
        """Best dense half-precision throughput (BF16 where available, else FP16)."""
        return self.bf16_tflops if self.bf16_tflops is not None else self.fp16_tflops


_NV = "NVIDIA datasheet"

_MODELS: tuple[GpuModel, ...] = (
    GpuModel(
        name="P100",
        memory_gib=16,
        bf16_tflops=None,
        fp16_tflops=18.7,
        memory_bw_gbs=732,
        tdp_w=250,
        idle_w=30,
        compute_capability="6.0",
        mig=False,
        price_usd_per_hour=1.46,
        price_source="Google Cloud GPU pricing, nvidia-tesla-p100 on-demand, us-central1 (2024)",
        spec_source=f"{_NV}: Tesla P100 PCIe 16 GB",
        aliases=("TESLA-P100",),
    ),
    GpuModel(
        name="V100-16GB",
        memory_gib=16,
        bf16_tflops=None,
        fp16_tflops=125.0,
        memory_bw_gbs=900,
        tdp_w=300,
        idle_w=40,
        compute_capability="7.0",
        mig=False,
        price_usd_per_hour=3.06,
        price_source="AWS EC2 on-demand, p3.2xlarge (1x V100 16 GB), us-east-1 (2024)",
        spec_source=f"{_NV}: Tesla V100 SXM2 16 GB",
        aliases=("V100M16", "V100"),
    ),
    GpuModel(
        name="V100-32GB",
        memory_gib=32,
        bf16_tflops=None,
        fp16_tflops=125.0,
        memory_bw_gbs=900,
        tdp_w=300,
        idle_w=40,
        compute_capability="7.0",
        mig=False,
        price_usd_per_hour=3.90,
        price_source="AWS EC2 on-demand, p3dn.24xlarge $31.212/h over 8x V100 32 GB, us-east-1 (2024)",
        spec_source=f"{_NV}: Tesla V100 SXM2 32 GB",
        aliases=("V100M32",),
    ),
    GpuModel(
        name="T4",
        memory_gib=16,
        bf16_tflops=None,
        fp16_tflops=65.0,
        memory_bw_gbs=320,
        tdp_w=70,
        idle_w=10,
        compute_capability="7.5",
        mig=False,
        price_usd_per_hour=0.35,
        price_source="Google Cloud GPU pricing, nvidia-tesla-t4 on-demand, us-central1 (2024)",
        spec_source=f"{_NV}: Tesla T4",
    ),
    GpuModel(
        name="A10",
        memory_gib=24,
        bf16_tflops=125.0,
        fp16_tflops=125.0,
        memory_bw_gbs=600,
        tdp_w=150,
        idle_w=20,
        compute_capability="8.6",
        mig=False,
        price_usd_per_hour=0.75,
        price_source="Lambda GPU cloud on-demand, 1x A10 24 GB (2024)",
        spec_source=f"{_NV}: A10 Tensor Core GPU",
    ),
    GpuModel(
        name="A100-40GB",
        memory_gib=40,
        bf16_tflops=312.0,
        fp16_tflops=312.0,
        memory_bw_gbs=1555,
        tdp_w=400,
        idle_w=50,
        compute_capability="8.0",
        mig=True,
        price_usd_per_hour=4.10,
        price_source="AWS EC2 on-demand, p4d.24xlarge $32.7726/h over 8x A100 40 GB, us-east-1 (2024)",
        spec_source=f"{_NV}: A100 SXM4 40 GB",
        aliases=("A100", "A100-SXM4-40GB"),
    ),
    GpuModel(
        name="A100-80GB",
        memory_gib=80,
        bf16_tflops=312.0,
        fp16_tflops=312.0,
        memory_bw_gbs=2039,
        tdp_w=400,
        idle_w=50,
        compute_capability="8.0",
        mig=True,
        price_usd_per_hour=5.12,
        price_source="AWS EC2 on-demand, p4de.24xlarge $40.9657/h over 8x A100 80 GB, us-east-1 (2024)",
        spec_source=f"{_NV}: A100 SXM4 80 GB",
        aliases=("A100-SXM4-80GB",),
    ),
    GpuModel(
        name="L40S",
        memory_gib=48,
        bf16_tflops=362.05,
        fp16_tflops=362.05,
        memory_bw_gbs=864,
        tdp_w=350,
        idle_w=35,
        compute_capability="8.9",
        mig=False,
        price_usd_per_hour=1.861,
        price_source="AWS EC2 on-demand, g6e.xlarge (1x L40S), us-east-1 (2024)",
        spec_source=f"{_NV}: L40S",
    ),
    GpuModel(
        name="H100-80GB",
        memory_gib=80,
        bf16_tflops=989.4,
        fp16_tflops=989.4,
        memory_bw_gbs=3350,
        tdp_w=700,
        idle_w=70,
        compute_capability="9.0",
        mig=True,
        price_usd_per_hour=12.29,
        price_source="AWS EC2 on-demand, p5.48xlarge $98.32/h over 8x H100 80 GB, us-east-1 (2024)",
        spec_source=f"{_NV}: H100 SXM5 80 GB",
        aliases=("H100", "H100-SXM5-80GB"),
    ),
    GpuModel(
        name="H200",
        memory_gib=141,
        bf16_tflops=989.4,
        fp16_tflops=989.4,
        memory_bw_gbs=4800,
        tdp_w=700,
        idle_w=122.5,
        compute_capability="9.0",
        mig=True,
        price_usd_per_hour=6.31,
        price_source="CoreWeave on-demand, HGX H200 $50.44/h over 8 GPUs (2024)",
        spec_source=f"{_NV}: H200 SXM 141 GB",
        aliases=("H200-141GB",),
        power_curve=((0.0, 122.5), (0.27, 356.5), (0.52, 510.8), (0.77, 659.9), (0.98, 693.3), (1.0, 693.3)),
        power_source="measured with benchmarks/bench_gpu_power.py on one H200 SXM (700 W limit), 2026-11-30: "
                     "nvidia-smi power.draw (mean of 100 ms samples) at the utilisation nvidia-smi reported "
                     "while bf16 8192^3 matrix products ran for 0/25/50/75/100% of every 100 ms",
    ),
)


def _undisclosed(code: str, proxy: GpuModel) -> GpuModel:
    return GpuModel(
        name=code,
        memory_gib=proxy.memory_gib,
        bf16_tflops=proxy.bf16_tflops,
        fp16_tflops=proxy.fp16_tflops,
        memory_bw_gbs=proxy.memory_bw_gbs,
        tdp_w=proxy.tdp_w,
        idle_w=proxy.idle_w,
        compute_capability=proxy.compute_capability,
        mig=False,
        price_usd_per_hour=proxy.price_usd_per_hour,
        price_source=f"undisclosed model: price of proxy {proxy.name} ({proxy.price_source})",
        spec_source=f"undisclosed model in the Alibaba GPU trace; figures of proxy {proxy.name}",
        undisclosed=True,
        proxy=proxy.name,
    )


def _build() -> Mapping[str, GpuModel]:
    by_name = {m.name: m for m in _MODELS}
    # Proxies for the trace's undisclosed codes (an assumption, stated in every report using them):
    # G2 is the trace's bulk training GPU (8 per node), modelled as an A100-80GB class device;
    # G1 and G3 as V100-32GB class devices. MIG stays off for them: nothing says they support it.
    extra = (
        _undisclosed("G1", by_name["V100-32GB"]),
        _undisclosed("G2", by_name["A100-80GB"]),
        _undisclosed("G3", by_name["V100-32GB"]),
    )
    return MappingProxyType({m.name: m for m in (*_MODELS, *extra)})


class GpuCatalog(Mapping[str, GpuModel]):
    """Read-only lookup of GPU models by canonical name or alias (case-insensitive).

    >>> CATALOG["v100m32"].name
    'V100-32GB'
    >>> CATALOG.resolve("G2").undisclosed
    True
    """

    def __init__(self, models: Mapping[str, GpuModel]) -> None:
        self._models = dict(models)
        self._index: dict[str, str] = {}
        for m in self._models.values():
            for key in (m.name, *m.aliases):
                self._index[key.upper()] = m.name

    def resolve(self, name: str) -> GpuModel:
        """Return the model called ``name``; unknown names list the valid ones."""
        key = self._index.get(name.strip().upper())
        if key is None:
            raise UnknownNameError(
                f"unknown GPU model {name!r}; valid names: {', '.join(self.known_names())}"
            )
        return self._models[key]

    def known_names(self) -> list[str]:
        """Every accepted name and alias, sorted."""
        return sorted({*self._models, *(a for m in self._models.values() for a in m.aliases)})

    def __getitem__(self, name: str) -> GpuModel:
        return self.resolve(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().upper() in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)


CATALOG = GpuCatalog(_build())
"""The built-in catalog (immutable)."""


@dataclass(frozen=True, slots=True)
class PriceBook:
    """$ per GPU-hour by model, starting from the catalog's list prices.

    ``overrides`` maps a model name (or alias) to a price that replaces the list price, e.g. a
    negotiated or reserved rate.
    """

    overrides: Mapping[str, float] = field(default_factory=dict)
    catalog: GpuCatalog = field(default_factory=lambda: CATALOG)

    def usd_per_gpu_hour(self, model: str) -> float:
        """Price of one GPU-hour of ``model``."""
        m = self.catalog.resolve(model)
        for key, price in self.overrides.items():
            if self.catalog.resolve(key).name == m.name:
                return float(price)
        return m.price_usd_per_hour
