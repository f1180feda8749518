"""Privacy operations for the control plane's own users (whitepaper §5).

* ``anonymize``: the ``AnonymizeEvent`` rule (keyed session ids, behaviour entropy, timestamps
  truncated to the second) and ``telemetry``: the ingestion endpoint's service;
* ``subjects``, ``keys``, ``crypto``: data subjects, their per-subject data keys (crypto-shredding)
  and the rotated HMAC keys;
* ``erasure``, ``scan``, ``backup``, ``audit``: GDPR Art. 17 requests with a 72 h deadline, executed
  across every store, verified by a scan (a restored backup included) and recorded in Parquet;
* ``consent``: the CCPA "do not sell" consent flow that drives the dashboard's dialog;
* ``fingerprint``, ``challenge``, ``expiring``: device-fingerprint clusters, the WebAuthn
  attestation challenge and the Redis sorted-set blacklist with per-member expiry.

Heavy imports (``webauthn``, ``pyarrow``) happen inside the functions that need them.
"""
