"""Cluster mechanisms: disaggregated prefill/decode, routing and admission control."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError
from seedance.inference.disagg import Disaggregation, link_gbs, split_search
from seedance.inference.routing import Admission, RouteQuery, make_router
from seedance.inference.sim import DONE, DROPPED, REJECTED

from .helpers import TOY_MODEL, simulate, trace


def test_disaggregated_request_pays_the_transfer_then_decodes_on_the_other_pool() -> None:
    # toy: prefill 10 + 0.1 * tokens ms, decode 5 + batch ms; 1 KiB of KV per token
    link = 100 * TOY_MODEL.kv_bytes_per_token / 0.5 / 1e9  # 100 tokens take 0.5 s
    run = simulate(trace([0.0], [100], [3]), "continuous-chunked", replicas=2,
                   disaggregate=Disaggregation(prefill=1, link_gbs=link))
    assert run.state.tolist() == [DONE]
    assert run.first_token[0] == pytest.approx(0.020)  # the prefill replica's 100-token prefill
    # + 0.5 s transfer, + a 1-token admission step on the decode replica (10.1 ms), + one decode step (6 ms)
    assert run.finish[0] == pytest.approx(0.020 + 0.5 + 0.0101 + 0.006)


def test_split_search_tries_every_split_and_links_have_sources() -> None:
    best, tried = split_search(4, lambda p: {1: 1.0, 2: 3.0, 3: 2.0}[p])
    assert best == 2 and [p for p, _ in tried] == [1, 2, 3]
    assert link_gbs("ib-hdr") == 200.0 and link_gbs("ib-ndr", gpus=4) == 200.0
    with pytest.raises(InputError):
        link_gbs("ethernet")
    with pytest.raises(InputError):
        simulate(trace([0.0], [10], [2]), "continuous", replicas=2, disaggregate=Disaggregation(prefill=2))


def test_prefix_aware_router_follows_the_cache_unless_load_is_imbalanced() -> None:
    r = make_router("prefix-aware", {"balance_abs": 4, "tight_balance_abs": 1})
    q = RouteQuery(request=0, prompt=100, slo_class=1, outstanding=[3, 1, 2], matched=[0, 0, 80])
    assert r.pick([10, 11, 12], q) == 12  # 80% cached on replica 12, load within 4
    q.matched = [0, 0, 40]
    assert r.pick([10, 11, 12], q) == 11  # below the 50% threshold: least loaded
    q.matched, q.outstanding = [0, 0, 80], [3, 1, 9]
    assert r.pick([10, 11, 12], q) == 11  # 9 - 1 > 4: imbalanced, least loaded
    q.outstanding, q.slo_class = [3, 1, 3], 0
    assert r.pick([10, 11, 12], q) == 11  # the tight class tolerates only 1 request of imbalance
    with pytest.raises(InputError):
        make_router("prefix-aware", {"threshold": 1})


def test_admission_rejects_early_with_a_reason() -> None:
    # 30 requests of 500 tokens at once on one replica: prefill 10 + 0.1 * 500 = 60 ms each (budget 512)
    tr = trace([0.0] + [1.0] * 30, [500] * 31, [2] * 31)
    run = simulate(tr, "continuous-chunked", options={"max_num_batched_tokens": 512},
                   admission=Admission(ttft_ms=(400.0,)))
    rejected = np.flatnonzero(run.state == REJECTED)
    assert rejected.size > 0 and (run.state[run.state != REJECTED] == DONE).all()
    # the first request measured the rate: 500 tokens / 60 ms; a request is admitted while
    # (queued + own) tokens / rate <= 400 ms: 6 requests of 500 tokens (3000 / 8.33 = 360 ms)
    assert int((run.state == DONE).sum()) == 1 + 6
    assert run.reject_reason[int(rejected[0])].startswith("predicted TTFT")
    done = run.state == DONE
    assert np.all((run.first_token[done] - run.arrival[done]) * 1000 <= 400.0 + 1e-9)


requests = st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(1, 120), st.integers(1, 40)), min_size=1,
                    max_size=14)


@pytest.mark.parametrize("batcher", ["continuous", "continuous-chunked", "seedance"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=requests, blocks=st.integers(4, 40), replicas=st.integers(2, 4), data=st.data())
def test_no_kv_block_is_held_on_both_pools(batcher: str, reqs: list[tuple[float, int, int]], blocks: int,
                                           replicas: int, data: st.DataObject) -> None:
    reqs.sort()
    arr, prompt, out = (list(x) for x in zip(*reqs, strict=True))
    prefill = data.draw(st.integers(1, replicas - 1))
    gbs = data.draw(st.sampled_from([1e-4, 1e-3, 1.0]))
    # audit: every block id is owned once per replica and no request owns blocks on two replicas
    run = simulate(trace(arr, prompt, out), batcher, blocks=blocks, block_tokens=4, replicas=replicas,
                   disaggregate=Disaggregation(prefill=prefill, link_gbs=gbs), tpot_ms=40.0, ttft_ms=300.0)
    assert set(run.state.tolist()) <= {DONE, DROPPED}
    for i in np.flatnonzero(run.state == DROPPED):
        assert -(-(prompt[i] + max(out[i], 1)) // 4) > blocks
    done = run.state == DONE
    assert np.all(run.finish[done] >= run.first_token[done])
