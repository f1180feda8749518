"""Global queue reordering by ``cost_score`` inside tier guarantees.

The algorithm is :func:`seedance.scheduling.queueing.share_order` (the live queue's
``cost-score`` order uses it too); this module binds it to a tier configuration's ``min_share``.
"""

from __future__ import annotations

from collections.abc import Sequence

from seedance.core.errors import InputError
from seedance.scheduling.queueing import share_order
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig


def tier_shares(tiers: TierConfig = DEFAULT_TIER_CONFIG) -> dict[str, float]:
    """``min_share`` of every tier; raises ``InputError`` when they sum to more than 1."""
    shares = {name: spec.min_share for name, spec in tiers.tiers.items()}
    if sum(shares.values()) > 1.0 + 1e-9:
        raise InputError(f"tier min_share values sum to {sum(shares.values()):.3f} > 1; no order can honour them",
                         field="min_share")
    return shares


def reorder(entry_tiers: Sequence[str], keys: Sequence[float], tiers: TierConfig = DEFAULT_TIER_CONFIG) -> list[int]:
    """The order in which to try queue entries.

    Args:
        entry_tiers: Tier name of each entry.
        keys: Sort key of each entry (smaller first); ties keep the queue order.
        tiers: Tier configuration (``min_share`` per tier).

    Returns:
        A permutation of ``range(len(keys))``.

    >>> reorder(["gold", "bronze", "bronze"], [5.0, 1.0, 2.0])  # gold holds floor(0.5 * 2) = 1 of 2 slots
    [1, 0, 2]
    """
    if len(entry_tiers) != len(keys):
        raise InputError("one tier per queue entry is needed", field="tiers")
    shares = tier_shares(tiers)
    for t in set(entry_tiers):
        if t not in shares:
            raise InputError(f"unknown tier {t!r}; tiers: {', '.join(shares)}", field="tier")
    return share_order(entry_tiers, keys, shares)
