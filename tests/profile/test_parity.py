"""Decision parity: the simulator, the live loop (SQLite and PostgreSQL) and the extender (real HTTP)
decide the same corpus identically, placements and explanations, for every registered policy."""

from __future__ import annotations

import time
from typing import Any

import pytest

from seedance.scheduling import PLACEMENT_POLICIES
from tests.profile.corpus import corpus, drive_extender, drive_live, drive_sim

CORPUS = corpus()
POLICIES = PLACEMENT_POLICIES.names()


def test_corpus_is_big_and_mixed() -> None:
    reqs = [r for c in CORPUS for r in c.reqs]
    assert len(reqs) >= 500
    assert {r.tier for r in reqs} == {"gold", "silver", "bronze"}
    assert sum(0 < r.milli < 1000 for r in reqs if r.num_gpu) > 100
    modes = {n.labels.get("gpu.mode") for c in CORPUS for n in c.nodes}
    assert {"exclusive", "shared", "mig"} <= modes


@pytest.mark.parametrize("policy", POLICIES)
def test_live_loop_sqlite_matches_the_simulator(policy: str, make_service: Any, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    t0 = time.perf_counter()
    for case in CORPUS:
        assert drive_live(svc, case, policy, policy) == drive_sim(case, policy), case.name
    print(policy, time.perf_counter() - t0)


@pytest.mark.parametrize("policy", POLICIES)
def test_extender_over_http_matches_the_simulator(policy: str) -> None:
    for case in CORPUS:
        assert drive_extender(case, policy) == drive_sim(case, policy), case.name
