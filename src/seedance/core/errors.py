"""Errors shared by every domain.

``InputError`` is the one error type for bad user input (a malformed trace, policy file, price file
or API payload). It always names where the problem is, so the CLI can print one clear line and exit
with code 2, and the API can answer with a 4xx.
"""

from __future__ import annotations


class SeedanceError(Exception):
    """Base class of every error Seedance raises on purpose."""


class InputError(SeedanceError):
    """Bad input, located by file, line and field.

    Args:
        message: What is wrong, in words a user can act on.
        source: File path (or other origin such as ``"request body"``).
        line: 1-based line number in ``source``, when known.
        field: Column or field name, when known.

    >>> str(InputError("must be >= 0", source="pods.csv", line=3, field="cpu_milli"))
    'pods.csv:3: field cpu_milli: must be >= 0'
    """

    def __init__(
        self, message: str, *, source: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        what = f"field {self.field}: " if self.field else ""
        return f"{where}{what}{self.message}"


class UnknownNameError(SeedanceError, KeyError):
    """A name looked up in a registry does not exist; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown name"


class InvalidTransition(SeedanceError):
    """A lifecycle transition that the transition table does not allow."""
