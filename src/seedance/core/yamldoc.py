"""The YAML loader with line numbers (the only one): parse, locate a key path's line, refuse
anchors/aliases, and turn pydantic errors into ``InputError`` with file, line and dotted field."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from seedance.core.errors import InputError


def line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at path ``loc`` (the deepest existing one)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    line = k.start_mark.line + 1
                    nxt = v
                    break
            if nxt is None:
                return line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def reject_aliases(text: str, *, source: str) -> None:
    """``InputError`` (with the line) when ``text`` uses YAML anchors or aliases (a small file could
    expand into a huge document); bad YAML raises ``InputError`` too."""
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                mark = ev.start_mark
                raise InputError("YAML anchors and aliases are not accepted", source=source,
                                 line=mark.line + 1 if mark else None)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", source=source,
                         line=mark.line + 1 if mark else None) from None


def compose(text: str, *, source: str, what: str, allow_empty: bool = False) -> tuple[yaml.Node | None, Any]:
    """Parse ``text`` as YAML (node tree and data); bad YAML or an empty file raise ``InputError``."""
    try:
        node = yaml.compose(text)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', exc)}", source=source,
                         line=mark.line + 1 if mark else None) from None
    if data is None and not allow_empty:
        raise InputError(f"empty {what}", source=source, line=1)
    return node, data


def validate(model: type[BaseModel], data: Any, node: yaml.Node | None, *, source: str, schema: str) -> Any:
    """``model.model_validate(data)``; the first error becomes an ``InputError`` with line and dotted field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and (x.startswith("function-") or x == "[key]")))
        field = ".".join(str(x) for x in loc) or None
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key (not in the {schema} schema; check the spelling)"
        raise InputError(msg, source=source, line=line_of(node, loc), field=field) from None
