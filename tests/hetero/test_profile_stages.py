"""The CUDA pre-flight as a profile filter (``CudaCompat``): named in the document, placed through ``build_profile``."""

from __future__ import annotations

import numpy as np
import pytest

from seedance.core.cluster import ClusterSpec, ClusterState, NodeSpec
from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.hetero.fleet import make_fleet
from seedance.hetero.profile_stages import LABEL_CUDA, LABEL_SASS, NODE_DRIVER, CudaCompat, node_key
from seedance.hetero.stages import HETERO_STAGES, HeteroJob
from seedance.profile import Attempt, SchedulingProfile, build_profile, profile_from_text
from seedance.profile.context import MappingPods, PodInfo, StageServices
from seedance.topology.compat import CudaBuild

DOC = (
    "kind: SchedulingProfile\n"
    "name: hetero\n"
    "placement: {policy: best-fit}\n"
    "filters: [NodeSchedulable, NodeResourcesFit, GpuModelMatch, GpuFit, CudaCompat]\n"
)
OLD_DRIVER = dict(zip(NODE_DRIVER, ("450", "80", "02"), strict=True))
# a100 is the tighter node (best-fit's choice); v100 runs an R450 driver; h100 has room
SPEC = ClusterSpec((
    NodeSpec("a100", 64000, 262144, 2, "A100-80GB"),
    NodeSpec("v100", 64000, 262144, 4, "V100-16GB", OLD_DRIVER),
    NodeSpec("h100", 64000, 262144, 8, "H100-80GB"),
))
PODS = MappingPods({
    1: PodInfo("plain", "t"),
    2: PodInfo("hopper-only", "t", {LABEL_CUDA: "12.4", LABEL_SASS: "sm_90"}),
    3: PodInfo("cuda12", "t", {LABEL_CUDA: "12.4"}),
    4: PodInfo("typo", "t", {LABEL_CUDA: "12.x"}),
    5: PodInfo("ampere-hopper", "t", {LABEL_CUDA: "11.8", LABEL_SASS: "sm_80,sm_90"}),
})
REQ = ResourceRequest(4000, 8192, 1, 1000)


def _profile(view: ClusterState) -> SchedulingProfile:
    return build_profile(profile_from_text(DOC, source="p.yaml"), view, services=StageServices(pods=PODS))


def test_the_filter_is_named_in_the_profile_document_and_builds() -> None:
    cfg = profile_from_text(DOC, source="p.yaml")
    assert cfg.filters[-1] == "CudaCompat"
    prof = _profile(ClusterState(SPEC))
    f = prof.filters[-1]
    assert isinstance(f, CudaCompat) and f.name == "CudaCompat" and f.resolvable is False
    with pytest.raises(InputError, match="valid names: .*cudacompat") as err:
        profile_from_text("kind: SchedulingProfile\nfilters: [NodeSchedulable, CudaCompt]\n", source="p.yaml")
    assert err.value.source == "p.yaml" and err.value.line == 2 and "attestedtee" in str(err.value)


def test_a_job_is_never_placed_on_a_node_that_cannot_run_its_build() -> None:
    view = ClusterState(SPEC)
    prof = _profile(view)
    plain = prof.decide(view, REQ, 1)
    assert plain.placement is not None and plain.placement.node == 0  # best-fit: the tight A100 node
    hopper = prof.decide(view, REQ, 2)
    assert hopper.placement is not None and hopper.placement.node == 2  # sm_90 SASS runs on 9.0 only
    cuda12 = prof.decide(view, REQ, 3)
    assert cuda12.placement is not None and cuda12.placement.node == 0
    adm = prof.admit(Attempt(view, REQ, 3))
    assert adm.ok.tolist() == [True, False, True]
    assert adm.reason(1) == "CUDA pre-flight: CUDA 12.4 needs driver >= 525.60.13, the node has 450.80.2"
    assert not adm.resolvable[1]  # waiting cannot change a driver
    adm2 = prof.admit(Attempt(view, REQ, 2))
    assert adm2.ok.tolist() == [False, False, True]
    assert adm2.reason(0).startswith("CUDA pre-flight: no code for compute capability 8.0: CUDA 12.4, SASS sm_90")
    assert adm2.reason(1) == adm.reason(1)


def test_when_only_incompatible_nodes_have_room_the_job_waits_with_the_filter_reason() -> None:
    view = ClusterState(SPEC)
    prof = _profile(view)
    h = prof.decide(view, ResourceRequest(4000, 8192, 8, 1000), 1)  # fill the H100 node
    assert h.placement is not None and h.placement.node == 2
    prof.apply(view, h)
    d = prof.decide(view, REQ, 2)
    assert d.placement is None and d.reason == "no node fits now (CudaCompat rejects 2 of 3)"
    assert d.explanation["rejected_by"]["CudaCompat"] == 2 and d.explanation["rejected_by"]["GpuFit"] == 1
    adm = prof.admit(Attempt(view, REQ, 2))
    assert not adm.ok.any() and adm.reason(0).startswith("CUDA pre-flight: no code for compute capability 8.0")
    # the profile stage agrees with the hetero stage on the same nodes
    fleet = make_fleet([("A100-80GB", 4), ("V100-16GB", 4)])
    job = HeteroJob(0, None, 1, CudaBuild.of("11.8", ["sm_80", "sm_90"]))
    assert HETERO_STAGES.get("cuda-compat")().mask(job, fleet).tolist() == [True, False]
    amp = prof.admit(Attempt(ClusterState(SPEC), REQ, 5))
    assert amp.ok.tolist() == [True, False, True]


def test_a_build_whose_labels_do_not_parse_goes_nowhere() -> None:
    view = ClusterState(SPEC)
    prof = _profile(view)
    d = prof.decide(view, REQ, 4)
    assert d.placement is None and "CudaCompat rejects 3 of 3" in d.reason
    adm = prof.admit(Attempt(view, REQ, 4))
    assert not adm.ok.any() and adm.reason(0).startswith("CUDA labels of typo do not parse: ")
    assert "12.x" in adm.reason(0)


def test_node_keys_from_feature_discovery_labels_or_the_catalog() -> None:
    assert node_key({}, "H100-80GB") == ((9, 0), (580, 65, 6))
    assert node_key({"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "6", **OLD_DRIVER},
                    "mystery") == ((8, 6), (450, 80, 2))
    assert node_key({}, None) == "node has no GPU"
    assert isinstance(node_key({}, "no-such-gpu"), str)
    view = ClusterState(ClusterSpec((NodeSpec("cpu", 8000, 8192, 0, None),)))
    prof = _profile(view)
    assert not np.asarray(prof.admit(Attempt(view, ResourceRequest(1000, 1024, 0, 0), 3)).ok).any()
