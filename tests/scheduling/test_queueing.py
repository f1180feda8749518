"""Queue orders: exact orders on hand-built queues, and the tier-share guarantee as a property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.scheduling.queueing import QUEUE_ORDERS, QueueItem, share_order


def items(*rows: tuple[str, float, int]) -> list[QueueItem]:
    """(tier, cost, priority) per job, arriving one second apart."""
    return [QueueItem(i, float(i), i, priority=p, tier=t, cost=c) for i, (t, c, p) in enumerate(rows)]


def test_fifo_priority_and_smallest_first_order_a_whole_queue_by_their_keys() -> None:
    q = [QueueItem(0, 0.0, 0, priority=0, gpu_milli=4000), QueueItem(1, 1.0, 1, priority=5, gpu_milli=500),
         QueueItem(2, 2.0, 2, priority=5, gpu_milli=1000)]
    assert QUEUE_ORDERS.get("fifo")().order(q) == [0, 1, 2]
    assert QUEUE_ORDERS.get("priority")().order(q) == [1, 2, 0]
    assert QUEUE_ORDERS.get("smallest-first")().order(q) == [1, 2, 0]


def test_cost_score_takes_the_cheapest_first_then_priority_then_arrival() -> None:
    q = items(("bronze", 5.0, 0), ("bronze", 1.0, 0), ("bronze", 3.0, 0), ("bronze", 1.0, 9))
    assert QUEUE_ORDERS.get("cost-score")().order(q) == [3, 1, 2, 0]


def test_cost_score_keeps_every_tier_its_guaranteed_share_of_the_slots() -> None:
    # gold is the dearest but holds floor(0.5 n) of the first n slots: slot 2 and slot 4 at the latest
    q = items(("gold", 9.0, 100), ("gold", 8.0, 100), ("bronze", 1.0, 0), ("bronze", 2.0, 0), ("bronze", 3.0, 0))
    order = QUEUE_ORDERS.get("cost-score")({"gold": 0.5, "bronze": 0.1}).order(q)
    assert order == [2, 1, 3, 0, 4]
    assert QUEUE_ORDERS.get("cost")().order(q) == [2, 3, 4, 1, 0]  # no shares given: cost alone


def test_shares_above_one_and_ragged_inputs_are_input_errors() -> None:
    with pytest.raises(InputError, match="sum to 1.200"):
        share_order(["a", "b"], [1.0, 2.0], {"a": 0.6, "b": 0.6})
    with pytest.raises(InputError, match="one tier per queue entry"):
        share_order(["a"], [1.0, 2.0], {})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gold", "silver", "bronze"]), st.floats(0, 100)), min_size=1, max_size=40),
       st.sampled_from([(0.5, 0.3, 0.1), (0.2, 0.2, 0.2), (0.0, 0.0, 0.9)]))
def test_share_order_is_a_permutation_and_no_tier_falls_below_its_share(
        rows: list[tuple[str, float]], shares: tuple[float, float, float]) -> None:
    tiers = [t for t, _ in rows]
    keys = [k for _, k in rows]
    share = dict(zip(("gold", "silver", "bronze"), shares, strict=True))
    order = share_order(tiers, keys, share)
    assert sorted(order) == list(range(len(rows)))
    for t, s in share.items():
        total = tiers.count(t)
        taken = 0
        for n, i in enumerate(order, start=1):
            taken += tiers[i] == t
            assert taken >= min(math.floor(s * n + 1e-9), total)
    # inside one tier the order is by key (ties by position)
    for t in share:
        mine = [i for i in order if tiers[i] == t]
        assert mine == sorted(mine, key=lambda i: (keys[i], i))
