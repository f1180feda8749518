"""A generic, case-insensitive name registry for plug-in families.

Every plug-in family (placement policies, queue orders, batchers, ...) owns one ``Registry``
instance, created where the family's base class lives. Registration happens at import time of
the plug-in module through the decorator. A registry created with ``plugins="package.module"``
imports that module the first time it is asked for a name (lazy loading): callers never import
plug-in packages for their side effects. A plug-in of another package can be announced by name
with :meth:`Registry.defer` (``reg.defer("name", "package.module")``): its module is imported the
first time that name is asked for, so a run that never uses it never pays for the import.

>>> reg: Registry[type] = Registry("demo")
>>> @reg.register("best-fit", aliases=("bf",))
... class BestFit: ...
>>> reg.get("BF") is BestFit
True
>>> reg.get("nope")
Traceback (most recent call last):
...
seedance.core.errors.UnknownNameError: unknown demo 'nope'; valid names: best-fit
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from seedance.core.errors import UnknownNameError

T = TypeVar("T")


class _Deferred:
    """Placeholder of a plug-in announced by :meth:`Registry.defer` (its module not imported yet)."""

    __slots__ = ("module",)

    def __init__(self, module: str) -> None:
        self.module = module


class Registry(Generic[T]):
    """Maps names (and aliases) to plug-ins of one family."""

    def __init__(self, family: str, *, plugins: str | None = None) -> None:
        self.family = family
        self.plugins = plugins
        self._loaded = plugins is None
        self._items: dict[str, T | _Deferred] = {}
        self._aliases: dict[str, str] = {}

    def _load(self) -> None:
        """Import the built-in plug-in module once (it registers itself through the decorator)."""
        if not self._loaded:
            self._loaded = True
            assert self.plugins is not None
            importlib.import_module(self.plugins)

    def register(self, name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name`` (and ``aliases``)."""

        def deco(obj: T) -> T:
            self.add(name, obj, aliases=aliases)
            return obj

        return deco

    def add(self, name: str, obj: T, *, aliases: tuple[str, ...] = ()) -> None:
        """Register ``obj`` under ``name``; a name already taken by another object is an error."""
        key = name.lower()
        old = self._items.get(key)
        if old is not None and old is not obj and not isinstance(old, _Deferred):
            raise ValueError(f"{self.family} {name!r} is already registered")
        self._items[key] = obj
        for alias in aliases:
            self._aliases[alias.lower()] = key

    def defer(self, name: str, module: str) -> None:
        """Announce ``name``, registered by ``module`` on import; the module loads when ``name`` is first asked for.

        The name is listed (and keeps its place in :meth:`names`) before the module is imported.
        """
        key = name.lower()
        if key not in self._items:
            self._items[key] = _Deferred(module)

    def get(self, name: str) -> T:
        """Return the plug-in called ``name`` (case-insensitive, aliases accepted)."""
        self._load()
        key = name.strip().lower()
        key = self._aliases.get(key, key)
        try:
            obj = self._items[key]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.family} {name!r}; valid names: {', '.join(self.names())}"
            ) from None
        if isinstance(obj, _Deferred):
            importlib.import_module(obj.module)
            obj = self._items[key]
            if isinstance(obj, _Deferred):
                raise ValueError(f"{obj.module} does not register {self.family} {name!r}")
        return obj

    def names(self) -> list[str]:
        """Registered canonical names, in registration order."""
        self._load()
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        self._load()
        key = name.strip().lower()
        return self._aliases.get(key, key) in self._items

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._items))

    def __len__(self) -> int:
        self._load()
        return len(self._items)
