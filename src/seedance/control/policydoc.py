"""Scheduling-policy YAML documents: parse safely and validate behind a small interface.

The control plane stores a policy's YAML verbatim next to its validated form. Validation goes
through :class:`PolicyValidator`. The default, :class:`CostPolicyValidator`, validates a
``kind: CostPolicy`` document (the file ``seedancectl scheduler policy enable --config-file`` takes,
e.g. ``policies/peak_aware.yaml``) with the cost model's own loader
(``seedance.costmodel.policy.parse_policy``: unknown keys refused, errors with line and field),
a ``kind: SchedulingProfile`` document with ``seedance.profile.profile_from_text`` (the profile the
live loop builds with ``build_profile``; policy options checked against the policy's option model),
and any other document with :class:`MinimalPolicyValidator`, which checks only what the control
plane itself uses (placement policy and queue order registry names) and keeps the rest as
plug-in options::

    apiVersion: seedance/v1          # optional
    kind: SchedulingPolicy           # optional
    metadata: {name: peak-aware}     # optional
    spec:                            # or the same keys at the top level
      placement: best-fit
      queueOrder: priority           # or queue_order
      plugin: electricity-pricing
      region: DE
      ...                            # plug-in options, kept as given

YAML anchors and aliases are refused (they let a small file expand into a huge document), and so are
documents nested too deep or holding huge integers (``seedance.control.yamlguard``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from seedance.control.yamlguard import check_yaml_shape
from seedance.core.errors import InputError, UnknownNameError
from seedance.core.yamldoc import compose, reject_aliases

MAX_YAML_BYTES = 32 * 1024


def parse_yaml(text: str, *, source: str) -> Any:
    """Parse one YAML document safely (size, anchors and aliases refused); errors name the line."""
    if len(text.encode("utf-8")) > MAX_YAML_BYTES:
        raise InputError(f"YAML larger than {MAX_YAML_BYTES} bytes", source=source)
    check_yaml_shape(text, source=source)
    reject_aliases(text, source=source)
    return compose(text, source=source, what="policy document", allow_empty=True)[1]


class PolicyValidator(ABC):
    """Turns a policy YAML text into its validated form (a JSON-able mapping)."""

    @abstractmethod
    def validate(self, text: str, *, source: str) -> dict[str, Any]:
        """Called once per stored policy; raises ``InputError`` naming the bad field."""


class MinimalPolicyValidator(PolicyValidator):
    """Fallback validator: a mapping whose placement and queue order are registered names."""

    def validate(self, text: str, *, source: str) -> dict[str, Any]:
        if not text.strip():
            return {}
        doc = parse_yaml(text, source=source)
        if not isinstance(doc, dict):
            raise InputError("a policy document must be a YAML mapping", source=source)
        kind = doc.get("kind")
        if kind is not None and kind != "SchedulingPolicy":
            raise InputError(f"kind must be SchedulingPolicy or CostPolicy, got {kind!r}", source=source,
                             field="kind")
        spec = doc.get("spec", {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")})
        if not isinstance(spec, dict):
            raise InputError("spec must be a mapping", source=source, field="spec")
        out: dict[str, Any] = {}
        for key, value in spec.items():
            out["queue_order" if key == "queueOrder" else str(key)] = value
        _check_name(out, "placement", source)
        _check_name(out, "queue_order", source)
        try:
            import json

            json.dumps(out, allow_nan=False)
        except (TypeError, ValueError):
            raise InputError("policy values must be plain strings, numbers, lists and mappings",
                             source=source) from None
        return out


def _check_name(spec: dict[str, Any], key: str, source: str) -> None:
    if key not in spec:
        return
    value = spec[key]
    if not isinstance(value, str):
        raise InputError("must be a string", source=source, field=f"spec.{key}")
    registry = _registry(key)
    try:
        spec[key] = _canonical(registry, value)
    except UnknownNameError as exc:
        raise InputError(str(exc), source=source, field=f"spec.{key}") from None


def _registry(key: str) -> Any:
    from seedance.scheduling import PLACEMENT_POLICIES, QUEUE_ORDERS

    return PLACEMENT_POLICIES if key == "placement" else QUEUE_ORDERS


def _canonical(registry: Any, value: str) -> str:
    target = registry.get(value)
    return str(next(n for n in registry.names() if registry.get(n) is target))


def canonical_placement(name: str) -> str:
    """Canonical registry name of a placement policy (unknown names list the valid ones)."""
    return _canonical(_registry("placement"), name)


def canonical_queue_order(name: str) -> str:
    """Canonical registry name of a queue order."""
    return _canonical(_registry("queue_order"), name)


class CostPolicyValidator(PolicyValidator):
    """``kind: CostPolicy`` through the cost model's loader; other documents through the minimal one."""

    def __init__(self) -> None:
        self.fallback = MinimalPolicyValidator()

    def validate(self, text: str, *, source: str) -> dict[str, Any]:
        if not text.strip():
            return {}
        doc = parse_yaml(text, source=source)  # size and alias checks first
        if isinstance(doc, dict) and doc.get("kind") == "SchedulingProfile":
            from seedance.profile import profile_from_text

            profile = profile_from_text(text, source=source)
            return {"placement": profile.placement.policy, "queue_order": profile.queue,
                    "profile": profile.model_dump(mode="json")}
        if isinstance(doc, dict) and doc.get("kind") == "CostPolicy":
            from seedance.costmodel.policy import parse_policy

            policy = parse_policy(text, source=source)
            out: dict[str, Any] = policy.model_dump(mode="json")
            out["plugin"] = policy.spec.plugin
            return out
        return self.fallback.validate(text, source=source)


def default_policy_validator() -> PolicyValidator:
    """The validator the service uses: cost policies by the cost model's schema, others minimally."""
    return CostPolicyValidator()
