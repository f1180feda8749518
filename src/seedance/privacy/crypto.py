"""Authenticated encryption, key wrapping and keyed hashes (``cryptography``: AES-256-GCM, HKDF, HMAC).

A sealed value is ``b"\\x01" + nonce(12) + ciphertext+tag``; the associated data binds it to what it
belongs to (a subject, a request, a key id), so a ciphertext moved to another row does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from seedance.core.errors import InputError, SeedanceError

KEY_BYTES = 32
_VERSION = b"\x01"
_NONCE = 12


class SealError(SeedanceError):
    """A sealed value does not open with this key and context (wrong key, tampered, or moved)."""


def new_key() -> bytes:
    """A fresh random 256-bit key."""
    return os.urandom(KEY_BYTES)


def encode_key(key: bytes) -> str:
    """base64url text of a key (no padding)."""
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode("ascii")


def decode_key(text: str, *, source: str = "key") -> bytes:
    """The 32 bytes of a base64url key; ``InputError`` when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError):
        raise InputError("not base64url text", source=source) from None
    if len(raw) != KEY_BYTES:
        raise InputError(f"a key must be {KEY_BYTES} bytes, got {len(raw)}", source=source)
    return raw


def seal(key: bytes, plaintext: bytes, context: str) -> bytes:
    """Encrypt and authenticate ``plaintext`` for ``context``."""
    nonce = os.urandom(_NONCE)
    return _VERSION + nonce + AESGCM(key).encrypt(nonce, plaintext, context.encode("utf-8"))


def open_sealed(key: bytes, sealed: bytes, context: str) -> bytes:
    """The plaintext of ``seal(key, plaintext, context)``; ``SealError`` otherwise."""
    if len(sealed) < 1 + _NONCE + 16 or sealed[:1] != _VERSION:
        raise SealError("not a sealed value")
    try:
        return AESGCM(key).decrypt(sealed[1:1 + _NONCE], sealed[1 + _NONCE:], context.encode("utf-8"))
    except InvalidTag:
        raise SealError("sealed value does not open with this key and context") from None


def derive(key: bytes, purpose: str) -> bytes:
    """A sub-key of ``key`` for one purpose (HKDF-SHA256), so one data key never serves two uses."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=purpose.encode("utf-8")).derive(key)


def keyed_hash(key: bytes, *parts: str) -> str:
    """HMAC-SHA256 hex of the parts (joined by a separator that cannot occur in them unescaped)."""
    msg = "\x1f".join(p.replace("\\", "\\\\").replace("\x1f", "\\x1f") for p in parts)
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).hexdigest()


def fingerprint(blob: bytes) -> str:
    """SHA-256 hex of a (wrapped) key blob: names the key in records without revealing it."""
    return hashlib.sha256(blob).hexdigest()
