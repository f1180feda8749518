"""flagd flag files: validate them (errors with file, line, field), and write a flag's canary states.

A flag file is flagd's JSON format (``{"flags": {key: {"state", "variants", "defaultVariant",
"targeting"}}}``, targeting in JsonLogic with flagd's ``fractional``). The file as authored is the
*promoted* state of each flag: its targeting says who gets the cost action (e.g. the whitepaper's
``enable_cpu_throttling`` for region ``cn-east-2`` and tier ``premium``). :class:`FlagRollout` writes
the other states of one flag, atomically (write to a temporary file, then rename), so a provider
reading the file never sees half a document:

* canary at weight *w* %: eligible evaluation contexts get the candidate for *w* % of targeting
  keys (``fractional`` in basis points, bucketed by flag key + targeting key as flagd does), every
  other context gets the baseline;
* promoted: the authored flag;
* rolled back: the baseline for everyone (``defaultVariant`` baseline, no targeting).

Author a flag with ``"state": "DISABLED"`` until its rollout starts (flagd then answers the
caller's default, the baseline); the controller enables it at the first canary step.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedance.core import yamldoc
from seedance.core.errors import InputError

TOP_KEYS = frozenset({"flags", "$schema", "$evaluators", "metadata"})
FLAG_KEYS = frozenset({"state", "variants", "defaultVariant", "targeting", "metadata"})
STATES = ("ENABLED", "DISABLED")
MAX_BYTES = 1024 * 1024
CANARY_META = "seedanceCanaryWeight"


@dataclass(frozen=True, slots=True)
class FlagFile:
    """A validated flag file."""

    path: Path
    data: dict[str, Any]

    def flag(self, key: str) -> dict[str, Any]:
        """The definition of flag ``key`` (unknown keys list the flags the file has)."""
        flags = self.data["flags"]
        if key not in flags:
            raise InputError(f"no flag {key!r}; the file has: {', '.join(sorted(flags)) or '(none)'}",
                             source=str(self.path), field=f"flags.{key}")
        out: dict[str, Any] = flags[key]
        return out


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    return "string" if isinstance(v, str) else "object"


def parse_flags(text: str, *, source: str) -> dict[str, Any]:
    """Parse and validate a flag file's text; every error names the file, line and field."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise InputError(f"flag file larger than {MAX_BYTES} bytes", source=source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", source=source, line=exc.lineno) from None
    try:  # JSON is YAML: the shared loader's node tree gives every key's line
        root, _ = yamldoc.compose(text, source=source, what="flag file", allow_empty=True)
    except InputError:  # JSON that PyYAML cannot read: errors keep file and field, without a line
        root = None

    def bad(msg: str, *path: str) -> InputError:
        known = bool(path) and isinstance(data, dict) and path[0] in data
        line = yamldoc.line_of(root, path) if known else None
        return InputError(msg, source=source, line=line, field=".".join(path) or None)

    if not isinstance(data, dict):
        raise InputError("a flag file is a JSON object with a 'flags' object", source=source, line=1)
    for k in data:
        if k not in TOP_KEYS:
            raise bad(f"unknown key {k!r}; valid: {', '.join(sorted(TOP_KEYS))}", k)
    flags = data.get("flags")
    if not isinstance(flags, dict):
        raise bad("'flags' must be an object of flag definitions", "flags")
    for name, flag in flags.items():
        if not isinstance(flag, dict):
            raise bad("a flag definition must be an object", "flags", name)
        for k in flag:
            if k not in FLAG_KEYS:
                raise bad(f"unknown key {k!r}; valid: {', '.join(sorted(FLAG_KEYS))}", "flags", name, k)
        for req in ("state", "variants", "defaultVariant"):
            if req not in flag:
                raise bad(f"missing {req!r}", "flags", name)
        if flag["state"] not in STATES:
            raise bad(f"state must be ENABLED or DISABLED, got {flag['state']!r}", "flags", name, "state")
        variants = flag["variants"]
        if not isinstance(variants, dict) or not variants:
            raise bad("variants must be a non-empty object", "flags", name, "variants")
        kinds = {_kind(v) for v in variants.values()}
        if len(kinds) > 1:
            raise bad(f"all variants of a flag must have one type, got {', '.join(sorted(kinds))}",
                      "flags", name, "variants")
        if flag["defaultVariant"] not in variants:
            raise bad(f"defaultVariant {flag['defaultVariant']!r} is not a variant ({', '.join(variants)})",
                      "flags", name, "defaultVariant")
        targeting = flag.get("targeting")
        if targeting is not None and not isinstance(targeting, dict):
            raise bad("targeting must be a JsonLogic object", "flags", name, "targeting")
    return data


