"""Shape checks run before any YAML is loaded: nesting depth, integer size, anchors and aliases.

PyYAML's composer and constructor recurse once per nesting level, so a few kilobytes of ``[[[[...``
raise ``RecursionError`` (and its pure-Python scanner costs time quadratic in the depth); Python
refuses to convert integers of more than 4,300 digits. :func:`check_yaml_shape` refuses such
documents with an ``InputError`` naming the line, in time linear in the text: a vectorised scan of
flow brackets first (no YAML parser involved), then libyaml's event stream (C), counting the
depth of every collection and the length of every plain scalar that would become an integer.
"""

from __future__ import annotations

import re

import numpy as np
import yaml

from seedance.core.errors import InputError

MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and sequences accepted."""
MAX_INT_DIGITS = 100
"""Longest integer accepted (digits); longer ones are refused, not converted."""

_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*'|(?<!\S)#[^\n]*")
_INTLIKE = re.compile(r"[-+]?(?:0[xXoObB])?[0-9a-fA-F_:]+")
_INT_TAG = "tag:yaml.org,2002:int"
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _flow_depth(text: str) -> tuple[int, int]:
    """Largest bracket depth outside quotes and comments, and the offset where it is reached."""
    stripped = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
    raw = np.frombuffer(stripped.encode("utf-32-le"), dtype=np.uint32)
    step = np.zeros(raw.shape, dtype=np.int32)
    step[(raw == ord("[")) | (raw == ord("{"))] = 1
    step[(raw == ord("]")) | (raw == ord("}"))] = -1
    if not step.any():
        return 0, 0
    depth = np.cumsum(step)
    at = int(np.argmax(depth))
    return int(depth[at]), at


def check_yaml_shape(text: str, *, source: str) -> None:
    """Refuse YAML nested deeper than ``MAX_YAML_DEPTH``, integers over ``MAX_INT_DIGITS`` digits,
    anchors and aliases; errors name ``source`` and the line."""
    flow, at = _flow_depth(text)
    if flow > MAX_YAML_DEPTH:
        raise InputError(f"YAML nested deeper than {MAX_YAML_DEPTH} levels", source=source,
                         line=text.count("\n", 0, at) + 1)
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=_PARSER):
            mark = ev.start_mark
            line = mark.line + 1 if mark is not None else None
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                raise InputError("YAML anchors and aliases are not accepted", source=source, line=line)
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise InputError(f"YAML nested deeper than {MAX_YAML_DEPTH} levels", source=source, line=line)
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
            elif (isinstance(ev, yaml.ScalarEvent) and len(ev.value) > MAX_INT_DIGITS
                  and ((ev.implicit[0] and not ev.style) or ev.tag == _INT_TAG) and _INTLIKE.fullmatch(ev.value)):
                raise InputError(f"integer with more than {MAX_INT_DIGITS} digits", source=source, line=line)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", source=source,
                         line=mark.line + 1 if mark else None) from None
