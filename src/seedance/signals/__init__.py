"""Hourly electricity-price and carbon-intensity signals per region: loaders, providers, forecasts."""

from seedance.signals.files import (
    NAIVE_PRICE_TIMEZONES,
    carbon_path,
    known_regions,
    load_carbon_file,
    load_price_file,
    price_path,
    resolve_region,
)
from seedance.signals.series import CARBON, HOUR, PRICE, HourlySeries, Integrator, iso, parse_utc

__all__ = [
    "CARBON", "HOUR", "NAIVE_PRICE_TIMEZONES", "PRICE", "HourlySeries", "Integrator", "carbon_path", "iso",
    "known_regions", "load_carbon_file", "load_price_file", "parse_utc", "price_path", "resolve_region",
]
