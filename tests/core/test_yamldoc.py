"""The one YAML-with-line-numbers loader: errors are InputErrors naming the source."""

from __future__ import annotations

import pytest

from seedance.core.errors import InputError
from seedance.core.yamldoc import compose_all


def test_compose_all_refuses_special_characters_with_an_input_error() -> None:
    """The YAML reader refuses C1 control characters before any document is read: still an InputError."""
    with pytest.raises(InputError) as err:
        compose_all("a: 1\nb: \x97\n", source="p.yaml")
    assert err.value.source == "p.yaml" and "unacceptable character #x0097" in err.value.message


def test_compose_all_returns_each_document_with_its_lines() -> None:
    docs = compose_all("a: 1\n---\nb: 2\n", source="p.yaml")
    assert [data for _, data in docs] == [{"a": 1}, {"b": 2}]
    assert docs[1][0].start_mark.line == 2
