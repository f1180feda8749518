"""Built-in placement policies; importing this package registers them by name."""

from seedance.scheduling.policies import (  # noqa: F401
    best_fit,
    clustering,
    dot_product,
    fgd,
    packing,
    random_fit,
    seedance_pack,
)
