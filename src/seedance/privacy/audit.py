"""The erasure audit log: ``audit_logs/delete_requests_<YYYY>Q<n>.parquet`` (pyarrow).

One row per verified (or failed) request, in the file of the quarter the request was made in:
request id, the subject's random id (a tombstone), requested / deadline / erased / verified
times, status, whether it met the deadline, the fingerprint of the destroyed data key, the
stores covered and the proof hash (SHA-256 of the canonical JSON proof stored with the request).
No identifier of the subject is written. Files are rewritten whole (Parquet is immutable)
through a temporary file and an atomic rename, under a lock file, so readers never see half a file.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FIELDS = ("request_id", "subject_tombstone", "tenant_id", "status", "requested_at", "deadline", "erased_at",
          "verified_at", "within_deadline", "key_fingerprint", "stores", "proof_hash")


def quarter_file(folder: Path, when: dt.datetime) -> Path:
    """``delete_requests_<YYYY>Q<n>.parquet`` for the quarter of ``when`` (UTC)."""
    t = when.astimezone(dt.UTC)
    return folder / f"delete_requests_{t.year}Q{(t.month - 1) // 3 + 1}.parquet"


def _schema() -> Any:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("request_id", pa.int64()), ("subject_tombstone", pa.string()), ("tenant_id", pa.int64()),
        ("status", pa.string()), ("requested_at", ts), ("deadline", ts), ("erased_at", ts), ("verified_at", ts),
        ("within_deadline", pa.bool_()), ("key_fingerprint", pa.string()), ("stores", pa.list_(pa.string())),
        ("proof_hash", pa.string()),
    ])


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def append(folder: Path, rows: Iterable[dict[str, Any]]) -> list[Path]:
    """Add rows (one dict per request, keys ``FIELDS``) to their quarter files; returns the files written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    by_file: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        missing = set(FIELDS) - set(r)
        if missing:
            raise ValueError(f"audit row lacks {sorted(missing)}")
        by_file[quarter_file(folder, r["requested_at"])].append({k: r[k] for k in FIELDS})
    schema = _schema()
    with _locked(folder):
        for path, new in by_file.items():
            table = pa.Table.from_pylist(new, schema=schema)
            if path.exists():
                old = pq.read_table(path, schema=schema)
                table = pa.concat_tables([old, table])
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, path)
    return sorted(by_file)


def read(folder: Path) -> list[dict[str, Any]]:
    """Every audit row of every quarter file, oldest file first."""
    import pyarrow.parquet as pq

    out: list[dict[str, Any]] = []
    for path in files(folder):
        out.extend(pq.read_table(path).to_pylist())
    return out


def files(folder: Path) -> list[Path]:
    """The quarter files present."""
    return sorted(folder.glob("delete_requests_*Q*.parquet")) if folder.exists() else []
