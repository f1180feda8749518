"""SLA tiers (Gold / Silver / Bronze) as policy bundles."""

from seedance.core.resources import SliceBackend
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig, TierSpec, load_tier_config

__all__ = ["DEFAULT_TIER_CONFIG", "SliceBackend", "TierConfig", "TierSpec", "load_tier_config"]
