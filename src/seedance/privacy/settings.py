"""Privacy settings (pydantic-settings): environment variables ``SEEDANCE_PRIVACY_*`` or keyword arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_CONSENT_FLOW = Path(__file__).resolve().parents[3] / "config" / "privacy" / "consent_flow_v2.json"


class PrivacySettings(BaseSettings):
    """What the privacy service reads at start-up."""

    model_config = SettingsConfigDict(env_prefix="SEEDANCE_PRIVACY_", extra="ignore", frozen=True)

    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis holding caches and blacklists.")
    redis_prefix: str = Field(
        default="sd:", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9:_.-]+$",
        description="Prefix of every Redis key this service writes (the erasure scan covers exactly these keys).",
    )
    master_key: SecretStr | None = Field(
        default=None, description="Key-encryption key: 32 bytes, base64url. Wraps every data key and HMAC key. "
        "Unset: read or create 'privacy-master.key' in $SEEDANCE_HOME (local mode only).",
    )
    audit_dir: Path | None = Field(default=None, description="Folder of audit_logs/*.parquet (default: "
                                   "$SEEDANCE_HOME/audit_logs).")
    backup_dir: Path | None = Field(default=None, description="Folder of data backups (default: "
                                    "$SEEDANCE_HOME/backups).")
    erasure_deadline_hours: float = Field(default=72.0, gt=0, le=24 * 30, description="Deadline of an erasure.")
    worker_interval_s: float = Field(default=60.0, gt=0, le=3600, description="Seconds between erasure runs.")
    worker_enabled: bool = Field(default=True, description="Run pending erasures in the server process.")
    session_key_rotation_hours: float = Field(default=24.0, gt=0, description="A new session-id key this often.")
    session_key_retention_hours: float = Field(
        default=24.0 * 7, gt=0, description="A session-id key is destroyed this long after it was retired "
        "(its session ids then cannot be linked to a device by anyone).")
    device_key_rotation_hours: float = Field(default=24.0 * 30, gt=0, description="A new device-tag key this often.")
    device_key_retention_hours: float = Field(default=24.0 * 30, gt=0, description="Device-tag keys kept this long "
                                              "after retirement (blacklist lookups use every live key).")
    max_events_per_batch: int = Field(default=500, ge=1, le=500, description="Most events in one batch (the API's "
                                      "schema allows 500; 64 KiB bodies hold about 1,300 minimal events).")
    max_clock_skew_s: float = Field(default=300.0, ge=0, description="Events further in the future are refused.")
    max_event_age_hours: float = Field(default=24.0 * 7, gt=0, description="Older events are refused.")
    cluster_threshold: int = Field(
        default=50, ge=1, description="A WebGL signature seen on MORE than this many devices is paused.")
    cluster_window_hours: float = Field(default=24.0, gt=0, description="Devices are counted over this window.")
    blacklist_ttl_days: float = Field(default=30.0, gt=0, description="Life of a blacklist entry.")
    verified_ttl_days: float = Field(default=30.0, gt=0, description="Life of a passed challenge.")
    challenge_timeout_s: float = Field(default=300.0, gt=0, le=3600, description="Time to answer a challenge.")
    profile_cache_ttl_s: int = Field(default=3600, ge=1, description="Life of a cached subject profile in Redis.")
    webauthn_rp_id: str = Field(default="localhost", description="WebAuthn relying-party id (a domain).")
    webauthn_rp_name: str = Field(default="Seedance", description="WebAuthn relying-party name.")
    webauthn_origins: tuple[str, ...] = Field(
        default=("http://localhost:8080",), description="Origins a challenge answer may come from.")
    attestation_policy: Literal["trusted-root", "any"] = Field(
        default="trusted-root", description="trusted-root: only attestations whose certificate chain ends in one "
        "of attestation_roots pass (software authenticators and emulators cannot); any: every valid ceremony passes.")
    attestation_roots: tuple[Path, ...] = Field(
        default=(), description="PEM files of trusted attestation roots (e.g. from the FIDO Metadata Service).")
    consent_flow_file: Path = Field(default=REPO_CONSENT_FLOW, description="The consent flow document (JSON).")

    @field_validator("master_key")
    @classmethod
    def _check_key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return v
        from seedance.privacy.crypto import decode_key

        decode_key(v.get_secret_value(), source="SEEDANCE_PRIVACY_MASTER_KEY")
        return v
