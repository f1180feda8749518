"""Core domain model: registry, catalog, requests, cluster state, lifecycles."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import make_cluster

from seedance.core.catalog import CATALOG, PriceBook
from seedance.core.cluster import ClusterState
from seedance.core.decision import Placement
from seedance.core.errors import InputError, InvalidTransition, SeedanceError, UnknownNameError
from seedance.core.lifecycle import JOB_TRANSITIONS, NODE_TRANSITIONS, JobStatus, NodeStatus, transition
from seedance.core.registry import Registry
from seedance.core.resources import ResourceRequest


def test_registry_is_case_insensitive_and_lists_valid_names_on_miss() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("Alpha", 1, aliases=("a",))
    reg.add("beta", 2)
    assert reg.get("ALPHA") == 1 and reg.get("A") == 1 and "beta" in reg
    with pytest.raises(UnknownNameError, match="valid names: alpha, beta"):
        reg.get("gamma")
    with pytest.raises(ValueError, match="already registered"):
        reg.add("alpha", 3)


def test_catalog_has_the_required_models_with_sources() -> None:
    for name in (
        "P100",
        "V100-16GB",
        "V100-32GB",
        "T4",
        "A10",
        "A100-40GB",
        "A100-80GB",
        "L40S",
        "H100-80GB",
        "H200",
    ):
        m = CATALOG[name]
        assert m.memory_gib > 0 and m.tdp_w > m.idle_w > 0 and m.price_usd_per_hour > 0
        assert m.price_source and m.spec_source and not m.undisclosed
    assert CATALOG["A100-80GB"].mig and CATALOG["H100-80GB"].mig and not CATALOG["T4"].mig
    for code in ("G1", "G2", "G3"):
        assert CATALOG[code].undisclosed and CATALOG[code].proxy
    assert CATALOG["v100m16"].name == "V100-16GB"
    assert PriceBook({"T4": 0.2}).usd_per_gpu_hour("T4") == 0.2
    with pytest.raises(UnknownNameError, match="valid names"):
        CATALOG.resolve("K9000")


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        ({"cpu_milli": -1, "memory_mib": 0}, "cpu_milli"),
        ({"cpu_milli": 1, "memory_mib": 0, "num_gpu": 2, "gpu_milli": 500}, "fractional"),
        ({"cpu_milli": 1, "memory_mib": 0, "num_gpu": 1, "gpu_milli": 1001}, "0..1000"),
        ({"cpu_milli": 1, "memory_mib": 0, "num_gpu": 0, "gpu_milli": 10}, "num_gpu is 0"),
    ],
)
def test_bad_requests_are_refused(kwargs: dict[str, int], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        ResourceRequest(**kwargs)


def test_request_classes() -> None:
    assert ResourceRequest(1000, 1).pod_class == 0
    assert ResourceRequest(1000, 1, 1, 300).pod_class == 1
    assert ResourceRequest(1000, 1, 1, 1000).pod_class == 2
    assert ResourceRequest(1000, 1, 8, 1000).pod_class == 9


def test_apply_and_release_keep_every_derived_array_exact() -> None:
    st = ClusterState(make_cluster())
    assert st.capacity_gpu_milli == 7000 and st.n_nodes == 3 and st.max_gpus == 4
    p = Placement(1, (0,), 300, 4000, 1024)
    q = Placement(1, (2, 3), 1000, 8000, 2048)
    st.apply(p)
    st.apply(q)
    assert st.gpu_free[1].tolist() == [700, 1000, 0, 0]
    assert st.gpu_free_total[1] == 1700 and st.n_full[1] == 1 and st.max_free[1] == 1000
    assert st.cpu_free[1] == 64000 - 12000 and st.mem_free[1] == 131072 - 3072
    assert st.used_gpu_milli == 2300
    assert st.class_counts[1].tolist()[:4] == [0, 1, 0, 1]
    st.release(q)
    st.release(p)
    assert st.gpu_free[1].tolist() == [1000] * 4 and st.used_gpu_milli == 0 and st.cpu_free[1] == 64000
    assert st.version[1] == 4


def test_apply_refuses_what_is_not_free_and_changes_nothing() -> None:
    st = ClusterState(make_cluster())
    st.apply(Placement(2, (0,), 800, 1000, 1))
    before = st.gpu_free.copy()
    with pytest.raises(SeedanceError, match="milli free"):
        st.apply(Placement(2, (0,), 300, 1000, 1))
    with pytest.raises(SeedanceError, match="no GPU"):
        st.apply(Placement(2, (1,), 100, 1000, 1))
    with pytest.raises(SeedanceError, match="CPU or memory"):
        st.apply(Placement(0, (0,), 100, 10**9, 1))
    with pytest.raises(SeedanceError, match="never applied"):
        st.release(Placement(2, (0,), 100, 1, 1))
    assert np.array_equal(st.gpu_free, before)


def test_views_are_read_only_but_track_the_state() -> None:
    st = ClusterState(make_cluster())
    view = st.gpu_free
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 5
    st.apply(Placement(0, (1,), 250, 0, 0))
    assert view[0, 1] == 750


def test_shape_ids_name_equal_node_states() -> None:
    st = ClusterState(make_cluster([(32000, 1, 2, "T4"), (32000, 1, 2, "T4"), (32000, 1, 2, "A10")]))
    assert st.shape_id[0] == st.shape_id[1] != st.shape_id[2]
    st.apply(Placement(0, (0,), 500, 0, 0))
    st.apply(Placement(1, (1,), 500, 0, 0))  # other GPU, same multiset of free milli
    assert st.shape_id[0] == st.shape_id[1]
    model, cpu, free = st.shapes()
    assert free[st.shape_id[0]].tolist() == [1000, 500]


def test_model_and_label_masks() -> None:
    st = ClusterState(
        make_cluster([(1, 1, 1, "T4"), (1, 1, 1, "V100-32GB"), (1, 1, 0, None)], **{"gpu.sla.level": "gold"})
    )
    assert st.model_mask(()).tolist() == [True, True, False]
    assert st.model_mask(("V100M32",)).tolist() == [False, True, False]
    assert st.label_mask("gpu.sla.level", ["gold"]).all()


def test_rank_must_be_a_permutation() -> None:
    st = ClusterState(make_cluster())
    st.set_rank([2, 0, 1])
    assert st.rank.tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="permutation"):
        st.set_rank([0, 0, 1])


def test_lifecycle_tables() -> None:
    assert transition(JobStatus.PENDING, JobStatus.BOUND, JOB_TRANSITIONS) is JobStatus.BOUND
    assert transition(JobStatus.PREEMPTED, JobStatus.PENDING, JOB_TRANSITIONS) is JobStatus.PENDING
    with pytest.raises(InvalidTransition, match="succeeded -> running"):
        transition(JobStatus.SUCCEEDED, JobStatus.RUNNING, JOB_TRANSITIONS)
    assert transition(NodeStatus.DOWN, NodeStatus.READY, NODE_TRANSITIONS) is NodeStatus.READY
    assert set(JOB_TRANSITIONS) == set(JobStatus) and set(NODE_TRANSITIONS) == set(NodeStatus)


def test_input_error_names_file_line_and_field() -> None:
    assert str(InputError("bad", source="f.csv", line=7, field="x")) == "f.csv:7: field x: bad"
    assert str(InputError("bad")) == "bad"
