"""Reading CSV files with errors that name the file, the line and the field.

Every loader (traces, price and carbon series, request traces) reads through these two
generators, so a missing file, an undecodable byte or a malformed row is reported the same way.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

from seedance.core.errors import InputError


def csv_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of every row of ``path``, header included (a BOM is dropped)."""
    p = Path(path)
    src = str(p)
    try:
        fh = p.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("file not found", source=src) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", source=src) from None
    with fh:
        reader = csv.reader(fh)
        try:
            for row in reader:
                yield reader.line_num, row
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputError(f"malformed CSV: {exc}", source=src, line=reader.line_num or 1) from None


def csv_records(path: str | Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, {column: value})`` of every data row; the header must name ``required``.

    Blank lines are skipped; a row with a different number of fields than the header is an error.
    """
    src = str(path)
    rows = csv_rows(path)
    first = next(rows, None)
    if first is None:
        raise InputError("empty file (no header line)", source=src, line=1)
    header = [h.strip() for h in first[1]]
    for col in required:
        if col not in header:
            raise InputError(f"missing column (header has: {', '.join(header)})", source=src, line=1, field=col)
    width = len(header)
    for line, row in rows:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != width:
            raise InputError(f"expected {width} fields, found {len(row)}", source=src, line=line)
        yield line, dict(zip(header, row, strict=True))
