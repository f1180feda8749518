"""Cost policies as YAML: the schema, the loader, and the cost-policy plug-in registry.

A policy file (``policies/peak_aware.yaml`` is the shipped example) is validated against
:class:`CostPolicy` (unknown keys are errors, so typos do not pass silently). Errors name the
file, the line of the offending key and its dotted path, through :class:`InputError`.

The control plane reuses :func:`load_policy` / :func:`parse_policy` and
:meth:`CostPolicy.weights` to score jobs with :func:`seedance.costmodel.score.cost_score`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.core.yamldoc import compose as _compose
from seedance.core.yamldoc import line_of as _line_of
from seedance.costmodel.energy import CarbonAccounting, EnergyModel
from seedance.costmodel.score import Weights

API_VERSION = "seedance.io/v1"
KIND = "CostPolicy"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WeightSpec(_Model):
    """Weights of the three terms of ``cost_score``."""

    price: float = Field(default=1.0, ge=0, description="Weight of the energy cost.")
    carbon: float = Field(default=1.0, ge=0, description="Weight of the carbon cost (emissions x shadow price).")
    delay: float = Field(default=1.0, ge=0, description="Weight of the delay penalty.")


class MarketSpec(_Model):
    """Market-based carbon accounting (GHG Protocol Scope 2)."""

    contract_share: float = Field(default=0.0, ge=0, le=1, description="Share of energy covered by PPAs/certificates.")
    contract_g_per_kwh: float = Field(default=0.0, ge=0, description="Emission factor of the contracted supply.")
    residual_g_per_kwh: float | None = Field(
        default=None, ge=0, description="Residual-mix factor for the rest; null = the hourly grid intensity.")


class CarbonSpec(_Model):
    """How emissions are counted and priced."""

    accounting: Literal["location", "market"] = Field(default="location", description="Location- or market-based.")
    column: Literal["direct", "lca"] = Field(default="direct", description="Electricity Maps column to use.")
    shadow_price_per_tonne: dict[str, float] = Field(
        # USD: US EPA social cost of CO2 for 2020 emissions at a 2% discount rate (Report on the Social
        # Cost of Greenhouse Gases, 2023). EUR: about the 2023 average EU ETS allowance price.
        default_factory=lambda: {"USD": 190.0, "EUR": 85.0},
        description="Shadow price of CO2 per tonne, by currency of the region's prices.")
    market: MarketSpec = Field(default_factory=MarketSpec, description="Market-based accounting inputs.")

    @field_validator("shadow_price_per_tonne")
    @classmethod
    def _nonneg(cls, v: dict[str, float]) -> dict[str, float]:
        return _currency_map(v)


class DelaySpec(_Model):
    """Delay penalty, by currency of the region's prices."""

    per_mwh_hour: dict[str, float] = Field(
        default_factory=lambda: {"USD": 0.1, "EUR": 0.1},
        description="Per MWh of the job's energy and hour waited (a 24 h deferral must save 2.4/MWh at 0.1).")
    per_gpu_hour: dict[str, float] = Field(default_factory=dict, description="Per GPU-hour waited.")

    @field_validator("per_mwh_hour", "per_gpu_hour")
    @classmethod
    def _nonneg(cls, v: dict[str, float]) -> dict[str, float]:
        return _currency_map(v)


class DeferralSpec(_Model):
    """Limits on deferral."""

    max_delay_hours: float = Field(default=24.0, gt=0, le=24 * 14, description="Longest deferral after submission.")
    min_gain: float = Field(default=0.0, ge=0, lt=1, description="Defer only for at least this relative gain.")
    default_slack_hours: float = Field(
        default=24.0, ge=0, description="Deadline slack given to flexible jobs that come without a deadline.")


