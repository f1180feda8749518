"""Decision parity: the simulator, the live loop (SQLite and PostgreSQL) and the extender (real HTTP)
decide the same corpus identically, placements and explanations, for every registered policy.

The default run checks a 100-request slice of the corpus per policy and driver; the ``bench``
marker runs the whole 500-request corpus (``pytest -m bench tests/profile``).
"""

from __future__ import annotations

from typing import Any

import pytest

from seedance.scheduling import PLACEMENT_POLICIES
from tests.profile.corpus import Case, CNode, CReq, corpus, drive_extender, drive_live, drive_sim

CORPUS = corpus()
SLICE = CORPUS[:5]
PG_SLICE = CORPUS[:2]  # PostgreSQL round trips are slower: 40 requests per policy by default
POLICIES = PLACEMENT_POLICIES.names()

GOLD = {"gpu.sla.level": "gold", "gpu.mode": "exclusive"}
#: The repro: the bronze pool is full, a bronze pod asks 250 milli with borrowing allowed. The only
#: room is a Gold/exclusive A100, which hosts whole GPUs only: the share must borrow one whole GPU.
BRONZE_250 = Case("bronze250", (
    CNode("bronze-t4", 16, 64, 1, "T4", {"gpu.sla.level": "bronze"}),
    CNode("gold-a100", 64, 256, 8, "A100-80GB", GOLD),
), (
    CReq("bronze", 2, 4, 1, 1000, ()),  # fills the bronze pool
    CReq("bronze", 2, 4, 1, 250, ()),
))


def test_corpus_is_big_and_mixed() -> None:
    reqs = [r for c in CORPUS for r in c.reqs]
    assert len(reqs) >= 500
    assert {r.tier for r in reqs} == {"gold", "silver", "bronze"}
    assert sum(0 < r.milli < 1000 for r in reqs if r.num_gpu) > 100
    modes = {n.labels.get("gpu.mode") for c in CORPUS for n in c.nodes}
    assert {"exclusive", "shared", "mig"} <= modes
    outcomes = {row["outcome"] for c in SLICE for row in drive_sim(c, "best-fit")}
    stages = {row["explanation"].get("stage") for c in CORPUS for row in drive_sim(c, "best-fit")}
    slices = {row["explanation"].get("slice", {}).get("backend") for c in CORPUS for row in drive_sim(c, "best-fit")}
    assert {"bind", "pending"} <= outcomes
    assert {"own-pool", "borrow", "pending"} <= stages  # every stage is exercised
    assert "mig" in slices  # MIG instances are placed


def _bronze_250_expectation(rows: list[dict[str, Any]]) -> None:
    share = rows[1]
    assert (share["outcome"], share["node"], share["gpus"], share["gpu_milli"]) == ("bind", "gold-a100", [0], 1000)
    assert share["explanation"]["stage"] == "borrow"
    assert share["explanation"]["request"]["borrowed_as_whole_gpu"] is True


def test_bronze_250_milli_gets_a_whole_gpu_from_every_driver(make_service: Any, sqlite_url: str) -> None:
    sim = drive_sim(BRONZE_250, "best-fit")
    _bronze_250_expectation(sim)
    assert drive_extender(BRONZE_250, "best-fit") == sim
    assert drive_live(make_service(sqlite_url), BRONZE_250, "best-fit", "repro") == sim


def test_bronze_250_milli_on_postgresql(make_service: Any, pg_schema_url: str) -> None:
    assert drive_live(make_service(pg_schema_url), BRONZE_250, "best-fit", "repro") == drive_sim(BRONZE_250, "best-fit")


@pytest.mark.parametrize("policy", POLICIES)
def test_live_loop_sqlite_matches_the_simulator(policy: str, make_service: Any, sqlite_url: str) -> None:
    svc = make_service(sqlite_url)
    for case in SLICE:
        assert drive_live(svc, case, policy, policy) == drive_sim(case, policy), case.name


@pytest.mark.parametrize("policy", POLICIES)
def test_live_loop_postgresql_matches_the_simulator(policy: str, make_service: Any, pg_schema_url: str) -> None:
    svc = make_service(pg_schema_url)
    for case in PG_SLICE:
        assert drive_live(svc, case, policy, policy) == drive_sim(case, policy), case.name


@pytest.mark.parametrize("policy", POLICIES)
def test_extender_over_http_matches_the_simulator(policy: str) -> None:
    for case in SLICE:
        assert drive_extender(case, policy) == drive_sim(case, policy), case.name


@pytest.mark.bench
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
@pytest.mark.parametrize("policy", POLICIES)
def test_full_corpus_every_driver(policy: str, store: str, make_service: Any, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if store == "sqlite" else "pg_schema_url")
    svc = make_service(url)
    for case in CORPUS:
        sim = drive_sim(case, policy)
        assert drive_live(svc, case, policy, policy) == sim, case.name
        if store == "sqlite":
            assert drive_extender(case, policy) == sim, case.name
