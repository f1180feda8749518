"""Service settings (pydantic-settings): environment variables ``SEEDANCE_*`` or keyword arguments.

``seedancectl serve`` turns its options into these settings. The one secret, the bootstrap admin
token, is refused when it is a well-known placeholder (the FastAPI template's guard) or weak: shorter
than 32 characters, fewer than 12 distinct characters, or below 128 bits by the estimate
``length × log2(alphabet of the character classes it uses)`` (``openssl rand -hex 32`` and
``python -c 'import secrets; print(secrets.token_urlsafe(32))'`` pass).
"""

from __future__ import annotations

import math
import string
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from seedance.control.paths import default_database_url

_PLACEHOLDERS = frozenset({"changethis", "changeme", "secret", "password", "admin", "token"})


MIN_TOKEN_CHARS = 32
MIN_TOKEN_BITS = 128
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def token_bits(raw: str) -> float:
    """Upper estimate of a secret's entropy: its length times log2 of the alphabets it draws from."""
    alphabet = sum(len(c) for c in _CLASSES if any(ch in c for ch in raw))
    if any(not any(ch in c for c in _CLASSES) for ch in raw):
        alphabet += 32  # punctuation and the rest
    return len(raw) * math.log2(max(alphabet, 2))


class ControlSettings(BaseSettings):
    """Everything the control-plane service reads at start-up."""

    model_config = SettingsConfigDict(env_prefix="SEEDANCE_", extra="ignore", frozen=True)

    database_url: str = Field(
        default_factory=default_database_url,
        description="SQLAlchemy URL: sqlite:///path.db (default: seedance.db in $SEEDANCE_HOME) or "
        "postgresql+psycopg://user@host:port/db.",
    )
    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port (0 picks a free one).")
    workers: int = Field(default=1, ge=1, le=64, description="uvicorn worker processes.")
    max_body_bytes: int = Field(
        default=64 * 1024, ge=1024, le=16 * 2**20, description="Largest request body accepted (413 above)."
    )
    max_header_bytes: int = Field(
        default=16 * 1024, ge=1024, le=1024 * 1024,
        description="Largest request line plus headers accepted (431 and the connection closed above).")
    idle_timeout_s: int = Field(
        default=5, ge=1, le=3600,
        description="Seconds a connection may stay idle before its request headers are complete, or between "
        "requests (keep-alive); then it is closed.")
    group_commit: bool = Field(
        default=True, description="Commit concurrent job submissions together (each answered after its commit).")
    group_commit_max: int = Field(default=256, ge=1, le=10_000, description="Most submissions per group commit.")
    group_commit_threads: int = Field(default=4, ge=1, le=64,
                                      description="Committer threads (connections) on PostgreSQL; SQLite uses one.")
    switch_interval_ms: float = Field(
        default=0.5, gt=0, le=100,
        description="GIL switch interval of a serving process (Python's default: 5 ms): how long a thread running "
        "Python code (scheduling loop, committers) may keep the event loop waiting (control/runtime.py).")
    gc_freeze: bool = Field(
        default=True, description="Freeze the objects made at start-up out of the garbage collector's full passes "
        "(a full pass over them held the GIL 150-200 ms).")
    gc_gen0_threshold: int = Field(default=20_000, ge=100, le=10_000_000,
                                   description="Allocations between young-generation collections (Python: 700).")
    scheduler_enabled: bool = Field(default=True, description="Run the live scheduling loop in this process.")
    scheduler_interval_s: float = Field(
        default=0.5, gt=0, le=60, description="Seconds between loop cycles when nothing wakes it earlier."
    )
    scheduler_min_gap_s: float = Field(
        default=0.05, ge=0, le=10,
        description="Seconds a woken loop waits before its cycle (0: none): jobs submitted meanwhile are decided "
        "together, so the cycle's fixed cost (reads, two commits, the dispatch query) is paid less often.")
    scheduler_notify: bool = Field(
        default=True, description="With scheduler_enabled off on PostgreSQL: wake the loop of another process "
        "(seedancectl scheduler run) by NOTIFY after a submission, at most once per scheduler_min_gap_s.")
    scheduler_batch: int = Field(default=1024, ge=1, le=100_000, description="Most pending jobs decided per cycle.")
    default_placement: str = Field(
        default="best-fit", description="Placement policy (registry name) of clusters with no enabled policy."
    )
    default_queue_order: str = Field(default="priority", description="Queue order (registry name) by default.")
    dispatcher: str = Field(default="noop", description="Backend that runs placed jobs (DISPATCHERS registry name).")
    explain: bool = Field(default=True, description="Add filter counts and runner-up nodes to every decision.")
    tier_pools: bool = Field(
        default=False,
        description="Place jobs only in their SLA tier's node pool or one it may borrow (labels gpu.sla.level, "
        "gpu.mode; Gold on gold+exclusive nodes), with seedance.tiers.TieredScheduler.",
    )
    preemption: bool = Field(
        default=False,
        description="With tier_pools: a job that cannot be placed preempts running jobs of the tiers it may "
        "preempt (victims chosen as in the tiered replay; stopped through the dispatcher and re-queued).",
    )
    cost_scorer: str = Field(
        default="gpu-hours", description="COST_SCORERS entry computing cost_score: gpu-hours (rental, no data) "
        "or costmodel (energy+carbon+delay from the region's signals).")
    cost_region: str = Field(default="US-CAL-CISO", description="Signals region of the costmodel scorer.")
    bootstrap_token: SecretStr | None = Field(
        default=None, description="Admin token created at start-up if absent (its hash is stored, never the value)."
    )
    opentelemetry: bool = Field(
        default=False, description="FastAPI's native OpenTelemetry spans, metrics and logs (when a provider is "
        "configured); off by default: its per-request provider checks cost CPU on every request.")
    auth_cache_ttl_s: float = Field(
        default=2.0, ge=0, le=300,
        description="Seconds a verified token stays cached in this process; a revocation made through another "
        "process takes effect within this time (at once in the process that revoked it).",
    )
    dashboard_cache_s: float = Field(
        default=5.0, ge=0, le=300,
        description="Seconds a rendered /api/v1/dashboard answer is shared by the callers asking for the same tenant "
        "scope, cluster and window (its Age header says how old; 0: render every call). The page polls every 5 s.")
    rate_limit_per_address: int = Field(
        default=5000, ge=0, le=10_000_000, description="Requests per second from one source address (0: no limit).")
    rate_limit_per_token: int = Field(
        default=2000, ge=0, le=10_000_000, description="Requests per second with one bearer token (0: no limit).")
    failed_auth_per_address: int = Field(
        default=300, ge=0, le=10_000_000,
        description="Failed authentications per minute from one address before its requests get 429 (0: no limit).")
    rate_limiter: str = Field(
        default="memory", description="RATE_LIMITERS entry: memory (per process) or redis (shared by workers).")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis of the redis rate limiter.")
    rate_limit_prefix: str = Field(default="seedance:rl:", description="Key prefix of the redis rate limiter.")
    content_security_policy: str = Field(
        default="default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        pattern=r"^[\x20-\x7e]{1,4000}$",
        description="Content-Security-Policy of every answer; add the origins of third-party scripts a consent "
        "flow declares to script-src (they are blocked otherwise).")
    metrics_public: bool | None = Field(
        default=None, description="Serve /metrics on the API port without a token. Default: yes in a local "
        "environment without metrics_listen, otherwise a bearer token is required (Prometheus: authorization).")
    metrics_listen: str | None = Field(
        default=None, pattern=r"^[0-9A-Za-z.:\[\]-]+:[0-9]{1,5}$",
        description="host:port of a separate metrics listener without a token (bind it to a private address); "
        "one per process, so with several workers use the token instead.")
    db_pool_size: int = Field(default=16, ge=1, le=256, description="Connections kept open per process.")
    environment: Literal["local", "production"] = Field(default="local", description="Deployment kind.")
    attestation_service: Literal["none", "maa", "intel-trust-authority"] = Field(
        default="none", description="Attestation service whose node tokens admit sensitive jobs (none: no node is "
        "eligible for a sensitive job).")
    attestation_issuer: str | None = Field(
        default=None, max_length=2000, description="MAA instance URL (the tokens' exact iss), required for maa; "
        "Intel Trust Authority's base URL for intel-trust-authority (default: its portal).")
    attestation_jwks_file: str | None = Field(
        default=None, description="JWKS file pinning the service's signing keys (default: fetched from its /certs).")
    attestation_audience: str | None = Field(
        default=None, max_length=2000, description="Required aud member of the tokens, if they carry one.")
    attestation_measurements_file: str | None = Field(
        default=None, description="JSON {tenant: [launch measurement hex, ...]}: what each tenant's sensitive jobs "
        "accept (required with an attestation service).")
    attestation_max_age_s: float | None = Field(
        default=None, gt=0, le=30 * 86400,
        description="Trust a verified token at most this many seconds, whatever its exp (default: its exp).")
    attestation_nonce_ttl_s: float = Field(
        default=300.0, gt=0, le=86400, description="Seconds a node has to attest with a nonce it was issued.")

    @field_validator("bootstrap_token")
    @classmethod
    def _check_secret(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return v
        raw = v.get_secret_value()
        if raw.lower() in _PLACEHOLDERS:
            raise ValueError("bootstrap_token is a placeholder value; generate a random one")
        if len(raw) < MIN_TOKEN_CHARS or len(set(raw)) < 12 or token_bits(raw) < MIN_TOKEN_BITS:
            raise ValueError(
                f"bootstrap_token is too weak: use at least {MIN_TOKEN_CHARS} random characters "
                f"(>= {MIN_TOKEN_BITS} bits), e.g. the output of 'openssl rand -hex 32'")
        return v

    @property
    def metrics_open(self) -> bool:
        """Whether /metrics on the API port answers without a token."""
        if self.metrics_public is not None:
            return self.metrics_public
        return self.environment == "local" and self.metrics_listen is None

    @model_validator(mode="after")
    def _check_url(self) -> ControlSettings:
        if not self.database_url.startswith(("sqlite", "postgresql")):
            raise ValueError("database_url must be a sqlite:/// or postgresql+psycopg:// URL")
        if self.attestation_service != "none" and not self.attestation_measurements_file:
            raise ValueError("attestation_service needs attestation_measurements_file (the tenants' allow-lists)")
        if self.attestation_service == "maa" and not self.attestation_issuer:
            raise ValueError("attestation_service maa needs attestation_issuer (the MAA instance URL)")
        if self.preemption and not self.tier_pools:
            raise ValueError("preemption needs tier_pools (victims are chosen inside a tier's own pool)")
        return self
