"""Seedance: a cost-aware GPU scheduler and orchestration platform.

Importing :mod:`seedance` imports nothing heavy; domains live in sub-packages
(``core``, ``traces``, ``scheduling``, ``sim``, ...).
"""

__version__ = "0.1.0"
