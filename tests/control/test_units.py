"""Small pieces: cost fallback, dispatchers, settings guard, request conversions, policy documents."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from seedance.backends.dispatch import DISPATCHERS, BackendStatus, DispatchRequest, make_dispatcher
from seedance.control.costing import COST_SCORERS, CostInput, GpuHoursPrice, make_cost_scorer
from seedance.control.policydoc import MinimalPolicyValidator, parse_yaml
from seedance.control.schemas import JobCreate, Role
from seedance.control.security import Principal, hash_token, new_token_value
from seedance.control.settings import ControlSettings
from seedance.core.errors import InputError, UnknownNameError


def inp(**kw: object) -> CostInput:
    base: dict[str, object] = {"num_gpu": 1, "gpu_milli": 1000, "gpu_types": (), "cluster_models": (),
                               "duration_hours": None, "tier": "bronze"}
    base.update(kw)
    return CostInput(**base)  # type: ignore[arg-type]


def test_cost_fallback_is_gpu_hours_times_catalog_price() -> None:
    s = GpuHoursPrice()
    # 4 GPUs x 12 h on the cheapest model present (T4 at $0.35) = 16.8
    e = s.estimate(inp(num_gpu=4, duration_hours=12, cluster_models=("A100-80GB", "T4")))
    assert e.score == pytest.approx(4 * 12 * 0.35)
    assert e.basis == "gpu-hours: 48 GPU-h (12h) x $0.35/GPU-h (T4)"
    # the job's constraint wins over cheaper models present
    assert s.estimate(inp(gpu_types=("A100-80GB",), cluster_models=("A100-80GB", "T4"))).score == 5.12
    # a quarter GPU for the default hour; a constraint not present in the cluster still prices
    e = s.estimate(inp(gpu_milli=250, gpu_types=("H100-80GB",), cluster_models=("T4",)))
    assert e.score == pytest.approx(0.25 * 12.29) and "(default)" in e.basis
    assert s.estimate(inp(num_gpu=0, gpu_milli=0)).score == 0.0
    assert s.at_bind(inp(num_gpu=2, duration_hours=3), "V100-32GB").score == pytest.approx(2 * 3 * 3.90)
    assert make_cost_scorer("fallback").name == "gpu-hours" and "gpu-hours" in COST_SCORERS


def test_dispatchers_are_registered_by_name_and_idempotent() -> None:
    job = DispatchRequest(job_id=7, tenant_id=1, name="j", kind="TrainingJob", tier="gold", cluster="c",
                          node="n", gpu_model="T4", gpu_indices=(0,), gpu_milli=1000, cpu_milli=1, memory_mib=1,
                          duration_hours=1.0)
    noop = make_dispatcher("noop")
    assert noop.dispatch(job) == noop.dispatch(job) == "noop:7"
    assert noop.poll(["noop:7"]) == {"noop:7": BackendStatus.RUNNING}
    timer = make_dispatcher("local", speedup=3600 * 1000)  # an hour in a millisecond
    handle = timer.dispatch(job)
    time.sleep(0.01)
    assert timer.poll([handle, "garbage"]) == {handle: BackendStatus.SUCCEEDED, "garbage": BackendStatus.UNKNOWN}
    with pytest.raises(UnknownNameError, match="valid names: .*noop.*timer"):
        DISPATCHERS.get("ray-someday")


def test_dispatchers_have_one_home_and_control_imports_none_of_the_old_path() -> None:
    import importlib.util
    from pathlib import Path

    import seedance.control

    assert importlib.util.find_spec("seedance.control.dispatch") is None
    root = Path(seedance.control.__file__).parents[1]
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "seedance.control.dispatch" in p.read_text())
    assert users == []


def test_settings_refuse_placeholder_secrets_and_other_databases() -> None:
    for bad in ("changethis", "short"):
        with pytest.raises(ValidationError):
            ControlSettings(bootstrap_token=bad)
    with pytest.raises(ValidationError, match="sqlite:/// or postgresql"):
        ControlSettings(database_url="mysql://u@h/d")
    strong = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # openssl rand -hex 32 shape
    assert ControlSettings(bootstrap_token=strong).bootstrap_token is not None


@pytest.mark.parametrize("weak", [
    "correcthorsebattery",            # 19 characters, one dictionary phrase
    "passwordpassword",               # the probe's 16-character dictionary word
    "x" * 40,                         # long but one character
    "abcabcabcabcabcabcabcabcabcabcabc",  # long, 3 distinct characters
])
def test_weak_bootstrap_tokens_are_refused(weak: str) -> None:
    with pytest.raises(ValidationError, match="too weak"):
        ControlSettings(bootstrap_token=weak)


def test_tokens_are_random_and_hashed() -> None:
    a, b = new_token_value(), new_token_value()
    assert a != b and a.startswith("sdt_") and len(a) == 47
    assert hash_token(a) == hash_token(a) != hash_token(b) and len(hash_token(a)) == 64


def test_principal_scoping() -> None:
    member = Principal(token_id=1, token_name="m", tenant_id=5, tenant_name="t", role=Role.MEMBER)
    admin = Principal(token_id=2, token_name="a", tenant_id=1, tenant_name="system", role=Role.ADMIN)
    assert member.tenant_scope() == 5 and admin.tenant_scope() is None
    from seedance.control.errors import Forbidden, NotFound

    with pytest.raises(NotFound):
        member.check_tenant(6)
    admin.check_tenant(6)
    with pytest.raises(Forbidden, match="needs role operator or higher; this token is member"):
        member.require(Role.OPERATOR, "adding a node")


@given(milli=st.integers(1, 999))
def test_fractional_gpus_round_trip(milli: int) -> None:
    j = JobCreate.model_validate({"gpus": milli / 1000})
    assert (j.num_gpu, j.gpu_milli) == (1, milli)


@given(k=st.integers(1, 64))
def test_whole_gpus(k: int) -> None:
    j = JobCreate.model_validate({"gpus": k})
    assert (j.num_gpu, j.gpu_milli) == (k, 1000)


def test_strict_request_fields() -> None:
    for bad in ({"gpus": "1"}, {"gpus": True}, {"gpus": 1, "priority": "3"}, {"gpus": 1, "deadline": 1700000000}):
        with pytest.raises(ValidationError):
            JobCreate.model_validate(bad)
    j = JobCreate.model_validate({"gpus": 1, "tier": "gold", "kind": "InferenceService",
                                  "deadline": "2030-01-01T00:00:00", "gpu_types": ["A100", "A100-40GB"]})
    assert j.deadline is not None and j.deadline.tzinfo is not None  # naive means UTC
    assert j.gpu_types == ["A100-40GB"]  # aliases (exact spellings: the OpenAPI enum) resolved, de-duplicated


def test_policy_documents() -> None:
    v = MinimalPolicyValidator()
    out = v.validate("apiVersion: seedance/v1\nkind: SchedulingPolicy\nspec:\n  placement: BF\n  queueOrder: sjf\n"
                     "  plugin: electricity-pricing\n  thresholds: {peak: 0.3}\n", source="p.yaml")
    assert out == {"placement": "best-fit", "queue_order": "smallest-first", "plugin": "electricity-pricing",
                   "thresholds": {"peak": 0.3}}
    assert v.validate("", source="p.yaml") == {}
    with pytest.raises(InputError, match=r"p.yaml:2: YAML anchors"):
        parse_yaml("a: 1\nb: &x 2\n", source="p.yaml")
    with pytest.raises(InputError, match="larger than"):
        parse_yaml("a: " + "x" * 40000, source="p.yaml")
    with pytest.raises(InputError, match="field spec.placement: unknown placement policy"):
        v.validate("placement: nope\n", source="p.yaml")
    with pytest.raises(InputError, match="plain strings, numbers"):
        v.validate("when: 2024-01-01T00:00:00\n", source="p.yaml")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 60) | st.none(), st.integers(1, 8)), max_size=30))
def test_cost_series_prefix_sums_equal_a_pass_per_job(jobs_: list[tuple[int, int | None, int]]) -> None:
    import numpy as np

    from seedance.control.services.dashboard import _held_at

    ts = np.linspace(0.0, 120.0, 25)
    start = np.array([b for b, _, _ in jobs_], dtype=float)
    end = np.array([b + d if d is not None else np.inf for b, d, _ in jobs_], dtype=float)
    weight = np.array([w * 0.25 for _, _, w in jobs_], dtype=float)
    expected = np.zeros(len(ts))
    for b, e, w in zip(start, end, weight, strict=True):
        expected += ((ts >= b) & (ts < e)) * w
    # each job as the store groups it: its first instant and first instant past its end (instants before each)
    groups = [(int(np.searchsorted(ts, b, side="left")), int(np.searchsorted(ts, e, side="left")), w)
              for b, e, w in zip(start, end, weight, strict=True)]
    assert np.allclose(_held_at(len(ts), groups), expected, atol=1e-9)
    assert _held_at(len(ts), [(2, 4, 2.0)]).tolist() == [2.0 if 10 <= t < 20 else 0.0 for t in ts]
    assert _held_at(3, [(0, 9, 1.5), (5, 9, 1.0), (1, 1, 7.0)]).tolist() == [1.5, 1.5, 1.5]
