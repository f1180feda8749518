"""Exact parsing of Kubernetes resource quantities (``"500m"``, ``"64Gi"``, ``"1e3"``, ``"1.5"``).

Grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go): a signed decimal number followed by
nothing, a binary SI suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, k, M, G, T, P,
E) or a decimal exponent (``e3``, ``E-2``). Values are returned as exact fractions; callers round
(CPU requests up to whole milli-cores, as the API server does).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from seedance.core.errors import InputError

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?"
)
MIB = 2**20


def parse_quantity(value: str | int | float, *, field: str | None = None) -> Fraction:
    """Exact value of a quantity; raises :class:`InputError` naming ``field`` when malformed.

    >>> parse_quantity("500m"), parse_quantity("1.5Gi") == 1.5 * 2**30, parse_quantity("2e3")
    (Fraction(1, 2), True, Fraction(2000, 1))
    """
    if isinstance(value, bool):
        raise InputError(f"not a quantity: {value!r}", field=field)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"not a quantity: {value!r}", field=field)
        return Fraction(str(value))
    m = _QUANTITY.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise InputError(f"not a quantity: {value!r}", field=field)
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def cpu_milli(value: str | int | float, *, field: str | None = None) -> int:
    """CPU quantity in milli-cores, rounded up (``"0.1"`` → 100, ``"1n"`` → 1)."""
    return math.ceil(parse_quantity(value, field=field) * 1000)


def memory_mib(value: str | int | float, *, field: str | None = None, round_up: bool = True) -> int:
    """Memory quantity in MiB: rounded up for requests, down (``round_up=False``) for capacities."""
    q = parse_quantity(value, field=field) / MIB
    return math.ceil(q) if round_up else math.floor(q)
