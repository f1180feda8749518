"""The attestation registry of a control-plane process, built from its settings.

NOTE(seedance): ``attestation_service`` names an :data:`ATTESTATION_SERVICES` entry building the
trusted service (``maa``: issuer = the instance URL, RS256, JWKS at ``/certs``; ``intel-trust-authority``:
issuer ``Intel Trust Authority``, PS384/RS256). Keys come from ``attestation_jwks_file`` when set
(pinned), else from the service's ``/certs`` endpoint. The per-tenant allow-list is
``attestation_measurements_file``: a JSON object ``{tenant: [hex, ...]}``. The registry lives in
memory: after a restart every node must attest again (it asks for a fresh nonce anyway).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seedance.control.settings import ControlSettings
from seedance.core.errors import InputError
from seedance.core.registry import Registry
from seedance.trust.attestation import (
    AttestationService,
    AttestationVerifier,
    KeySource,
    NonceStore,
    PinnedJwks,
    intel_trust_authority_service,
    maa_service,
)
from seedance.trust.registry import AttestationRegistry, MeasurementPolicy

ServiceBuilder = Callable[[ControlSettings, KeySource | None], AttestationService]
ATTESTATION_SERVICES: Registry[ServiceBuilder] = Registry("attestation service")


def _maa(st: ControlSettings, keys: KeySource | None) -> AttestationService:
    assert st.attestation_issuer is not None  # the settings require it
    return maa_service("maa", st.attestation_issuer, keys, audience=st.attestation_audience)


def _ita(st: ControlSettings, keys: KeySource | None) -> AttestationService:
    base = {"base_url": st.attestation_issuer.rstrip("/")} if st.attestation_issuer else {}
    return intel_trust_authority_service(keys, audience=st.attestation_audience, **base)


ATTESTATION_SERVICES.add("maa", _maa)
ATTESTATION_SERVICES.add("intel-trust-authority", _ita)


def _json_file(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", source=path) from exc
    except ValueError as exc:
        raise InputError(f"the {what} is not JSON: {exc}", source=path) from exc


def _policy(path: str) -> MeasurementPolicy:
    doc = _json_file(path, "measurement allow-list")
    if not isinstance(doc, dict) or not all(
        isinstance(t, str) and isinstance(ms, list) and all(isinstance(m, str) and m for m in ms)
        for t, ms in doc.items()
    ):
        raise InputError("must be an object {tenant: [measurement hex, ...]}", source=path)
    return MeasurementPolicy.from_mapping(doc)


def build_registry(st: ControlSettings) -> AttestationRegistry | None:
    """The registry the settings describe (``None`` when ``attestation_service`` is ``none``)."""
    if st.attestation_service == "none":
        return None
    assert st.attestation_measurements_file is not None  # the settings require it
    keys = None
    if st.attestation_jwks_file:
        doc = _json_file(st.attestation_jwks_file, "JWKS")
        if not isinstance(doc, dict):
            raise InputError("a JWKS must be a JSON object with 'keys'", source=st.attestation_jwks_file)
        keys = PinnedJwks(doc, source=st.attestation_jwks_file)
    service = ATTESTATION_SERVICES.get(st.attestation_service)(st, keys)
    verifier = AttestationVerifier([service], NonceStore(ttl_s=st.attestation_nonce_ttl_s))
    return AttestationRegistry(verifier, _policy(st.attestation_measurements_file),
                               max_validity_s=st.attestation_max_age_s)
