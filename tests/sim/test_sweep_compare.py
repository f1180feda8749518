"""Comparing two ``seedancectl simulate -o json`` payloads timings aside (``tests.sim.ray_sweeps``)."""

from __future__ import annotations

from typing import Any

from tests.sim.ray_sweeps import first_difference, timeless


def _payload() -> dict[str, Any]:
    return {
        "mode": "inflation",
        "results": [
            {"policy": "fgd", "seed": 42, "placed": 10, "wall_s": 1.5},
            {"policy": "fgd", "seed": 43, "placed": 11, "wall_s": 1.7},
        ],
        "summary": [{"policy": "fgd", "unallocated_pct_at_100_mean": 3.25, "wall_s_mean": 1.6}],
        "bounds": [],
        "bound_summary": [],
    }


def test_timings_alone_do_not_count() -> None:
    a, b = _payload(), _payload()
    b["results"][0]["wall_s"] = 9.0
    b["summary"][0]["wall_s_mean"] = 5.0
    assert first_difference(a, b) is None
    assert timeless(a) == {
        "mode": "inflation",
        "results": [{"policy": "fgd", "seed": 42, "placed": 10}, {"policy": "fgd", "seed": 43, "placed": 11}],
        "summary": [{"policy": "fgd", "unallocated_pct_at_100_mean": 3.25}],
        "bounds": [],
        "bound_summary": [],
    }
    assert a["results"][0]["wall_s"] == 1.5  # the input is left as it was


def test_the_first_differing_record_is_named_with_its_fields() -> None:
    a, b = _payload(), _payload()
    b["results"][1]["placed"] = 12
    b["results"][1]["wall_s"] = 0.1
    assert first_difference(a, b) == {
        "key": "results", "index": 1, "fields": ["placed"],
        "a": {"policy": "fgd", "seed": 43, "placed": 11}, "b": {"policy": "fgd", "seed": 43, "placed": 12},
    }


def test_missing_records_keys_and_fields_are_differences() -> None:
    a, b = _payload(), _payload()
    b["results"].pop()
    assert first_difference(a, b) == {"key": "results", "index": 1, "lengths": [2, 1]}
    b = _payload()
    del b["bounds"]
    assert first_difference(a, b) == {"key": "bounds", "only_in": "a"}
    b = _payload()
    b["summary"][0]["extra"] = 1
    diff = first_difference(a, b)
    assert diff is not None and diff["index"] == 0 and diff["fields"] == ["extra"]
    b = _payload()
    b["mode"] = "replay"
    assert first_difference(a, b) == {"key": "mode", "a": "inflation", "b": "replay"}
