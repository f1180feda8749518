"""Small helpers shared by CLI commands: parsing lists and ranges, writing outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seedance.core.errors import InputError

if TYPE_CHECKING:
    import typer

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def command_group(app: typer.Typer, name: str, help_text: str) -> typer.Typer:
    """The ``typer`` command group ``name`` of ``app``: the one another module registered, else a new one.

    Groups such as ``explain`` and ``scheduler`` gather commands from several modules.
    """
    import typer

    group = next((g.typer_instance for g in app.registered_groups if g.name == name and g.typer_instance), None)
    if group is None:
        group = typer.Typer(help=help_text, no_args_is_help=True)
        app.add_typer(group, name=name)
    return group


def parse_seeds(text: str) -> list[int]:
    """``"42-51"``, ``"42,43,50"`` or a mix (``"42-44,50"``) → sorted unique seeds.

    >>> parse_seeds("42-44,50")
    [42, 43, 44, 50]
    """
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _RANGE.fullmatch(part)
        if m is None:
            raise InputError(f"not a seed or a range: {part!r}", source="--seeds")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise InputError(f"empty range {part!r}", source="--seeds")
        seeds.update(range(lo, hi + 1))
    if not seeds:
        raise InputError("no seeds given", source="--seeds")
    return sorted(seeds)


def split_names(text: str) -> list[str]:
    """``"a,b, c"`` → ``["a", "b", "c"]``."""
    return [x.strip() for x in text.split(",") if x.strip()]


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``, creating parent folders."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def dumps(obj: Any) -> str:
    """JSON with a stable layout."""
    return json.dumps(obj, indent=2, sort_keys=False, allow_nan=False)


def progress_bar() -> Any:
    """A transient progress bar on stderr (description, bar, done/total, elapsed) for sweeps."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def emit(rendered: Any, out: Path | None = None) -> None:
    """Print text, or a rich renderable at least 120 columns wide; also write it to ``out``."""
    import typer
    from rich.console import Console

    if isinstance(rendered, str):
        typer.echo(rendered.rstrip("\n"))
        if out:
            write_text(out, rendered)
        return
    console = Console(record=out is not None, width=max(Console().width, 120))
    console.print(rendered)
    if out:
        write_text(out, console.export_text())
