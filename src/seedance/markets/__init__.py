"""Capacity markets: GPU instance offers with on-demand, spot and 1-/3-year commitment prices.

:mod:`~seedance.markets.book` loads the shared catalog (``../shared/data/cloud-gpu-prices``: AWS,
GCP and Azure list prices with their sources and dates) and user price books (YAML, kind
``PriceBook``) that add or override offers with contract prices; :mod:`~seedance.markets.spot`
reads spot price history (the ``aws ec2 describe-spot-price-history`` JSON).
"""

from seedance.markets.book import InstanceOffer, MarketBook, load_catalog, load_price_book

__all__ = ["InstanceOffer", "MarketBook", "load_catalog", "load_price_book"]
