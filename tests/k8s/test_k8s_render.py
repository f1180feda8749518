"""SLA-tier Pod fragments, nodeAffinity evaluation and PriorityClasses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedance.core.errors import InputError, UnknownNameError
from seedance.k8s.affinity import pod_fits_node, requirement_matches, selector_matches
from seedance.k8s.extender import Extender
from seedance.k8s.render import merge_fragment, pod_spec_fragment, priority_classes
from seedance.k8s.validation import object_errors, pod_fragment_errors
from seedance.scheduling import make_policy
from seedance.tiers import DEFAULT_TIER_CONFIG
from tests.k8s.k8s_docs import make_node, make_pod

# Whitepaper §2.2, verbatim structure:
# affinity: nodeAffinity: requiredDuringSchedulingIgnoredDuringExecution: nodeSelectorTerms:
#   - matchExpressions: - key: gpu.sla.level operator: In values: ["gold"]
#                       - key: gpu.mode operator: In values: ["exclusive"]
WHITEPAPER_GOLD_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "gpu.sla.level", "operator": "In", "values": ["gold"]},
                    {"key": "gpu.mode", "operator": "In", "values": ["exclusive"]},
                ]}
            ]
        }
    }
}

# name → labels; the gold/exclusive ones are exactly n-gold-ex-1 and n-gold-ex-2
HAND_MADE_NODES: dict[str, dict[str, str]] = {
    "n-gold-ex-1": {"gpu.sla.level": "gold", "gpu.mode": "exclusive"},
    "n-gold-ex-2": {"gpu.sla.level": "gold", "gpu.mode": "exclusive", "zone": "b", "gpu.model": "H100"},
    "n-gold-shared": {"gpu.sla.level": "gold", "gpu.mode": "shared"},
    "n-gold-nomode": {"gpu.sla.level": "gold"},
    "n-silver-ex": {"gpu.sla.level": "silver", "gpu.mode": "exclusive"},
    "n-Gold-ex": {"gpu.sla.level": "Gold", "gpu.mode": "exclusive"},  # label values are case-sensitive
    "n-typo": {"gpu.sla-level": "gold", "gpu.mode": "exclusive"},
    "n-bronze": {"gpu.sla.level": "bronze", "gpu.mode": "shared"},
    "n-bare": {},
}


def test_gold_fragment_is_the_whitepaper_yaml() -> None:
    frag = pod_spec_fragment("gold")
    assert frag["spec"]["affinity"] == WHITEPAPER_GOLD_AFFINITY
    assert frag["spec"]["priorityClassName"] == "seedance-gold"
    assert frag["metadata"] == {"labels": {"seedance.ai/tier": "gold"}}
    assert frag["spec"]["tolerations"] == [
        {"key": "gpu.sla.level", "operator": "Equal", "value": "gold", "effect": "NoSchedule"},
        {"key": "gpu.mode", "operator": "Equal", "value": "exclusive", "effect": "NoSchedule"},
    ]
    assert "schedulerName" not in frag["spec"]


def test_gold_fragment_selects_exactly_the_gold_exclusive_nodes() -> None:
    spec = pod_spec_fragment("gold")["spec"]
    chosen = {name for name, labels in HAND_MADE_NODES.items() if pod_fits_node(spec, labels, name)}
    assert chosen == {"n-gold-ex-1", "n-gold-ex-2"}


def test_extender_tier_filter_agrees_with_the_rendered_affinity() -> None:
    ext = Extender(make_policy("best-fit"))
    ext.set_nodes([make_node(n, labels=labels) for n, labels in HAND_MADE_NODES.items()])
    res = ext.filter({"Pod": make_pod("g", gpus=1, tier="gold"), "NodeNames": list(HAND_MADE_NODES)})
    assert set(res["NodeNames"]) == {"n-gold-ex-1", "n-gold-ex-2"}
    assert set(res["FailedAndUnresolvableNodes"]) == set(HAND_MADE_NODES) - {"n-gold-ex-1", "n-gold-ex-2"}
    assert res["FailedAndUnresolvableNodes"]["n-bare"] == (
        "Seedance: tier gold needs gpu.sla.level in [gold] and gpu.mode in [exclusive]")


_LABEL_VALUES = st.sampled_from(["gold", "silver", "bronze", "exclusive", "shared", "Gold"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["gpu.sla.level", "gpu.mode", "zone"]), _LABEL_VALUES),
                min_size=1, max_size=12),
       st.sampled_from(["gold", "silver", "bronze"]), st.booleans())
def test_affinity_and_extender_mask_agree_on_random_labels(
    label_sets: list[dict[str, str]], tier: str, borrow: bool
) -> None:
    nodes = {f"n{i}": labels for i, labels in enumerate(label_sets)}
    ext = Extender(make_policy("best-fit"))
    ext.set_nodes([make_node(n, labels=labels) for n, labels in nodes.items()])
    frag = pod_spec_fragment(tier, borrow=borrow)
    pod = merge_fragment(make_pod("p", gpus=1), frag)
    res = ext.filter({"Pod": pod, "NodeNames": list(nodes)})
    admitted = {n for n, labels in nodes.items() if pod_fits_node(pod["spec"], labels, n)}
    own_spec = merge_fragment(make_pod("p", gpus=1), pod_spec_fragment(tier, borrow=False))["spec"]
    own = {n for n, labels in nodes.items() if pod_fits_node(own_spec, labels, n)}
    # the profile borrows only when the own pool has no room: the own pool if it has a node, else the lenders
    assert set(res["NodeNames"]) == (own or admitted)
    assert set(res["NodeNames"]) <= admitted


@pytest.mark.parametrize("tier", ["gold", "silver", "bronze"])
@pytest.mark.parametrize("borrow", [False, True])
def test_every_fragment_validates_against_the_pod_schema(tier: str, borrow: bool) -> None:
    assert pod_fragment_errors(pod_spec_fragment(tier, borrow=borrow, scheduler_name="seedance-scheduler")) == []


def test_invalid_fragment_is_caught_by_the_schema() -> None:
    frag = pod_spec_fragment("gold")
    frag["spec"]["tolerations"] = {"key": "gpu.sla.level"}  # an object where a list belongs
    assert pod_fragment_errors(frag) == ["spec.tolerations: {'key': 'gpu.sla.level'} is not of type 'array', 'null'"]


def test_bronze_borrow_fragment() -> None:
    frag = pod_spec_fragment("bronze", borrow=True)
    na = frag["spec"]["affinity"]["nodeAffinity"]
    assert na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "gpu.sla.level", "operator": "In", "values": ["bronze"]}]},
        {"matchExpressions": [{"key": "gpu.sla.level", "operator": "In", "values": ["gold", "silver"]}]},
    ]
    assert na["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "gpu.sla.level", "operator": "In", "values": ["bronze"]}]}}]
    assert [t["value"] for t in frag["spec"]["tolerations"]] == ["bronze", "gold", "silver"]
    assert frag["metadata"]["annotations"] == {"seedance.ai/borrow": "true"}
    # gold has no borrow labels: borrow=True changes nothing
    assert pod_spec_fragment("gold", borrow=True) == pod_spec_fragment("gold")


def test_unknown_tier_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="unknown tier 'platinum'; valid names: gold, silver, bronze"):
        pod_spec_fragment("platinum")


def test_merge_ands_the_tier_with_the_pods_own_affinity() -> None:
    pod = make_pod("p")
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                              {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    merged = merge_fragment(pod, pod_spec_fragment("silver", scheduler_name="seedance-scheduler"))
    terms = merged["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    silver = {"key": "gpu.sla.level", "operator": "In", "values": ["silver"]}
    assert terms == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, silver]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}, silver]},
    ]
    assert merged["spec"]["schedulerName"] == "seedance-scheduler"
    assert merged["spec"]["tolerations"][0]["key"] == "node.kubernetes.io/not-ready"  # the pod's own kept
    assert merged["metadata"]["labels"] == {"app": "p", "seedance.ai/tier": "silver"}
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"] == [{"key": "zone", "operator": "In", "values": ["a"]}]
    assert merge_fragment(merged, pod_spec_fragment("silver"))["spec"]["tolerations"] == merged["spec"][
        "tolerations"]  # idempotent on tolerations
    assert object_errors(merged) == []
    assert pod_fits_node(merged["spec"], {"zone": "b", "gpu.sla.level": "silver"})
    assert not pod_fits_node(merged["spec"], {"zone": "c", "gpu.sla.level": "silver"})


@pytest.mark.parametrize(
    ("req", "labels", "expected"),
    [
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
        ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": "1"}, False),
        ({"key": "gpus", "operator": "Gt", "values": ["4"]}, {"gpus": "8"}, True),
        ({"key": "gpus", "operator": "Gt", "values": ["8"]}, {"gpus": "8"}, False),
        ({"key": "gpus", "operator": "Lt", "values": ["8"]}, {"gpus": "four"}, False),
        ({"key": "gpus", "operator": "Lt", "values": ["8"]}, {}, False),
    ],
)
def test_requirement_semantics(req: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert requirement_matches(req, labels) is expected


def test_selector_edge_cases() -> None:
    assert not selector_matches({"nodeSelectorTerms": [{}]}, {"a": "b"})  # an empty term matches nothing
    by_name = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                       "values": ["n1"]}]}]}
    assert selector_matches(by_name, {}, "n1")
    assert not selector_matches(by_name, {}, "n2")
    assert pod_fits_node({"nodeSelector": {"a": "b"}}, {"a": "b"})
    assert not pod_fits_node({"nodeSelector": {"a": "b"}}, {"a": "c"})
    with pytest.raises(InputError, match="invalid node selector requirement"):
        requirement_matches({"key": "a", "operator": "Inn", "values": ["b"]}, {})
    with pytest.raises(InputError, match="exactly one value"):
        requirement_matches({"key": "a", "operator": "Gt", "values": ["1", "2"]}, {"a": "3"})


def test_priority_classes_follow_the_tiers() -> None:
    pcs = priority_classes()
    assert [(p["metadata"]["name"], p["value"], p["preemptionPolicy"]) for p in pcs] == [
        ("seedance-gold", 1000, "PreemptLowerPriority"),
        ("seedance-silver", 500, "PreemptLowerPriority"),
        ("seedance-bronze", 100, "Never"),
    ]
    assert [p["value"] for p in pcs] == [DEFAULT_TIER_CONFIG.tiers[t].priority for t in ("gold", "silver", "bronze")]
    assert all(object_errors(p) == [] for p in pcs)
