"""Node labels the heterogeneous-fleet stages read (a driver that filters node labels must keep these)."""

from __future__ import annotations

NODE_CC = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")
"""GPU feature discovery: the node's compute capability (``CudaCompat``)."""
NODE_DRIVER = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")
"""GPU feature discovery: the node's driver version (``CudaCompat``)."""
LABEL_PRICE = "seedance.io/price-per-gpu-hour"
"""A node's $/GPU-h when it is not the catalog's (spot, negotiated; ``ThroughputPerDollar``)."""

HETERO_NODE_LABELS = frozenset({*NODE_CC, *NODE_DRIVER, LABEL_PRICE})
