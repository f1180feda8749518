"""Batching policies, registered by name in :data:`BATCHERS`; importing this package registers them."""

from seedance.inference.batchers import continuous, dynamic, seedance, static  # noqa: F401
from seedance.inference.batchers.base import BATCHERS, Batcher, Plan, ReplicaView, make_batcher

__all__ = ["BATCHERS", "Batcher", "Plan", "ReplicaView", "make_batcher"]
