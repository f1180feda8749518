"""Global reordering by cost_score: greedy by key, but no tier ever below its guaranteed share."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.costmodel import reorder
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig, TierSpec

SHARES = {n: s.min_share for n, s in DEFAULT_TIER_CONFIG.tiers.items()}  # gold .5, silver .3, bronze .1


def test_pure_key_order_when_no_share_is_at_stake() -> None:
    assert reorder(["bronze"] * 4, [3.0, 1.0, 2.0, 1.0]) == [1, 3, 2, 0]


def test_gold_gets_half_of_every_prefix_even_with_the_worst_keys() -> None:
    tiers = ["gold", "gold", "bronze", "bronze", "bronze", "bronze"]
    keys = [9.0, 8.0, 1.0, 2.0, 3.0, 4.0]
    order = reorder(tiers, keys)
    assert order == [2, 1, 3, 0, 4, 5]  # gold (best key 8 first) is owed floor(0.5 n) of the first n slots


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gold", "silver", "bronze"]), st.floats(-1e3, 1e3)), max_size=60))
def test_reordering_never_starves_a_tier(entries: list[tuple[str, float]]) -> None:
    tiers = [t for t, _ in entries]
    keys = [k for _, k in entries]
    order = reorder(tiers, keys)
    assert sorted(order) == list(range(len(entries)))
    total = {t: tiers.count(t) for t in SHARES}
    taken = dict.fromkeys(SHARES, 0)
    for n, i in enumerate(order, start=1):
        taken[tiers[i]] += 1
        for t, s in SHARES.items():
            assert taken[t] >= min(math.floor(s * n + 1e-9), total[t]), (t, n)
    for t in SHARES:  # inside a tier, the key order holds
        ks = [keys[i] for i in order if tiers[i] == t]
        assert ks == sorted(ks)


def test_shares_that_cannot_all_be_honoured_are_rejected() -> None:
    gold = DEFAULT_TIER_CONFIG.tiers["gold"].model_copy(update={"min_share": 0.7, "may_preempt": ("bronze",)})
    bronze = DEFAULT_TIER_CONFIG.tiers["bronze"].model_copy(update={"min_share": 0.4, "borrow_labels": {}})
    greedy = TierConfig(tiers={"gold": gold, "bronze": bronze}, qos_map={}, default_tier="bronze")
    with pytest.raises(InputError, match="sum to 1.100 > 1"):
        reorder(["gold"], [1.0], greedy)
    with pytest.raises(InputError, match="unknown tier 'tin'"):
        reorder(["tin"], [1.0])
    assert isinstance(gold, TierSpec)
