"""Flags through OpenFeature + flagd (file mode): the whitepaper's enable_cpu_throttling, canary splits, bad files."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.core.errors import InputError
from seedance.rollout.evaluator import FlagEvaluator
from seedance.rollout.flags import FlagRollout, load_flag_file, parse_flags
from tests.rollout.helpers import FLAG, flag_doc, write_flag_file


@pytest.fixture
def flags(tmp_path: Path) -> Iterator[tuple[Path, FlagEvaluator]]:
    path = write_flag_file(tmp_path, state="ENABLED")
    ev = FlagEvaluator(path, poll_ms=20)
    yield path, ev
    ev.close()


def wait_for(pred: object, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the provider did not pick up the change"
        time.sleep(0.01)


def test_whitepaper_flag_targets_region_and_tier(flags: tuple[Path, FlagEvaluator]) -> None:
    _, ev = flags
    d = ev.details(FLAG, False, "user-42", region="cn-east-2", tier="premium")
    assert (d.value, d.variant, str(d.reason)) == (True, "on", "TARGETING_MATCH")
    assert ev.details(FLAG, False, "user-42", region="cn-east-2", tier="basic").value is False
    assert ev.details(FLAG, False, "user-42", region="us-west-1", tier="premium").value is False
    missing = ev.details("no_such_flag", False, "user-42")
    assert missing.value is False and str(missing.error_code) == "FLAG_NOT_FOUND"


def test_canary_split_promotion_and_rollback(flags: tuple[Path, FlagEvaluator]) -> None:
    path, ev = flags
    ro = FlagRollout(path, FLAG, "on", "off")
    users = [f"user-{i}" for i in range(2000)]
    ro.set_weight(5)
    wait_for(lambda: ev.details(FLAG, False, "probe").flag_metadata.get("seedanceCanaryWeight") == 5)
    on = Counter(ev.variant(FLAG, u, region="cn-east-2", tier="premium") for u in users)
    share = on["on"] / len(users)
    assert abs(share - 0.05) <= 0.03  # ±3 pp of the weight (binomial 3 sigma at n = 2000 is 1.5 pp)
    assert Counter(ev.variant(FLAG, u, region="eu-west-1", tier="premium") for u in users) == {"off": 2000}
    sticky = {u for u in users if ev.variant(FLAG, u, region="cn-east-2", tier="premium") == "on"}
    ro.set_weight(10)
    wait_for(lambda: ev.details(FLAG, False, "probe").flag_metadata.get("seedanceCanaryWeight") == 10)
    wider = {u for u in users if ev.variant(FLAG, u, region="cn-east-2", tier="premium") == "on"}
    assert sticky <= wider  # a user on the canary stays on it as the weight grows
    ro.rollback()
    wait_for(lambda: ev.details(FLAG, False, "probe").flag_metadata.get("seedanceCanaryWeight") == 0)
    assert Counter(ev.variant(FLAG, u, region="cn-east-2", tier="premium") for u in users) == {"off": 2000}
    ro.promote()
    wait_for(lambda: ev.details(FLAG, False, "probe").flag_metadata.get("seedanceCanaryWeight") == 100)
    assert Counter(ev.variant(FLAG, u, region="cn-east-2", tier="premium") for u in users) == {"on": 2000}
    assert Counter(ev.variant(FLAG, u, region="cn-east-2", tier="basic") for u in users) == {"off": 2000}


BAD = [
    ('{"flags": {"f": {"state": "ENABLED",\n "variants": {"on": true}\n "defaultVariant": "on"}}}', 3, None,
     "not valid JSON"),
    ('{"flags": {"f": {\n  "state": "ON",\n  "variants": {"on": true}, "defaultVariant": "on"}}}', 2, "flags.f.state",
     "ENABLED or DISABLED"),
    ('{"flags": {\n "f": {"state": "ENABLED",\n  "variants": {"on": true},\n  "defaultVariant": "off"}}}', 4,
     "flags.f.defaultVariant", "not a variant"),
    ('{"flags": {"f": {"state": "ENABLED", "variants": {"on": true}, "defaultVariant": "on",\n "targetting": {}}}}',
     2, "flags.f.targetting", "unknown key"),
    ('{"flags": {"f": {"state": "ENABLED",\n "variants": {"a": true, "b": "x"}, "defaultVariant": "a"}}}', 2,
     "flags.f.variants", "one type"),
    ('{"flags": {"f": {"state": "ENABLED", "variants": {"on": true}}}}', 1, "flags.f", "missing 'defaultVariant'"),
    ('{"flag": {}}', 1, "flag", "unknown key"),
    ('[1, 2]', 1, None, "JSON object"),
]


@pytest.mark.parametrize(("text", "line", "field", "words"), BAD)
def test_malformed_flag_files_are_located(text: str, line: int, field: str | None, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse_flags(text, source="flags.json")
    err = info.value
    assert (err.source, err.line, err.field) == ("flags.json", line, field)
    assert words in err.message


def test_cli_validates_flag_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_flag_file(tmp_path)
    assert main(["rollout", "validate", str(good)]) == 0
    assert FLAG in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(BAD[2][0])
    assert main(["rollout", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}:4: field flags.f.defaultVariant: defaultVariant 'off' is not a variant (on)"]
    assert main(["rollout", "eval", str(good), FLAG, "--key", "u1", "--attr", "region=cn-east-2",
                 "--attr", "tier=premium"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["value"], out["variant"]) == (False, None)  # DISABLED until a rollout starts: the code default
    with pytest.raises(InputError, match="no flag 'nope'"):
        load_flag_file(good).flag("nope")
    assert flag_doc()["flags"][FLAG]["state"] == "DISABLED"


def test_cost_action_flags_target_by_tenant_region_and_tier(tmp_path: Path) -> None:
    path = tmp_path / "spot.json"
    path.write_text(json.dumps({"flags": {"spot_migration": {
        "state": "ENABLED", "variants": {"spot": "spot", "on-demand": "on-demand"}, "defaultVariant": "on-demand",
        "targeting": {"if": [{"and": [{"in": [{"var": "tenant"}, ["ml-platform", "search"]]},
                                      {"==": [{"var": "region"}, "cn-east-2"]},
                                      {"!=": [{"var": "tier"}, "gold"]}]}, "spot", "on-demand"]}}}}))
    ev = FlagEvaluator(path)
    try:
        cases = {("ml-platform", "cn-east-2", "bronze"): "spot", ("search", "cn-east-2", "silver"): "spot",
                 ("ml-platform", "cn-east-2", "gold"): "on-demand", ("ads", "cn-east-2", "bronze"): "on-demand",
                 ("search", "us-west-1", "bronze"): "on-demand"}
        for (tenant, region, tier), want in cases.items():
            d = ev.details("spot_migration", "on-demand", f"job-{tenant}", tenant=tenant, region=region, tier=tier)
            assert (d.value, d.variant) == (want, want)
    finally:
        ev.close()
