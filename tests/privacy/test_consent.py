"""The consent flow document: the shipped file validates against its schema; malformed flows are refused
with the field; decisions are recorded only for the current flow and its purposes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from seedance.core.errors import InputError
from seedance.privacy.consent import consent_flow_schema, load_consent_flow, parse_consent_flow
from seedance.privacy.models import ConsentRecord
from seedance.privacy.settings import REPO_CONSENT_FLOW
from tests.privacy.conftest import Env, client_for
from tests.privacy.helpers import table_count

DOC = json.loads(REPO_CONSENT_FLOW.read_text())


def test_shipped_flow_is_valid_and_its_schema_file_is_current() -> None:
    flow = load_consent_flow(REPO_CONSENT_FLOW)
    assert flow.version == "2.0.0" and flow.default_choice == "refused"
    assert [s.id for s in flow.steps] == ["choose", "confirm"]
    assert {p.id: p.sale_or_share for p in flow.purposes} == {"usage_telemetry": False, "third_party_analytics": True}
    schema_file = REPO_CONSENT_FLOW.with_name("consent_flow_v2.schema.json")
    assert json.loads(schema_file.read_text()) == consent_flow_schema()  # regenerate it when the model changes
    jsonschema.validate(DOC, consent_flow_schema())


def _broken(edit: Any) -> str:
    doc = copy.deepcopy(DOC)
    edit(doc)
    return json.dumps(doc)


BROKEN: list[tuple[str, Any, str]] = [
    ("no refuse on step one", lambda d: d["steps"][0]["actions"][1].update(does="grant"),
     "exactly 'grant' and 'refuse'"),
    ("a script for an undeclared purpose", lambda d: d["third_party_scripts"][0].update(purpose="ads"),
     "not a declared third-party purpose"),
    ("a script over plain http", lambda d: d["third_party_scripts"][0].update(src="http://x.example/a.js"),
     "third_party_scripts.0.src"),
    ("three steps", lambda d: d["steps"].append(d["steps"][1]), "steps"),
    ("granted by default", lambda d: d.update(default_choice="granted"), "default_choice"),
    ("version 1", lambda d: d.update(version="1.0.0"), "version"),
    ("unknown field", lambda d: d.update(tracking=True), "tracking"),
]


@pytest.mark.parametrize(("name", "edit", "says"), BROKEN, ids=[b[0] for b in BROKEN])
def test_malformed_flows_name_the_problem(name: str, edit: Any, says: str) -> None:
    with pytest.raises(InputError) as err:
        parse_consent_flow(_broken(edit), source="flow.json")
    assert says in str(err.value) and str(err.value).startswith("flow.json: ")


def test_not_json_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "flow.json"
    bad.write_text('{\n "version": 2,\n}')
    with pytest.raises(InputError, match=r"flow.json:3: not JSON"):
        load_consent_flow(bad)


def test_flow_is_served_without_a_token(env: Env) -> None:
    with client_for(env, token=None) as c:
        r = c.get("/api/v1/privacy/consent-flow")
    assert r.status_code == 200 and r.json() == DOC


DECISIONS: list[tuple[dict[str, Any], int, str]] = [
    ({"flow_version": "1.9.0", "choice": "granted", "purposes": {}}, 409, "not the current one"),
    ({"flow_version": "2.0.0", "choice": "granted", "purposes": {"ads": True}}, 422, "unknown purposes"),
    ({"flow_version": "2.0.0", "choice": "refused", "purposes": {"third_party_analytics": True}}, 422,
     "cannot grant a purpose that is a sale"),
    ({"flow_version": "2.0.0", "choice": "maybe", "purposes": {}}, 422, "choice"),
    ({"flow_version": "2.0.0", "choice": "granted", "purposes": {}, "subject": "nobody@example.org"}, 404,
     "unknown subject"),
]


@pytest.mark.parametrize(("body", "status", "says"), DECISIONS)
def test_bad_decisions_are_refused_and_nothing_stored(env: Env, body: dict[str, Any], status: int, says: str) -> None:
    with client_for(env) as c:
        r = c.post("/api/v1/privacy/consents", json=body)
    assert r.status_code == status and says in r.text
    assert table_count(env, ConsentRecord) == 0


def test_a_decision_is_recorded_with_every_purpose(env: Env) -> None:
    with client_for(env) as c:
        r = c.post("/api/v1/privacy/consents", json={"flow_version": "2.0.0", "choice": "granted",
                                                     "purposes": {"usage_telemetry": True}})
    assert r.status_code == 201
    from sqlalchemy import select

    with env.control.db.read() as s:
        rec = s.scalars(select(ConsentRecord)).one()
    assert (rec.choice, rec.purposes) == ("granted", {"usage_telemetry": True, "third_party_analytics": False})
