"""The published OpenAPI document: FastAPI's, plus the validators' rules its generator leaves out.

schemathesis' ``positive_data_acceptance`` sends data valid under the published schema and counts any
answer outside its expected statuses (2xx, 3xx, 401, 403, 404, 409, 429, 5xx; *whether or not 422 is
documented*) as a mismatch, so every rule a validator enforces must be in the schema. Stated here:

* a ``patternProperties`` object (a ``dict`` with constrained keys) refuses any other key:
  ``additionalProperties: false`` (pydantic's generator omits it);
* text fields of the privacy API refuse control characters (``seedance.privacy.schemas._text``):
  ``pattern`` :data:`NO_CONTROL_PATTERN` on each of them (:data:`NO_CONTROL_FIELDS`; a test checks the
  list against the models).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI

NO_CONTROL_PATTERN = r"^[^\x00-\x1f\x7f]*$"
NO_CONTROL_FIELDS: dict[str, tuple[str, ...]] = {
    "Fingerprint": ("webgl_renderer", "webgl_vendor"),
    "TelemetryBatch": ("subject",),
    "SubjectIdentify": ("subject", "traits.*"),
    "ErasureCreate": ("subject",),
    "ChallengeCreate": ("subject",),
    "ConsentDecision": ("subject",),
}
"""Component → properties whose strings refuse control characters (``name.*``: the values of a map)."""


def install(app: FastAPI) -> None:
    """Serve the stated document from ``app.openapi()`` (and so from ``/openapi.json``)."""
    generate: Callable[[], dict[str, Any]] = app.openapi
    cache: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        base = generate()
        if cache.get("base") is not base:  # FastAPI regenerates when routes change
            cache["base"], cache["stated"] = base, stated(base)
        out: dict[str, Any] = cache["stated"]
        return out

    app.openapi = openapi  # type: ignore[method-assign]


def stated(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with the rules of the module docstring added."""
    doc = copy.deepcopy(document)
    for node in _objects(doc):
        if "patternProperties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
    components = doc.get("components", {}).get("schemas", {})
    for name, fields in NO_CONTROL_FIELDS.items():
        props = components.get(name, {}).get("properties", {})
        for field in fields:
            key, _, values = field.partition(".")
            if key not in props:
                continue
            target = props[key]
            if values:
                for sub in target.get("patternProperties", {}).values():
                    _no_control(sub)
            else:
                _no_control(target)
    return doc


def _no_control(schema: dict[str, Any]) -> None:
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string" and "pattern" not in branch:
            branch["pattern"] = NO_CONTROL_PATTERN


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _objects(v)
    elif isinstance(node, list):
        for v in node:
            yield from _objects(v)
