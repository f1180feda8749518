"""The serving simulator: exact timelines on hand-made traces, and invariants on random ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.inference.sim import DONE, DROPPED

from .helpers import TOY_MODEL, simulate, trace

MIB = 1024 * 1024


def test_one_request_alone() -> None:
    run = simulate(trace([0.0], [100], [5]), "continuous")
    # prefill 10 + 0.1 * 100 = 20 ms; then 4 decode steps of 5 + 1 = 6 ms
    assert run.first_token[0] == pytest.approx(0.020)
    assert run.finish[0] == pytest.approx(0.044)
    assert run.iterations == 5 and run.state[0] == DONE


def test_static_pads_and_holds_its_batch() -> None:
    run = simulate(trace([0.0, 0.0, 0.01], [100, 300, 50], [3, 6, 2]), "static")
    # padded prefill 2 x 300 tokens = 70 ms; decode steps of a padded batch of 2 take 7 ms
    assert run.first_token[:2] == pytest.approx([0.070, 0.070])
    assert run.finish[:2] == pytest.approx([0.084, 0.105])
    # request 2 waits for the whole batch: prefill 15 ms, one decode step 6 ms
    assert run.first_token[2] == pytest.approx(0.120)
    assert run.finish[2] == pytest.approx(0.126)
    # the padded tensor: 2 rows x (300 + 5) tokens x 1 KiB
    assert run.mem_mib.max() == pytest.approx(2 * 305 * TOY_MODEL.kv_bytes_per_token / MIB)


def test_continuous_admits_at_the_next_iteration_boundary() -> None:
    run = simulate(trace([0.0, 0.030], [100, 100], [10, 2]), "continuous")
    # request 1 arrives mid-step; the step ends at 32 ms; its prefill stalls request 0 until 52 ms
    assert run.first_token[1] == pytest.approx(0.052)
    assert run.finish[1] == pytest.approx(0.059)  # one decode step with two sequences: 7 ms
    assert run.finish[0] == pytest.approx(0.095)  # six more steps alone at 6 ms
    # paged KV: 16-token blocks; at the peak both hold ceil(103/16) + ceil(101/16) = 7 + 7 blocks
    assert run.mem_mib.max() == pytest.approx(14 * 16 * 1024 / MIB)


def test_chunked_prefill_lets_decodes_continue() -> None:
    run = simulate(trace([0.0, 0.030], [100, 400], [10, 2]), "continuous-chunked",
                   options={"max_num_batched_tokens": 201})
    # at 32 ms: chunk 200 of request 1 + request 0's decode: max(10 + 0.1 * 201, 5 + 1) = 30.1 ms, twice
    assert run.first_token[1] == pytest.approx(0.032 + 2 * 0.0301)
    assert run.finish[0] < 0.032 + 2 * 0.0301 + 7 * 0.007 + 1e-9


def test_preemption_recomputes_and_still_completes() -> None:
    run = simulate(trace([0.0, 0.0, 0.0], [8, 8, 8], [12, 12, 12]), "continuous", blocks=7, block_tokens=4,
                   options={"watermark": 0.0})
    assert (run.state == DONE).all()
    assert run.preemptions.sum() >= 1
    assert np.all(run.finish > run.first_token)


def test_a_request_that_can_never_fit_is_dropped_not_lost() -> None:
    run = simulate(trace([0.0, 0.1], [200, 10], [5, 40]), "continuous", blocks=4, block_tokens=16)
    assert run.state.tolist() == [DROPPED, DONE]
    grow = simulate(trace([0.0], [40], [100]), "seedance", blocks=4, block_tokens=16)
    assert grow.state.tolist() == [DROPPED]  # its own KV outgrows the pool


def test_shared_queue_and_least_loaded_routing() -> None:
    tr = trace([0.0, 0.0, 0.0, 0.0], [100] * 4, [50] * 4)
    a = simulate(tr, "static", replicas=2, options={"batch_size": 2})
    # two replicas pull two requests each from the shared queue and run side by side
    assert a.first_token.tolist() == pytest.approx([0.03] * 4)
    b = simulate(tr, "continuous", replicas=2, router="least-loaded")
    assert b.first_token.tolist() == pytest.approx([0.03] * 4)  # 2 + 2, each prefill 200 tokens


def test_simulations_are_deterministic_and_independent() -> None:
    tr = trace(sorted(np.random.default_rng(1).uniform(0, 2, 40).tolist()), [50 + 7 * i for i in range(40)],
               [5 + i % 9 for i in range(40)])
    first = simulate(tr, "seedance", tpot_ms=30.0, ttft_ms=500.0)
    other = simulate(tr, "continuous")
    again = simulate(tr, "seedance", tpot_ms=30.0, ttft_ms=500.0)
    assert np.array_equal(first.finish, again.finish) and np.array_equal(first.first_token, again.first_token)
    assert not np.array_equal(first.finish, other.finish)


requests = st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(1, 150), st.integers(1, 60)), min_size=1,
                    max_size=25)


@pytest.mark.parametrize("batcher", ["static", "dynamic", "continuous", "continuous-chunked", "seedance"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=requests, blocks=st.integers(4, 40), replicas=st.integers(1, 2), delta=st.floats(0.1, 3.0))
def test_invariants(batcher: str, reqs: list[tuple[float, int, int]], blocks: int, replicas: int,
                    delta: float) -> None:
    reqs.sort()
    arr, prompt, out = (list(x) for x in zip(*reqs, strict=True))
    options: dict[str, object] = {}
    if batcher in ("static", "dynamic"):
        options["max_new_tokens"] = 60
    if batcher == "seedance":
        options["delta"] = delta
    bs = 8
    run = simulate(trace(arr, prompt, out), batcher, blocks=blocks, block_tokens=bs, replicas=replicas,
                   options=options, audit=True, tpot_ms=40.0, ttft_ms=300.0)  # audit: block ids checked per event
    # every request completes or is reported dropped
    assert set(run.state.tolist()) <= {DONE, DROPPED}
    done = run.state == DONE
    assert np.all(run.first_token[done] >= run.arrival[done] - 1e-12)
    assert np.all(run.finish[done] >= run.first_token[done] - 1e-12)
    # a request is dropped only when it could never fit
    for i in np.flatnonzero(~done):
        if batcher in ("static", "dynamic"):
            assert math.ceil((prompt[i] + 60) / bs) > blocks
        else:
            assert math.ceil((prompt[i] + max(out[i], 1)) / bs) > blocks
    # memory never exceeds the pools
    assert run.mem_mib.max() <= replicas * blocks * bs * TOY_MODEL.kv_bytes_per_token / MIB + 1e-9
    if batcher == "seedance" and done.any():  # δ stays within [0.3 δ, δ]
        assert run.delta_seen is not None
        lo, hi = run.delta_seen
        assert 0.3 * delta - 1e-12 <= lo <= hi <= delta + 1e-12


def test_delta_shrinks_under_memory_pressure() -> None:
    tr = trace([0.01 * i for i in range(30)], [30 + 3 * i for i in range(30)], [40] * 30)
    run = simulate(tr, "seedance", blocks=40, block_tokens=8, options={"delta": 2.0})
    assert run.delta_seen == pytest.approx((0.6, 2.0))
    assert (run.state == DONE).all()
