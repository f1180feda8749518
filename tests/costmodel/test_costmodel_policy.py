"""Policy YAML: the shipped example validates, bad files name line and field, the store persists."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from seedance.core.errors import InputError
from seedance.costmodel.policy import CostPolicy, load_policy, parse_policy, policy_schema
from seedance.costmodel.store import PolicyStore, data_home

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_example_policies_validate_and_peak_aware_is_the_default() -> None:
    pol = load_policy(ROOT / "policies" / "peak_aware.yaml")
    assert pol.metadata.name == "peak-aware" and pol.spec == CostPolicy().spec
    w = pol.weights("USD")
    assert (w.carbon_price_per_tonne, w.delay_per_mwh_hour, w.max_delay_h) == (190.0, 0.1, 24.0)
    assert pol.weights("EUR").carbon_price_per_tonne == 85.0
    for other in sorted((ROOT / "policies").glob("*.yaml")):
        assert load_policy(other).apiVersion == "seedance.io/v1"
    assert parse_policy(pol.to_yaml()) == pol


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spec:\n  weights:\n    price: -1\n", "policy:3: field spec.weights.price: Input should be greater than"),
        ("spec:\n  weigths: {}\n", "policy:2: field spec.weigths: unknown key"),
        ("apiVersion: v2\n", "policy:1: field apiVersion: must be 'seedance.io/v1'"),
        ("spec:\n  plugin: solar\n", "policy:2: field spec.plugin: unknown cost-policy plugin 'solar'"),
        ("spec:\n  signals:\n    provider: ftp\n", "policy:3: field spec.signals.provider: unknown signal provider"),
        ("spec:\n  carbon:\n    shadow_price_per_tonne: {usd: 1}\n", "policy:3: field spec.carbon.shadow_price"),
        ("spec:\n  forecast:\n    quantiles: [0.5]\n", "policy:3: field spec.forecast.quantiles: give at least two"),
        ("spec: [1,\n", "policy:2: not valid YAML"),
        ("- a\n- b\n", "policy:1: a policy file is a mapping"),
        ("", "policy:1: empty policy file"),
    ],
)
def test_bad_policy_documents_are_located(text: str, expected: str) -> None:
    with pytest.raises(InputError) as err:
        parse_policy(text)
    assert str(err.value).startswith(expected)


def test_a_currency_without_a_shadow_price_is_refused(tmp_path: Path) -> None:
    pol = parse_policy("spec:\n  carbon:\n    shadow_price_per_tonne: {EUR: 80}\n")
    with pytest.raises(InputError, match="no carbon shadow price for currency USD"):
        pol.weights("USD")
    assert parse_policy("spec:\n  weights: {carbon: 0}\n  carbon: {shadow_price_per_tonne: {}}\n").weights(
        "JPY").carbon_price_per_tonne == 0.0
    with pytest.raises(InputError, match="policy file not found"):
        load_policy(tmp_path / "missing.yaml")
    assert "spec" in policy_schema()["properties"]


def test_store_persists_enables_and_disables(seedance_home: Path) -> None:
    assert data_home() == seedance_home
    store = PolicyStore()
    pol = CostPolicy()
    store.enable(name="peak-aware", plugin="electricity-pricing", region="DE-LU", policy=pol, config_path="p.yaml")
    again = PolicyStore()  # a new process would see the same file
    [only] = again.active()
    assert (only.name, only.region, only.enabled) == ("peak-aware", "DE-LU", True)
    assert only.policy() == pol
    off = again.disable("peak-aware")
    assert not off.enabled and off.disabled_at is not None and again.active() == []
    assert [p.name for p in again.all()] == ["peak-aware"]
    re = again.enable(name="peak-aware", plugin="electricity-pricing", region="US-CAL-CISO", policy=pol,
                      config_path="q.yaml")
    assert re.enabled and re.region == "US-CAL-CISO" and re.disabled_at is None
    with pytest.raises(InputError, match="no stored policy 'nope'; stored: peak-aware"):
        again.disable("nope")
    assert (seedance_home / "cost_policies.sqlite").is_file()


def test_a_corrupt_store_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "store.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InputError, match="policy store"):
        PolicyStore(bad).all()
    ok = PolicyStore(tmp_path / "ok.sqlite")
    assert ok.all() == []
    assert sqlite3.connect(ok.path).execute("PRAGMA user_version").fetchone()[0] == 1
