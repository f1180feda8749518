"""Capture a node's MIG state live: run the four read-only ``nvidia-smi`` commands the audit reads.

Only listing commands are run (``-L``, ``mig -lgi``, ``mig -lci``, ``-q``); nothing changes a GPU.
``LC_ALL=C`` keeps the output in the format the parsers read. ``mig -lgi`` / ``-lci`` exit non-zero
with ``No MIG-enabled devices found.`` or ``No ... instances found`` on their output; that text is
kept, as it is a valid answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from seedance.core.errors import InputError
from seedance.trust.nvsmi import OutputKind

COMMANDS: tuple[tuple[str, tuple[str, ...], OutputKind], ...] = (
    ("nvidia-smi -L", ("-L",), OutputKind.LIST),
    ("nvidia-smi mig -lgi", ("mig", "-lgi"), OutputKind.GPU_INSTANCES),
    ("nvidia-smi mig -lci", ("mig", "-lci"), OutputKind.COMPUTE_INSTANCES),
    ("nvidia-smi -q", ("-q",), OutputKind.QUERY),
)

_ANSWERS = ("No MIG-enabled devices found", "No GPU instances found", "No compute instances found")


def capture_live(nvidia_smi: str = "nvidia-smi", *, timeout_s: float = 60.0) -> list[tuple[str, str, OutputKind]]:
    """``(command, output, kind)`` for the audit's four commands, run on this machine.

    Raises:
        InputError: ``nvidia-smi`` is not installed, times out, or fails without a known answer.
    """
    exe = shutil.which(nvidia_smi)
    if exe is None:
        raise InputError(
            f"{nvidia_smi} not found on PATH; capture the outputs on the node and pass --from FILE", source="--live"
        )
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    out: list[tuple[str, str, OutputKind]] = []
    for name, args, kind in COMMANDS:
        try:
            proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise InputError(f"{name} did not answer within {timeout_s:g} s", source="--live") from exc
        text = proc.stdout if proc.stdout.strip() else proc.stderr
        if proc.returncode != 0 and not any(a in text for a in _ANSWERS):
            raise InputError(f"{name} failed (exit {proc.returncode}): {text.strip()[:200]}", source="--live")
        out.append((name, text, kind))
    return out
