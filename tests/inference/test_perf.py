"""Step-time tables from the measured profiles."""

from __future__ import annotations

import csv
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.inference.perf import SPLITWISE_FILE, load_step_times
from seedance.traces.paths import data_file

from .helpers import toy_step


def _rows(**match: str) -> list[dict[str, str]]:
    with data_file(SPLITWISE_FILE).open() as fh:
        return [r for r in csv.DictReader(fh) if all(r[k] == v for k, v in match.items())]


def test_splitwise_tables_are_medians_of_the_profile() -> None:
    st_ = load_step_times("llama2-70b", "A100-80GB", 8)
    assert st_.source.startswith("splitwise")
    # a single-sequence 8192-token prefill shares its total with 512 x 16: the table takes the median of both
    rows = _rows(model="llama2-70b", hardware="a100-80gb", tensor_parallel="8")
    at_8192 = [float(r["prompt_time"]) for r in rows if int(r["prompt_size"]) * int(r["batch_size"]) == 8192]
    assert st_.prefill_ms(8192) == pytest.approx(statistics.median(at_8192))
    # decode at batch 64, reference context (prompt 512, 128 output tokens: 576 on average per sequence)
    b64 = [float(r["token_time"]) for r in rows if r["batch_size"] == "64" and r["prompt_size"] == "512"]
    assert st_.decode_ms(64, 64 * 576) == pytest.approx(statistics.median(b64))
    assert st_.kv_ms_per_token > 0
    h100 = load_step_times("llama2-70b", "H100", 8)
    assert h100.decode_ms(16, 16 * 576) < st_.decode_ms(16, 16 * 576)


def test_curves_are_non_decreasing() -> None:
    for tp in (2, 4, 8):
        s = load_step_times("llama2-70b", "A100-80GB", tp)
        assert list(s.prefill_y) == sorted(s.prefill_y)
        assert list(s.decode_y) == sorted(s.decode_y)


def test_vidur_model_for_llama2_7b() -> None:
    a100 = load_step_times("llama2-7b", "A100-80GB", 1)
    h100 = load_step_times("llama2-7b", "H100-80GB", 1)
    assert a100.source.startswith("vidur")
    assert 0 < h100.prefill_ms(4096) < a100.prefill_ms(4096)
    assert a100.prefill_ms(2048, 2048.0**2) > a100.prefill_ms(2048)  # the attention roofline adds up
    assert a100.decode_ms(8, 8000) > a100.decode_ms(8, 0)


def test_unprofiled_combinations_are_input_errors() -> None:
    with pytest.raises(InputError, match="no measured profile"):
        load_step_times("llama2-70b", "T4", 8)
    with pytest.raises(InputError, match="no measured profile"):
        load_step_times("bloom-176b", "A100-80GB", 4)
    with pytest.raises(InputError):
        load_step_times("llama2-70b", "A100-80GB", 0)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 300), st.integers(0, 50_000), st.integers(1, 400), st.floats(0.0, 0.01))
def test_span_closed_form_equals_the_sum_of_steps(batch: int, kv: int, steps: int, kv_ms: float) -> None:
    s = toy_step(kv_ms)
    one_by_one = sum(s.decode_ms(batch, kv + j * batch) for j in range(steps))
    assert s.decode_span_ms(batch, kv, steps) == pytest.approx(one_by_one, rel=1e-9)
    n = s.steps_within(batch, kv, one_by_one)
    assert n == steps or s.decode_span_ms(batch, kv, n) >= one_by_one > s.decode_span_ms(batch, kv, n - 1)


@settings(max_examples=80, deadline=None)
@given(st.floats(0.0, 20_000.0), st.integers(1, 100_000))
def test_max_prefill_tokens_is_the_largest_that_fits(budget: float, cap: int) -> None:
    s = load_step_times("llama2-70b", "A100-80GB", 8)
    n = s.max_prefill_tokens(budget, cap)
    assert 0 <= n <= cap
    if n:
        assert s.prefill_ms(n) <= budget
    if n < cap:
        assert s.prefill_ms(n + 1) > budget


@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-80GB"])
def test_simulated_end_to_end_matches_the_profiled_runs(gpu: str) -> None:
    """Golden check: replaying each profiled configuration (batch of equal requests, 128 output
    tokens) in the simulator reproduces the profile's measured end-to-end time within 10%. (Rows
    with longer outputs are left out: their e2e_time plateaus near 30 s, so those runs stopped
    early.)"""
    from seedance.inference.memory import KVBudget
    from seedance.inference.model import get_model
    from seedance.inference.sim import ServingSimulator
    from seedance.inference.trace import from_arrays

    hw = {"A100-80GB": "a100-80gb", "H100-80GB": "h100-80gb"}[gpu]
    st_ = load_step_times("llama2-70b", gpu, 8)
    shape = get_model("llama2-70b")
    budget = KVBudget.for_replica(shape, gpu, 8)
    groups: dict[tuple[int, int], list[float]] = {}
    for r in _rows(model="llama2-70b", hardware=hw, tensor_parallel="8", token_size="128"):
        groups.setdefault((int(r["prompt_size"]), int(r["batch_size"])), []).append(float(r["e2e_time"]))
    assert len(groups) == 13
    for (prompt, batch), measured in groups.items():
        tr = from_arrays([0.0] * batch, [prompt] * batch, [128] * batch)
        run = ServingSimulator(tr, step=st_, shape=shape, budget=budget, batcher="continuous",
                               options={"max_num_batched_tokens": 1 << 20}).run()
        assert run.finish.max() * 1000 == pytest.approx(statistics.median(measured), rel=0.10), (prompt, batch)
