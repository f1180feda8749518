"""GPU product names as drivers print them → catalog models (for prices and idle power)."""

from __future__ import annotations

import re

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.errors import UnknownNameError

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"H200"), "H200"),
    (re.compile(r"H100"), "H100-80GB"),
    (re.compile(r"A100.*80\s*GB|A800.*80\s*GB"), "A100-80GB"),
    (re.compile(r"A100|A800"), "A100-40GB"),
    (re.compile(r"L40S"), "L40S"),
    (re.compile(r"\bA10G?\b"), "A10"),
    (re.compile(r"\bT4\b"), "T4"),
    (re.compile(r"V100.*32\s*GB"), "V100-32GB"),
    (re.compile(r"V100"), "V100-16GB"),
    (re.compile(r"P100"), "P100"),
)


def catalog_model(name: str | None, catalog: GpuCatalog = CATALOG) -> str | None:
    """The catalog model of a product name (``"NVIDIA H100 80GB HBM3"`` → ``"H100-80GB"``), else ``None``.

    >>> catalog_model("NVIDIA A100-SXM4-80GB"), catalog_model("NVIDIA H200"), catalog_model("Quadro X")
    ('A100-80GB', 'H200', None)
    """
    if not name:
        return None
    try:
        return catalog.resolve(name).name
    except (UnknownNameError, KeyError):
        pass
    text = name.upper().replace("NVIDIA", "").strip()
    for pattern, model in _RULES:
        if pattern.search(text):
            return model
    return None
