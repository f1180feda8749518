"""Seedance's CustomResourceDefinitions (``seedance.ai/v1alpha1``) as data.

* ``TrainingJob`` (namespaced): ``replicas`` pods from a pod template, in an SLA tier, with GPU
  needs (whole GPUs or one share), an estimated duration, an optional ``CostPolicy`` and deadline.
  The operator reconciles it into Pods and reports ``status``.
* ``InferenceService`` (namespaced): a served model with a replica range, GPU needs and an SLO.
  Only the CRD ships in this release; no controller reconciles it yet.
* ``CostPolicy`` (cluster-scoped): the weights of ``cost_score`` (price, carbon, delay), deferral
  limits and budgets.

Schemas are *structural* (every field typed; ``anyOf`` only repeats fields with value
validations), so the API server can prune and default them. Cross-field rules are ``anyOf``
where OpenAPI can say them (checked offline by jsonschema in the tests) and CEL
(``x-kubernetes-validations``) otherwise; CEL rules are evaluated only by a real API server and
were not tested here.
"""

from __future__ import annotations

import copy
from typing import Any

from seedance.k8s import keys
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

Obj = dict[str, Any]

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _tier(tier_config: TierConfig, default: str) -> Obj:
    return {"type": "string", "enum": tier_config.names(), "default": default,
            "description": "SLA tier: sets the pods' node affinity, tolerations and priority class."}


def _gpu() -> Obj:
    return {
        "type": "object",
        "description": "GPUs per replica: count whole GPUs, or one GPU share of milli/1000.",
        "properties": {
            "count": {"type": "integer", "minimum": 0, "maximum": 64, "default": 1,
                      "description": "GPUs per replica (0: CPU only)."},
            "milli": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000,
                      "description": "Share of each GPU in milli-GPU; below 1000 only with count 1."},
            "types": {"type": "array", "maxItems": 16, "items": {"type": "string", "minLength": 1},
                      "description": "Acceptable GPU models (catalog names or aliases); empty: any."},
        },
        # a share (milli < 1000) is of exactly one GPU
        "anyOf": [{"properties": {"milli": {"minimum": 1000}}}, {"properties": {"count": {"maximum": 1}}}],
    }


def _string_map() -> Obj:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _template() -> Obj:
    return {
        "type": "object",
        "description": "Pod template (a core/v1 PodTemplateSpec); the tier fragment is merged into it.",
        "required": ["spec"],
        "properties": {
            "metadata": {"type": "object",
                         "properties": {"labels": _string_map(), "annotations": _string_map()}},
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "required": ["containers"],
                "properties": {
                    "containers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                  "required": ["name"], "properties": {"name": {"type": "string"}}},
                    },
                },
            },
        },
    }


def _conditions() -> Obj:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
            },
        },
    }


def _crd(kind: str, plural: str, scope: str, short: list[str], spec: Obj, status: Obj,
         columns: list[Obj], description: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{keys.GROUP}",
                     "labels": {"app.kubernetes.io/name": "seedance", "app.kubernetes.io/part-of": "seedance"}},
        "spec": {
            "group": keys.GROUP,
            "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": short, "categories": ["seedance"]},
            "versions": [{
                "name": keys.VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": description,
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status,
                    },
                }},
            }],
        },
    }


