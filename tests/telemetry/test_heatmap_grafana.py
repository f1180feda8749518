"""``adaptive_batch_size`` (the text's mapping, monotone), the heatmap matrix, and the Grafana dashboard."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.telemetry.exporter import _HELP
from seedance.telemetry.heatmap import adaptive_batch_size, batch_size_for, heatmap_matrix

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"


def test_the_whitepapers_stated_points() -> None:
    assert [batch_size_for(u) for u in (0, 25, 50)] == [128, 128, 128]  # "below 50 % it rises to 128"
    assert batch_size_for(90) == 32  # "at 90 % average utilisation it drops to 32"
    assert batch_size_for(70) == 64 and batch_size_for(100) == 8
    # the whitepaper's own formula would give 12 at 90 %: that is the contradiction this mapping fixes
    assert max(8, min(128, int(128 * (1 - 90 / 100)))) == 12


@given(st.floats(0, 100), st.floats(0, 100))
def test_monotone_and_clamped(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    assert batch_size_for(lo) >= batch_size_for(hi)
    assert 8 <= batch_size_for(a) <= 128


def test_heatmap_input_nan_is_ignored_and_bad_input_raises() -> None:
    m = np.array([[90.0, np.nan], [90.0, 90.0]])
    assert adaptive_batch_size(m) == 32
    with pytest.raises(InputError, match="no utilisation"):
        adaptive_batch_size(np.full((2, 2), np.nan))
    with pytest.raises(InputError, match="0..100"):
        adaptive_batch_size([[120.0]])
    with pytest.raises(InputError, match="within 0..100"):
        batch_size_for(-1.0)


def test_heatmap_matrix_folds_mig_instances() -> None:
    rows = [
        {"node": "b", "gpu": 0, "util_pct": 40.0, "mem_used_mib": 10.0, "mem_total_mib": 100.0, "cost_usd_h": 1.0},
        {"node": "a", "gpu": 1, "slice": "1/0", "util_pct": 20.0, "mem_used_mib": 5.0, "mem_total_mib": 10.0,
         "cost_usd_h": 0.5},
        {"node": "a", "gpu": 1, "slice": "2/0", "util_pct": 60.0, "mem_used_mib": 5.0, "mem_total_mib": 30.0,
         "cost_usd_h": 1.5},
        {"node": "a", "gpu": -1, "lost": True},
    ]
    nodes, util = heatmap_matrix(rows)
    assert nodes == ["a", "b"] and util.shape == (2, 2)
    assert util[0, 1] == 40.0 and util[1, 0] == 40.0 and math.isnan(util[0, 0])
    assert heatmap_matrix(rows, "memory")[1][0, 1] == 25.0 and heatmap_matrix(rows, "cost")[1][0, 1] == 2.0


def dashboard() -> dict:
    return json.loads((GRAFANA / "seedance-finops-dashboard.json").read_text())


def schema_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((GRAFANA / "schema" / "dashboard.jsonschema.json").read_text()))


def test_dashboard_validates_against_grafanas_schema() -> None:
    errors = list(schema_validator().iter_errors(dashboard()))
    assert errors == []


@pytest.mark.parametrize("breaks", [
    lambda d: d.pop("schemaVersion"),
    lambda d: d["panels"][0]["gridPos"].update(w=30),
    lambda d: d["panels"][1].pop("type"),
    lambda d: d["templating"]["list"][0].update(type="nonsense"),
    lambda d: d.update(colour="red"),
])
def test_the_schema_rejects_broken_dashboards(breaks: object) -> None:
    d = dashboard()
    breaks(d)  # type: ignore[operator]
    assert list(schema_validator().iter_errors(d)) != []


def test_every_query_uses_metrics_the_exporter_emits() -> None:
    d = dashboard()
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    known = set(_HELP)
    used = set()
    for p in d["panels"]:
        for t in p["targets"]:
            used |= set(re.findall(r"\b(DCGM_FI_\w+|seedance_\w+)", t["expr"]))
    assert used and used <= known, used - known
    assert {"DCGM_FI_DEV_GPU_UTIL", "seedance_allocation_cost_usd_total", "seedance_gpu_used_share"} <= used
