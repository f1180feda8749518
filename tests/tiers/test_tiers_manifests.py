"""Tier Pod fragments (``seedance.k8s.render``) against the simulator's tier pools.

The renderer belongs to the Kubernetes package; these tests pin the tier side: every tier's
fragment is a valid Pod offline (Kubernetes OpenAPI schema, strict), and on a cluster labelled by
``label_pools`` the rendered nodeAffinity selects exactly the nodes the simulator's ``TierFilter``
admits, Gold exactly the gold + exclusive nodes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.cluster import ClusterState
from seedance.core.resources import ResourceRequest
from seedance.k8s.affinity import pod_fits_node
from seedance.k8s.render import pod_spec_fragment
from seedance.k8s.validation import pod_fragment_errors
from seedance.sim.replay import scale_cluster
from seedance.tiers import DEFAULT_TIER_CONFIG
from seedance.tiers.filters import TierFilter
from seedance.tiers.pools import label_pools, tier_demand
from seedance.traces import load_nodes, load_pods

ANY = ResourceRequest(cpu_milli=0, memory_mib=0)


@pytest.fixture(scope="module")
def labelled(alibaba: Path) -> ClusterState:
    spec = scale_cluster(load_nodes(alibaba / "openb_node_list_gpu_node.csv"), 0.05, seed=3)
    cluster, _ = label_pools(spec, tier_demand(load_pods(alibaba / "openb_pod_list_default.csv")))
    return ClusterState(cluster)


@pytest.mark.parametrize("tier", ["gold", "silver", "bronze"])
@pytest.mark.parametrize("borrow", [False, True])
def test_fragments_are_valid_pods_offline(tier: str, borrow: bool) -> None:
    assert pod_fragment_errors(pod_spec_fragment(tier, borrow=borrow)) == []


def test_gold_rendering_selects_exactly_the_gold_exclusive_nodes(labelled: ClusterState) -> None:
    spec = pod_spec_fragment("gold")["spec"]
    chosen = {n.name for n in labelled.spec.nodes if pod_fits_node(spec, n.labels, n.name)}
    expected = {
        n.name for n in labelled.spec.nodes
        if n.labels.get("gpu.sla.level") == "gold" and n.labels.get("gpu.mode") == "exclusive"
    }
    assert chosen == expected and 0 < len(chosen) < labelled.n_nodes


@pytest.mark.parametrize("tier", ["gold", "silver", "bronze"])
def test_rendered_affinity_and_simulator_filter_agree(labelled: ClusterState, tier: str) -> None:
    ts = DEFAULT_TIER_CONFIG.tiers[tier]
    own = pod_spec_fragment(tier)["spec"]
    assert [pod_fits_node(own, n.labels, n.name) for n in labelled.spec.nodes] == (
        TierFilter.own(tier, ts).mask(labelled, ANY).tolist()
    )
    if ts.borrow_labels:
        both = pod_spec_fragment(tier, borrow=True)["spec"]
        sim = TierFilter.own(tier, ts).mask(labelled, ANY) | TierFilter.borrowed(tier, ts).mask(labelled, ANY)
        assert [pod_fits_node(both, n.labels, n.name) for n in labelled.spec.nodes] == sim.tolist()


def test_each_node_serves_exactly_one_tier(labelled: ClusterState) -> None:
    masks = np.array([
        TierFilter.own(t, s).mask(labelled, ANY) for t, s in DEFAULT_TIER_CONFIG.tiers.items()
    ])
    assert (masks.sum(axis=0) == 1).all()
