"""The reservation planner's policy file (YAML, kind ``ReservationConfig``).

::

    apiVersion: seedance.io/v1
    kind: ReservationConfig
    metadata: {name: a100-fleet}
    spec:
      offer: {cloud: gcp, instance_type: a2-highgpu-1g, region: us-central1}  # prices per GPU of this offer
      price_book: null          # a PriceBook YAML merged over the catalog
      spot_share: 0.0           # share of uncovered demand that runs on spot
      spot_rework: 0.0          # extra spot hours per spot hour lost to interruptions
      epoch_hours: 730          # decision epoch (the terms must be whole numbers of epochs)
      ppo: {timesteps: 125000, seed: 0, policy_file: null}
      percentile: {lookback_days: null, percentile: null, term: null}   # null: tuned on the training windows
      online: {term: null}                                               # null: tuned

Unknown keys and bad values raise ``InputError`` with the file, line and dotted field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seedance.core.errors import InputError
from seedance.core.yamldoc import compose, validate


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OfferRef(_Model):
    """Which offer of the market book prices the plan."""

    cloud: str = "gcp"
    instance_type: str = "a2-highgpu-1g"
    region: str = "us-central1"


class PpoSpec(_Model):
    """PPO training."""

    timesteps: int = Field(default=125_000, ge=512, le=10_000_000)
    seed: int = Field(default=0, ge=0)
    policy_file: str | None = Field(default=None, description="A trained policy (zip); skips training.")
    action: Literal["levels", "planner"] = Field(
        default="planner", description="The capacity part of the action: a level on the 60-day quantile scale, "
                                      "or a ratio of the receding-horizon planner's forecast.")


class PercentileSpec(_Model):
    """The advisor baseline; null fields are tuned on the training windows."""

    lookback_days: float | None = Field(default=None, gt=0, le=365)
    percentile: float | None = Field(default=None, ge=0, le=100)
    term: Literal["auto", "1y", "3y"] | None = None


class OnlineSpec(_Model):
    """The online algorithm; a null term is tuned."""

    term: Literal["1y", "3y"] | None = None


class ReservationSpec(_Model):
    """What to plan with."""

    offer: OfferRef = Field(default_factory=OfferRef)
    price_book: str | None = None
    spot_share: float = Field(default=0.0, ge=0, le=1)
    spot_rework: float = Field(default=0.0, ge=0, le=10)
    epoch_hours: int = Field(default=730, ge=24, le=8760)
    ppo: PpoSpec = Field(default_factory=PpoSpec)
    percentile: PercentileSpec = Field(default_factory=PercentileSpec)
    online: OnlineSpec = Field(default_factory=OnlineSpec)

    @field_validator("epoch_hours")
    @classmethod
    def _divides(cls, v: int) -> int:
        if 8760 % v:
            raise ValueError("must divide 8760 (a year) so that the terms are whole numbers of epochs")
        return v


class ReservationConfig(_Model):
    """A reservation planner document."""

    apiVersion: Literal["seedance.io/v1"] = "seedance.io/v1"  # noqa: N815 - the document's key
    kind: Literal["ReservationConfig"] = "ReservationConfig"
    metadata: dict[str, str] = Field(default_factory=dict)
    spec: ReservationSpec = Field(default_factory=ReservationSpec)


def parse_config(text: str, *, source: str = "reservation config") -> ReservationConfig:
    """Parse and validate a config document."""
    node, data = compose(text, source=source, what="reservation config")
    if not isinstance(data, dict):
        raise InputError("a reservation config is a mapping with apiVersion, kind, metadata and spec", source=source,
                         line=1)
    cfg: ReservationConfig = validate(ReservationConfig, data, node, source=source, schema="ReservationConfig")
    return cfg


def load_config(path: str | Path) -> ReservationConfig:
    """Load a config file."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("reservation config not found", source=src) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read reservation config: {exc}", source=src) from None
    return parse_config(text, source=src)
