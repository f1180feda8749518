"""Trust: MIG configuration audit (``nvidia-smi`` parsers and checks), isolation grades per node and
tenant, and attested TEE placement (attestation-token verifier, node-attestation registry, filter
stages). See ``docs/trust.md``."""
