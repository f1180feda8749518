"""The AnonymizeEvent rule: keyed session ids, behaviour entropy, timestamps to the second."""

from __future__ import annotations

import datetime as dt
import hashlib
import math

from hypothesis import given
from hypothesis import strategies as st

from seedance.privacy.anonymize import anonymize_batch, behaviour_entropy, session_id, truncate_to_second
from seedance.privacy.crypto import keyed_hash

T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)


def test_entropy_exact_values() -> None:
    assert behaviour_entropy([]) == 0.0
    assert behaviour_entropy(["view"] * 7) == 0.0
    assert behaviour_entropy(["a", "b"]) == 1.0
    assert behaviour_entropy(["a", "a", "b", "b"]) == 1.0
    assert behaviour_entropy(["a", "b", "c", "d"]) == 2.0
    # p = (1/2, 1/4, 1/4): 0.5*1 + 2*0.25*2 = 1.5 bits
    assert behaviour_entropy(["a", "a", "b", "c"]) == 1.5


@given(st.lists(st.sampled_from(["view", "click", "scroll", "submit", "refresh"]), min_size=1, max_size=200))
def test_entropy_bounded_by_log_of_distinct_actions(actions: list[str]) -> None:
    h = behaviour_entropy(actions)
    assert 0.0 <= h <= math.log2(len(set(actions))) + 1e-12
    assert behaviour_entropy(list(reversed(actions))) == h  # order-free: a frequency summary, not the trail


def test_truncation_floors_to_the_second_in_utc() -> None:
    local = T0.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert truncate_to_second(local) == dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


def test_session_id_is_keyed_and_stable_per_session() -> None:
    k1, k2 = b"k" * 32, b"j" * 32
    sid = session_id(k1, "device-123456", T0)
    assert sid == keyed_hash(k1, "device-123456", "2026-03-04T05:06:07+00:00")
    assert sid == session_id(k1, "device-123456", T0.replace(microsecond=0))  # same second, same session
    assert sid != session_id(k2, "device-123456", T0)  # another key: unlinkable
    assert sid != session_id(k1, "device-654321", T0)
    # not the whitepaper's bare SHA-256, which anyone holding the device id can recompute
    bare = hashlib.sha256(("device-123456" + T0.isoformat()).encode()).hexdigest()
    assert sid != bare and len(sid) == 64


def test_batch_keeps_actions_and_times_drops_the_trail() -> None:
    events = [("view", T0), ("click", T0 + dt.timedelta(milliseconds=100)), ("view", T0 + dt.timedelta(seconds=2))]
    out = anonymize_batch(key=b"k" * 32, key_id="session:1", device_id="device-123456", session_started_at=T0,
                          events=events)
    assert [e.action for e in out] == ["view", "click", "view"]
    assert [e.occurred_at.second for e in out] == [7, 7, 9] and all(e.occurred_at.microsecond == 0 for e in out)
    assert {e.entropy for e in out} == {behaviour_entropy(["view", "click", "view"])}
    assert len({e.session_id for e in out}) == 1 and out[0].key_id == "session:1"
    assert not any(hasattr(e, "device_id") for e in out)
