"""The profile document: typed YAML with line numbers, validated stage names and policy options."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.control.policydoc import default_policy_validator
from seedance.core.cluster import ClusterState
from seedance.core.errors import InputError
from seedance.profile import build_profile, load_profile, profile_from_text
from seedance.profile.tiers import Borrow, Preempt, TierRequest
from seedance.slicing.placement import SliceFit
from tests.conftest import make_cluster

REPO = Path(__file__).resolve().parents[2]


def test_bundled_profiles_load_and_build() -> None:
    files = sorted((REPO / "config" / "profiles").glob("*.yaml"))
    assert [f.name for f in files] == ["fgd.yaml", "tiers-mig.yaml"]
    cfg = load_profile(REPO / "config" / "profiles" / "tiers-mig.yaml")
    assert (cfg.placement.policy, cfg.queue, cfg.slices.mode, cfg.placement.options) == (
        "seedance", "priority", "mig", {"balance": 2.0})
    state = ClusterState(make_cluster([(64_000, 256_000, 8, "A100-80GB"), (32_000, 128_000, 4, "G2")]))
    prof = build_profile(cfg, state)
    assert [type(a) for a in prof.adapters] == [TierRequest]
    assert [type(f) for f in prof.fallbacks] == [Borrow, Preempt]
    assert isinstance(prof.filters[-1], SliceFit)  # GpuFit becomes the MIG-aware fit
    assert [h.name for h in prof.hooks] == ["mig-ledger"]


def test_unknown_policy_option_names_file_line_and_valid_options() -> None:
    text = "kind: SchedulingProfile\nplacement:\n  policy: seedance\n  options:\n    balanse: 1.0\n"
    with pytest.raises(InputError) as exc:
        profile_from_text(text, source="p.yaml")
    e = exc.value
    assert (e.source, e.line, e.field) == ("p.yaml", 5, "options.balanse")
    assert "unknown option 'balanse' of placement policy 'seedance'; valid options: memory, fgd_weight" in str(e)


def test_option_of_a_policy_without_options_is_refused() -> None:
    text = "kind: SchedulingProfile\nplacement:\n  policy: best-fit\n  options: {alpha: 1}\n"
    with pytest.raises(InputError, match="unknown option 'alpha' of placement policy 'best-fit'; valid options: none"):
        profile_from_text(text, source="p.yaml")


def test_ill_typed_option_is_refused() -> None:
    text = "kind: SchedulingProfile\nplacement:\n  policy: seedance\n  options:\n    score: magic\n"
    with pytest.raises(InputError, match="option 'score'") as exc:
        profile_from_text(text, source="p.yaml")
    assert exc.value.line == 5


def test_unknown_key_and_unknown_stage_name_have_their_line() -> None:
    with pytest.raises(InputError, match="unknown key") as exc:
        profile_from_text("kind: SchedulingProfile\nqueue: fifo\nfilterz: []\n", source="p.yaml")
    assert (exc.value.line, exc.value.field) == (3, "filterz")
    with pytest.raises(InputError, match="unknown filter stage 'GpuFitt'; valid names: ") as exc:
        profile_from_text("kind: SchedulingProfile\nfilters:\n  - NodeSchedulable\n  - GpuFitt\n", source="p.yaml")
    assert (exc.value.line, exc.value.field) == (4, "filters.1")
    with pytest.raises(InputError, match="unknown fallback stage 'steal'") as exc:
        profile_from_text("kind: SchedulingProfile\ntiers:\n  enabled: true\n  fallbacks: [borrow, steal]\n",
                          source="p.yaml")
    assert exc.value.line == 4
    with pytest.raises(InputError, match="unknown queue order 'lifo'") as exc:
        profile_from_text("kind: SchedulingProfile\nqueue: lifo\n", source="p.yaml")
    assert exc.value.line == 2


def test_wrong_kind_is_refused() -> None:
    with pytest.raises(InputError, match="SchedulingProfile") as exc:
        profile_from_text("kind: CostPolicy\n", source="p.yaml")
    assert exc.value.field == "kind"


def test_control_plane_accepts_a_profile_as_a_scheduling_policy() -> None:
    text = (REPO / "config" / "profiles" / "tiers-mig.yaml").read_text()
    out = default_policy_validator().validate(text, source="config_yaml")
    assert (out["placement"], out["queue_order"]) == ("seedance", "priority")
    assert out["profile"]["slices"]["mig_map"] == {"G2": "A100-80GB"}
    with pytest.raises(InputError, match="unknown option 'balanse'"):
        default_policy_validator().validate(text.replace("balance", "balanse"), source="config_yaml")


def test_simulate_profile_errors_exit_2_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: SchedulingProfile\nplacement:\n  policy: fgd\n  options: {theta: 2}\n")
    assert main(["simulate", "--profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4:" in err and "unknown option 'theta' of placement policy 'fgd'" in err
