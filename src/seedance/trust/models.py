"""Which MIG table a GPU of an ``nvidia-smi`` output uses: from its product name, else its profiles."""

from __future__ import annotations

import re
from collections.abc import Sequence

from seedance.slicing.mig import MigGpu, mig_gpu, mig_gpus
from seedance.trust.nvsmi import GpuInstanceRow

_PRODUCTS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"H100.*(NVL|94GB|96GB)|GH200", re.I), None),  # other MIG tables (1g.12gb, ...)
    (re.compile(r"A100.*40GB", re.I), "A100-40GB"),
    (re.compile(r"A100.*80GB", re.I), "A100-80GB"),
    (re.compile(r"H100", re.I), "H100-80GB"),
    (re.compile(r"H200", re.I), "H200"),
)


def model_of_product(product: str) -> MigGpu | None:
    """MIG geometry of a product name as ``nvidia-smi`` prints it (``None``: no MIG table for it)."""
    for pattern, model in _PRODUCTS:
        if pattern.search(product):
            return mig_gpu(model) if model else None
    return None


def models_of_profiles(names: Sequence[str]) -> list[MigGpu]:
    """Every MIG model whose profile table holds all ``names`` (A100-80GB and H100-80GB share names)."""
    wanted = set(names)
    return [g for g in mig_gpus() if wanted <= set(g.names())]


def gi_profile_of(name: str) -> str:
    """The GPU-instance profile a MIG device / CI name belongs to (``1c.3g.20gb`` -> ``3g.20gb``)."""
    m = re.match(r"^\d+c\.(.+)$", name)
    return m.group(1) if m else name


def ci_slices_of(name: str) -> int | None:
    """Compute slices of a CI named ``name`` (``1c.3g.20gb`` -> 1, ``3g.20gb`` -> 3)."""
    m = re.match(r"^(\d+)c\.", name)
    if m:
        return int(m.group(1))
    head = re.match(r"^(\d+)g\.", name)
    return int(head.group(1)) if head else None


def row_matches(g: MigGpu, r: GpuInstanceRow) -> bool:
    """Whether a ``-lgi`` row's profile ID and size are those of its profile on ``g``."""
    p = g.profile(r.profile)
    return p.profile_id == r.profile_id and p.memory_slices == r.size
