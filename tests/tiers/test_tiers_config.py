"""Tier configuration: defaults, YAML round trip of the preemption fields, errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from seedance.core.errors import InputError
from seedance.tiers import DEFAULT_TIER_CONFIG, load_tier_config


def test_defaults_follow_the_whitepaper_and_the_issue() -> None:
    t = DEFAULT_TIER_CONFIG.tiers
    assert [t[n].target_availability for n in ("gold", "silver", "bronze")] == [0.9995, 0.995, 0.95]
    assert DEFAULT_TIER_CONFIG.qos_map == {"LS": "gold", "Guaranteed": "gold", "Burstable": "silver", "BE": "bronze"}
    assert not t["gold"].preemptible and t["gold"].exclusive
    assert (t["silver"].checkpoint_interval_s, t["bronze"].checkpoint_interval_s) == (600.0, 1800.0)
    assert t["silver"].reclaim_min_runtime_s == t["bronze"].reclaim_min_runtime_s == 0.0


def test_yaml_round_trip_and_errors(tmp_path: Path) -> None:
    doc = DEFAULT_TIER_CONFIG.model_dump(mode="json")
    doc["tiers"]["bronze"]["reclaim_min_runtime_s"] = 120
    doc["qos_map"]["BE"] = "silver"
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = load_tier_config(path)
    assert cfg.tiers["bronze"].reclaim_min_runtime_s == 120.0 and cfg.tier_of("BE") == "silver"
    doc["tiers"]["silver"]["checkpoint_interval_s"] = -1
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match="checkpoint_interval_s"):
        load_tier_config(path)
