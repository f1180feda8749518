"""Attestation-token verification: JWTs of Microsoft Azure Attestation and Intel Trust Authority.

NOTE(seedance): what a token must pass, in order (the first failure is the rejection reason).
  1. ``malformed`` — three base64url parts, JSON header and claims, an ``iss`` string, a ``kid``.
  2. ``issuer`` — ``iss`` is one of the configured attestation services (exact string:
     MAA ``https://<instance>.<region>.attest.azure.net``, Intel Trust Authority
     ``Intel Trust Authority``); the service decides keys, algorithms and audience.
  3. ``algorithm`` — the header's ``alg`` is one the service signs with (MAA ``RS256``; Intel
     Trust Authority ``PS384``, or ``RS256`` on request); ``none`` and HMAC are never accepted.
  4. ``unknown-key`` / ``keys-unavailable`` — the ``kid`` is in the service's JWKS (fetched from
     its ``certs`` endpoint with PyJWT's ``PyJWKClient``, or pinned from a file).
  5. ``signature`` — PyJWT verifies the signature with that key.
  6. ``audience`` — when the service is configured with one, ``aud`` must contain it (MAA and
     Intel Trust Authority tokens carry no ``aud``; other verifiers, e.g. Google's, do).
  7. ``expired`` / ``not-yet-valid`` — ``exp`` and ``iat`` are required; ``now`` within
     ``[nbf (or iat) - leeway, exp + leeway)``.
  8. ``tee-type`` — the attestation type claim names a format this verifier knows
     (``x-ms-attestation-type`` = ``sevsnpvm`` / ``tdxvm`` / ``sgx``; ``attester_type`` = ``TDX`` /
     ``SGX``) and the TEE the node advertises.
  9. ``debug`` — every debug claim of the format says disabled (``x-ms-sevsnpvm-is-debuggable``
     false; ``tdx_td_attributes_debug`` / ``tdx_is_debuggable`` / ``sgx_is_debuggable`` false;
     ``dbgstat`` = ``disabled``); a format's debug claim missing is a rejection, not a pass.
  10. ``tcb-status`` / ``compliance`` — Intel ``attester_tcb_status`` in the accepted set
      (``UpToDate``, ``OK`` by default); MAA ``x-ms-compliance-status`` = ``azure-compliant-cvm``
      for SEV-SNP and TDX confidential VMs.
  11. ``measurement`` — the launch measurement (``x-ms-sevsnpvm-launchmeasurement``, ``tdx_mrtd``,
      ``x-ms-sgx-mrenclave`` / ``sgx_mrenclave``) is on the allow-list (per tenant: the registry).
  12. ``nonce`` — the token binds a nonce this verifier issued to this node, unused, younger than
      the store's TTL (MAA: the EAT ``nonce`` claim; Intel Trust Authority: ``attester_held_data``,
      base64 of the nonce, the user data the attester passes). The nonce is consumed last, so a
      token failing an earlier check does not burn it.
  Claims and formats: MicrosoftDocs ``articles/attestation/attestation-token-examples.md`` and
  ``claim-sets.md``; Intel Trust Authority "Attestation tokens and claims" and its EAT profile.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from seedance.core.errors import InputError, SeedanceError
from seedance.core.registry import Registry


class TeeKind(StrEnum):
    """Trusted execution environments a node can advertise."""

    SGX = "sgx"
    TDX = "tdx"
    SEV_SNP = "sev-snp"


class Reason(StrEnum):
    """Why a token was rejected."""

    MALFORMED = "malformed"
    ISSUER = "issuer"
    ALGORITHM = "algorithm"
    UNKNOWN_KEY = "unknown-key"
    KEYS_UNAVAILABLE = "keys-unavailable"
    SIGNATURE = "signature"
    AUDIENCE = "audience"
    EXPIRED = "expired"
    NOT_YET_VALID = "not-yet-valid"
    TEE_TYPE = "tee-type"
    DEBUG = "debug"
    TCB_STATUS = "tcb-status"
    COMPLIANCE = "compliance"
    NONCE = "nonce"
    MEASUREMENT = "measurement"
    REVOKED = "revoked"


class AttestationRejected(SeedanceError):
    """A token that does not verify; ``reason`` is machine-readable, the message says why."""

    def __init__(self, reason: Reason, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(f"{reason.value}: {message}")


# ---------------------------------------------------------------------------- formats


@dataclass(frozen=True, slots=True)
class TokenFormat:
    """The claims of one attestation service's tokens for one TEE.

    Attributes:
        name: Registry name (``maa-sevsnp``, ``ita-tdx``, ...).
        tee: The TEE these tokens attest.
        type_claim: Claim naming the attestation type, and ``type_value`` its value.
        measurement_claim: Claim holding the launch measurement (hex).
        debug_false: Claims that must be present and ``false``.
        debug_disabled: Claims that must be present and ``"disabled"``.
        nonce_claim: Claim binding the nonce; ``nonce_base64`` when it holds base64 of it.
        tcb_claim: Claim with the TCB status (checked against the service's accepted set).
        compliance: ``(claim, value)`` that must hold.
    """

    name: str
    tee: TeeKind
    type_claim: str
    type_value: str
    measurement_claim: str
    debug_false: tuple[str, ...] = ()
    debug_disabled: tuple[str, ...] = ()
    nonce_claim: str = "nonce"
    nonce_base64: bool = False
    tcb_claim: str | None = None
    compliance: tuple[str, str] | None = None


TOKEN_FORMATS: Registry[TokenFormat] = Registry("attestation token format")

_MAA_TYPE = "x-ms-attestation-type"
for _f in (
    TokenFormat(
        "maa-sevsnp",
        TeeKind.SEV_SNP,
        _MAA_TYPE,
        "sevsnpvm",
        "x-ms-sevsnpvm-launchmeasurement",
        debug_false=("x-ms-sevsnpvm-is-debuggable",),
        compliance=("x-ms-compliance-status", "azure-compliant-cvm"),
    ),
    TokenFormat(
        "maa-tdx",
        TeeKind.TDX,
        _MAA_TYPE,
        "tdxvm",
        "tdx_mrtd",
        debug_false=("tdx_td_attributes_debug",),
        debug_disabled=("dbgstat",),
        tcb_claim="attester_tcb_status",
        compliance=("x-ms-compliance-status", "azure-compliant-cvm"),
    ),
    TokenFormat(
        "maa-sgx", TeeKind.SGX, _MAA_TYPE, "sgx", "x-ms-sgx-mrenclave", debug_false=("x-ms-sgx-is-debuggable",)
    ),
    TokenFormat(
        "ita-tdx",
        TeeKind.TDX,
        "attester_type",
        "TDX",
        "tdx_mrtd",
        debug_false=("tdx_is_debuggable",),
        debug_disabled=("dbgstat",),
        nonce_claim="attester_held_data",
        nonce_base64=True,
        tcb_claim="attester_tcb_status",
    ),
    TokenFormat(
        "ita-sgx",
        TeeKind.SGX,
        "attester_type",
        "SGX",
        "sgx_mrenclave",
        debug_false=("sgx_is_debuggable",),
        debug_disabled=("dbgstat",),
        nonce_claim="attester_held_data",
        nonce_base64=True,
        tcb_claim="attester_tcb_status",
    ),
):
    TOKEN_FORMATS.add(_f.name, _f)


# ---------------------------------------------------------------------------- keys


class KeySource(Protocol):
    """Where a service's signing keys come from."""

    def key_for(self, token: str, kid: str) -> Any:
        """The public key for ``kid`` (raises :class:`AttestationRejected` when there is none)."""


class JwksUrl:
    """The service's JWKS endpoint, fetched and cached by PyJWT's ``PyJWKClient`` (refetched on an unknown kid).

    Args:
        url: ``https://<instance>.attest.azure.net/certs``, ``https://portal.trustauthority.intel.com/certs``.
        lifespan_s: How long a fetched key set is cached.
        timeout_s: HTTP timeout.
        refetch_cooldown_s: An unknown ``kid`` refetches the set at most this often (PyJWT's guard
            against a flood of made-up kids; a rotated key is picked up after it).
    """

    def __init__(
        self, url: str, *, lifespan_s: float = 300.0, timeout_s: float = 10.0, refetch_cooldown_s: float = 30.0
    ) -> None:
        import jwt

        self.url = url
        self._client = jwt.PyJWKClient(
            url, cache_keys=True, lifespan=lifespan_s, timeout=timeout_s, cooldown_duration=refetch_cooldown_s
        )

    def key_for(self, token: str, kid: str) -> Any:
        import jwt

        try:
            return self._client.get_signing_key(kid).key
        except jwt.PyJWKClientConnectionError as exc:
            raise AttestationRejected(Reason.KEYS_UNAVAILABLE, f"cannot fetch {self.url}: {exc}") from exc
        except jwt.PyJWKClientError as exc:
            raise AttestationRejected(Reason.UNKNOWN_KEY, f"kid {kid!r} is not in {self.url}: {exc}") from exc


class PinnedJwks:
    """A JWKS document pinned in configuration (air-gapped deployments)."""

    def __init__(self, jwks: Mapping[str, Any], *, source: str = "jwks") -> None:
        import jwt

        try:
            keyset = jwt.PyJWKSet.from_dict(dict(jwks))
        except jwt.PyJWKSetError as exc:
            raise InputError(f"not a usable JWKS: {exc}", source=source) from exc
        self._keys = {k.key_id: k.key for k in keyset.keys if k.key_id}

    def key_for(self, token: str, kid: str) -> Any:
        if kid not in self._keys:
            raise AttestationRejected(Reason.UNKNOWN_KEY, f"kid {kid!r} is not in the pinned JWKS")
        return self._keys[kid]


@dataclass(frozen=True)
class AttestationService:
    """One attestation service instance the cluster trusts.

    Attributes:
        name: Label (``maa-wus``, ``intel``).
        issuer: Exact ``iss`` of its tokens.
        keys: Its signing keys.
        algorithms: Signing algorithms accepted (pinned).
        formats: Token formats it issues (:data:`TOKEN_FORMATS` names).
        audience: Required ``aud`` member, if the service's tokens carry one.
        accepted_tcb: Accepted ``attester_tcb_status`` values.
        leeway_s: Clock skew allowed on ``exp`` / ``nbf`` / ``iat``.
    """

    name: str
    issuer: str
    keys: KeySource = field(compare=False)
    algorithms: tuple[str, ...]
    formats: tuple[str, ...]
    audience: str | None = None
    accepted_tcb: tuple[str, ...] = ("UpToDate", "OK")
    leeway_s: float = 30.0

    def __post_init__(self) -> None:
        bad = [a for a in self.algorithms if a.upper() == "NONE" or a.upper().startswith("HS")]
        if bad or not self.algorithms:
            raise InputError(
                f"service {self.name}: algorithms must be asymmetric, got {list(self.algorithms)}", field="algorithms"
            )
        for f in self.formats:
            TOKEN_FORMATS.get(f)


def maa_service(name: str, instance_url: str, keys: KeySource | None = None, **kw: Any) -> AttestationService:
    """A Microsoft Azure Attestation instance (``https://<instance>.<region>.attest.azure.net``, RS256, ``/certs``)."""
    url = instance_url.rstrip("/")
    return AttestationService(
        name,
        url,
        keys or JwksUrl(f"{url}/certs"),
        kw.pop("algorithms", ("RS256",)),
        kw.pop("formats", ("maa-sevsnp", "maa-tdx", "maa-sgx")),
        **kw,
    )


def intel_trust_authority_service(
    keys: KeySource | None = None, *, base_url: str = "https://portal.trustauthority.intel.com", **kw: Any
) -> AttestationService:
    """Intel Trust Authority (``iss`` ``Intel Trust Authority``; PS384, or RS256 on request; JWKS at ``/certs``)."""
    return AttestationService(
        kw.pop("name", "intel-trust-authority"),
        "Intel Trust Authority",
        keys or JwksUrl(f"{base_url}/certs"),
        kw.pop("algorithms", ("PS384", "RS256")),
        kw.pop("formats", ("ita-tdx", "ita-sgx")),
        **kw,
    )


# ---------------------------------------------------------------------------- nonces


@dataclass(slots=True)
class _Nonce:
    node: str
    issued_at: float
    used: bool = False


class NonceStore:
    """Single-use nonces handed to nodes before they attest (in memory; owned by one registry).

    Args:
        ttl_s: A nonce older than this is stale.
        random_bytes: Source of nonce bytes (``secrets.token_bytes``).
    """

    def __init__(self, *, ttl_s: float = 300.0, random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self.ttl_s = ttl_s
        self._random = random_bytes
        self._nonces: dict[str, _Nonce] = {}

    def issue(self, node: str, now: float) -> str:
        """A fresh nonce for ``node`` (URL-safe base64 of 32 random bytes)."""
        self._expire(now)
        value = base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")
        self._nonces[value] = _Nonce(node, now)
        return value

    def adopt(self, value: str, node: str, issued_at: float) -> None:
        """Accept a nonce issued elsewhere (by the control plane, or the operator) as if this store issued it."""
        if not value:
            raise InputError("empty nonce", field="nonce")
        self._nonces[value] = _Nonce(node, issued_at)

    def consume(self, value: str, node: str, now: float) -> None:
        """Accept ``value`` once, for the node it was issued to, within the TTL (else :class:`AttestationRejected`)."""
        n = self._nonces.get(value)
        if n is None:
            raise AttestationRejected(Reason.NONCE, "nonce was not issued by this verifier (or has been forgotten)")
        if n.node != node:
            raise AttestationRejected(Reason.NONCE, f"nonce was issued to {n.node}, not {node}")
        if n.used:
            raise AttestationRejected(Reason.NONCE, "nonce was already used (replayed token)")
        if now - n.issued_at > self.ttl_s:
            raise AttestationRejected(
                Reason.NONCE, f"nonce is stale: issued {now - n.issued_at:.0f} s ago, limit {self.ttl_s:.0f} s"
            )
        n.used = True

    def _expire(self, now: float) -> None:
        old = [k for k, n in self._nonces.items() if now - n.issued_at > 2 * self.ttl_s]
        for k in old:
            del self._nonces[k]


# ---------------------------------------------------------------------------- verification


@dataclass(frozen=True, slots=True)
class VerifiedAttestation:
    """What a verified token says about a node."""

    node: str
    service: str
    format: str
    tee: TeeKind
    jti: str | None
    measurement: str
    issued_at: float
    expires_at: float
    tcb_status: str | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (audit: jti, TEE type, measurement per node)."""
        return {
            "node": self.node,
            "service": self.service,
            "format": self.format,
            "tee": self.tee.value,
            "jti": self.jti,
            "measurement": self.measurement,
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
            "tcb_status": self.tcb_status,
        }


def _b64json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        doc = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise AttestationRejected(Reason.MALFORMED, f"token {what} is not base64url JSON") from exc
    if not isinstance(doc, dict):
        raise AttestationRejected(Reason.MALFORMED, f"token {what} is not a JSON object")
    return doc


class AttestationVerifier:
    """Verifies attestation JWTs against the configured services (the rules in the module docstring).

    Args:
        services: Trusted attestation services.
        nonces: The nonce store the registry issues from.
    """

    def __init__(self, services: Sequence[AttestationService], nonces: NonceStore) -> None:
        self.services = {s.issuer: s for s in services}
        if len(self.services) != len(services):
            raise InputError("two attestation services with the same issuer", field="services")
        self.nonces = nonces

    def verify(
        self,
        token: str,
        *,
        node: str,
        now: float,
        advertised: TeeKind | None = None,
        allowed_measurements: Iterable[str] | None = None,
    ) -> VerifiedAttestation:
        """Verify ``token`` for ``node`` at time ``now``; consumes its nonce only when everything else passed."""
        import jwt

        if not isinstance(token, str) or token.count(".") != 2:
            raise AttestationRejected(Reason.MALFORMED, "not a compact JWS (header.claims.signature)")
        head_b64, body_b64, _ = token.split(".")
        header = _b64json(head_b64, "header")
        body = _b64json(body_b64, "claims")
        iss = body.get("iss")
        if not isinstance(iss, str):
            raise AttestationRejected(Reason.MALFORMED, "no 'iss' claim")
        service = self.services.get(iss)
        if service is None:
            raise AttestationRejected(Reason.ISSUER, f"issuer {iss!r} is not a trusted attestation service")
        alg = header.get("alg")
        if alg not in service.algorithms:
            raise AttestationRejected(Reason.ALGORITHM, f"alg {alg!r} is not one of {list(service.algorithms)}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise AttestationRejected(Reason.MALFORMED, "no 'kid' in the token header")
        key = service.keys.key_for(token, kid)
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=list(service.algorithms),
                issuer=service.issuer,
                audience=service.audience,
                options={
                    "verify_exp": False,  # checked below against ``now``
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": service.audience is not None,
                    "require": ["exp", "iat", "iss"],
                },
            )
        except jwt.InvalidSignatureError as exc:
            raise AttestationRejected(Reason.SIGNATURE, "signature does not verify with the service's key") from exc
        except jwt.InvalidAlgorithmError as exc:
            raise AttestationRejected(Reason.ALGORITHM, str(exc)) from exc
        except jwt.InvalidIssuerError as exc:
            raise AttestationRejected(Reason.ISSUER, str(exc)) from exc
        except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as exc:
            if isinstance(exc, jwt.MissingRequiredClaimError) and exc.claim != "aud":
                raise AttestationRejected(Reason.MALFORMED, f"missing claim {exc.claim!r}") from exc
            raise AttestationRejected(Reason.AUDIENCE, f"audience {service.audience!r} not in the token") from exc
        except jwt.InvalidTokenError as exc:
            raise AttestationRejected(Reason.MALFORMED, str(exc)) from exc
        exp, iat = claims["exp"], claims["iat"]
        nbf = claims.get("nbf", iat)
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (exp, iat, nbf)):
            raise AttestationRejected(Reason.MALFORMED, "exp / iat / nbf must be numbers")
        if now >= exp + service.leeway_s:
            raise AttestationRejected(Reason.EXPIRED, f"token expired {now - exp:.0f} s ago")
        if now + service.leeway_s < max(nbf, iat):
            raise AttestationRejected(Reason.NOT_YET_VALID, "token is not valid yet (nbf / iat in the future)")
        fmt = self._format(service, claims)
        if advertised is not None and fmt.tee is not advertised:
            raise AttestationRejected(
                Reason.TEE_TYPE, f"token attests {fmt.tee.value}, node advertises {advertised.value}"
            )
        for c in fmt.debug_false:
            if claims.get(c) is not False:
                raise AttestationRejected(Reason.DEBUG, f"{c} is {claims.get(c, 'missing')!r}, must be false")
        for c in fmt.debug_disabled:
            if claims.get(c) != "disabled":
                raise AttestationRejected(Reason.DEBUG, f"{c} is {claims.get(c, 'missing')!r}, must be 'disabled'")
        tcb = claims.get(fmt.tcb_claim) if fmt.tcb_claim else None
        if fmt.tcb_claim and tcb not in service.accepted_tcb:
            raise AttestationRejected(
                Reason.TCB_STATUS, f"{fmt.tcb_claim} is {tcb!r}; accepted: {', '.join(service.accepted_tcb)}"
            )
        if fmt.compliance and claims.get(fmt.compliance[0]) != fmt.compliance[1]:
            raise AttestationRejected(Reason.COMPLIANCE, f"{fmt.compliance[0]} is {claims.get(fmt.compliance[0])!r}")
        measurement = claims.get(fmt.measurement_claim)
        if not isinstance(measurement, str) or not measurement:
            raise AttestationRejected(Reason.MEASUREMENT, f"no {fmt.measurement_claim} claim")
        measurement = measurement.lower()
        if allowed_measurements is not None and measurement not in {m.lower() for m in allowed_measurements}:
            raise AttestationRejected(
                Reason.MEASUREMENT, f"{fmt.measurement_claim} {measurement[:16]}... is not on the allow-list"
            )
        nonce = self._nonce(fmt, claims)
        self.nonces.consume(nonce, node, now)
        jti = claims.get("jti")
        return VerifiedAttestation(
            node=node,
            service=service.name,
            format=fmt.name,
            tee=fmt.tee,
            jti=jti if isinstance(jti, str) else None,
            measurement=measurement,
            issued_at=float(iat),
            expires_at=float(exp),
            tcb_status=tcb if isinstance(tcb, str) else None,
        )

    @staticmethod
    def _format(service: AttestationService, claims: Mapping[str, Any]) -> TokenFormat:
        for name in service.formats:
            fmt = TOKEN_FORMATS.get(name)
            if claims.get(fmt.type_claim) == fmt.type_value:
                return fmt
        seen = {TOKEN_FORMATS.get(n).type_claim: claims.get(TOKEN_FORMATS.get(n).type_claim) for n in service.formats}
        raise AttestationRejected(Reason.TEE_TYPE, f"attestation type {seen} is not one {service.name} issues")

    @staticmethod
    def _nonce(fmt: TokenFormat, claims: Mapping[str, Any]) -> str:
        value = claims.get(fmt.nonce_claim)
        if not isinstance(value, str) or not value:
            raise AttestationRejected(Reason.NONCE, f"no {fmt.nonce_claim} claim binding a nonce")
        if fmt.nonce_base64:
            try:
                return base64.b64decode(value, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise AttestationRejected(Reason.NONCE, f"{fmt.nonce_claim} is not base64 of a nonce") from exc
        return value
