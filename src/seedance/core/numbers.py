"""JSON numbers at the edges (API bodies, agents' posts): JSON Schema's ``integer`` includes ``1109.0``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator


def integral(v: object) -> object:
    """JSON Schema's ``integer`` includes ``1109.0``: accept integral floats as ints (strict otherwise)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return v


Int = Annotated[int, BeforeValidator(integral)]
"""An integer field of a request body: ints and integral floats; no strings, no booleans."""
