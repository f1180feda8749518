"""The Azure trace loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.traces.paths import data_file

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(header + body, encoding="utf-8")
    return p


def test_loads_and_sorts(tmp_path: Path) -> None:
    p = write(tmp_path, "2023-11-16 18:15:50.5000000,10,3\n2023-11-16 18:15:46.0000000,374,44\n"
                        "2023-11-17 00:00:00,5,0\n")
    t = load_azure_trace(p)
    assert t.arrival_s.tolist() == [0.0, 4.5, 20654.0]
    assert t.prompt.tolist() == [374, 10, 5]
    assert t.output.tolist() == [44, 3, 1]  # a 0-token output still yields the prefill's token
    assert t.scaled(2.0).arrival_s.tolist() == [0.0, 2.25, 10327.0]
    assert len(t.head(seconds=5.0)) == 2 and len(t.head(count=1)) == 1


@pytest.mark.parametrize(
    ("body", "line", "field"),
    [
        ("2023-11-16 18:15:46,abc,3\n", 2, "ContextTokens"),
        ("2023-11-16 18:15:46,10,3\n2023-11-16 18:15:47,0,3\n", 3, "ContextTokens"),
        ("2023-11-16 18:15:46,10,-1\n", 2, "GeneratedTokens"),
        ("yesterday,10,3\n", 2, "TIMESTAMP"),
        ("2023-11-16 25:15:46,10,3\n", 2, "TIMESTAMP"),
    ],
)
def test_bad_rows_name_line_and_field(tmp_path: Path, body: str, line: int, field: str) -> None:
    with pytest.raises(InputError) as e:
        load_azure_trace(write(tmp_path, body))
    assert (e.value.line, e.value.field) == (line, field)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_azure_trace(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="missing column") as e:
        load_azure_trace(write(tmp_path, "1,2\n", header="TIMESTAMP,ContextTokens\n"))
    assert e.value.field == "GeneratedTokens"
    with pytest.raises(InputError, match="expected 3 fields"):
        load_azure_trace(write(tmp_path, "2023-11-16 18:15:46,10\n"))
    with pytest.raises(InputError, match="no requests"):
        load_azure_trace(write(tmp_path, ""))
    with pytest.raises(InputError):
        load_azure_trace(write(tmp_path, "2023-11-16 18:15:46,10,3\n")).scaled(0)


def test_conversation_trace_matches_its_source_notes() -> None:
    t = load_azure_trace(data_file(CONV_TRACE))
    assert len(t) == 19_366
    assert np.median(t.prompt) == 1020 and t.prompt.max() == 14_050
    assert np.median(t.output) == 129 and t.output.max() == 1000
    assert t.rate == pytest.approx(5.53, abs=0.01)
    assert np.all(np.diff(t.arrival_s) >= 0)