def _age() -> Obj:
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def trainingjob_crd(tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> Obj:
    """The TrainingJob CRD."""
    spec = {
        "type": "object",
        "required": ["template"],
        "properties": {
            "tier": _tier(tier_config, tier_config.default_tier),
            "replicas": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1,
                         "description": "Number of pods."},
            "gpu": _gpu(),
            "durationHours": {"type": "number", "minimum": 0.01, "maximum": 8760, "default": 1,
                              "description": "Estimated run time (hours), used by cost_score."},
            "costPolicy": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN,
                           "description": "Name of the cluster-scoped CostPolicy that weighs cost_score."},
            "deadline": {"type": "string", "format": "date-time",
                         "description": "Latest acceptable completion time (RFC 3339)."},
            "borrow": {"type": "boolean", "default": False,
                       "description": "Also run on the tier's borrow-label nodes, as a preemptible guest."},
            "template": _template(),
        },
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {"type": "string", "enum": ["Pending", "Running", "Succeeded", "Failed"]},
            "replicas": {"type": "integer", "minimum": 0},
            "running": {"type": "integer", "minimum": 0},
            "succeeded": {"type": "integer", "minimum": 0},
            "failed": {"type": "integer", "minimum": 0},
            "pods": {"type": "array", "items": {"type": "string"}},
            "costScore": {"type": "number"},
            "costTags": {"type": "object", "properties": {"team": {"type": "string"}, "env": {"type": "string"}}},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": _conditions(),
        },
    }
    columns = [
        {"name": "Tier", "type": "string", "jsonPath": ".spec.tier"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Cost", "type": "number", "jsonPath": ".status.costScore"},
        _age(),
    ]
    return _crd("TrainingJob", "trainingjobs", "Namespaced", ["tj"], spec, status, columns,
                "A training job: replicas pods of a template in an SLA tier, reconciled by the Seedance operator.")


def inferenceservice_crd(tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> Obj:
    """The InferenceService CRD (no controller yet)."""
    default_tier = "silver" if "silver" in tier_config.tiers else tier_config.default_tier
    spec = {
        "type": "object",
        "required": ["model", "template"],
        "properties": {
            "tier": _tier(tier_config, default_tier),
            "model": {"type": "string", "minLength": 1, "maxLength": 256,
                      "description": "Model served, e.g. meta-llama/Meta-Llama-3-8B."},
            "replicas": {
                "type": "object",
                "properties": {
                    "min": {"type": "integer", "minimum": 0, "maximum": 1024, "default": 1},
                    "max": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1},
                },
                "x-kubernetes-validations": [{"rule": "!has(self.min) || !has(self.max) || self.min <= self.max",
                                              "message": "replicas.min must not exceed replicas.max"}],
            },
            "gpu": _gpu(),
            "slo": {
                "type": "object",
                "properties": {
                    "p99LatencyMs": {"type": "number", "minimum": 1,
                                     "description": "p99 end-to-end latency target (ms)."},
                    "minTokensPerSecond": {"type": "number", "minimum": 0,
                                           "description": "Throughput floor per replica."},
                },
            },
            "template": _template(),
        },
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {"type": "string", "enum": ["Pending", "Ready", "Degraded", "Failed"]},
            "replicas": {"type": "integer", "minimum": 0},
            "readyReplicas": {"type": "integer", "minimum": 0},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": _conditions(),
        },
    }
    columns = [
        {"name": "Model", "type": "string", "jsonPath": ".spec.model"},
        {"name": "Tier", "type": "string", "jsonPath": ".spec.tier"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        _age(),
    ]
    return _crd("InferenceService", "inferenceservices", "Namespaced", ["sisvc"], spec, status, columns,
                "A served model with a replica range, GPU needs and an SLO.")


def costpolicy_crd(tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> Obj:
    """The CostPolicy CRD (cluster-scoped)."""
    weight = {"type": "number", "minimum": 0, "maximum": 1000}
    spec = {
        "type": "object",
        "properties": {
            "weights": {
                "type": "object",
                "description": "cost_score = price*w_price + carbon*w_carbon + delay*w_delay.",
                "properties": {
                    "price": {**weight, "default": 1, "description": "Weight of energy and GPU price (USD)."},
                    "carbon": {**weight, "default": 0, "description": "Weight of emissions (kg CO2e)."},
                    "delay": {**weight, "default": 0, "description": "Weight of delay (hours)."},
                },
            },
            "region": {"type": "string", "maxLength": 64, "description": "Price and carbon region."},
            "maxDeferralHours": {"type": "number", "minimum": 0, "maximum": 168, "default": 0},
            "deferrableTiers": {"type": "array", "items": {"type": "string", "enum": tier_config.names()},
                                "description": "Tiers whose jobs this policy may defer."},
            "budgets": {
                "type": "object",
                "properties": {
                    "usdPerMonth": {"type": "number", "minimum": 0},
                    "kgCO2PerMonth": {"type": "number", "minimum": 0},
                },
            },
            "enabled": {"type": "boolean", "default": True},
        },
    }
    status = {
        "type": "object",
        "properties": {"active": {"type": "boolean"}, "message": {"type": "string"},
                       "observedGeneration": {"type": "integer", "format": "int64"}},
    }
    columns = [
        {"name": "Region", "type": "string", "jsonPath": ".spec.region"},
        {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
        _age(),
    ]
    return _crd("CostPolicy", "costpolicies", "Cluster", ["cpol"], spec, status, columns,
                "Weights and limits of the cost score that orders and defers jobs.")


def all_crds(tier_config: TierConfig = DEFAULT_TIER_CONFIG) -> list[Obj]:
    """The three CRDs, in a stable order."""
    return [trainingjob_crd(tier_config), inferenceservice_crd(tier_config), costpolicy_crd(tier_config)]


def crd_schema(crd: Obj, version: str = keys.VERSION) -> Obj:
    """The ``openAPIV3Schema`` of one version of a CRD (a copy)."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return copy.deepcopy(v["schema"]["openAPIV3Schema"])
    raise KeyError(version)
