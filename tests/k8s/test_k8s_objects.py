"""Quantities, Node documents and Pod documents → Seedance's model."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as kube_parse_quantity

from seedance.core.errors import InputError
from seedance.core.resources import ResourceRequest
from seedance.k8s.objects import gpu_model_of, node_spec, node_unschedulable, pod_info
from seedance.k8s.quantity import cpu_milli, memory_mib, parse_quantity
from seedance.k8s.validation import object_errors
from tests.k8s.k8s_docs import load_fixture, make_pod


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("95690m", Fraction(95690, 1000)),
        ("64Gi", Fraction(64 * 2**30)),
        ("1166093668Ki", Fraction(1166093668 * 1024)),
        ("129e6", Fraction(129_000_000)),
        ("1E", Fraction(10**18)),
        ("1e-3", Fraction(1, 1000)),
        ("100n", Fraction(1, 10**7)),
        (".5", Fraction(1, 2)),
        (3, Fraction(3)),
    ],
)
def test_parse_quantity_exact(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", "1GiB", "--1", "1e", True])
def test_parse_quantity_rejects_malformed(bad: str | bool) -> None:
    with pytest.raises(InputError, match="not a quantity"):
        parse_quantity(bad, field="cpu")  # type: ignore[arg-type]


@given(
    number=st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    suffix=st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]),
)
def test_parse_quantity_agrees_with_kubernetes_client(number: Decimal, suffix: str) -> None:
    text = f"{number.normalize():f}{suffix}"
    assert parse_quantity(text) == Fraction(kube_parse_quantity(text))


def test_cpu_rounds_up_and_memory_rounds_by_use() -> None:
    assert cpu_milli("0.1") == 100
    assert cpu_milli("1n") == 1
    assert memory_mib("1536Ki") == 2
    assert memory_mib("1536Ki", round_up=False) == 1


def test_node_fixture_is_a_valid_node_and_maps_exactly() -> None:
    node = load_fixture("node-a100.json")
    assert object_errors(node) == []
    spec = node_spec(node)
    assert (spec.name, spec.cpu_milli, spec.memory_mib, spec.gpu_count, spec.gpu_model) == (
        "gpu-a100-07", 95690, 1166093668 // 1024, 8, "A100-80GB")
    assert spec.labels["gpu.sla.level"] == "gold"
    assert not node_unschedulable(node)


@pytest.mark.parametrize(
    ("labels", "model"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, "A100-80GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB"}, "A100-40GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "H100-80GB"),
        ({"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}, "V100-32GB"),
        ({"nvidia.com/gpu.product": "Tesla-T4"}, "T4"),
        ({"nvidia.com/gpu.product": "NVIDIA-L40S"}, "L40S"),
        ({"nvidia.com/gpu.product": "NVIDIA-A10G"}, "NVIDIA-A10G"),  # unknown: kept as the label says
        ({"gpu.model": "h200", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, "H200"),  # ours first
        ({}, None),
    ],
)
def test_gpu_model_from_labels(labels: dict[str, str], model: str | None) -> None:
    assert gpu_model_of(labels) == model


def test_node_with_bad_allocatable_names_node_and_field() -> None:
    node = load_fixture("node-a100.json")
    node["status"]["allocatable"]["memory"] = "lots"
    with pytest.raises(InputError, match=r"node gpu-a100-07: field status.allocatable.memory: not a quantity"):
        node_spec(node)


def test_pod_fixture_effective_request_follows_kube_scheduler() -> None:
    # containers: 1500m+250m (limit as request), 6Gi+128Mi; sidecar 100m/64Mi; one-shot init 4 CPU / 2Gi;
    # overhead 50m/32Mi  →  CPU max(1850, 4000) + 50, memory max(6336, 2048) + 32
    pod = load_fixture("pod-pending.json")
    assert object_errors(pod) == []
    info = pod_info(pod)
    assert info.request == ResourceRequest(cpu_milli=4050, memory_mib=6368, num_gpu=1, gpu_milli=250,
                                           gpu_types=("A100-80GB", "H100-80GB"))
    assert (info.uid, info.namespace, info.name, info.tier, info.node) == (
        "9d3c2b1a-0f1e-4d2c-8b7a-6e5d4c3b2a19", "ml-platform", "eval-7f9c", "bronze", "")


def test_whole_gpus_come_from_the_extended_resource() -> None:
    info = pod_info(make_pod("p", cpu="2", memory="3Gi", gpus=4))
    assert info.request == ResourceRequest(cpu_milli=2000, memory_mib=3072, num_gpu=4, gpu_milli=1000)


def test_exclusive_tier_rounds_a_share_up_to_a_whole_gpu() -> None:
    info = pod_info(make_pod("p", milli=300, tier="gold"))
    assert info.request.gpu_milli == 300  # as asked; the tier rule lives once, in the profile's tier stage
    from seedance.core.cluster import ClusterSpec, ClusterState
    from seedance.profile import Attempt
    from seedance.profile.build import tier_profile
    from seedance.scheduling import make_policy

    prof = tier_profile(make_policy("best-fit"))
    assert prof.adapt(Attempt(ClusterState(ClusterSpec(())), info.request, tier=info.tier)).gpu_milli == 1000
    assert pod_info(make_pod("p", milli=300, tier="silver")).request.gpu_milli == 300


def test_tier_from_priority_class_when_unlabelled() -> None:
    pod = make_pod("p")
    pod["spec"]["priorityClassName"] = "seedance-silver"
    assert pod_info(pod).tier == "silver"
    pod["spec"]["priorityClassName"] = "system-cluster-critical"
    assert pod_info(pod).tier is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"milli": 0}, r"field metadata.annotations.seedance.ai/gpu-milli: must be within 1..1000"),
        ({"annotations": {"seedance.ai/gpu-milli": "half"}}, r"gpu-milli: not an integer"),
        ({"milli": 500, "gpus": 2}, r"a GPU share \(500 milli\) cannot span 2"),
        ({"milli": 500, "types": "A100-80GB,Voodoo5"}, r"gpu-types: unknown GPU model 'Voodoo5'"),
        ({"tier": "platinum"}, r"field metadata.labels.seedance.ai/tier: unknown tier 'platinum'"),
        ({"cpu": "-1"}, r"negative resource request"),
        ({"annotations": {"seedance.ai/gpu-index": "0,x"}}, r"gpu-index: not a comma-separated list"),
    ],
)
def test_bad_pods_raise_input_error_naming_pod_and_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message) as exc:
        pod_info(make_pod("bad", namespace="ns", **kwargs))  # type: ignore[arg-type]
    assert str(exc.value).startswith("pod ns/bad: ")
