"""Global queue reordering by ``cost_score`` inside tier guarantees.

NOTE(seedance): the invariant, once.
  Entries are taken in ascending ``key`` order (the cost model's regret: jobs that lose least by
  running now go first), except that every tier ``t`` with ``min_share = s_t`` holds at least
  ``floor(s_t * n)`` of the first ``n`` slots, for every ``n``, as long as it has entries left.
  Before each slot the greedy choice is checked against that guarantee for all later prefixes;
  when it would break it, the slot goes to the tier whose next guaranteed slot comes first
  (earliest deadline first, which is optimal for unit-size slots with deadlines). The shares must
  sum to at most 1, which makes the guarantee always satisfiable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from seedance.core.errors import InputError
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
    n = len(keys)
    if len(entry_tiers) != n:
        raise InputError("one tier per queue entry is needed", field="tiers")
    shares = tier_shares(tiers)
    for t in set(entry_tiers):
        if t not in shares:
            raise InputError(f"unknown tier {t!r}; tiers: {', '.join(shares)}", field="tier")
    names = sorted(set(entry_tiers))
    queues: dict[str, list[int]] = {t: [] for t in names}
    for i in sorted(range(n), key=lambda i: (keys[i], i)):
        queues[entry_tiers[i]].append(i)
    s = np.array([shares[t] for t in names])
    total = np.array([len(queues[t]) for t in names])
    taken = np.zeros(len(names), dtype=np.int64)
    heads = [0] * len(names)
    m = np.arange(1, n + 1)
    quota = np.minimum(np.floor(s[:, None] * m[None, :] + 1e-9).astype(np.int64), total[:, None])  # (T, n)
    order: list[int] = []
    for pos in range(1, n + 1):  # choosing slot ``pos``
        live = [j for j in range(len(names)) if heads[j] < total[j]]
        greedy = min(live, key=lambda j: (keys[queues[names[j]][heads[j]]], queues[names[j]][heads[j]]))
        after = taken.copy()
        after[greedy] += 1
        # slots pos+1..M must cover what every tier is still owed by M, for every M >= pos
        owed = np.maximum(quota[:, pos - 1:] - after[:, None], 0).sum(axis=0)
        room = m[pos - 1:] - pos
        pick = greedy
        if np.any(owed > room):
            due = [(math.ceil((taken[j] + 1) / s[j] - 1e-9), j) for j in live if s[j] > 0 and taken[j] < total[j]]
            pick = min(due)[1] if due else greedy
        order.append(queues[names[pick]][heads[pick]])
        heads[pick] += 1
        taken[pick] += 1
    return order
