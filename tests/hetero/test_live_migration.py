"""Live migration on a real 3-node local Ray cluster: the torch-train job checkpoints its state dict,
stops, resumes on another node, and its later losses equal an uninterrupted run's.

Starts Ray: run under ``flock /tmp/seedance-ray.lock``. Fails loudly when Ray is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from seedance.hetero.live import migrate_jobs, planner_estimate, start_local_cluster

NODES = ["gpu-a", "gpu-b", "gpu-c"]
PLAN = [(11, "gpu-a", "gpu-b"), (12, "gpu-b", "gpu-c"), (13, "gpu-c", "gpu-a")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with start_local_cluster(NODES) as c:
        yield c


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.xdist_group("ray")  # one Ray cluster at a time under pytest -n (scripts/test.sh)
def test_jobs_resume_on_another_node_with_identical_losses(cluster: Any) -> None:
    results = migrate_jobs(PLAN, steps=30, checkpoint_at=12)
    assert len(results) == 3 and all(r["completed"] for r in results)  # 0 jobs lost
    for r in results:
        assert r["source_node_ok"] and r["target_node_ok"], r
        assert len(r["resumed_losses"]) == 18
        assert r["max_loss_diff"] <= 1e-6
        assert r["checkpoint_bytes"] > 10_000  # a real state dict: 16-32-1 MLP weights + two Adam moments
        assert 0 < r["migration_s"] < 60
    est = planner_estimate(results[0]["checkpoint_bytes"])
    assert est["restart_s"] == 10.0 and est["data_s"] < 1e-3
    print("live migration s:", [round(r["migration_s"], 3) for r in results], "planner estimate s:",
          round(est["transfer_s"], 3))
