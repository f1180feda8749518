"""A software WebAuthn authenticator for the tests (``cryptography`` + ``cbor2``).

It answers ``navigator.credentials.create()`` options with an ES256 credential and one of three
attestations: ``none``; ``packed`` self-attestation (signed by the credential key); ``packed``
with an x5c chain issued by ``AttestationCA`` (what a hardware authenticator under a vendor root
sends). Encoding follows WebAuthn Level 2 §6.1 (authenticatorData: rpIdHash, flags UP|AT,
signCount, attestedCredentialData = AAGUID, credential id length and id, COSE_Key) and §8.2
(packed: ``sig`` over ``authenticatorData || SHA-256(clientDataJSON)``). The verifier is the real
``webauthn`` library; nothing here is used by the product.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import struct
from dataclasses import dataclass
from typing import Any

import cbor2
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class AttestationCA:
    """A root certificate and an attestation certificate it issued."""

    root_pem: bytes
    att_key: ec.EllipticCurvePrivateKey
    att_der: bytes

    @classmethod
    def make(cls, name: str = "Seedance Test Attestation Root") -> AttestationCA:
        now = dt.datetime.now(dt.UTC)
        root_key = ec.generate_private_key(ec.SECP256R1())
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
                .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=365))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False, data_encipherment=False,
                                             key_agreement=False, encipher_only=False, decipher_only=False),
                               critical=True)
                .sign(root_key, hashes.SHA256()))
        att_key = ec.generate_private_key(ec.SECP256R1())
        att = (x509.CertificateBuilder()
               .subject_name(x509.Name([
                   x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                   x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Seedance Test Authenticators"),
                   x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Authenticator Attestation"),
                   x509.NameAttribute(NameOID.COMMON_NAME, "Test Authenticator")]))
               .issuer_name(root_name).public_key(att_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .sign(root_key, hashes.SHA256()))
        return cls(root.public_bytes(serialization.Encoding.PEM), att_key, att.public_bytes(serialization.Encoding.DER))


class SoftwareAuthenticator:
    """One authenticator; ``attestation`` is ``none``, ``packed-self`` or ``packed-x5c`` (needs ``ca``)."""

    def __init__(self, attestation: str = "none", *, ca: AttestationCA | None = None,
                 aaguid: bytes = bytes(16)) -> None:
        if attestation == "packed-x5c" and ca is None:
            raise ValueError("packed-x5c needs an AttestationCA")
        self.attestation = attestation
        self.ca = ca
        self.aaguid = aaguid
        self.key = ec.generate_private_key(ec.SECP256R1())

    def _cose_key(self) -> bytes:
        nums = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"), -3: nums.y.to_bytes(32, "big")})

    def create(self, options: dict[str, Any], origin: str, *, challenge: str | None = None,
               rp_id: str | None = None, corrupt_signature: bool = False) -> dict[str, Any]:
        """A RegistrationResponseJSON for ``options`` (PublicKeyCredentialCreationOptionsJSON)."""
        client_data = json.dumps({"type": "webauthn.create", "challenge": challenge or options["challenge"],
                                  "origin": origin, "crossOrigin": False}, separators=(",", ":")).encode()
        cred_id = os.urandom(32)
        rp_hash = hashlib.sha256((rp_id or options["rp"]["id"]).encode()).digest()
        auth_data = (rp_hash + bytes([0x41]) + struct.pack(">I", 0) + self.aaguid
                     + struct.pack(">H", len(cred_id)) + cred_id + self._cose_key())
        signed = auth_data + hashlib.sha256(client_data).digest()
        if self.attestation == "none":
            fmt, stmt = "none", {}
        elif self.attestation == "packed-self":
            fmt, stmt = "packed", {"alg": -7, "sig": self.key.sign(signed, ec.ECDSA(hashes.SHA256()))}
        else:
            assert self.ca is not None
            fmt = "packed"
            stmt = {"alg": -7, "sig": self.ca.att_key.sign(signed, ec.ECDSA(hashes.SHA256())), "x5c": [self.ca.att_der]}
        if corrupt_signature:
            sig = bytearray(stmt["sig"])
            sig[-1] ^= 0x01
            stmt["sig"] = bytes(sig)
        att_obj = cbor2.dumps({"fmt": fmt, "attStmt": stmt, "authData": auth_data})
        return {"id": b64url(cred_id), "rawId": b64url(cred_id), "type": "public-key",
                "response": {"clientDataJSON": b64url(client_data), "attestationObject": b64url(att_obj),
                             "transports": ["internal"]},
                "clientExtensionResults": {}, "authenticatorAttachment": "platform"}
