"""``seedancectl logs JOB``: a job's captured stdout/stderr, from the backend that ran it.

With a context it asks that server (``GET /api/v1/jobs/{id}/logs``); without one, the local store's
service and its dispatcher (``SEEDANCE_DISPATCHER=ray`` and ``SEEDANCE_RAY_ADDRESS`` reach a Ray
cluster). The log holds every run of the job: a job re-queued after its node died shows both runs.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seedance.core.errors import InputError

if TYPE_CHECKING:
    from seedance.control.client import ControlClient

_TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


def _fetch(client: ControlClient, ref: str, tail_bytes: int | None) -> dict[str, Any]:
    from seedance.control.client import ClientError
    from seedance.control.errors import ControlError

    try:
        return client.logs(ref, tail_bytes=tail_bytes)
    except ClientError as exc:
        raise InputError(str(exc)) from None
    except ControlError as exc:
        raise InputError(f"{exc.status}: {exc}") from None


def register(app: typer.Typer) -> None:
    """Add the ``logs`` command."""

    @app.command("logs")
    def logs(
        ref: Annotated[str, typer.Argument(help="Job id or name.")],
        tail_bytes: Annotated[int | None, typer.Option("--tail-bytes", min=1, max=16 * 2**20,
                                                       help="Only the last bytes of the log.")] = None,
        follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new output until the job ends.")]
        = False,
        interval: Annotated[float, typer.Option(min=0.1, max=60, help="Seconds between reads with --follow.")] = 1.0,
        output: Annotated[str, typer.Option("-o", "--output", help="text, json or yaml.")] = "text",
        context: Annotated[str | None, typer.Option("--context", help="Context to use (default: the current one).")]
        = None,
    ) -> None:
        """Print a job's captured output (every run of it)."""
        from seedance.cli.jobs import make_client
        from seedance.control.client import check_ref

        if output not in ("text", "table", "json", "yaml"):
            raise InputError(f"output must be text, json or yaml, not {output!r}", field="output")
        ref = check_ref(ref)
        client, _ = make_client(context)
        try:
            got = _fetch(client, ref, tail_bytes)
            if output in ("json", "yaml"):
                if output == "json":
                    typer.echo(json.dumps(got, indent=2))
                else:
                    import yaml

                    typer.echo(yaml.safe_dump(got, sort_keys=False).rstrip())
                return
            if not got["available"]:
                typer.echo(got["note"] or "no log", err=True)
            typer.echo(got["text"], nl=False)
            shown = got["text"]
            if follow and tail_bytes is not None:  # follow from the end of the whole log
                shown = _fetch(client, ref, None)["text"]
            while follow and got["status"] not in _TERMINAL:
                time.sleep(interval)
                got = _fetch(client, ref, None)
                text = got["text"]
                new = text[len(shown):] if text.startswith(shown) else text
                typer.echo(new, nl=False)
                shown = text
        finally:
            client.close()
