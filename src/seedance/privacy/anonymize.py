"""The whitepaper's ``AnonymizeEvent``: what of a client event the server keeps.

    SessionID = hash(DeviceID + Timestamp)    -> a keyed HMAC, not a bare SHA-256 (see below)
    Action    = e.Action                      -> kept
    Entropy   = behaviourEntropy(ActionSequence)  -> instead of the raw trail
    Timestamp = e.Timestamp.Truncate(second)

Why keyed: a bare SHA-256 of a device id and a timestamp is *pseudonymous*, not anonymous.
Device ids come from small, known spaces (advertising ids, serials, UUIDs an app logs elsewhere)
and timestamps are known to the second, so anyone holding the ids can hash every candidate and
reverse the table (a dictionary attack). An HMAC under a key that rotates and is later destroyed
cannot be recomputed without the key, and once the key is destroyed not even the operator can.
The "timestamp" hashed is the session's start (one session id per session); the events' own
times are kept truncated to the second.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from seedance.privacy.crypto import keyed_hash


def behaviour_entropy(actions: Sequence[str]) -> float:
    """Shannon entropy, in bits, of the action frequencies of a sequence (0 for one repeated action).

    >>> behaviour_entropy(["view", "view", "click", "click"])
    1.0
    """
    n = len(actions)
    if n == 0:
        return 0.0
    h = -sum((c / n) * math.log2(c / n) for c in sorted(Counter(actions).values()))  # sorted: order-free sum
    return h + 0.0  # -0.0 -> 0.0


def truncate_to_second(t: dt.datetime) -> dt.datetime:
    """``t`` in UTC with the sub-second part dropped (floor)."""
    return t.astimezone(dt.UTC).replace(microsecond=0)


def session_id(key: bytes, device_id: str, session_started_at: dt.datetime) -> str:
    """HMAC-SHA256 of the device id and the session's start time (to the second, RFC 3339)."""
    return keyed_hash(key, device_id, truncate_to_second(session_started_at).isoformat())


@dataclass(frozen=True, slots=True)
class AnonymizedEvent:
    """What is stored of one event."""

    session_id: str
    key_id: str
    action: str
    entropy: float
    occurred_at: dt.datetime


def anonymize_batch(
    *, key: bytes, key_id: str, device_id: str, session_started_at: dt.datetime,
    events: Sequence[tuple[str, dt.datetime]],
) -> list[AnonymizedEvent]:
    """Anonymise one session's batch of ``(action, time)``: every event gets the batch's entropy."""
    sid = session_id(key, device_id, session_started_at)
    entropy = behaviour_entropy([a for a, _ in events])
    return [AnonymizedEvent(sid, key_id, action, entropy, truncate_to_second(at)) for action, at in events]
