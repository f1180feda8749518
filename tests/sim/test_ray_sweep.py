"""``seedancectl simulate --executor ray=ADDRESS`` on a real 3-node local Ray cluster.

The sweep (2 real traces × every policy × seeds 42-44, on a slice of the real node list) must
give the same JSON as the local executor, timings aside; a run whose worker dies is retried; a
run that fails every time stops the sweep naming the run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.sim.ray_sweeps import local_ray_cluster, timeless

from seedance.cli.main import main
from seedance.sim.executors import LocalExecutor, RayExecutor, make_executor
from seedance.sim.experiment import RunSpec, execute
from seedance.traces import load_nodes, load_pods
from seedance.traces.scale import write_nodes, write_pods

POLICIES = "random,dot-product,clustering,packing,best-fit,fgd,seedance"
TRACES = ("default", "gpushare40")

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """Three raylets of one CPU each (no driver connected: the CLI joins by address)."""
    with local_ray_cluster(3) as address:
        yield address


@pytest.fixture(scope="module")
def sliced(alibaba: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Every 20th real GPU node (61 nodes) and every 40th pod of two real traces."""
    root = tmp_path_factory.mktemp("slice")
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    from seedance.core.cluster import ClusterSpec

    nodes = root / "nodes.csv"
    write_nodes(ClusterSpec(nodes=spec.nodes[::20]), nodes)
    pods = []
    for name in TRACES:
        trace = load_pods(alibaba / f"openb_pod_list_{name}.csv")
        path = root / f"openb_pod_list_{name}.csv"
        write_pods(trace.take(np.arange(0, len(trace), 40)), path)
        pods.append(path)
    return nodes, pods


def _simulate(tmp_path: Path, nodes: Path, pods: list[Path], tag: str, *extra: str) -> dict[str, Any]:
    out = tmp_path / f"{tag}.json"
    args = ["simulate", "--nodes", str(nodes), *(a for p in pods for a in ("--pods", str(p))),
            "--policy", POLICIES, "--seeds", "42-44", "-o", "json", "--out", str(out), *extra]
    assert main(args) == 0
    return timeless(json.loads(out.read_text()))


def test_ray_sweep_gives_the_local_json(
    ray_address: str, sliced: tuple[Path, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = sliced
    local = _simulate(tmp_path, nodes, pods, "local", "--workers", "1")
    remote = _simulate(tmp_path, nodes, pods, "ray", "--executor", f"ray={ray_address}")
    assert len(local["results"]) == len(TRACES) * 7 * 3 == 42
    assert remote == local
    assert {r["policy"] for r in local["results"]} == set(POLICIES.split(","))


def test_ray_replay_sweep_gives_the_local_json(
    ray_address: str, sliced: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    nodes, pods = sliced
    args = ("--mode", "replay", "--policy", "fgd,best-fit")
    local = _simulate(tmp_path, nodes, pods[:1], "local", *args, "--workers", "1")
    remote = _simulate(tmp_path, nodes, pods[:1], "ray", *args, "--executor", f"ray={ray_address}")
    assert len(local["results"]) == 6 and remote == local


class DieOnce:
    """An execute function whose worker process dies the first time it runs each run."""

    def __init__(self, marks: Path) -> None:
        self.marks = marks

    def __call__(self, run: RunSpec) -> Any:
        mark = self.marks / f"{Path(run.pods).stem}-{run.policy}-{run.seed}"
        if not mark.exists():
            mark.write_text("died")
            os._exit(1)  # the worker dies: a system failure Ray retries
        return execute(run)


class AlwaysFails:
    """An execute function that raises every time (and counts its attempts in a file)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __call__(self, run: RunSpec) -> Any:
        with self.log.open("a") as fh:
            fh.write("x")
        raise OSError(f"disk gone for {run.policy}")


def _runs(nodes: Path, pods: list[Path]) -> list[RunSpec]:
    return [RunSpec(str(nodes), str(pods[0]), pol, s, 1.3, 130) for pol in ("fgd", "random") for s in (42, 43)]


def test_dead_workers_are_retried_and_results_match(
    ray_address: str, sliced: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    runs = _runs(*sliced)
    seen: list[Any] = []
    remote = make_executor(f"ray={ray_address}", retries=2).map(runs, DieOnce(tmp_path), progress=seen.append)
    local = LocalExecutor().map(runs, execute)
    assert [r.to_json() | {"wall_s": 0} for r in remote] == [r.to_json() | {"wall_s": 0} for r in local]
    assert len(seen) == 4 and sorted(p.read_text() for p in tmp_path.iterdir()) == ["died"] * 4


def test_a_run_failing_every_retry_stops_the_sweep_naming_it(
    ray_address: str, sliced: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ex = RayExecutor(ray_address, retries=1)
    log = tmp_path / "attempts"
    with pytest.raises(RuntimeError, match=r"(?s)run 0 .*policy='fgd'.*failed after 1 retries.*disk gone for fgd"):
        ex.map(_runs(*sliced)[:1], AlwaysFails(log))
    assert log.read_text() == "xx"  # the first try and one retry


def test_executor_names_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert make_executor("local", workers=3).workers == 3
    assert make_executor("ray=10.0.0.1:6379").address == "10.0.0.1:6379"
    assert main(["simulate", "--executor", "dask"]) == 2
    assert "valid names: local, ray" in capsys.readouterr().err
    assert main(["simulate", "--executor", "local=host"]) == 2
    assert main(["simulate", "--executor", "ray="]) == 2
