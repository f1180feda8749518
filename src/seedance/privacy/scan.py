"""Find a subject's identifiers in a store: every table of a database, every Redis key, audit files.

What is searched for ("needles"), per subject:
  * ``external_id``, identifying ``trait`` values (e-mail, phone, user name), ``device_id``: the
    plaintext identifiers;
  * ``lookup_hash`` and ``device_tag``: pseudonyms anyone holding a live key can recompute;
  * ``pseudonym``: the subject's session ids and device tags made with its own key (snapshotted
    before erasure; once that key is destroyed no one can link them to the subject);
  * ``subject_id``: the random id (a tombstone in the ledger; elsewhere it marks leftover rows).

Matching is case-insensitive on whole tokens (runs of ``[a-z0-9_%+@.:-]``, outer ``.:-``
stripped), so a 3-letter value never matches inside random ciphertext; a value with other
characters (a space) is searched as a substring. Bytes columns are searched as Latin-1 text, so
a plaintext identifier inside a blob is found too. Names are not needles: they are not unique,
and a match could belong to another person.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text

from seedance.control.db.session import Database

_TOKEN = re.compile(r"[a-z0-9_%+@.:\-]+")
_STRIP = ".:-"
NEEDLE_KINDS = ("external_id", "trait", "device_id", "lookup_hash", "device_tag", "pseudonym", "subject_id")


@dataclass(frozen=True, slots=True)
class Needle:
    """One value to look for, and whose it is."""

    subject_id: str
    kind: str
    value: str


@dataclass(frozen=True, slots=True)
class Finding:
    """A needle found in a store (the value itself is never recorded)."""

    store: str
    location: str
    subject_id: str
    kind: str


@dataclass(slots=True)
class StoreScan:
    """What one scan of one store saw."""

    store: str
    scanned: int = 0
    findings: list[Finding] = field(default_factory=list)


class NeedleIndex:
    """Needles ready for fast search: whole-token ones in a dict, the rest as substrings."""

    def __init__(self, needles: Iterable[Needle]) -> None:
        self.tokens: dict[str, list[Needle]] = defaultdict(list)
        self.phrases: list[tuple[str, Needle]] = []
        self.count = 0
        for n in needles:
            v = n.value.casefold().strip()
            if not v:
                continue
            self.count += 1
            if _TOKEN.fullmatch(v) and v.strip(_STRIP) == v:
                self.tokens[v].append(n)
            else:
                self.phrases.append((v, n))

    def search(self, text_: str) -> list[Needle]:
        """Every needle occurring in ``text_``."""
        low = text_.casefold()
        hits: list[Needle] = []
        if self.tokens:
            for tok in set(_TOKEN.findall(low)):
                found = self.tokens.get(tok.strip(_STRIP))
                if found:
                    hits.extend(found)
        for v, n in self.phrases:
            if v in low:
                hits.append(n)
        return hits


def render(value: Any) -> str:
    """A stored value as searchable text (bytes as Latin-1, JSON as JSON)."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1")
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def scan_database(db: Database, index: NeedleIndex, *, store: str) -> StoreScan:
    """Search every row of every table of ``db`` (its current schema)."""
    out = StoreScan(store)
    insp = inspect(db.engine)
    for table in sorted(insp.get_table_names()):
        pk = insp.get_pk_constraint(table).get("constrained_columns") or []
        with db.engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=2000).execute(
                text(f"SELECT * FROM {_quote(table)}"))
            cols = list(result.keys())
            pk_idx = [cols.index(c) for c in pk if c in cols]
            for row in result:
                out.scanned += 1
                hits = index.search(" ".join(render(v) for v in row))
                if hits:
                    where = f"{table}:" + ",".join(str(row[i]) for i in pk_idx)
                    out.findings.extend(Finding(store, where, n.subject_id, n.kind) for n in hits)
    return out


def redis_items(redis: Any, prefix: str) -> Iterator[tuple[str, str]]:
    """``(key, searchable text of key and value)`` for every key under ``prefix``."""
    for key in redis.scan_iter(match=_glob_escape(prefix) + "*", count=1000):
        kind = redis.type(key)
        value: Any
        if kind == "string":
            value = redis.get(key)
        elif kind == "hash":
            value = redis.hgetall(key)
        elif kind == "set":
            value = sorted(redis.smembers(key))
        elif kind == "zset":
            value = redis.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = redis.lrange(key, 0, -1)
        else:
            value = ""
        yield key, f"{key} {render(value) if not isinstance(value, list | dict) else json.dumps(value)}"


def scan_redis(redis: Any, prefix: str, index: NeedleIndex, *, store: str = "redis") -> StoreScan:
    """Search every Redis key (name and value) under ``prefix``."""
    out = StoreScan(store)
    for key, blob in redis_items(redis, prefix):
        out.scanned += 1
        out.findings.extend(Finding(store, key, n.subject_id, n.kind) for n in index.search(blob))
    return out


def scan_parquet(paths: Iterable[Path], index: NeedleIndex, *, store: str = "audit") -> StoreScan:
    """Search every row of Parquet files."""
    import pyarrow.parquet as pq

    out = StoreScan(store)
    for path in paths:
        for i, row in enumerate(pq.read_table(path).to_pylist()):
            out.scanned += 1
            hits = index.search(" ".join(render(v) for v in row.values()))
            out.findings.extend(Finding(store, f"{path.name}:{i}", n.subject_id, n.kind) for n in hits)
    return out


def _glob_escape(s: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", s)
