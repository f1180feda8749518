"""Prefix caching: exact hit accounting on hand-made sessions, eviction order, and engine invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.inference.prefix import PrefixCache, PrefixStructure
from seedance.inference.sim import DONE, DROPPED, REJECTED
from seedance.inference.trace import RequestTrace
from seedance.inference.workloads import multi_turn, structure_stats, system_prompts

from .helpers import simulate, trace


def _structured(arrival: list[float], prompt: list[int], output: list[int], *, sys_id: list[int],
                sys_tokens: list[int], session: list[int], turn: list[int]) -> RequestTrace:
    base = trace(arrival, prompt, output)
    a, b, c, d = (np.asarray(x, np.int64) for x in (sys_id, sys_tokens, session, turn))
    st_ = PrefixStructure(a, b, c, d)
    return RequestTrace(base.arrival_s, base.prompt, base.output, "test", st_)


def test_hits_on_a_hand_made_conversation_are_exact() -> None:
    # block 4 tokens. Session 7, system prompt 0 of 10 tokens (2 full blocks; block 2 straddles).
    # turn 0: prompt 13, output 4 -> at completion 16 tokens of KV (13 + 4 - 1): 4 full blocks
    # turn 1: prompt 25 (its first 17 tokens are turn 0's prompt + answer): hit = 4 blocks = 16 tokens
    # turn 2: prompt 40, output 2, after turn 1 (25 + 3 - 1 = 27 KV tokens -> 6 blocks): hit 24 tokens
    # request 3: another session with the same system prompt: hit = the 2 system blocks = 8 tokens
    # request 4: no structure: no hit
    tr = _structured([0.0, 10.0, 20.0, 30.0, 40.0], [13, 25, 40, 30, 30], [4, 3, 2, 2, 2],
                     sys_id=[0, 0, 0, 0, -1], sys_tokens=[10, 10, 10, 10, 0], session=[7, 7, 7, 8, -1],
                     turn=[0, 1, 2, 0, 0])
    run = simulate(tr, "continuous-chunked", block_tokens=4, blocks=1000, prefix_cache=True)
    assert (run.state == DONE).all()
    assert run.cached_tokens is not None
    assert run.cached_tokens.tolist() == [0, 16, 24, 8, 0]
    # the cached tokens are not recomputed: turn 1's first token comes after a 9-token prefill
    # (toy prefill: 10 + 0.1 * tokens ms)
    assert run.first_token[1] - run.arrival[1] == pytest.approx((10 + 0.1 * 9) / 1000)


def test_a_full_hit_still_computes_one_token() -> None:
    tr = _structured([0.0, 5.0], [16, 16], [1, 1], sys_id=[3, 3], sys_tokens=[16, 16], session=[-1, -1],
                     turn=[0, 0])
    run = simulate(tr, "continuous", block_tokens=4, blocks=100, prefix_cache=True)
    assert run.cached_tokens is not None and run.cached_tokens.tolist() == [0, 12]  # 3 of 4 blocks


def test_lru_evicts_the_oldest_tail_first_and_children_before_parents() -> None:
    # requests: 0, 1 sessions under system prompt 0 (8 tokens = 2 blocks); 2 a session without one
    st_ = PrefixStructure(np.array([0, 0, -1]), np.array([8, 8, 0]), np.array([1, 2, 3]), np.zeros(3, np.int64))
    cache = PrefixCache(st_, np.array([20, 20, 20]), 4)
    for i, t in ((0, 1.0), (1, 2.0), (2, 3.0)):
        cache.acquire(i, 20, first=True)
        cache.publish(i, 20)  # 5 full blocks: 2 system + 3 session (or 5 session for request 2)
        cache.release(i, t)
    assert (cache.pinned, cache.unpinned) == (0, 2 + 3 + 3 + 5)
    cache.fit(11)  # 2 over: the oldest leaf (session 1) loses its tail
    assert cache.sessions[(0, 1)].cached == 1 and cache.systems[0].cached == 2
    cache.fit(6)  # 5 more: session 1 (1), then session 2 (3), then the system prompt (its children are gone): 1
    assert cache.sessions[(0, 1)].cached == 0 and cache.sessions[(0, 2)].cached == 0 and cache.systems[0].cached == 1
    assert cache.sessions[(-1, 3)].cached == 5 and cache.unpinned == 6
    # a pinned node is never evicted
    cache.acquire(2, 24, first=False)
    cache.fit(0)
    assert cache.sessions[(-1, 3)].cached == 5 and cache.pinned == 5 and cache.unpinned == 0


def test_generators_keep_sizes_and_build_append_only_sessions() -> None:
    rng = np.random.default_rng(3)
    n = 400
    tr = trace(np.sort(rng.uniform(0, 4000, n)).tolist(), rng.integers(50, 4000, n).tolist(),
               rng.integers(1, 300, n).tolist())
    mt = multi_turn(tr, seed=1)
    assert mt.prefix is not None
    assert np.array_equal(mt.prompt, tr.prompt) and np.array_equal(mt.arrival_s, tr.arrival_s)
    for s in np.unique(mt.prefix.session):
        idx = np.flatnonzero(mt.prefix.session == s)
        assert mt.prefix.turn[idx].tolist() == list(range(idx.size))
        for a, b in zip(idx[:-1], idx[1:], strict=True):  # each turn contains the previous turn and its answer
            assert mt.prompt[b] > mt.prompt[a] + mt.output[a]
            assert 10.0 <= mt.arrival_s[b] - mt.arrival_s[a] <= 600.0
    stats = structure_stats(mt)
    assert 1.0 < stats["mean_turns"] <= 2.0 and stats["reusable_token_share"] > 0
    sp = system_prompts(tr, prompts=4, seed=2)
    assert sp.prefix is not None
    has = sp.prefix.sys_id >= 0
    assert np.all(sp.prompt[has] > sp.prefix.sys_tokens[has]) and has.any()


requests = st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(1, 120), st.integers(1, 40), st.integers(-1, 2),
                              st.integers(-1, 3)), min_size=1, max_size=14)


@pytest.mark.parametrize("batcher", ["continuous", "continuous-chunked", "seedance"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=requests, blocks=st.integers(4, 40), replicas=st.integers(1, 3), admit=st.booleans())
def test_prefix_cached_runs_keep_the_invariants(batcher: str, reqs: list[tuple[float, int, int, int, int]],
                                                blocks: int, replicas: int, admit: bool) -> None:
    from seedance.inference.routing import Admission

    reqs.sort()
    arr, prompt, out, sysg, sess = (list(x) for x in zip(*reqs, strict=True))
    tr = _structured(arr, prompt, out, sys_id=sysg, sys_tokens=[12 if g >= 0 else 0 for g in sysg],
                     session=sess, turn=[0] * len(arr))
    run = simulate(tr, batcher, blocks=blocks, block_tokens=4, replicas=replicas, prefix_cache=True,
                   router="prefix-aware", admission=Admission((50.0,)) if admit else None,
                   tpot_ms=40.0, ttft_ms=300.0)  # audit on: block ids and the cache's pinned blocks checked
    # every request completes, is rejected with a reason, or is reported dropped
    assert set(run.state.tolist()) <= {DONE, DROPPED, REJECTED}
    assert set(run.reject_reason) == set(np.flatnonzero(run.state == REJECTED).tolist())
    assert all("predicted TTFT" in why for why in run.reject_reason.values())
    assert run.cached_tokens is not None
    done = run.state == DONE
    assert np.all(run.cached_tokens[done] < run.prompt[done])
    for i in np.flatnonzero(run.state == DROPPED):
        assert -(-(prompt[i] + max(out[i], 1)) // 4) > blocks
