"""The published OpenAPI states the validators' rules that FastAPI's generator leaves out."""

from __future__ import annotations

import re
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import seedance.privacy.schemas as privacy_schemas
from seedance.control.api import openapi
from seedance.control.api.routes.finops import STEP
from seedance.control.app import create_app
from seedance.core.errors import InputError
from seedance.finops.window import parse_duration
from tests.control.helpers import settings_for


def _uses_text(annotation: object) -> bool:
    meta = getattr(annotation, "__metadata__", ())
    if any(getattr(m, "func", None) is privacy_schemas._text for m in meta):
        return True
    return any(_uses_text(a) for a in typing.get_args(annotation))


def test_every_privacy_text_field_is_listed() -> None:
    found: dict[str, set[str]] = {}
    for name, model in vars(privacy_schemas).items():
        if isinstance(model, type) and issubclass(model, BaseModel) and model.__module__ == privacy_schemas.__name__:
            for field, info in model.model_fields.items():
                ann = typing.get_args(info.annotation) if typing.get_origin(info.annotation) is dict else ()
                if ann and _uses_text(ann[1]):
                    found.setdefault(name, set()).add(f"{field}.*")
                elif _uses_text(info.annotation) or any(getattr(m, "func", None) is privacy_schemas._text
                                                        for m in info.metadata):
                    found.setdefault(name, set()).add(field)
    assert found == {k: set(v) for k, v in openapi.NO_CONTROL_FIELDS.items()}


def test_published_document_states_the_rules(tmp_path: typing.Any) -> None:
    doc = create_app(settings_for(f"sqlite:///{tmp_path / 's.db'}")).openapi()
    comp = doc["components"]["schemas"]
    assert comp["ConsentDecision"]["properties"]["purposes"]["additionalProperties"] is False
    labels = comp["JobCreate"]["properties"]["labels"]
    assert labels["additionalProperties"] is False
    subject = comp["SubjectIdentify"]["properties"]["subject"]
    assert subject["pattern"] == openapi.NO_CONTROL_PATTERN
    assert [b.get("pattern") for b in comp["ConsentDecision"]["properties"]["subject"]["anyOf"]] == [
        openapi.NO_CONTROL_PATTERN, None]
    trait = next(iter(comp["SubjectIdentify"]["properties"]["traits"]["patternProperties"].values()))
    assert trait["pattern"] == openapi.NO_CONTROL_PATTERN
    step = next(p for p in doc["paths"]["/api/v1/allocation/explain"]["get"]["parameters"] if p["name"] == "step")
    assert step["schema"]["pattern"] == STEP
    assert re.fullmatch(openapi.NO_CONTROL_PATTERN[1:-1], "caf\u00e9 \U0001f600") and not re.match(
        openapi.NO_CONTROL_PATTERN, "a\tb")


@pytest.mark.parametrize(("text", "ok"), [("1h", True), ("0.5d", True), ("90m", True), ("2w", True), ("1.0s", True),
                                          ("0h", False), ("0.0m", False), ("00000000000000000000", False),
                                          ("h", False), ("1", False), ("-1h", False), ("1y", False)])
def test_step_pattern_is_the_parser(text: str, ok: bool) -> None:
    assert bool(re.match(STEP, text)) is ok
    if ok:
        assert parse_duration(text) > 0
    else:
        with pytest.raises(InputError):
            parse_duration(text)


@settings(max_examples=40, deadline=None)
@given(st.from_regex(STEP, fullmatch=True).filter(lambda s: s.isascii()))
def test_every_string_of_the_step_pattern_parses(text: str) -> None:
    assert parse_duration(text) > 0


@pytest.mark.parametrize(("deadline", "ok"), [
    ("0231-09-12T01:37:13+07:02", False),  # schema-valid before the pattern, refused by the validator: fuzzer's find
    ("1999-12-31T23:59:59Z", False), ("2200-01-01T00:00:00Z", False),
    ("2000-01-01T00:00:00+14:00", True), ("2199-12-31T23:59:59-12:00", True), ("2026-12-02T10:00:00Z", True),
])
def test_deadline_pattern_is_the_validator(tmp_path: typing.Any, deadline: str, ok: bool) -> None:
    from pydantic import ValidationError

    from seedance.control.schemas import JobCreate

    doc = create_app(settings_for(f"sqlite:///{tmp_path / 's.db'}")).openapi()
    branch = doc["components"]["schemas"]["JobCreate"]["properties"]["deadline"]["anyOf"][0]
    assert branch == {"type": "string", "format": "date-time", "pattern": "^2[01][0-9]{2}-"}
    assert bool(re.match(branch["pattern"], deadline)) is ok
    if ok:
        assert JobCreate(deadline=deadline).deadline is not None
    else:
        with pytest.raises(ValidationError, match="deadline must be between 2000 and 2199"):
            JobCreate(deadline=deadline)
