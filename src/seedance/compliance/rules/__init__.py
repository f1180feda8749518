"""The built-in compliance rules, one module per rule (importing this package registers them)."""

from seedance.compliance.rules import (  # noqa: F401  (registration)
    autoscale_bound,
    backup_encryption,
    key_rotation,
    log_retention,
    node_wipe_proof,
    storage_encryption,
)