def load_flag_file(path: str | Path) -> FlagFile:
    """Read and validate a flag file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read flag file: {getattr(exc, 'strerror', None) or exc}", source=str(p)) from None
    return FlagFile(p, parse_flags(text, source=str(p)))


def write_flags(path: str | Path, data: dict[str, Any]) -> None:
    """Write a flag document atomically (temporary file in the same folder, fsync, rename)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def canary_targeting(eligible: dict[str, Any] | None, candidate: str, baseline: str, weight: float) -> dict[str, Any]:
    """JsonLogic giving ``candidate`` to ``weight`` % of the eligible contexts' targeting keys.

    ``eligible`` is the authored targeting (it names the candidate for eligible contexts); ``None``
    means every context is eligible. Weights are basis points, so fractional percentages work.
    """
    bp = int(round(weight * 100))
    split: dict[str, Any] = {"fractional": [[candidate, bp], [baseline, 10_000 - bp]]}
    if eligible is None:
        return split
    return {"if": [{"==": [copy.deepcopy(eligible), candidate]}, split, baseline]}


class FlagRollout:
    """Writes the canary, promoted and rolled-back states of one flag of a flag file.

    Args:
        path: The flag file (the authored, promoted state is read from it once).
        flag: Flag key.
        candidate: Variant of the change being rolled out.
        baseline: Variant everyone gets back on rollback.
    """

    def __init__(self, path: str | Path, flag: str, candidate: str, baseline: str) -> None:
        self.file = load_flag_file(path)
        self.path = self.file.path
        self.key = flag
        authored = copy.deepcopy(self.file.flag(flag))
        for v, what in ((candidate, "candidate"), (baseline, "baseline")):
            if v not in authored["variants"]:
                raise InputError(f"{what} {v!r} is not a variant of flag {flag!r} ({', '.join(authored['variants'])})",
                                 source=str(self.path), field=f"flags.{flag}.variants")
        self.authored = authored
        self.candidate = candidate
        self.baseline = baseline

    def _write(self, flag: dict[str, Any]) -> None:
        data = copy.deepcopy(self.file.data)
        data["flags"][self.key] = flag
        write_flags(self.path, data)

    def set_weight(self, weight: float) -> None:
        """Canary: ``weight`` % of the eligible contexts get the candidate."""
        flag = copy.deepcopy(self.authored)
        flag["state"] = "ENABLED"
        flag["defaultVariant"] = self.baseline
        flag["targeting"] = canary_targeting(self.authored.get("targeting"), self.candidate, self.baseline, weight)
        flag["metadata"] = {**flag.get("metadata", {}), CANARY_META: weight}
        self._write(flag)

    def promote(self) -> None:
        """The authored flag, enabled: the change for every eligible context."""
        flag = copy.deepcopy(self.authored)
        flag["state"] = "ENABLED"
        if flag.get("targeting") is None:
            flag["defaultVariant"] = self.candidate
        flag["metadata"] = {**flag.get("metadata", {}), CANARY_META: 100}
        self._write(flag)

    def rollback(self) -> None:
        """The baseline for every context."""
        flag = {k: copy.deepcopy(v) for k, v in self.authored.items() if k != "targeting"}
        flag["state"] = "ENABLED"
        flag["defaultVariant"] = self.baseline
        flag["metadata"] = {**flag.get("metadata", {}), CANARY_META: 0}
        self._write(flag)
