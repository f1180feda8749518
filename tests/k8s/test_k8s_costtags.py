"""The operator's cost-tag handlers, called directly on real object documents (no API server here)."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from seedance.k8s import costtags
from seedance.k8s.controller import register
from seedance.telemetry.pods import pod_meta

log = logging.getLogger("test-costtags")


class FakeApi:
    def __init__(self) -> None:
        self.ns = {"nlp": {"env": "prod", "team": "platform"}, "bare": {}}
        self.pods = {"nlp": [_pod("a", {"team": "search"}), _pod("b", {}), _pod("c", {
            "cost.seedance.ai/team": "platform", "cost.seedance.ai/env": "prod"})]}
        self.patched: list[tuple[str, str, dict[str, str]]] = []

    def namespace_labels(self, ns: str) -> dict[str, str]:
        return dict(self.ns.get(ns, {}))

    def list_namespace_pods(self, ns: str) -> list[dict[str, Any]]:
        return self.pods.get(ns, [])

    def patch_pod_labels(self, ns: str, name: str, labels: dict[str, str]) -> None:
        self.patched.append((ns, name, labels))


def _pod(name: str, labels: dict[str, str], ns: str = "nlp") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}


def call(pod: dict[str, Any], api: FakeApi) -> tuple[dict[str, str], kopf.Patch]:
    patch = kopf.Patch()
    out = costtags.tag_pod(pod, pod["metadata"]["namespace"], kopf.Memo(api=api), patch, log)
    return out, patch


def test_team_from_the_pod_env_from_the_namespace() -> None:
    api = FakeApi()
    out, patch = call(_pod("a", {"team": "search", "env": "dev"}), api)
    assert out == {"cost.seedance.ai/team": "search", "cost.seedance.ai/env": "prod"}
    assert patch == {"metadata": {"labels": out}}


def test_fallbacks_unassigned_and_sanitised_values() -> None:
    api = FakeApi()
    out, _ = call(_pod("b", {}), api)
    assert out == {"cost.seedance.ai/team": "platform", "cost.seedance.ai/env": "prod"}  # namespace's team
    out, _ = call(_pod("x", {"team": "R&D / vision"}, ns="bare"), api)
    assert out == {"cost.seedance.ai/team": "R-D---vision", "cost.seedance.ai/env": "unassigned"}


def test_up_to_date_pods_get_no_patch_and_mutate_does_the_same() -> None:
    api = FakeApi()
    tagged = _pod("c", {"team": "platform", "cost.seedance.ai/team": "platform", "cost.seedance.ai/env": "prod"})
    out, patch = call(tagged, api)
    assert out == {} and patch == {}
    p2 = kopf.Patch()
    assert costtags.mutate_pod(_pod("a", {"team": "search"}), "nlp", kopf.Memo(api=api), p2, log) == {
        "cost.seedance.ai/team": "search", "cost.seedance.ai/env": "prod"}


def test_namespace_label_change_retags_its_pods() -> None:
    api = FakeApi()
    api.ns["nlp"]["env"] = "staging"
    n = costtags.retag_namespace("nlp", kopf.Memo(api=api), log)
    assert n == 3
    assert api.patched[0] == ("nlp", "a", {"cost.seedance.ai/team": "search", "cost.seedance.ai/env": "staging"})
    assert api.patched[2] == ("nlp", "c", {"cost.seedance.ai/env": "staging"})


def test_the_sampler_reads_the_operators_tags_back() -> None:
    api = FakeApi()
    pod = _pod("a", {"team": "search"})
    out, _ = call(pod, api)
    pod["metadata"]["labels"].update(out)
    api.ns["nlp"]["env"] = "changed-later"  # the pod's stored tag is what the ledger sees
    assert pod_meta(pod, api.namespace_labels("nlp")).tags() == {"team": "search", "env": "prod"}


def test_handlers_are_registered() -> None:
    reg = register(kopf.OperatorRegistry())
    ids = {h.id for h in reg._changing.get_all_handlers()}
    assert {"cost-tags", "reconcile"} <= {i.split("/")[0] for i in ids}
    webhooks = {h.id for h in reg._webhooks.get_all_handlers()}
    assert "cost-tags-admission" in webhooks
