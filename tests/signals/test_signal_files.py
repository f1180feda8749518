"""Price and carbon CSV loaders: UTC/DST normalisation on known hours, units from headers, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.signals import (
    known_regions,
    load_carbon_file,
    load_price_file,
    parse_utc,
    resolve_region,
)
from seedance.signals.files import carbon_path, price_path

CARBON_HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,Data Estimated,"
    "Data Estimation Method"
)


def write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def at(series: object, text: str) -> float:
    return series.value_at(parse_utc(text))  # type: ignore[attr-defined]


def test_naive_local_times_cross_the_spring_gap_on_known_hours(tmp_path: Path) -> None:
    # Europe/Berlin, 2023-03-26: 02:00 local does not exist (CET +1 → CEST +2 at 01:00 UTC)
    p = write(tmp_path, "DE-LU_electricity_prices_2023.csv", [
        "Datetime,Price (EUR/MWh)",
        "2023-03-26 00:00:00,10", "2023-03-26 01:00:00,11", "2023-03-26 02:00:00,12", "2023-03-26 03:00:00,13",
        "2023-03-26 04:00:00,14",
    ])
    s = load_price_file(p)
    assert s.currency == "EUR" and s.unit == "EUR/MWh"
    assert s.start == parse_utc("2023-03-25T23:00:00Z")  # 00:00 CET
    assert at(s, "2023-03-26T00:00:00Z") == 11  # 01:00 CET
    assert at(s, "2023-03-26T01:00:00Z") == 13  # 03:00 CEST: the non-existent 02:00 row is dropped
    assert at(s, "2023-03-26T02:00:00Z") == 14
    assert len(s) == 4 and s.dropped_rows == 1 and s.filled_hours == 0


def test_naive_local_times_cross_the_autumn_fold_on_known_hours(tmp_path: Path) -> None:
    # Europe/Berlin, 2023-10-29: 02:00-03:00 local happens twice; a 24-row day names it once
    p = write(tmp_path, "DE-LU_electricity_prices_2023.csv", [
        "Datetime,Price (EUR/MWh)",
        "2023-10-29 01:00:00,10", "2023-10-29 02:00:00,20", "2023-10-29 03:00:00,40",
    ])
    s = load_price_file(p)
    assert at(s, "2023-10-28T23:00:00Z") == 10  # 01:00 CEST
    assert at(s, "2023-10-29T00:00:00Z") == 20  # 02:00 CEST (first occurrence)
    assert at(s, "2023-10-29T01:00:00Z") == 30  # 02:00 CET: missing from the file, interpolated
    assert at(s, "2023-10-29T02:00:00Z") == 40  # 03:00 CET
    assert s.filled_hours == 1 and s.dropped_rows == 0


def test_a_repeated_ambiguous_row_is_the_second_occurrence(tmp_path: Path) -> None:
    p = write(tmp_path, "x.csv", [
        "Datetime,Price (EUR/MWh)", "2023-10-29 02:00:00,20", "2023-10-29 02:00:00,25", "2023-10-29 03:00:00,40",
    ])
    s = load_price_file(p, tz="Europe/Berlin")
    assert s.values.tolist() == [20, 25, 40] and s.start == parse_utc("2023-10-29T00:00:00Z")
    assert s.filled_hours == 0


def test_explicit_offsets_are_honoured_across_dst(tmp_path: Path) -> None:
    # ERCOT style: local time with offset; 2023-03-12 02:00 CST does not exist in Chicago
    p = write(tmp_path, "US-TEX-ERCO_electricity_prices_2023.csv", [
        "Datetime,Price (USD/MWh)", "2023-03-12 01:00:00-06:00,5", "2023-03-12 03:00:00-05:00,7",
        "2023-03-12 04:00:00-05:00,9",
    ])
    s = load_price_file(p)
    assert s.start == parse_utc("2023-03-12T07:00:00Z")
    assert s.values.tolist() == [5, 7, 9] and s.filled_hours == 0 and s.currency == "USD"


def test_caiso_naive_times_are_utc_and_the_tz_option_overrides(tmp_path: Path) -> None:
    lines = ["Datetime,Price (USD/MWh)", "2023-03-12 09:00:00,1", "2023-03-12 10:00:00,2"]
    p = write(tmp_path, "US-CAL-CISO_electricity_prices_2023.csv", lines)
    assert load_price_file(p).start == parse_utc("2023-03-12T09:00:00Z")
    assert load_price_file(p, tz="America/Los_Angeles").start == parse_utc("2023-03-12T16:00:00Z")
    q = write(tmp_path, "prices.csv", lines)
    assert load_price_file(q, region="US-CAL-CISO").start == parse_utc("2023-03-12T09:00:00Z")


def test_price_unit_from_header_is_converted_to_per_mwh(tmp_path: Path) -> None:
    p = write(tmp_path, "x.csv", ["Datetime,Price (chf/kWh)", "2023-01-01 00:00:00,0.25"])
    s = load_price_file(p, tz="UTC")
    assert s.currency == "CHF" and s.unit == "CHF/MWh" and s.values.tolist() == [250.0]


def test_carbon_file_header_says_utc_and_columns_are_chosen(tmp_path: Path) -> None:
    p = write(tmp_path, "DE-LU_2023_hourly.csv", [
        CARBON_HEADER,
        "2023-03-26 01:00:00,Germany,Germany,DE,100.5,150,80,70,entsoe.eu,false,",
        "2023-03-26 02:00:00,Germany,Germany,DE,110.5,160,80,70,entsoe.eu,true,estimated",
    ])
    direct = load_carbon_file(p)
    assert direct.start == parse_utc("2023-03-26T01:00:00Z") and direct.values.tolist() == [100.5, 110.5]
    assert direct.region == "DE-LU" and direct.unit == "gCO2eq/kWh" and direct.dropped_rows == 0
    assert any("1 row(s) flagged estimated" in n for n in direct.notes)
    assert load_carbon_file(p, column="lca").values.tolist() == [150.0, 160.0]


def test_carbon_in_kg_per_mwh_equals_g_per_kwh(tmp_path: Path) -> None:
    p = write(tmp_path, "z.csv", ["Datetime (UTC),Carbon Intensity kgCO2/MWh (direct)", "2023-01-01 00:00:00,321"])
    assert load_carbon_file(p).values.tolist() == [321.0]


@pytest.mark.parametrize(
    ("lines", "where", "what"),
    [
        (["Datetime,Cost", "2023-01-01 00:00:00,1"], ":1: field Price", "no price column"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,abc"], ":2: field Price (EUR/MWh)", "not a number"),
        (["Datetime,Price (EUR/MWh)", "yesterday,1"], ":2: field Datetime", "not a date-time"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:30:00,1"], ":2: field Datetime", "not the start of an hour"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,1", "2023-01-01 00:00:00,2"], ":3: field Datetime",
         "appears twice (also on line 2)"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,1", "2023-01-01 09:00:00,2"], ":3: field Datetime",
         "8 hours missing"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,1,2"], ":2:", "expected 2 fields"),
        (["Datetime,Price (EUR/MWh)"], ":2:", "no data rows"),
        (["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,nan"], ":2:", "not a finite number"),
    ],
)
def test_malformed_price_files_name_file_line_and_field(tmp_path: Path, lines: list[str], where: str,
                                                        what: str) -> None:
    p = write(tmp_path, "bad.csv", lines)
    with pytest.raises(InputError) as err:
        load_price_file(p, tz="UTC")
    assert str(err.value).startswith(str(p) + where) and what in str(err.value)


def test_naive_times_without_a_known_zone_ask_for_one(tmp_path: Path) -> None:
    p = write(tmp_path, "XX_electricity_prices_2023.csv", ["Datetime,Price (EUR/MWh)", "2023-01-01 00:00:00,1"])
    with pytest.raises(InputError, match="pass its IANA timezone"):
        load_price_file(p)
    with pytest.raises(InputError, match="unknown IANA timezone 'Mars/Olympus'"):
        load_price_file(p, tz="Mars/Olympus")


def test_missing_empty_and_negative_carbon_files_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_carbon_file(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="empty file"):
        load_carbon_file(write(tmp_path, "empty.csv", []))
    neg = write(tmp_path, "neg.csv", [CARBON_HEADER, "2023-01-01 00:00:00,A,B,C,-1,2,3,4,x,false,"])
    with pytest.raises(InputError, match=":2: field Carbon Intensity gCO₂eq/kWh \\(direct\\): carbon intensity must"):
        load_carbon_file(neg)
    with pytest.raises(InputError, match="column must be 'direct' or 'lca'"):
        load_carbon_file(neg, column="scope3")


def test_real_de_lu_prices_are_normalised_on_known_hours(shared_data: Path) -> None:
    s = load_price_file(price_path("DE-LU"))
    assert len(s) == 8760 and s.dropped_rows == 1 and s.filled_hours == 1
    assert s.start == parse_utc("2022-12-31T23:00:00Z")  # 2023-01-01 00:00 CET
    assert at(s, "2023-03-26T01:00:00Z") == pytest.approx(40.12)  # the file's "03:00" row (CEST)
    assert at(s, "2023-10-29T00:00:00Z") == pytest.approx(0.015)  # "02:00" read as CEST
    assert at(s, "2023-10-29T01:00:00Z") == pytest.approx((0.015 - 0.24) / 2)  # the hour the file lacks
    assert s.stats()["mean"] == pytest.approx(95.18, abs=0.01)  # SOURCE.md: 95.18 / -500 / 524.27
    assert s.stats()["min"] == -500.0 and s.stats()["max"] == pytest.approx(524.27)


def test_real_caiso_and_carbon_files_match_their_source_notes(shared_data: Path) -> None:
    p = load_price_file(price_path("US-CAL-CISO"))
    assert len(p) == 8784 and p.start == parse_utc("2022-12-31T08:00:00Z") and p.values[0] == pytest.approx(110.77982)
    assert p.stats()["mean"] == pytest.approx(61.54, abs=0.01)
    for region, mean in (("US-CAL-CISO", 194.0), ("DE-LU", 307.7)):
        c = load_carbon_file(carbon_path(region))
        assert len(c) == 8760 and c.start == parse_utc("2023-01-01T00:00:00Z")
        assert c.stats()["mean"] == pytest.approx(mean, abs=0.05)
    assert np.isfinite(p.values).all()


def test_regions_come_from_the_data_and_unknown_ones_list_them(shared_data: Path) -> None:
    known = known_regions()
    assert {"US-CAL-CISO", "DE-LU"} <= set(known)
    assert resolve_region("us-cal-ciso") == "US-CAL-CISO"
    with pytest.raises(InputError) as err:
        resolve_region("us-west-2")
    assert "known regions with 2023 price and carbon data: " in str(err.value) and "DE-LU" in str(err.value)
