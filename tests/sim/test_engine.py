"""The discrete-event engine: ordering, streamed arrivals, isolation between instances."""

from __future__ import annotations

import pytest

from seedance.sim.engine import EventLoop


def test_events_pop_in_time_then_schedule_order_and_arrivals_interleave() -> None:
    seen: list[tuple[str, float, int]] = []
    loop: EventLoop

    def arrive(t: float, p: int) -> None:
        seen.append(("arr", t, p))
        loop.schedule(t + 5, 1, p)

    def leave(t: float, p: int) -> None:
        seen.append(("end", t, p))

    loop = EventLoop([arrive, leave])
    loop.schedule(3.0, 1, 99)
    n = loop.run([(0.0, 1), (3.0, 2), (10.0, 3)])
    assert n == 7
    assert seen == [
        ("arr", 0.0, 1),
        ("end", 3.0, 99),
        ("arr", 3.0, 2),
        ("end", 5.0, 1),
        ("end", 8.0, 2),
        ("arr", 10.0, 3),
        ("end", 15.0, 3),
    ]


def test_past_events_and_unsorted_arrivals_are_refused() -> None:
    loop = EventLoop([lambda t, p: None])
    loop.run([(5.0, 0)])
    with pytest.raises(ValueError, match="before the clock"):
        loop.schedule(1.0, 0, 0)
    with pytest.raises(ValueError, match="not sorted"):
        EventLoop([lambda t, p: None]).run([(5.0, 0), (1.0, 1)])


def test_until_and_stop() -> None:
    got: list[int] = []
    loop = EventLoop([lambda t, p: got.append(p)])
    loop.run([(float(i), i) for i in range(10)], until=4.5)
    assert got == [0, 1, 2, 3, 4]
    loop2 = EventLoop([lambda t, p: (got.append(p), loop2.stop())])
    loop2.run([(0.0, 100), (1.0, 101)])
    assert got[-1] == 100


def test_two_engines_do_not_share_sequence_numbers() -> None:
    a, b = EventLoop([lambda t, p: None]), EventLoop([lambda t, p: None])
    for i in range(3):
        a.schedule(1.0, 0, i)
    b.schedule(1.0, 0, 7)
    assert a.pending() == 3 and b.pending() == 1
    assert b._heap[0][1] == 1  # b's counter starts at its own 1
