"""SDC001 autoscale-max-instances: autoscaling must be bounded (whitepaper §4.3, first sample check).

The whitepaper's ``validate_cost_policy`` flags ``autoscale.max_instances > 50`` ("unbounded
scaling may leave log retention incomplete", GDPR Art. 32). Generalised: an ``autoscale`` section
without ``max_instances`` is unbounded too, and ``min_instances`` may not exceed it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from seedance.compliance.actions import mapping, number
from seedance.compliance.document import PolicyDocument
from seedance.compliance.facts import SystemFacts
from seedance.compliance.rule import COMPLIANCE_RULES, GBT_8_2_3_D, GDPR_32_1_C, Finding, Rule


@COMPLIANCE_RULES.register("SDC001", aliases=("autoscale-max-instances",))
class AutoscaleBound(Rule):
    """Autoscaling has an upper bound of at most :attr:`limit` instances."""

    id = "SDC001"
    name = "autoscale-max-instances"
    summary = "Autoscaling is bounded: max_instances is set and at most 50"
    help = ("Set autoscale.max_instances to at most 50 (the whitepaper's bound). Beyond it, scheduling and "
            "audit logs of short-lived instances are at risk of being incomplete; larger pools need a reviewed "
            "suppression (# seedance:skip=SDC001 <reason>).")
    clauses = (GDPR_32_1_C, GBT_8_2_3_D)
    evidence = ("complete scheduling logs of every instance the autoscaler creates",)
    limit: ClassVar[int] = 50

    def check(self, doc: PolicyDocument, facts: SystemFacts | None) -> Iterator[Finding]:
        if mapping(doc, "autoscale") is None:
            return
        hi = number(doc, "autoscale.max_instances", integer=True, minimum=1)
        lo = number(doc, "autoscale.min_instances", integer=True, minimum=0)
        if hi is None:
            yield self.at(doc, "autoscale", "autoscale has no max_instances: scaling is unbounded "
                          f"(set autoscale.max_instances <= {self.limit})")
            return
        if hi > self.limit:
            yield self.at(doc, "autoscale.max_instances", f"autoscale.max_instances is {int(hi)} > {self.limit}: "
                          "unbounded scaling may leave scheduling-log retention incomplete")
        if lo is not None and lo > hi:
            yield self.at(doc, "autoscale.min_instances",
                          f"autoscale.min_instances {int(lo)} exceeds max_instances {int(hi)}")
