"""SDC003 scheduling-log-retention: 72 hours of scheduling logs are kept (whitepaper §4.3 table, row 1).

Document: ``audit.scheduling_log_retention_hours``, when given, is at least 72; a policy that
downgrades data to cold storage must state it. System (``--system``): the event and decision
logs are append-only (the store's triggers exist), the declared pruning age is at least the
required retention, and the store still holds its history (the oldest retained event is as old
as the required retention, or as the store when the store is younger).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from seedance.compliance.actions import actions, mapping, number
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_2_3_D, GDPR_32_1_C, Finding, Rule


@COMPLIANCE_RULES.register("SDC003", aliases=("scheduling-log-retention",))
class LogRetention(Rule):
    """Scheduling logs are retained for at least :attr:`required_hours`."""

    id = "SDC003"
    name = "scheduling-log-retention"
    summary = "72 hours of scheduling logs are retained, append-only"
    help = ("Keep the event and decision logs for at least 72 h (do not set SEEDANCE_COMPLIANCE_LOG_RETENTION_HOURS "
            "below it, keep the store's append-only triggers) and state audit.scheduling_log_retention_hours >= 72 "
            "in policies that move data to cold storage.")
    clauses = (GDPR_32_1_C, GBT_8_2_3_D)
    evidence = ("72 h of scheduling (decision and event) logs, append-only",)
    required_hours: ClassVar[float] = 72.0
    slack_hours: ClassVar[float] = 0.25

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        mapping(doc, "audit")
        declared = number(doc, "audit.scheduling_log_retention_hours", minimum=0)
        need = max(self.required_hours, declared or 0.0)
        if declared is not None and declared < self.required_hours:
            yield self.at(doc, "audit.scheduling_log_retention_hours",
                          f"scheduling logs kept {declared:g} h < the required {self.required_hours:g} h")
        cold = [i for i, a, _ in actions(doc) if a["type"] == "downgrade-cold-storage"]
        if cold and declared is None:
            yield self.at(doc, f"actions.{cold[0]}", "a cold-storage downgrade needs "
                          f"audit.scheduling_log_retention_hours >= {self.required_hours:g} stated in the policy")
        if facts is None:
            return
        if not facts.append_only_logs:
            yield self.at(doc, "", "the store's event/decision logs are not append-only (their UPDATE/DELETE "
                          "triggers are missing)", system="store/triggers")
        if facts.log_retention_hours is not None and facts.log_retention_hours < need:
            yield self.at(doc, "", f"the control plane prunes logs after {facts.log_retention_hours:g} h < "
                          f"{need:g} h required", system="settings/log_retention_hours")
        age = facts.hours_since(facts.store_started_at)
        kept = facts.hours_since(facts.oldest_event_at)
        if age is not None and age > self.slack_hours:
            expect = min(age, need) - self.slack_hours
            if kept is None or kept < expect:
                have = "no events" if kept is None else f"events back to {kept:.1f} h ago"
                yield self.at(doc, "", f"the store began {age:.1f} h ago but holds {have}: scheduling logs of the "
                              f"last {min(age, need):.0f} h are missing", system="store/events")