class ForecastSpec(_Model):
    """The forecaster used for planning."""

    forecaster: str = Field(default="profile-ridge", description="Registered forecaster name.")
    price_forecaster: str | None = Field(
        default="auto", description="Forecaster for prices only: auto (the published day-ahead prices where the "
        "market publishes them, else forecaster), a forecaster name (e.g. published-day-ahead), or null "
        "(= forecaster).")
    horizon_hours: int = Field(default=48, ge=1, le=24 * 14, description="Forecast horizon (hours).")
    quantiles: tuple[float, ...] = Field(default=(0.1, 0.5, 0.9), description="Quantile levels reported.")
    options: dict[str, float | int] = Field(default_factory=dict, description="Forecaster options.")

    @field_validator("forecaster", "price_forecaster")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        from seedance.signals.forecast import FORECASTERS

        if v is not None and v != "auto" and v not in FORECASTERS:
            raise ValueError(f"unknown forecaster {v!r}; valid names: {', '.join(FORECASTERS.names())}")
        return v

    @field_validator("quantiles")
    @classmethod
    def _levels(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if len(v) < 2 or any(not 0 < q < 1 for q in v):
            raise ValueError("give at least two quantile levels strictly between 0 and 1")
        return tuple(sorted(v))


class EnergySpec(_Model):
    """Energy model inputs (see :class:`~seedance.costmodel.energy.EnergyModel`)."""

    gpu_util: float = Field(default=0.8, ge=0, le=1, description="GPU utilisation of training jobs.")
    host_w_per_gpu: float = Field(default=150.0, ge=0, description="Host power per GPU (W).")
    pue: float = Field(default=1.2, ge=1, le=3, description="Facility PUE.")


class SignalSpec(_Model):
    """Where the signals come from."""

    provider: str = Field(default="files", description="Registered signal provider for prices.")
    carbon_provider: str | None = Field(default=None, description="Provider for carbon (default: same).")
    prices: str | None = Field(default=None, description="Price file (default: by region).")
    carbon: str | None = Field(default=None, description="Carbon file (default: by region).")
    price_timezone: str | None = Field(default=None, description="IANA zone of naive price timestamps.")
    year: int = Field(default=2023, ge=2000, le=2100, description="Year of the default files.")
    api_base_url: str | None = Field(default=None, description="Base URL of an API provider.")
    token_env: str | None = Field(default=None, description="Environment variable holding the API token.")

    @field_validator("provider", "carbon_provider")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        from seedance.signals.providers import SIGNAL_PROVIDERS

        if v is not None and v not in SIGNAL_PROVIDERS:
            raise ValueError(f"unknown signal provider {v!r}; valid names: {', '.join(SIGNAL_PROVIDERS.names())}")
        return v


class PolicySpec(_Model):
    """What the policy does."""

    plugin: str = Field(default="electricity-pricing", description="Registered cost-policy plug-in.")
    weights: WeightSpec = Field(default_factory=WeightSpec)
    carbon: CarbonSpec = Field(default_factory=CarbonSpec)
    delay: DelaySpec = Field(default_factory=DelaySpec)
    deferral: DeferralSpec = Field(default_factory=DeferralSpec)
    forecast: ForecastSpec = Field(default_factory=ForecastSpec)
    energy: EnergySpec = Field(default_factory=EnergySpec)
    signals: SignalSpec = Field(default_factory=SignalSpec)
    # compliance declarations: checked by seedance.compliance (``seedancectl policy validate``), unused here
    autoscale: dict[str, Any] | None = Field(default=None, description="Autoscaling bounds (compliance rule SDC001).")
    storage: dict[str, Any] | None = Field(default=None, description="Storage the policy writes (SDC002, SDC006).")
    actions: list[dict[str, Any]] | None = Field(default=None, description="Cost actions (compliance.actions).")
    audit: dict[str, Any] | None = Field(default=None, description="Audit-log retention declared (SDC003).")
    keys: dict[str, Any] | None = Field(default=None, description="Key rotation period declared (SDC004).")

    @field_validator("plugin")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in COST_PLUGINS:
            raise ValueError(f"unknown cost-policy plugin {v!r}; valid names: {', '.join(COST_PLUGINS.names())}")
        return v


class Metadata(_Model):
    """Name and description."""

    name: str = Field(default="peak-aware", description="Policy name (lowercase letters, digits, dashes).")
    description: str = Field(default="", description="Free text.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", v):
            raise ValueError("must be 1-63 lowercase letters, digits or dashes, starting and ending alphanumeric")
        return v


class CostPolicy(_Model):
    """A cost policy document (``apiVersion: seedance.io/v1``, ``kind: CostPolicy``)."""

    apiVersion: Literal["seedance.io/v1"] = "seedance.io/v1"  # noqa: N815 - the document's key
    kind: Literal["CostPolicy"] = "CostPolicy"
    metadata: Metadata = Field(default_factory=Metadata)
    spec: PolicySpec = Field(default_factory=PolicySpec)

    def weights(self, currency: str) -> Weights:
        """The scoring weights for prices in ``currency`` (per-currency values must name it).

        Raises:
            InputError: the policy has no shadow price (or delay penalty) for this currency.
        """
        s = self.spec
        shadow = s.carbon.shadow_price_per_tonne
        if s.weights.carbon > 0 and currency not in shadow:
            raise InputError(
                f"no carbon shadow price for currency {currency} (policy has: {', '.join(shadow) or 'none'})",
                source=f"policy {self.metadata.name}", field="spec.carbon.shadow_price_per_tonne")
        market = s.carbon.market
        return Weights(
            price=s.weights.price, carbon=s.weights.carbon, delay=s.weights.delay,
            carbon_price_per_tonne=shadow.get(currency, 0.0),
            delay_per_gpu_hour=s.delay.per_gpu_hour.get(currency, 0.0),
            delay_per_mwh_hour=s.delay.per_mwh_hour.get(currency, 0.0),
            max_delay_h=s.deferral.max_delay_hours, min_gain=s.deferral.min_gain,
            energy=EnergyModel(gpu_util=s.energy.gpu_util, host_w_per_gpu=s.energy.host_w_per_gpu, pue=s.energy.pue),
            accounting=CarbonAccounting(s.carbon.accounting, market.contract_share, market.contract_g_per_kwh,
                                        market.residual_g_per_kwh),
        )

    def to_yaml(self) -> str:
        """The policy as YAML (round-trips through :func:`parse_policy`)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _currency_map(v: dict[str, float]) -> dict[str, float]:
    out = {}
    for cur, amount in v.items():
        if not re.fullmatch(r"[A-Z]{3}", cur):
            raise ValueError(f"currency keys are ISO codes such as USD or EUR, got {cur!r}")
        if amount < 0:
            raise ValueError(f"{cur}: must be >= 0, got {amount}")
        out[cur] = float(amount)
    return out


class CostPlugin(ABC):
    """A cost-policy plug-in: how a policy's scores turn into start-time decisions.

    ``schedule_policy`` names the :data:`~seedance.costmodel.schedulers.SCHEDULE_POLICIES` entry
    that the simulator runs for it; ``describe`` is called by ``seedancectl costmodel describe``.
    """

    name: ClassVar[str]
    schedule_policy: ClassVar[str]

    @abstractmethod
    def describe(self, policy: CostPolicy) -> dict[str, Any]:
        """Human-facing summary of what this plug-in does with ``policy``."""


COST_PLUGINS: Registry[type[CostPlugin]] = Registry("cost-policy plugin")


@COST_PLUGINS.register("electricity-pricing", aliases=("peak-aware",))
class ElectricityPricing(CostPlugin):
    """Dual-factor (price + carbon) deferral of flexible training jobs, planned on forecasts."""

    name = "electricity-pricing"
    schedule_policy = "peak-aware"

    def describe(self, policy: CostPolicy) -> dict[str, Any]:
        s = policy.spec
        return {
            "plugin": self.name, "schedule_policy": self.schedule_policy,
            "score": "w_price*cost + w_carbon*co2_t*shadow_price + w_delay*delay (integrated over the run window)",
            "weights": s.weights.model_dump(), "shadow_price_per_tonne": s.carbon.shadow_price_per_tonne,
            "delay": s.delay.model_dump(), "deferral": s.deferral.model_dump(),
            "carbon_accounting": s.carbon.accounting, "carbon_column": s.carbon.column,
            "forecaster": s.forecast.forecaster, "horizon_hours": s.forecast.horizon_hours,
            "energy": s.energy.model_dump(),
        }


def parse_policy(text: str, *, source: str = "policy") -> CostPolicy:
    """Parse and validate a policy document.

    Raises:
        InputError: not YAML, not a mapping, or a schema violation (with line and dotted field).
    """
    node, data = _compose(text, source=source, what="policy file")
    if not isinstance(data, dict):
        raise InputError("a policy file is a mapping with apiVersion, kind, metadata and spec", source=source, line=1)
    try:
        return CostPolicy.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        field = ".".join(str(x) for x in loc) or None
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not in the CostPolicy schema; check the spelling)"
        elif err["type"] == "literal_error" and loc and loc[-1] in ("apiVersion", "kind"):
            msg = f"must be {API_VERSION!r}" if loc[-1] == "apiVersion" else f"must be {KIND!r}"
        raise InputError(msg, source=source, line=_line_of(node, loc), field=field) from None


def load_policy(path: str | Path) -> CostPolicy:
    """Load and validate a policy YAML file (see :func:`parse_policy`)."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("policy file not found", source=src) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read policy file: {exc}", source=src) from None
    return parse_policy(text, source=src)


def policy_schema() -> dict[str, Any]:
    """The JSON schema of a policy document (for editors and docs)."""
    return CostPolicy.model_json_schema()
