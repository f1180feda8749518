"""Every compliance rule: a passing and a failing fixture with exact locations, and its system-facts checks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from seedance.compliance.document import load_document, parse_document
from seedance.compliance.engine import check_document, resolve_rules
from seedance.compliance.facts import BackupRecord, KeyRotation, NodeDestruction, NodeRemoval, SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, Finding, Level

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)

# rule -> (level, line, column, path, words in the message) of every finding on its failing fixture
EXPECTED: dict[str, list[tuple[Level, int, int, str, str]]] = {
    "SDC001": [(Level.ERROR, 8, 5, "spec.autoscale.min_instances", "60 exceeds max_instances 51"),
               (Level.ERROR, 9, 5, "spec.autoscale.max_instances", "is 51 > 50")],
    "SDC002": [(Level.ERROR, 10, 5, "spec.storage.encryption_at_rest", "encryption_at_rest is false")],
    "SDC003": [(Level.ERROR, 6, 5, "spec.audit.scheduling_log_retention_hours", "48 h < the required 72 h")],
    "SDC004": [(Level.ERROR, 8, 5, "spec.keys.rotation_days", "rotation_days 400 > 365")],
    "SDC005": [(Level.ERROR, 5, 3, "spec.autoscale", "destroys nodes without a wipe section"),
               (Level.ERROR, 11, 7, "spec.actions.0.wipe", "wipe.method is missing"),
               (Level.ERROR, 11, 7, "spec.actions.0.wipe", "wipe.proof must be sha256")],
    "SDC006": [(Level.ERROR, 8, 7, "spec.storage.backup.encrypted", "backup.encrypted is false")],
}


def facts(**kw: object) -> SystemFacts:
    """Healthy facts (append-only logs, never pruned, a day of history, a fresh encrypted backup) with overrides."""
    base: dict[str, object] = {
        "collected_at": NOW, "store": "sqlite", "append_only_logs": True, "log_retention_hours": None,
        "oldest_event_at": NOW - dt.timedelta(hours=30), "store_started_at": NOW - dt.timedelta(hours=30),
        "backups": [BackupRecord(event_id=1, at=NOW - dt.timedelta(hours=2), encrypted=True, cipher="aes-256-gcm")],
        "key_rotations": [KeyRotation(event_id=2, at=NOW - dt.timedelta(days=10), key_id="kms/1")],
    }
    base.update(kw)
    return SystemFacts.model_validate(base)


def mine(findings: list[Finding], rule: str) -> list[tuple[Level, int, int, str, str]]:
    return [(f.level, f.line, f.column, f.path, f.message) for f in findings if f.rule_id == rule]


def run(doc_path: Path, rule: str, fx: SystemFacts | None = None) -> list[Finding]:
    return [r.finding for r in check_document(load_document(doc_path), fx, rules=[rule]).findings]


def test_every_registered_rule_has_both_fixtures_clauses_and_evidence() -> None:
    rules = resolve_rules(None, source="")
    assert [r.id for r in rules] == sorted(EXPECTED)
    for r in rules:
        assert (FIXTURES / f"{r.id}-pass.yaml").is_file() and (FIXTURES / f"{r.id}-fail.yaml").is_file()
        assert r.clauses and r.evidence and r.summary and r.help
        assert COMPLIANCE_RULES.get(r.name) is r  # the name is an alias of the id
    tags = {c.tag for r in rules for c in r.clauses}  # the whitepaper's clause table is covered
    assert {"GDPR Art. 32(1)(c)", "GDPR Art. 17(1)(a)", "GB/T 22239-2019 8.2.3.d", "GB/T 22239-2019 8.1.3.b"} <= tags


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_passing_fixture_has_no_finding(rule: str) -> None:
    assert run(FIXTURES / f"{rule}-pass.yaml", rule) == []
    assert run(FIXTURES / f"{rule}-pass.yaml", rule, facts()) == []


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_failing_fixture_findings_are_exact(rule: str) -> None:
    got = mine(run(FIXTURES / f"{rule}-fail.yaml", rule), rule)
    want = EXPECTED[rule]
    assert [g[:4] for g in got] == [w[:4] for w in want]
    for g, w in zip(got, want, strict=True):
        assert w[4] in g[4]


def test_whitepaper_validate_cost_policy_samples() -> None:
    """§4.3's two checks: max_instances > 50 (GDPR_Art32) and storage without encryption_at_rest (8.2.3.d)."""
    doc = parse_document("autoscale:\n  max_instances: 51\nstorage: {}\n", source="wp.yaml")
    rep = check_document(doc, rules=["SDC001", "SDC002"])
    got = {(f.finding.rule_id, f.finding.line) for f in rep.findings}
    assert got == {("SDC001", 2), ("SDC002", 3)}
    assert rep.failed
    ok = check_document(parse_document("autoscale:\n  max_instances: 50\nstorage:\n  encryption_at_rest: true\n",
                                       source="wp.yaml"), rules=["SDC001", "SDC002"])
    assert ok.findings == () and not ok.failed
    unbounded = check_document(parse_document("autoscale:\n  min_instances: 1\n", source="u.yaml"), rules=["SDC001"])
    assert "unbounded" in unbounded.findings[0].finding.message


