"""Flag evaluation through OpenFeature with the flagd provider in file mode (no flagd daemon).

Each :class:`FlagEvaluator` registers its own provider under its own OpenFeature domain, so two
evaluators in one process (the service and the controller's confirmation probe, in tests) never
share state; the provider re-reads the file when its modification time changes (polled every
``poll_ms``). An external flagd can be used instead by giving ``host``/``port`` (RPC resolver).
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path
from typing import Any

from seedance.core.errors import InputError

_DOMAINS = itertools.count()  # unique domain names; the counter holds no state worth resetting
_LOCK = threading.Lock()


def _domain() -> str:
    with _LOCK:
        return f"seedance-rollout-{os.getpid()}-{next(_DOMAINS)}"


class FlagEvaluator:
    """OpenFeature client of one flag file (or one flagd daemon).

    Args:
        path: flagd flag file (file resolver), validated first.
        poll_ms: How often the provider checks the file for changes.
        host, port: Use a flagd daemon (RPC resolver) instead of the file.
    """

    def __init__(self, path: str | Path | None = None, *, poll_ms: int = 100, host: str | None = None,
                 port: int | None = None) -> None:
        from openfeature import api
        from openfeature.contrib.provider.flagd import FlagdProvider
        from openfeature.contrib.provider.flagd.config import ResolverType

        from seedance.rollout.flags import load_flag_file

        if path is None and host is None:
            raise InputError("give a flag file or a flagd host", source="flags")
        if path is not None:
            load_flag_file(path)
            provider = FlagdProvider(resolver_type=ResolverType.FILE, offline_flag_source_path=str(path),
                                     deadline_ms=poll_ms)
        else:
            provider = FlagdProvider(resolver_type=ResolverType.RPC, host=host, port=port)
        self.domain = _domain()
        self.provider = provider
        api.set_provider_and_wait(provider, self.domain)
        self.client = api.get_client(self.domain)

    def details(self, flag: str, default: Any, targeting_key: str, **attributes: Any) -> Any:
        """OpenFeature evaluation details of ``flag`` (type of ``default``) for one context."""
        from openfeature.evaluation_context import EvaluationContext

        ctx = EvaluationContext(targeting_key, attributes)
        if isinstance(default, bool):
            return self.client.get_boolean_details(flag, default, ctx)
        if isinstance(default, int):
            return self.client.get_integer_details(flag, default, ctx)
        if isinstance(default, float):
            return self.client.get_float_details(flag, default, ctx)
        if isinstance(default, str):
            return self.client.get_string_details(flag, default, ctx)
        return self.client.get_object_details(flag, default, ctx)

    def variant(self, flag: str, targeting_key: str, default: Any = False, **attributes: Any) -> str | None:
        """The variant name ``flag`` (of the type of ``default``) resolves to; ``None`` on an evaluation error."""
        d = self.details(flag, default, targeting_key, **attributes)
        return str(d.variant) if d.error_code is None and d.variant is not None else None

    def close(self) -> None:
        """Shut the provider down and detach the domain."""
        from openfeature import api
        from openfeature.provider.no_op_provider import NoOpProvider

        self.provider.shutdown()
        api.set_provider(NoOpProvider(), self.domain)
