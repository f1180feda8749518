"""Energy model: power of a job from its GPUs, and carbon accounting of that energy.

Power of one GPU at utilisation ``u`` (0..1) is linear between the catalog's idle power and its
TDP: ``P_gpu(u) = idle_w + (tdp_w - idle_w) * u``, or, for a model whose catalog entry holds a
measured ``power_curve``, that curve interpolated linearly (the H200's, measured on real hardware,
is concave: 510.8 W at 52 % and 693.3 W at 98 % utilisation, where a 75-700 W line gives 400 W and
688 W). Each GPU also carries ``host_w_per_gpu`` of host
power (CPU, memory, NIC, fans; a DGX A100 draws at most 6.5 kW for 8 x 400 W GPUs, i.e. up to
412 W of non-GPU power per GPU at full load, NVIDIA DGX A100 datasheet). The facility multiplies
IT power by its PUE. A job holding ``g`` GPUs (a fraction for a shared GPU: 0.47 is 470
milli-GPU) draws ``g * (P_gpu(u) + host_w_per_gpu) * PUE`` watts at the meter, for its whole run.

Carbon: location-based accounting (the default) charges the hourly grid intensity of the region.
Market-based accounting (GHG Protocol Scope 2) charges ``contract_share`` of the energy at the
emission factor of the contracted supply (PPA, certificates) and the rest at the residual mix
(a constant factor, or the hourly grid intensity when no residual mix is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from seedance.core.catalog import CATALOG, GpuModel
from seedance.core.errors import InputError, UnknownNameError


@dataclass(frozen=True, slots=True)
class EnergyModel:
    """Power of jobs from their GPUs.

    Attributes:
        gpu_util: Default GPU utilisation of a training job (0..1), used when a job gives none.
        host_w_per_gpu: Host (non-GPU IT) power per GPU, in watts.
        pue: Power usage effectiveness of the facility (>= 1).

    >>> m = EnergyModel(gpu_util=0.5, host_w_per_gpu=100, pue=1.5)
    >>> m.gpu_power_w("A100-80GB")  # 50 W idle + 0.5 * (400 - 50) W
    225.0
    >>> m.job_power_kw("A100-80GB", 2)  # 2 * (225 + 100) W * 1.5
    0.975
    """

    gpu_util: float = 0.8
    host_w_per_gpu: float = 150.0
    pue: float = 1.2

    def __post_init__(self) -> None:
        if not 0.0 <= self.gpu_util <= 1.0:
            raise InputError(f"gpu_util must be within 0..1, got {self.gpu_util}", field="gpu_util")
        if self.host_w_per_gpu < 0:
            raise InputError(f"host_w_per_gpu must be >= 0, got {self.host_w_per_gpu}", field="host_w_per_gpu")
        if self.pue < 1.0:
            raise InputError(f"pue must be >= 1, got {self.pue}", field="pue")

    @staticmethod
    def model(name: str) -> GpuModel:
        """The catalog entry of a GPU model (bad names raise ``InputError`` listing the valid ones)."""
        try:
            return CATALOG.resolve(name)
        except UnknownNameError as exc:
            raise InputError(str(exc), field="gpu_model") from None

    def gpu_power_w(self, gpu_model: str, util: float | None = None) -> float:
        """Board power of one GPU of ``gpu_model`` at utilisation ``util`` (default ``gpu_util``)."""
        m = self.model(gpu_model)
        u = self.gpu_util if util is None else util
        if not 0.0 <= u <= 1.0:
            raise InputError(f"utilisation must be within 0..1, got {u}", field="gpu_util")
        if m.power_curve:
            us, ws = zip(*m.power_curve, strict=True)
            return float(np.interp(u, us, ws))
        return m.idle_w + (m.tdp_w - m.idle_w) * u

    def job_power_kw(self, gpu_model: str, gpus: float, util: float | None = None) -> float:
        """Facility power (kW) of a job holding ``gpus`` GPUs of ``gpu_model``."""
        if gpus < 0:
            raise InputError(f"GPU count must be >= 0, got {gpus}", field="gpus")
        return gpus * (self.gpu_power_w(gpu_model, util) + self.host_w_per_gpu) * self.pue / 1000.0


@dataclass(frozen=True, slots=True)
class CarbonAccounting:
    """How energy is turned into emissions.

    Attributes:
        method: ``"location"`` (hourly grid intensity) or ``"market"``.
        contract_share: Market-based: share of the energy covered by contractual instruments.
        contract_g_per_kwh: Market-based: emission factor of the contracted supply (gCO2eq/kWh).
        residual_g_per_kwh: Market-based: residual-mix factor for the uncovered share; ``None``
            uses the hourly grid intensity.

    >>> CarbonAccounting("market", contract_share=0.5).effective(np.array([200.0]))
    array([100.])
    """

    method: Literal["location", "market"] = "location"
    contract_share: float = 0.0
    contract_g_per_kwh: float = 0.0
    residual_g_per_kwh: float | None = None

    def __post_init__(self) -> None:
        if self.method not in ("location", "market"):
            raise InputError(f"carbon accounting must be 'location' or 'market', got {self.method!r}",
                             field="accounting")
        if not 0.0 <= self.contract_share <= 1.0:
            raise InputError("contract_share must be within 0..1", field="contract_share")
        if self.contract_g_per_kwh < 0 or (self.residual_g_per_kwh is not None and self.residual_g_per_kwh < 0):
            raise InputError("emission factors must be >= 0", field="contract_g_per_kwh")

    def effective(self, grid: ArrayLike) -> NDArray[np.float64]:
        """Accounted intensity (gCO2eq/kWh) for hourly grid intensities ``grid``."""
        g = np.asarray(grid, dtype=np.float64)
        if self.method == "location":
            return g
        rest = g if self.residual_g_per_kwh is None else np.full_like(g, self.residual_g_per_kwh)
        return self.contract_share * self.contract_g_per_kwh + (1.0 - self.contract_share) * rest
