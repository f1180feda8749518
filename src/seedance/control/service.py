"""``ControlService``: everything one control-plane process holds, wired from its settings.

The API app (``app.create_app``) and the CLI's local mode (``client.LocalClient``) both build one;
it owns the store handle, the metrics registry, the cost scorer, the policy validator, the
dispatcher, the scheduling loop and the token cache. Nothing here is module-global, so two
services in one process (tests do this) never share state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from seedance.backends.dispatch import Dispatcher, make_dispatcher
from seedance.control.costing import CostScorer, make_cost_scorer
from seedance.control.db import migrate
from seedance.control.db.session import Database
from seedance.control.errors import TooManyRequests, Unauthorized
from seedance.control.observability import ControlMetrics, serve_metrics
from seedance.control.policydoc import PolicyValidator, default_policy_validator
from seedance.control.ratelimit import RATE_LIMITERS, RateLimiter
from seedance.control.rendercache import RenderCache
from seedance.control.security import Principal, hash_token
from seedance.control.services import tokens
from seedance.control.services.attestation import LiveStages
from seedance.control.services.attestation_config import build_registry
from seedance.control.services.groupcommit import GroupCommitter
from seedance.control.services.jobs import ClusterDirectory
from seedance.control.services.scheduling import FilterProvider, SchedulingLoop
from seedance.control.services.wakeup import NotifyWaker
from seedance.control.settings import ControlSettings
from seedance.scheduling.framework import FilterPlugin
from seedance.tiers.config import DEFAULT_TIER_CONFIG, TierConfig

_CACHE_MAX = 10_000


class ControlService:
    """One control-plane instance.

    Args:
        settings: Service settings.
        filters: Extra scheduling filter plug-ins (a list for every tier, or ``tier -> list``).
        cost_scorer: Name of the ``COST_SCORERS`` entry computing ``cost_score`` (default: the settings').
        dispatcher: A dispatcher instance (default: the one named by ``settings.dispatcher``).
        run_migrations: Bring the store to the newest schema first.
        stages: Trust and deferral wiring of the loop (default: no attestation registry, so no node
            is eligible for a sensitive job; no deferral).
        tier_config: SLA tiers of the scheduling loop (default: ``seedance.tiers.DEFAULT_TIER_CONFIG``).
    """

    def __init__(
        self, settings: ControlSettings, *, filters: Sequence[FilterPlugin] | FilterProvider = (),
        cost_scorer: str | None = None, dispatcher: Dispatcher | None = None, run_migrations: bool = True,
        stages: LiveStages | None = None,
        tier_config: TierConfig | None = None,
    ) -> None:
        self.settings = settings
        self.db = Database(settings.database_url, pool_size=settings.db_pool_size)
        if run_migrations:
            migrate.upgrade(self.db)
        self.metrics = ControlMetrics(self.db)
        self.dashboard_cache = RenderCache(settings.dashboard_cache_s)
        self.scorer: CostScorer = make_cost_scorer(cost_scorer or settings.cost_scorer, settings)
        self.directory = ClusterDirectory()
        self.revision = migrate.HEAD_REVISION if run_migrations else migrate.current_revision(self.db)
        self.validator: PolicyValidator = default_policy_validator()
        self.dispatcher = dispatcher if dispatcher is not None else make_dispatcher(settings.dispatcher)
        self.loop = SchedulingLoop(
            self.db, scorer=self.scorer, dispatcher=self.dispatcher, filters=filters, metrics=self.metrics,
            default_placement=settings.default_placement, default_queue=settings.default_queue_order,
            batch=settings.scheduler_batch, explain=settings.explain, interval_s=settings.scheduler_interval_s,
            min_gap_s=settings.scheduler_min_gap_s,
            tier_pools=settings.tier_pools,
            stages=stages if stages is not None else LiveStages(registry=build_registry(settings)),
            preemption=settings.preemption,
            tier_config=tier_config if tier_config is not None else DEFAULT_TIER_CONFIG,
        )
        self.limiter: RateLimiter = RATE_LIMITERS.get(settings.rate_limiter)(
            redis_url=settings.redis_url, prefix=settings.rate_limit_prefix)
        self.committer = GroupCommitter(
            self.db, max_batch=settings.group_commit_max, threads=settings.group_commit_threads,
        ) if settings.group_commit else None
        # no loop here: a submission wakes the loop process of the store by NOTIFY (services/wakeup.py)
        self.waker = NotifyWaker(self.db, min_gap_s=settings.scheduler_min_gap_s) if (
            not settings.scheduler_enabled and settings.scheduler_notify and not self.db.is_sqlite) else None
        self._metrics_server: Any = None
        self._auth_cache: dict[str, tuple[Principal, float]] = {}
        self._auth_lock = threading.Lock()
        self.bootstrap_value: str | None = None
        with self.db.write() as s:
            secret = settings.bootstrap_token.get_secret_value() if settings.bootstrap_token else None
            self.bootstrap_value = tokens.ensure_admin_token(session=s, value=secret)

    def start(self, *, loop: bool | None = None) -> None:
        """Start the scheduling loop thread (``loop``, default: when enabled) and the metrics listener (when set)."""
        if self.settings.scheduler_enabled if loop is None else loop:
            self.loop.start()
        if self.settings.metrics_listen and self._metrics_server is None:
            host, _, port = self.settings.metrics_listen.rpartition(":")
            self._metrics_server = serve_metrics(self.metrics, host.strip("[]"), int(port))

    def close(self) -> None:
        """Stop the loop, the dispatcher and the store connections."""
        self.loop.stop()
        if self.waker is not None:
            self.waker.close()
        if self.committer is not None:
            self.committer.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        self.dispatcher.close()
        self.limiter.close()
        self.db.dispose()

    def wake_scheduler(self) -> None:
        """Start a scheduling cycle now: the loop's here, or else a loop process's (PostgreSQL ``NOTIFY``)."""
        if self.waker is not None and not self.loop.running:
            self.waker.wake()
        else:
            self.loop.wake()

    # ------------------------------------------------------------------------------- tokens
    def cached_principal(self, value: str | None) -> Principal | None:
        """The caller of ``value`` if it was authenticated within ``auth_cache_ttl_s`` (no store access)."""
        if not value or self.settings.auth_cache_ttl_s <= 0:
            return None
        hit = self._auth_cache.get(hash_token(value))
        return hit[0] if hit is not None and hit[1] > time.monotonic() else None

    def authenticate(self, value: str | None) -> Principal:
        """The caller of a presented token; ``Unauthorized`` when missing, unknown or revoked."""
        if not value:
            raise Unauthorized("missing bearer token (header 'Authorization: Bearer <token>')")
        key = hash_token(value)
        now = time.monotonic()
        ttl = self.settings.auth_cache_ttl_s
        if ttl > 0:
            hit = self._auth_cache.get(key)
            if hit is not None and hit[1] > now:
                return hit[0]
        with self.db.read() as s:
            principal = tokens.authenticate(session=s, value=value)
        if principal is None:
            raise Unauthorized("unknown or revoked token")
        if ttl > 0:
            with self._auth_lock:
                if len(self._auth_cache) >= _CACHE_MAX:
                    self._auth_cache.clear()
                self._auth_cache[key] = (principal, now + ttl)
        return principal

    def authenticate_from(self, value: str | None, address: str | None) -> Principal:
        """:meth:`authenticate` with failed-authentication throttling per source address.

        An address over ``failed_auth_per_address`` failures this minute gets ``TooManyRequests``
        before its token is looked up (no store query).
        """
        limit = self.settings.failed_auth_per_address
        key = f"authfail:{address or '?'}"
        if limit:
            wait = self.limiter.over(key, limit, 60)
            if wait is not None:
                raise TooManyRequests("too many failed authentications from this address; retry later", wait)
        try:
            return self.authenticate(value)
        except Unauthorized:
            if limit:
                self.limiter.hit(key, limit, 60)
            raise

    def forget_token(self, token_id: int) -> None:
        """Drop a token from this process's cache (called after it is revoked here)."""
        with self._auth_lock:
            for key in [k for k, (p, _) in self._auth_cache.items() if p.token_id == token_id]:
                del self._auth_cache[key]
