"""The identifier search: whole tokens, case-insensitive, phrases as substrings, blobs as Latin-1."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from seedance.privacy.scan import Needle, NeedleIndex, render

EMAIL = Needle("s1", "external_id", "Ada@Example.org")
NAME = Needle("s1", "trait", "Ada Lovelace")
SHORT = Needle("s2", "trait", "bob")


def kinds(index: NeedleIndex, text: str) -> list[str]:
    return sorted(f"{n.subject_id}:{n.kind}" for n in index.search(text))


def test_tokens_phrases_and_case() -> None:
    idx = NeedleIndex([EMAIL, NAME, SHORT])
    assert kinds(idx, 'user "ADA@example.ORG" logged in.') == ["s1:external_id"]
    assert kinds(idx, "contact: ada@example.org.") == ["s1:external_id"]  # trailing dot is not part of it
    assert kinds(idx, "xada@example.org") == []  # another address, not this one
    assert kinds(idx, "by ada lovelace, 1843") == ["s1:trait"]
    assert kinds(idx, "bob; bobby; kabob") == ["s2:trait"]  # only the whole token
    assert kinds(idx, "nothing here") == []


def test_blobs_are_searched_as_latin1() -> None:
    idx = NeedleIndex([EMAIL])
    assert kinds(idx, render(b"\x00\x01ada@example.org\xff")) == ["s1:external_id"]
    assert kinds(idx, render({"to": ["ada@example.org"]})) == ["s1:external_id"]
    assert render(None) == "" and render(memoryview(b"ab")) == "ab"


@given(st.binary(min_size=0, max_size=4096))
def test_random_ciphertext_never_matches_a_short_value(blob: bytes) -> None:
    idx = NeedleIndex([SHORT, Needle("s3", "device_id", "dev-7f3a9c21")])
    text = render(os.urandom(16) + blob)
    hits = idx.search(text)
    # a hit is only possible when the value really stands alone in the blob
    for n in hits:
        assert n.value.casefold() in text.casefold()
