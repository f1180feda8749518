"""The consent flow document (``config/privacy/consent_flow_v2.json``) and its schema.

The document drives the dashboard's two-step dialog (``dashboard/consent.js``): step one states
the purposes and offers accepting or refusing with equal weight (one click each, CPRA regulations
§7004 "symmetry in choice"); step two confirms the choice. Third-party scripts are listed here and
nowhere else, each bound to a third-party purpose: the page loads a script only after a recorded
"granted" decision covering its purpose, so refusing (or not deciding) loads none.

The JSON Schema (``consent_flow_v2.schema.json`` beside the document) is generated from
``ConsentFlow``; a test keeps the two equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from seedance.core.errors import InputError

PurposeId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
Line = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Para = Annotated[str, StringConstraints(min_length=1, max_length=2000)]
SCHEMA_NAME = "consent_flow_v2.schema.json"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Purpose(_Doc):
    """Something data is used for."""

    id: PurposeId
    party: Literal["first", "third"] = Field(description="first: Seedance itself; third: another company.")
    sale_or_share: bool = Field(description="A 'sale' or 'sharing' under CCPA §1798.140 (refusable by 'do not sell').")
    label: Line
    description: Para


class ThirdPartyScript(_Doc):
    """A third-party script the page may load, and the purpose it serves."""

    id: PurposeId
    purpose: PurposeId
    src: Annotated[str, StringConstraints(pattern=r"^https://[^\s\"'<>]+$", max_length=500)]


class Action(_Doc):
    """A button of a step."""

    label: Line
    does: Literal["grant", "refuse", "confirm", "back"]


class Step(_Doc):
    """One layer of the dialog."""

    id: PurposeId
    title: Line
    body: Para
    actions: list[Action] = Field(min_length=2, max_length=4)


class ConsentFlow(_Doc):
    """The whole flow."""

    schema_ref: str = Field(default=SCHEMA_NAME, alias="$schema")
    version: Annotated[str, StringConstraints(pattern=r"^2\.[0-9]+\.[0-9]+$")]
    regulations: list[Literal["CCPA", "CPRA", "GDPR", "ePrivacy"]] = Field(min_length=1)
    default_choice: Literal["refused"] = Field(description="Until a decision is made nothing optional runs.")
    remember_days: int = Field(ge=1, le=400, description="A decision is asked again after this many days.")
    purposes: list[Purpose] = Field(min_length=1, max_length=20)
    third_party_scripts: list[ThirdPartyScript] = Field(default_factory=list, max_length=20)
    steps: list[Step] = Field(min_length=2, max_length=2, description="Exactly two layers: choose, confirm.")

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _coherent(self) -> ConsentFlow:
        ids = [p.id for p in self.purposes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"purpose ids must be unique: {ids}")
        third = {p.id for p in self.purposes if p.party == "third"}
        for s in self.third_party_scripts:
            if s.purpose not in third:
                raise ValueError(f"script {s.id!r} serves {s.purpose!r}, which is not a declared third-party purpose")
        choose, confirm = self.steps
        does = {a.does for a in choose.actions}
        if not {"grant", "refuse"} <= does or does & {"confirm", "back"}:
            raise ValueError("the first step must offer exactly 'grant' and 'refuse' (equal choice), nothing else")
        if {a.does for a in confirm.actions} != {"confirm", "back"}:
            raise ValueError("the second step must offer 'confirm' and 'back'")
        return self


def parse_consent_flow(text: str, *, source: str) -> ConsentFlow:
    """Validate a consent flow document; ``InputError`` names the first wrong field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=source, line=exc.lineno) from None
    try:
        return ConsentFlow.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InputError(f"{err['msg']}{more}", source=source, field=where) from None


def load_consent_flow(path: Path) -> ConsentFlow:
    """Read and validate the document at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the consent flow: {exc.strerror}", source=str(path)) from None
    return parse_consent_flow(text, source=str(path))


def consent_flow_schema() -> dict[str, object]:
    """The JSON Schema of the document."""
    schema = ConsentFlow.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_NAME
    return schema
