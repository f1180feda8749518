"""Spot price history (AWS describe-spot-price-history JSON): time-weighted statistics and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedance.core.errors import InputError
from seedance.markets.book import load_catalog
from seedance.markets.spot import apply_history, load_history, summarise
from seedance.signals.series import parse_utc

DOC = {"SpotPriceHistory": [
    {"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
     "SpotPrice": "8.000000", "Timestamp": "2026-06-30T12:00:00+00:00"},
    {"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
     "SpotPrice": "10.000000", "Timestamp": "2026-07-01T06:00:00+00:00"},
    {"AvailabilityZone": "us-east-1b", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
     "SpotPrice": "4.000000", "Timestamp": "2026-07-01T00:00:00Z"},
]}


def test_time_weighted_statistics_per_region(tmp_path: Path, shared_data: Path) -> None:
    p = tmp_path / "h.json"
    p.write_text(json.dumps(DOC))
    recs = load_history(p)
    s = summarise(recs, start=parse_utc("2026-07-01T00:00:00Z"), end=parse_utc("2026-07-02T00:00:00Z"))
    x = s[("p4d.24xlarge", "us-east-1")]
    # zone a: 8 for 6 h (carried in from before the span) then 10 for 18 h; zone b: 4 for 24 h
    assert x.hours == pytest.approx(48.0) and x.zones == ("us-east-1a", "us-east-1b")
    assert x.mean == pytest.approx((8 * 6 + 10 * 18 + 4 * 24) / 48) and (x.min, x.max) == (4.0, 10.0)
    assert x.p90 == 10.0
    book = apply_history(load_catalog(), s, stat="mean", source=str(p))
    o = book.find(cloud="aws", instance_type="p4d.24xlarge", region="us-east-1")
    assert o.spot == pytest.approx(x.mean) and "48 zone-hours" in o.sources["spot"]
    assert book.find(cloud="aws", instance_type="p4d.24xlarge", region="us-west-2").spot == 7.9992  # untouched


@pytest.mark.parametrize(("doc", "field"), [
    ({"SpotPriceHistory": []}, "SpotPriceHistory"),
    ({"SpotPriceHistory": [{"AvailabilityZone": "a", "InstanceType": "x", "SpotPrice": "-1",
                            "Timestamp": "2026-07-01T00:00:00Z"}]}, "SpotPriceHistory.0.SpotPrice"),
    ({"SpotPriceHistory": [{"AvailabilityZone": "a", "InstanceType": "x", "SpotPrice": "1",
                            "Timestamp": "2026-07-01T00:00:00"}]}, "SpotPriceHistory.0.Timestamp"),
    ({"SpotPriceHistory": [{"InstanceType": "x", "SpotPrice": "1", "Timestamp": "2026-07-01T00:00:00Z"}]},
     "SpotPriceHistory.0.AvailabilityZone"),
])
def test_bad_history_files(tmp_path: Path, doc: dict[str, object], field: str) -> None:
    p = tmp_path / "h.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError) as ei:
        load_history(p)
    assert ei.value.field == field and ei.value.source == str(p)
