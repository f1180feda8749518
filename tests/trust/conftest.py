"""Attestation test kit: locally generated RSA keys, a real HTTP JWKS endpoint, tokens in MAA / Intel formats.

Claims are the documented samples (MicrosoftDocs ``attestation-token-examples.md``; Intel Trust
Authority "Attestation tokens and claims"), with times moved to the test clock and a nonce bound.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

NOW = 1_700_000_000.0
MAA_ISS = "https://maasandbox0001.wus.attest.azure.net"
ITA_ISS = "Intel Trust Authority"
SNP_MEASUREMENT = "04a170f39a3f702472ed0c7ecbda9babfc530e3caac475fdd607ff499177d14c278c5a15ad07ceacd5230ae63d507e9d"
TDX_MRTD = "5be56d418d33661a6c21da77c9503a07e430b35eb92a0bd042a6b3c4e79b3c82bb1c594e770d0d129a0724669f1e953f"
SGX_MRENCLAVE = "ab9989f1c4c1ffa3" + "0" * 48

# MAA SEV-SNP sample (attestation-token-examples.md), verbatim values except times, jti and nonce
MAA_SEVSNP: dict[str, Any] = {
    "iss": MAA_ISS,
    "jti": "b65da1dcfbb4698b0bb2323cac664b745a2ff1cffbba55641fd65784aa9474d5",
    "x-ms-attestation-type": "sevsnpvm",
    "x-ms-compliance-status": "azure-compliant-cvm",
    "x-ms-policy-hash": "LTPRQQju-FejAwdYihF8YV_c2XWebG9joKvrHKc3bxs",
    "x-ms-sevsnpvm-authorkeydigest": "0" * 96,
    "x-ms-sevsnpvm-bootloader-svn": 0,
    "x-ms-sevsnpvm-familyId": "01000000000000000000000000000000",
    "x-ms-sevsnpvm-guestsvn": 1,
    "x-ms-sevsnpvm-hostdata": "0" * 64,
    "x-ms-sevsnpvm-idkeydigest": (
        "38ed94f9aab20bc5eb40e89c7cbb03aa1b9efb435892656ade789ccaa0ded82ff18bae0e849c3166351ba1fa7ff620a2"
    ),
    "x-ms-sevsnpvm-imageId": "02000000000000000000000000000000",
    "x-ms-sevsnpvm-is-debuggable": False,
    "x-ms-sevsnpvm-launchmeasurement": SNP_MEASUREMENT,
    "x-ms-sevsnpvm-microcode-svn": 40,
    "x-ms-sevsnpvm-migration-allowed": False,
    "x-ms-sevsnpvm-reportdata": "99dd4593a43f4b0f5f10f1856c7326eba309b943251fededc15592e3250ca9e9" + "0" * 64,
    "x-ms-sevsnpvm-reportid": "d1d5c2c71596fae601433ecdfb62799de2a785cc08be3b1c8a4e26a381494787",
    "x-ms-sevsnpvm-smt-allowed": True,
    "x-ms-sevsnpvm-snpfw-svn": 0,
    "x-ms-sevsnpvm-tee-svn": 0,
    "x-ms-sevsnpvm-vmpl": 0,
    "x-ms-ver": "1.0",
}
# MAA TDX sample
MAA_TDX: dict[str, Any] = {
    "attester_tcb_status": "UpToDate",
    "dbgstat": "disabled",
    "eat_profile": "https://aka.ms/maa-eat-profile-tdxvm",
    "intuse": "generic",
    "iss": MAA_ISS,
    "jti": "5f65006d573bc1c04f67820348c20f5d8da72ddbbd4d6c03da8de9f11b5cf29b",
    "tdx_mrseam": "2fd279c16164a93dd5bf373d834328d46008c2b693af9ebb865b08b2ced320c9a89b4869a9fab60fbe9d0c5a5363c656",
    "tdx_mrtd": TDX_MRTD,
    "tdx_report_data": "93c6db49f2318387bcebdad0275e206725d948f9000d900344aa44abaef14596" + "0" * 64,
    "tdx_seamsvn": 3,
    "tdx_td_attributes": "0000000000000000",
    "tdx_td_attributes_debug": False,
    "tdx_tee_tcb_svn": "03000600000000000000000000000000",
    "tdx_xfam": "e718060000000000",
    "x-ms-attestation-type": "tdxvm",
    "x-ms-compliance-status": "azure-compliant-cvm",
    "x-ms-ver": "1.0",
}
MAA_SGX: dict[str, Any] = {
    "iss": MAA_ISS,
    "jti": "c152459f46ad10675ce49674d170a0e5e5cad4483f9570edaba07f4dadf3ac99",
    "x-ms-attestation-type": "sgx",
    "x-ms-sgx-is-debuggable": False,
    "x-ms-sgx-mrenclave": SGX_MRENCLAVE,
    "x-ms-sgx-mrsigner": "7f4e8adbc1d8da7a" + "0" * 48,
    "x-ms-sgx-product-id": 1,
    "x-ms-sgx-svn": 1,
    "x-ms-ver": "1.0",
}
# Intel Trust Authority TDX sample (alg PS384)
ITA_TDX: dict[str, Any] = {
    "tdx_tee_tcb_svn": "03000500000000000000000000000000",
    "tdx_mrtd": TDX_MRTD,
    "tdx_td_attributes_debug": False,
    "tdx_is_debuggable": False,
    "attester_tcb_status": "UpToDate",
    "attester_type": "TDX",
    "dbgstat": "disabled",
    "eat_profile": "https://portal.trustauthority.intel.com/eat_profile.html",
    "intuse": "generic",
    "ver": "1.0.0",
    "jti": "304915ef-ec89-48a4-bae0-890c09978d3e",
    "iss": ITA_ISS,
}
ITA_SGX: dict[str, Any] = {
    "sgx_mrenclave": SGX_MRENCLAVE,
    "sgx_mrsigner": "7f4e8adbc1d8da7a" + "0" * 48,
    "sgx_isvprodid": 1,
    "sgx_isvsvn": 1,
    "sgx_is_debuggable": False,
    "attester_tcb_status": "OK",
    "attester_type": "SGX",
    "dbgstat": "disabled",
    "ver": "1.0.0",
    "jti": "0c1b3de7-2487-485f-9f7b-066e299d83fc",
    "iss": ITA_ISS,
}
SAMPLES: dict[str, tuple[dict[str, Any], str]] = {
    "maa-sevsnp": (MAA_SEVSNP, "RS256"),
    "maa-tdx": (MAA_TDX, "RS256"),
    "maa-sgx": (MAA_SGX, "RS256"),
    "ita-tdx": (ITA_TDX, "PS384"),
    "ita-sgx": (ITA_SGX, "PS384"),
}
MEASUREMENT = {
    "maa-sevsnp": SNP_MEASUREMENT,
    "maa-tdx": TDX_MRTD,
    "maa-sgx": SGX_MRENCLAVE,
    "ita-tdx": TDX_MRTD,
    "ita-sgx": SGX_MRENCLAVE,
}
TEE = {"maa-sevsnp": "sev-snp", "maa-tdx": "tdx", "maa-sgx": "sgx", "ita-tdx": "tdx", "ita-sgx": "sgx"}


@dataclass
class Keys:
    """The services' signing keys and an attacker's key (all generated here)."""

    maa: rsa.RSAPrivateKey
    ita: rsa.RSAPrivateKey
    attacker: rsa.RSAPrivateKey
    jwks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def jwk(self, key: rsa.RSAPrivateKey, kid: str, alg: str) -> dict[str, Any]:
        doc = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        return {**doc, "kid": kid, "use": "sig", "alg": alg}


@pytest.fixture(scope="session")
def keys() -> Keys:
    k = Keys(*(rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(3)))
    k.jwks = {
        "maa": {"keys": [k.jwk(k.maa, "maa-1", "RS256")]},
        "ita": {"keys": [k.jwk(k.ita, "ita-1", "PS384")]},
    }
    return k


class _Handler(BaseHTTPRequestHandler):
    docs: dict[str, Any] = {}
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        type(self).hits.append(self.path)
        doc = type(self).docs.get(self.path)
        if doc is None:
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the test server
        return


@dataclass
class JwksServer:
    """A real HTTP server on 127.0.0.1 serving ``/maa/certs`` and ``/ita/certs``."""

    base: str
    handler: type[_Handler]

    def url(self, service: str) -> str:
        return f"{self.base}/{service}/certs"

    def set(self, service: str, doc: dict[str, Any]) -> None:
        self.handler.docs[f"/{service}/certs"] = doc

    @property
    def hits(self) -> list[str]:
        return self.handler.hits


@pytest.fixture(scope="session")
def jwks_server(keys: Keys) -> Iterator[JwksServer]:
    handler = type("Handler", (_Handler,), {"docs": {}, "hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    s = JwksServer(f"http://127.0.0.1:{server.server_address[1]}", handler)
    s.set("maa", copy.deepcopy(keys.jwks["maa"]))
    s.set("ita", copy.deepcopy(keys.jwks["ita"]))
    try:
        yield s
    finally:
        server.shutdown()
        server.server_close()


def claims_for(fmt: str, nonce: str, *, now: float = NOW, ttl: float = 3600.0) -> dict[str, Any]:
    """The sample claims of ``fmt`` issued at ``now``, valid ``ttl`` seconds, binding ``nonce``."""
    base, _ = SAMPLES[fmt]
    c = copy.deepcopy(base)
    c.update({"iat": int(now), "nbf": int(now), "exp": int(now + ttl)})
    if fmt.startswith("ita"):
        c["attester_held_data"] = base64.b64encode(nonce.encode()).decode()
    else:
        c["nonce"] = nonce
    return c


def sign(claims: dict[str, Any], key: rsa.RSAPrivateKey, *, kid: str, alg: str) -> str:
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid, "jku": "https://example.invalid/certs"})
