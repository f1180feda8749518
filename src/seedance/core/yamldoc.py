"""The YAML loader with line numbers (the only one): parse, locate a key path's line, refuse
anchors/aliases, and turn pydantic errors into ``InputError`` with file, line and dotted field."""

from __future__ import annotations

from collections.abc import Callable
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
        raise yaml_error(exc, source=source) from None


def yaml_error(exc: yaml.YAMLError, *, source: str) -> InputError:
    """The ``InputError`` for a PyYAML error: its problem, and the line of its problem (or context) mark."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return InputError(f"not valid YAML: {problem}", source=source, line=mark.line + 1 if mark else None)


def compose(text: str, *, source: str, what: str, allow_empty: bool = False) -> tuple[yaml.Node | None, Any]:
    """Parse ``text`` as YAML (node tree and data); bad YAML or an empty file raise ``InputError``."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source=source) from None
    if data is None and not allow_empty:
        raise InputError(f"empty {what}", source=source, line=1)
    return node, data


def compose_all(text: str, *, source: str,
                near: Callable[[int], str | None] | None = None) -> list[tuple[yaml.Node, Any]]:
    """Every non-empty document of a multi-document YAML text: its node tree and its data (constructed
    from that tree, so lines and values agree). Bad YAML raises ``InputError`` with the line; for a
    syntax error (not a value the safe loader refuses), ``near(line)`` names the field when given."""
    docs: list[tuple[yaml.Node, Any]] = []
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # the reader refuses special characters here already
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append((node, loader.construct_document(node)))
    except yaml.YAMLError as exc:
        err = yaml_error(exc, source=source)
        if near is not None and err.line is not None and not isinstance(exc, yaml.constructor.ConstructorError):
            err = InputError(err.message, source=source, line=err.line, field=near(err.line))
        raise err from None
    finally:
        if loader is not None:
            loader.dispose()
    return docs


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
