"""Closed-loop sessions (a follow-up is sent after its previous answer plus think time) and the
perfect-cache ceiling: exact timings on hand-made sessions, invariants under hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.inference.prefix import PrefixStructure
from seedance.inference.sim import DONE, DROPPED, REJECTED
from seedance.inference.trace import RequestTrace
from seedance.inference.workloads import multi_turn, reusable_tokens

from .helpers import simulate, trace


def _session(arrival: list[float], prompt: list[int], output: list[int], *, session: list[int], turn: list[int],
             think: list[float] | None) -> RequestTrace:
    base = trace(arrival, prompt, output)
    n = len(arrival)
    st_ = PrefixStructure(np.full(n, -1, np.int64), np.zeros(n, np.int64), np.asarray(session, np.int64),
                          np.asarray(turn, np.int64), np.asarray(think, np.float64) if think is not None else None)
    return RequestTrace(base.arrival_s, base.prompt, base.output, "test", st_)


# block 4 tokens; session 5: turn 0 (prompt 13, output 4) at 0 s; turn 1 (prompt 25, output 2) whose
# trace slot (1 ms) comes while turn 0 is still prefilling (toy prefill: 10 + 0.1 * tokens ms).
ARR, PROMPT, OUT = [0.0, 0.001], [13, 25], [4, 2]


def test_closed_loop_sends_the_follow_up_after_the_answer_plus_think_time() -> None:
    tr = _session(ARR, PROMPT, OUT, session=[5, 5], turn=[0, 1], think=[0.0, 0.5])
    run = simulate(tr, "continuous-chunked", block_tokens=4, blocks=1000, prefix_cache=True)
    assert (run.state == DONE).all()
    assert run.arrival[1] == run.finish[0] + 0.5  # the send time, not the trace slot
    # turn 0's prompt and answer (13 + 4 - 1 = 16 KV tokens: 4 full blocks) are all cached by then
    assert run.cached_tokens is not None and run.cached_tokens.tolist() == [0, 16]
    # so turn 1 prefills 25 - 16 = 9 tokens on an idle replica: its TTFT is one 9-token iteration
    assert run.first_token[1] - run.arrival[1] == pytest.approx((10 + 0.1 * 9) / 1000)


def test_open_loop_sends_at_the_trace_slot_before_the_answer_exists() -> None:
    tr = _session(ARR, PROMPT, OUT, session=[5, 5], turn=[0, 1], think=None)
    run = simulate(tr, "continuous-chunked", block_tokens=4, blocks=1000, prefix_cache=True)
    assert run.arrival.tolist() == ARR
    # admitted at the end of turn 0's prefill: only turn 0's 3 full prompt blocks are cached
    assert run.cached_tokens is not None and run.cached_tokens.tolist() == [0, 12]
    assert run.arrival[1] < run.finish[0]


def test_a_follow_up_of_a_dropped_turn_is_never_sent() -> None:
    # turn 0 needs ceil((40 + 1) / 4) = 11 blocks of a 10-block pool: dropped at arrival
    tr = _session([0.0, 1.0, 2.0], [40, 30, 8], [2, 2, 2], session=[1, 1, 2], turn=[0, 1, 0], think=[0.0, 0.1, 0.0])
    run = simulate(tr, "continuous-chunked", block_tokens=4, blocks=10, prefix_cache=True)
    assert run.state.tolist() == [DROPPED, DROPPED, DONE]
    assert np.isnan(run.first_token[1]) and run.arrival[1] == 1.0


def test_perfect_cache_ceiling_serves_the_reusable_prefix_the_real_cache_evicted() -> None:
    # a 10-block pool; turn 0 (index 0) is answered in ~30 ms and its 4 blocks stay cached; request 2
    # (37-token prompt: 10 blocks with its answer) at 0.5 s needs the whole pool: LRU evicts them;
    # turn 1 (index 1) is sent 1 s after turn 0's answer, when request 2 is long done
    tr = _session([0.0, 0.001, 0.5], [13, 25, 37], [4, 2, 4], session=[5, 5, -1], turn=[0, 1, 0],
                  think=[0.0, 1.0, 0.0])
    assert reusable_tokens(tr, 4).tolist() == [0, 16, 0]
    real = simulate(tr, "continuous-chunked", block_tokens=4, blocks=10, prefix_cache=True)
    ceiling = simulate(tr, "continuous-chunked", block_tokens=4, blocks=10, perfect_cache=True)
    assert (real.state == DONE).all() and (ceiling.state == DONE).all()
    assert real.cached_tokens is not None and real.cached_tokens.tolist() == [0, 0, 0]
    assert ceiling.arrival[1] == ceiling.finish[0] + 1.0 and ceiling.finish[2] < ceiling.arrival[1]
    assert real.first_token[1] - real.arrival[1] == pytest.approx((10 + 0.1 * 25) / 1000)
    assert ceiling.first_token[1] - ceiling.arrival[1] == pytest.approx((10 + 0.1 * 9) / 1000)


def test_perfect_cache_excludes_the_real_cache() -> None:
    from seedance.core.errors import InputError

    tr = _session(ARR, PROMPT, OUT, session=[5, 5], turn=[0, 1], think=[0.0, 0.5])
    with pytest.raises(InputError, match="perfect-cache"):
        simulate(tr, "continuous-chunked", prefix_cache=True, perfect_cache=True)


def test_multi_turn_is_closed_loop_by_default_with_think_times_on_follow_ups_only() -> None:
    rng = np.random.default_rng(4)
    n = 300
    tr = trace(np.sort(rng.uniform(0, 3000, n)).tolist(), rng.integers(50, 4000, n).tolist(),
               rng.integers(1, 300, n).tolist())
    closed = multi_turn(tr, seed=2, think_s=7.0)
    opened = multi_turn(tr, seed=2, closed_loop=False)
    assert closed.prefix is not None and opened.prefix is not None and opened.prefix.think_s is None
    think = closed.prefix.think_s
    assert think is not None
    assert np.all(think[closed.prefix.turn == 0] == 0.0) and np.all(think[closed.prefix.turn > 0] > 0.0)
    assert np.array_equal(closed.prefix.session, opened.prefix.session)
    parent = closed.prefix.previous_turn()
    assert np.all(closed.prefix.turn[parent >= 0] == closed.prefix.turn[parent[parent >= 0]] + 1)
    assert np.all((parent >= 0) == (closed.prefix.turn > 0))


requests = st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(1, 90), st.integers(1, 30), st.integers(0, 3),
                              st.floats(0.0, 0.2)), min_size=1, max_size=12)


@pytest.mark.parametrize("batcher", ["continuous-chunked", "seedance", "static"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=requests, blocks=st.integers(4, 40), replicas=st.integers(1, 3), admit=st.booleans())
def test_closed_loop_runs_keep_causality_and_account_for_every_request(
        batcher: str, reqs: list[tuple[float, int, int, int, float]], blocks: int, replicas: int, admit: bool) -> None:
    from seedance.inference.routing import Admission

    reqs.sort()
    arr, prompt, out, sess, think = (list(x) for x in zip(*reqs, strict=True))
    turns: dict[int, int] = {}
    turn = []
    for s in sess:
        turn.append(turns.get(s, 0))
        turns[s] = turn[-1] + 1
    tr = _session(arr, prompt, out, session=sess, turn=turn, think=[t if k else 0.0 for t, k in zip(think, turn,
                                                                                                      strict=True)])
    run = simulate(tr, batcher, blocks=blocks, block_tokens=4, replicas=replicas, prefix_cache=True,
                   admission=Admission((50.0,)) if admit and batcher != "static" else None, tpot_ms=40.0,
                   ttft_ms=300.0)
    assert set(run.state.tolist()) <= {DONE, DROPPED, REJECTED}
    assert tr.prefix is not None
    parent = tr.prefix.previous_turn()
    for i in range(len(arr)):
        assert run.arrival[i] >= tr.arrival_s[i]
        p = int(parent[i])
        if p < 0:
            assert run.arrival[i] == tr.arrival_s[i]
            if run.state[i] == DROPPED and batcher != "static":
                assert -(-(prompt[i] + 1) // 4) > blocks or -(-(prompt[i] + out[i]) // 4) > blocks
            continue
        if run.state[p] == DONE:  # sent once the answer is there plus the think time
            assert run.arrival[i] >= run.finish[p] + tr.prefix.think_s[i] - 1e-12  # type: ignore[index]
        else:  # the conversation ended without an answer: never sent
            assert run.state[i] == DROPPED and np.isnan(run.first_token[i])
