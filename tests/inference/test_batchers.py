"""Exact batch composition of every batcher on hand-made request sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError, UnknownNameError
from seedance.inference.batchers import BATCHERS, Plan, ReplicaView, make_batcher
from seedance.inference.batchers.seedance import SeedanceBatcher, adaptive_delta, admit_clusters, clusters

from .helpers import toy_step, view


def test_registry_lists_the_five_batchers() -> None:
    assert BATCHERS.names() == ["continuous", "continuous-chunked", "static", "dynamic", "seedance"]
    assert type(make_batcher("VLLM")).name == "continuous"
    with pytest.raises(UnknownNameError, match="valid names: continuous"):
        make_batcher("fifo")
    with pytest.raises(InputError, match="unknown option 'size'"):
        make_batcher("static", {"size": 4})
    with pytest.raises(InputError, match="must be a int"):
        make_batcher("static", {"batch_size": "many"})
    assert make_batcher("static", {"batch_size": "8"}).opts["batch_size"] == 8


def test_static_takes_the_oldest_sixteen() -> None:
    v = view([100] * 20, total_blocks=16 * 135)  # each row reserves ceil((100 + 2048) / 16) = 135 blocks
    plan = make_batcher("static").plan(v)
    assert [i for i, _ in plan.prefill] == list(range(16))
    assert all(t == 100 for _, t in plan.prefill) and plan.decode is False


def test_static_batch_is_cut_by_its_padded_reservation() -> None:
    # widths: the batch is padded to its longest prompt plus max_new_tokens (reserved up front)
    v = view([10, 200, 30, 40], total_blocks=40, block_tokens=16)
    plan = make_batcher("static", {"max_new_tokens": 40}).plan(v)
    # one row: ceil((10+40)/16)=4 blocks; two rows padded to 200: 2*ceil(240/16)=30; three: 45 > 40
    assert [i for i, _ in plan.prefill] == [0, 1]
    huge = view([1000, 10], total_blocks=40)
    plan = make_batcher("static", {"max_new_tokens": 40}).plan(huge)
    assert plan.reject == (0,) and [i for i, _ in plan.prefill] == [1]


def test_dynamic_waits_for_size_or_delay() -> None:
    b = make_batcher("dynamic", {"max_batch": 4, "max_queue_delay_ms": 100})
    early = view([50, 60, 70], arrival=[1.0, 1.02, 1.05], now=1.05)
    plan = b.plan(early)
    assert plan.prefill == () and plan.wake_at == pytest.approx(1.1)
    due = view([50, 60, 70], arrival=[1.0, 1.02, 1.05], now=1.1)
    assert [i for i, _ in b.plan(due).prefill] == [0, 1, 2]
    full = view([50] * 6, now=0.0, arrival=[0.0] * 6)
    assert [i for i, _ in b.plan(full).prefill] == [0, 1, 2, 3]


def test_continuous_admits_the_fcfs_prefix_that_fits() -> None:
    b = make_batcher("continuous", {"max_num_batched_tokens": 350, "watermark": 0.0})
    assert [i for i, _ in b.plan(view([100, 200, 300, 50])).prefill] == [0, 1]
    # blocks: 16-token blocks, 10 free: 100 tokens = 7 blocks, then 200 = 13 does not fit
    tight = view([100, 200, 10], total_blocks=100, free_blocks=10)
    assert [i for i, _ in b.plan(tight).prefill] == [0]
    # nothing fits: decode the running requests
    none = view([500], total_blocks=100, free_blocks=10, waiting=[0], decoding=[])
    assert b.plan(none) == Plan()


def test_chunked_fills_a_token_budget_after_the_decodes() -> None:
    b = make_batcher("continuous-chunked", {"max_num_batched_tokens": 300, "watermark": 0.0})
    v = view([100, 200, 300, 50, 80], waiting=[2, 3, 4], decoding=[0, 1])
    plan = b.plan(v)
    # 300 - 2 decodes = 298 tokens: request 2 gets a 298-token chunk
    assert plan.prefill == ((2, 298),) and plan.decode is True
    v.prefilling.append(2)
    v.waiting.remove(2)
    v.book.computed[2] = 298
    assert b.plan(v).prefill == ((2, 2), (3, 50), (4, 80))


def test_adaptive_delta_and_clusters() -> None:
    assert adaptive_delta(2.0, 0.85) == 2.0
    assert adaptive_delta(2.0, 0.851) == pytest.approx(0.6)
    f = np.array([[9.0, 6.6], [9.1, 6.7], [6.0, 9.0], [9.5, 6.5], [6.2, 9.1]])
    assert list(clusters(f, [0, 1, 2, 3, 4], 1.0)) == [[0, 1, 3], [2, 4]]
    assert list(clusters(f, [0, 1, 2, 3, 4], 0.3)) == [[0, 1], [2, 4], [3]]
    assert list(clusters(f, [], 1.0)) == []


def _seedance(opts: dict[str, object]) -> SeedanceBatcher:
    b = make_batcher("seedance", opts)
    assert isinstance(b, SeedanceBatcher)
    return b


def _seedance_view(free_blocks: int) -> ReplicaView:
    # anchor 512/100; 700/110 is 0.47 octaves away; 64/500 far; 500/90 close
    return view([512, 700, 64, 500, 40, 40], predicted=[100.0, 110.0, 500.0, 90.0, 20.0, 20.0],
                waiting=[0, 1, 2, 3], decoding=[4, 5], total_blocks=1000, free_blocks=free_blocks,
                step=toy_step(), tpot_ms=100.0, ttft_ms=10_000.0)


def test_seedance_admits_clusters_within_the_iteration_budget() -> None:
    b = _seedance({"delta": 1.0, "iteration_share": 0.9, "watermark": 0.0, "step_model": "profile"})
    v = _seedance_view(free_blocks=900)
    # 0.9 * 100 ms: 10 + 0.1 * (tokens + 2 decodes) <= 90  ->  798 prefill tokens
    assert b.budget(v) == 798
    plan = b.plan(v)
    assert plan.prefill == ((0, 512), (1, 286)) and plan.decode is True
    assert b.last_delta == 1.0


def test_seedance_under_memory_pressure_shrinks_delta_and_admits_one_cluster() -> None:
    b = _seedance({"delta": 1.0, "watermark": 0.0, "step_model": "profile"})
    v = _seedance_view(free_blocks=100)  # 90% used
    plan = b.plan(v)
    assert b.last_delta == pytest.approx(0.3)
    # the cluster of request 0 at δ=0.3 is {0, 3}; 1 (0.47 octaves) waits
    assert plan.prefill == ((0, 512), (3, 286))


def test_seedance_keeps_decodes_within_the_tpot_target() -> None:
    b = _seedance({"min_chunk": 16, "step_model": "profile"})
    v = view([100, 40], predicted=[50.0, 50.0], waiting=[0], decoding=[1], step=toy_step(kv_ms=1.0),
             tpot_ms=50.0, ttft_ms=1000.0, kv_tokens=40, now=0.0)
    # decoding alone takes 5 + 1 + 40 = 46 ms > 45 ms: no prefill until the oldest has waited 500 ms
    assert b.budget(v) == 0 and b.plan(v).prefill == ()
    v.now = 0.6
    assert b.plan(v).prefill == ((0, 16),)


def test_seedance_online_budget_learns_the_step_times_it_measured() -> None:
    # the engine reports measured iterations of the toy profile: prefill 10 + 0.1 * (tokens + decoders),
    # decode 5 + batch (mixed: the max); the fit is linear, so a mixed-only history is learnt exactly
    b = _seedance({"iteration_share": 0.9, "watermark": 0.0})
    v = _seedance_view(free_blocks=900)
    assert b.budget(v) == 256  # before the warm-up: min_chunk
    step = toy_step()
    for t in range(64):
        tokens, dec = 100 + 13 * t, 1 + t % 5
        b.observe_iteration(tokens, 0.0, dec, 0.0, step.iteration_ms(tokens, 0.0, dec, 0.0))
    # 10 + 0.1 * (tokens + 2) <= 90 -> 798, as the profile gives (the tiny ridge may cost a token at the edge)
    assert b.budget(v) in (797, 798)
    err = b.step_model.error_summary()
    assert err["observations"] == 64 and err["predictions"] == 32 and err["mean_abs_rel_err"] < 1e-6


def test_seedance_rejects_an_unknown_step_model() -> None:
    with pytest.raises(InputError):
        make_batcher("seedance", {"step_model": "oracle"})


@pytest.mark.parametrize("sq_coef", [0.0, 2e-3])
def test_online_model_budget_is_the_largest_fitting_chunk(sq_coef: float) -> None:
    from seedance.inference.stepmodel import OnlineStepModel

    m = OnlineStepModel(warmup=8, refit=8)
    for t in range(40):  # ms = 12 + 0.05 * tokens + 0.5 * decoders + sq_coef * sq / 1e6
        tok, dec = 50 * t + 1, t % 7
        m.observe(tok, float(tok * tok), dec, 0.0, 12 + 0.05 * tok + 0.5 * dec + sq_coef * tok * tok / 1e6)
    for budget in (13.0, 40.0, 90.0):
        n = m.max_prefill_tokens(budget, 3, 0.0, 4096)
        assert n is not None
        pred = m.predict
        assert n == 0 or pred(n, float(n * n), 3, 0.0) <= budget  # type: ignore[operator]
        assert n == 4096 or pred(n + 1, float((n + 1) ** 2), 3, 0.0) > budget  # type: ignore[operator]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40), st.floats(0.05, 3.0), st.booleans())
def test_lazy_cluster_admission_offers_what_the_clusters_give(seed: int, n: int, delta: float, first: bool) -> None:
    """The batcher's lazy admission offers the same requests, in the same order, as admitting
    :func:`clusters` group by group until a refusal (the plan's rule before it was made lazy)."""
    rng = np.random.default_rng(seed)
    feats = np.c_[rng.uniform(3.0, 14.0, 60), rng.uniform(0.0, 11.0, 60), np.full(60, 6.5)]
    feats[rng.integers(0, 60, 10)] = feats[rng.integers(0, 60, 10)]  # some exact ties
    cands = [int(x) for x in rng.permutation(60)[:n]]
    refuse = {int(x) for x in rng.choice(60, 3, replace=False)} if n and rng.random() < 0.8 else set()

    def run(lazy: bool) -> list[int]:
        offered: list[int] = []

        def admit(i: int) -> bool:
            offered.append(i)
            return i not in refuse

        if lazy:
            admit_clusters(feats, cands, delta, admit, first_only=first)
        else:
            for group in clusters(feats, cands, delta):
                if not all(admit(i) for i in group) or first:
                    break
        return offered

    assert run(True) == run(False)
