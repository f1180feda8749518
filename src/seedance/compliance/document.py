"""A policy YAML document with the line and column of every key, and its in-source suppressions.

Compliance rules read the plain parsed values and report findings at the position of the key
they concern (SARIF regions are 1-based lines and columns). A document's rule keys may sit under
``spec`` (``kind: SchedulingPolicy`` / ``CostPolicy`` documents) or at the top level; paths given
to :meth:`PolicyDocument.get` are looked up in ``spec`` first.

Suppressions are comments, as Checkov's ``#checkov:skip=``::

    autoscale:
      max_instances: 80   # seedance:skip=SDC001 burst pool reviewed by the DPO, ticket SEC-42

Unknown rule ids in a suppression are bad input (file, line, field ``seedance:skip``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from seedance.core import yamldoc
from seedance.core.errors import InputError

MAX_BYTES = 256 * 1024
SKIP_FIELD = "seedance:skip"
_SKIP = re.compile(r"#\s*seedance:skip=([A-Za-z0-9_,\- ]+?)(?:[:\s]\s*(.*))?$")
_KEY = re.compile(r"^(\s*)(?:-\s+)?([A-Za-z0-9_.\-\"']+)\s*:")

PathKey = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Position:
    """1-based line and column of a key in the file."""

    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Suppression:
    """A ``# seedance:skip=ID[,ID] reason`` comment."""

    rule_id: str
    reason: str
    line: int


@dataclass(slots=True)
class PolicyDocument:
    """A parsed policy document (see the module docstring).

    Attributes:
        source: File name used in findings and errors (the SARIF artifact URI).
        text: The document text.
        data: The parsed mapping.
        positions: Position of every key and sequence item by path from the document root.
        suppressions: In-source suppressions, by canonical rule id once resolved.
    """

    source: str
    text: str
    data: dict[str, Any]
    positions: dict[PathKey, Position]
    suppressions: list[Suppression] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The document's ``kind`` ("" when absent)."""
        return str(self.data.get("kind") or "")

    @property
    def name(self) -> str:
        """``metadata.name`` ("" when absent)."""
        meta = self.data.get("metadata")
        return str(meta.get("name") or "") if isinstance(meta, dict) else ""

    def _resolve(self, path: str) -> PathKey | None:
        parts = tuple(_parts(path))
        for prefix in (("spec",), ()):
            full = prefix + parts
            if _lookup(self.data, full)[0]:
                return full
        return None

    def has(self, path: str) -> bool:
        """Whether ``path`` (dotted; integers index lists) exists under ``spec`` or the root."""
        return self._resolve(path) is not None

    def get(self, path: str, default: Any = None) -> Any:
        """The value at ``path`` (``spec`` first, then the root), else ``default``."""
        full = self._resolve(path)
        return default if full is None else _lookup(self.data, full)[1]

    def dotted(self, path: str) -> str:
        """The full dotted path of ``path`` as found (``spec.``-prefixed when it sits in spec)."""
        full = self._resolve(path)
        if full is None:
            base = ("spec",) if isinstance(self.data.get("spec"), dict) else ()
            full = base + tuple(_parts(path))
        return ".".join(str(p) for p in full)

    def where(self, path: str) -> Position:
        """Position of ``path``, or of its nearest existing ancestor (line 1 for the root)."""
        full = self._resolve(path)
        if full is None:
            parts = tuple(_parts(path))
            base: PathKey = ("spec",) if isinstance(self.data.get("spec"), dict) else ()
            full = base + parts
        while full:
            pos = self.positions.get(full)
            if pos is not None:
                return pos
            full = full[:-1]
        return Position(1, 1)

    def suppressed(self, rule_id: str) -> Suppression | None:
        """The suppression of ``rule_id``, if the document has one."""
        return next((s for s in self.suppressions if s.rule_id == rule_id), None)


def _parts(path: str) -> Iterator[str | int]:
    for p in path.split("."):
        yield int(p) if p.isdigit() else p


def _lookup(data: Any, parts: PathKey) -> tuple[bool, Any]:
    cur = data
    for p in parts:
        if isinstance(p, int):
            if not isinstance(cur, list) or not 0 <= p < len(cur):
                return False, None
            cur = cur[p]
        else:
            if not isinstance(cur, dict) or p not in cur:
                return False, None
            cur = cur[p]
    return True, cur


def load_document(path: str | Path) -> PolicyDocument:
    """Read and parse a policy file (see :func:`parse_document`)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read policy file: {exc.strerror or exc}", source=str(p)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError("policy file is not UTF-8 text", source=str(p), line=line) from None
    return parse_document(text, source=str(p))


def parse_document(text: str, *, source: str) -> PolicyDocument:
    """Parse one YAML mapping with key positions; YAML errors name the file, line and nearest key."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise InputError(f"policy file larger than {MAX_BYTES} bytes", source=source)
    docs = yamldoc.compose_all(text, source=source, near=lambda line: _key_near(text, line))
    yamldoc.reject_aliases(text, source=source)  # parsed above, so only anchors and aliases remain to refuse
    if len(docs) != 1:
        raise InputError(f"expected one YAML document, found {len(docs)}", source=source)
    root, data = docs[0]
    if not isinstance(root, yaml.MappingNode):
        raise InputError("a policy document must be a YAML mapping", source=source,
                         line=root.start_mark.line + 1)
    positions: dict[PathKey, Position] = {}
    _walk(root, (), positions, source)
    return PolicyDocument(source=source, text=text, data=data, positions=positions,
                          suppressions=_suppressions(text))


def _walk(node: yaml.Node, path: PathKey, out: dict[PathKey, Position], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise InputError("mapping keys must be plain strings", source=source,
                                 line=key_node.start_mark.line + 1, field=".".join(map(str, path)) or None)
            child = (*path, str(key_node.value))
            out[child] = Position(key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _walk(value_node, child, out, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            out[child] = Position(item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, child, out, source)


def _suppressions(text: str) -> list[Suppression]:
    out: list[Suppression] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if "seedance:skip" not in line:
            continue
        m = _SKIP.search(line)
        if m is None:
            out.append(Suppression("", "", i))  # malformed: reported by resolve_suppressions
            continue
        reason = (m.group(2) or "").strip()
        for rid in m.group(1).split(","):
            if rid.strip():
                out.append(Suppression(rid.strip(), reason, i))
    return out


def _key_near(text: str, line: int) -> str | None:
    """Dotted path of the last key at or above ``line`` (by indentation), for YAML error messages."""
    lines = text.splitlines()[:line]
    path: list[tuple[int, str]] = []
    found = False
    for raw in lines:
        m = _KEY.match(raw)
        if not m:
            continue
        indent, key = len(m.group(1)), m.group(2).strip("\"'")
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, key))
        found = True
    return ".".join(k for _, k in path) if found else None
