"""schemathesis hooks for ``test_fuzz`` (loaded through ``SCHEMATHESIS_HOOKS``): the rules JSON Schema cannot state.

Every other rule of these operations is in the published schema, so schemathesis checks them strictly. A rule
below compares two values (of one string or of two fields) or needs arithmetic, which no JSON Schema keyword
expresses; the server refuses a request breaking it with a 422 that locates the field. ``filter_failure`` drops
a "schema-valid request rejected" (ST202) failure only when *every* error of that 422 is one of these rules,
matched by the operation, the error's location and its message; any other 422 still fails the run.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import schemathesis

UNSTATEABLE: tuple[tuple[str, str, str, str], ...] = (
    # (why, operation path, error location, error message): all regular expressions, fully matched
    ("a window pair must end after it starts (an order between the two halves of one string)",
     r"/api/v1/allocation(/explain)?", r"window|from|to", r"window ends before it starts: .*"),
    ("at most MAX_STEPS steps: the window's length divided by the step (two parameters and a division)",
     r"/api/v1/allocation(/explain)?", r"step", r"this window has \d+ steps of .* s; at most \d+ .*"),
    ("window_start is a multiple of window_s seconds since the epoch (a date-time and a number, modular arithmetic)",
     r"/api/v1/telemetry", r"body\.windows\.\d+\.window_start", r"window_start .* is not on a .* s edge"),
    ("a date-time whose UTC offset moves it past year 0001 or 9999 (format date-time has no bounds)",
     r"/api/v1/telemetry", r"body\.windows\.\d+\.window_start", r"Value error, must lie between .* in UTC"),
    ("config_yaml is a YAML document, a string to JSON Schema, whose content the policy loader checks (policy "
     "schema, registry names, nesting and integer limits)",
     r"/api/v1/(policies|policies/dry-run|compliance/check|compliance/overrides)",
     r"(config_yaml|\{source\})(\..+)?", r".+"),  # {source}: the request's own name of its document
    ("a replay needs its cluster named once the store holds several (a rule on stored data)",
     r"/api/v1/policies(/\{name\})?/dry-run", r"request body\.cluster",
     r"the store has several clusters; say which one to replay"),
    ("event times lie within max_event_age_hours before the server's clock and max_clock_skew_s after it",
     r"/api/v1/telemetry/events", r"body\.events\.\d+\.at",
     r".+ is (older than .+ h|in the future \(server time .+\)); nothing was stored"),
    ("a session starts before its first event (a comparison of two fields)",
     r"/api/v1/telemetry/events", r"body\.session_started_at",
     r"the session starts after its first event; nothing was stored"),
    ("an attestation token is a signed document the verifier checks, with the nonce bound inside it",
     r"/api/v1/clusters/\{cluster\}/nodes/\{node\}/attestation", r"nonce|token",
     r"the token does not bind this nonce|attestation rejected \(.+\): .+"),
)


def unstateable(path: str, status: int, body: bytes, source: str | None = None) -> list[str]:
    """The reasons of UNSTATEABLE matching every error of a 422 on ``path`` (empty if any error is another one);
    ``source`` is the request body's ``source`` field, the name its errors give the document."""
    if status != 422:
        return []
    try:
        errors: list[dict[str, Any]] = json.loads(body).get("errors") or []
    except (ValueError, AttributeError):
        return []
    why = []
    for e in errors:
        loc = str(e.get("loc"))
        if source and (loc == source or loc.startswith(f"{source}.")):
            loc = "{source}" + loc[len(source):]
        rule = next((r for r in UNSTATEABLE if re.fullmatch(r[1], path) and re.fullmatch(r[2], loc)
                     and re.fullmatch(r[3], str(e.get("msg")), re.DOTALL)), None)
        if rule is None:
            return []
        why.append(rule[0])
    return why


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but an ST202 whose 422 only names rules JSON Schema cannot state."""
    if getattr(failure, "code", None) != "ST202":
        return True
    source = case.body.get("source") if isinstance(case.body, dict) else None
    why = unstateable(case.operation.path, response.status_code, response.content,
                      source if isinstance(source, str) else None)
    log = os.environ.get("SEEDANCE_FUZZ_FILTERED")
    if why and log:  # the run's record of what was dropped, and why (test_fuzz counts it)
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"operation": case.operation.label, "why": sorted(set(why))}) + "\n")
    return not why