def test_policy_touching_no_storage_or_nodes_is_not_concerned() -> None:
    doc = parse_document("spec:\n  actions:\n    - type: cpu-throttling\n      max_cut: 0.2\n", source="t.yaml")
    assert check_document(doc, facts()).findings == ()


def test_log_retention_system_facts() -> None:
    pol = FIXTURES / "SDC003-pass.yaml"
    assert run(pol, "SDC003", facts()) == []
    got = run(pol, "SDC003", facts(append_only_logs=False, log_retention_hours=24.0,
                                   store_started_at=NOW - dt.timedelta(hours=100),
                                   oldest_event_at=NOW - dt.timedelta(hours=10)))
    by = {f.system: f.message for f in got}
    assert sorted(by) == ["settings/log_retention_hours", "store/events", "store/triggers"]
    assert "prunes logs after 24 h < 72 h" in by["settings/log_retention_hours"]
    assert "last 72 h are missing" in by["store/events"] and "not append-only" in by["store/triggers"]
    young = facts(store_started_at=NOW - dt.timedelta(hours=5), oldest_event_at=NOW - dt.timedelta(hours=5))
    assert run(pol, "SDC003", young) == []  # a young store holds its whole (short) history


def test_key_rotation_needs_a_record_within_the_period() -> None:
    pol = FIXTURES / "SDC004-pass.yaml"  # rotation_days: 90
    assert run(pol, "SDC004", facts()) == []
    old = facts(key_rotations=[KeyRotation(event_id=7, at=NOW - dt.timedelta(days=91), key_id="kms/1")])
    (f,) = run(pol, "SDC004", old)
    assert f.system == "events/7" and "last 90 days" in f.message and (f.line, f.column) == (8, 5)
    (f,) = run(pol, "SDC004", facts(key_rotations=[]))
    assert "none on record" in f.message


def test_node_destruction_needs_a_wipe_proof_record() -> None:
    pol = FIXTURES / "SDC005-pass.yaml"
    gone = NodeRemoval(event_id=11, at=NOW - dt.timedelta(hours=1), cluster_id=1, node="tmp-3", ephemeral=True)
    kept = NodeRemoval(event_id=12, at=NOW - dt.timedelta(hours=1), cluster_id=1, node="gpu-9", ephemeral=False)
    (f,) = run(pol, "SDC005", facts(node_removals=[gone, kept]))
    assert (f.level, f.system, f.path, f.line) == (Level.ERROR, "events/11", "spec.actions.0", 6)
    proof = NodeDestruction(event_id=13, at=NOW, cluster_id=1, node="tmp-3", destroyed_at=NOW - dt.timedelta(hours=1),
                            wipe_proof_sha256="ab" * 32)
    assert run(pol, "SDC005", facts(node_removals=[gone, kept], node_destructions=[proof])) == []
    other = FIXTURES / "SDC001-pass.yaml"  # destroys no nodes itself: a warning about the system only
    (w,) = run(other, "SDC005", facts(node_removals=[gone]))
    assert w.level is Level.WARNING and w.system == "events/11"


def test_backups_must_be_encrypted_and_recent() -> None:
    pol = FIXTURES / "SDC006-pass.yaml"
    assert run(pol, "SDC006", facts()) == []
    plain = BackupRecord(event_id=21, at=NOW - dt.timedelta(hours=1), encrypted=False)
    (f,) = run(pol, "SDC006", facts(backups=[plain]))
    assert (f.level, f.system) == (Level.ERROR, "events/21")
    stale = BackupRecord(event_id=22, at=NOW - dt.timedelta(hours=30), encrypted=True)
    (w,) = run(pol, "SDC006", facts(backups=[stale]))
    assert w.level is Level.WARNING and "newest is 30 h old" in w.message
    rep = check_document(load_document(pol), facts(backups=[stale]), rules=["SDC006"])
    assert not rep.failed  # warnings never fail the gate


def test_suppressions_keep_the_finding_but_do_not_fail() -> None:
    text = "autoscale:\n  max_instances: 80  # seedance:skip=SDC001 burst pool reviewed in SEC-42\n"
    rep = check_document(parse_document(text, source="s.yaml"), rules=["SDC001"])
    (rf,) = rep.findings
    assert rf.suppressed_by == "burst pool reviewed in SEC-42" and not rep.failed
    assert rep.status("SDC001") == "suppressed"
    by_name = check_document(parse_document(text.replace("SDC001", "autoscale-max-instances"), source="s.yaml"))
    assert not by_name.failed


def test_skip_and_rule_selection() -> None:
    doc = load_document(FIXTURES / "SDC001-fail.yaml")
    assert check_document(doc, skip=["SDC001"]).findings == ()
    assert {r.id for r in check_document(doc, rules=["autoscale-max-instances"]).rules} == {"SDC001"}
