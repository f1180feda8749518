"""Routers: which replica's queue an arriving request joins (within its pool).

``shared`` gives each pool one queue that every replica of the pool pulls from at its iteration
boundaries (late binding; Triton instance groups work this way). ``least-loaded`` pushes the
request at arrival to the replica with the fewest outstanding requests (queued plus running;
Vidur's "LOR" global scheduler), the usual load balancer in front of vLLM replicas.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from seedance.core.registry import Registry


class Router(ABC):
    """Chooses a replica for an arriving request."""

    name: ClassVar[str]
    shared: ClassVar[bool] = False

    @abstractmethod
    def pick(self, replicas: Sequence[int], outstanding: Sequence[int]) -> int:
        """Called once per arrival with the pool's replicas and their outstanding counts."""


ROUTERS: Registry[type[Router]] = Registry("router")


@ROUTERS.register("shared", aliases=("pull",))
class SharedQueue(Router):
    """One queue per pool; replicas pull at their iteration boundaries."""

    name = "shared"
    shared = True

    def pick(self, replicas: Sequence[int], outstanding: Sequence[int]) -> int:
        return replicas[0]


@ROUTERS.register("least-loaded", aliases=("lor", "least-outstanding"))
class LeastLoaded(Router):
    """Fewest outstanding requests; ties go to the lowest replica index."""

    name = "least-loaded"

    def pick(self, replicas: Sequence[int], outstanding: Sequence[int]) -> int:
        best = 0
        for k in range(1, len(replicas)):
            if outstanding[k] < outstanding[best]:
                best = k
        return replicas[best]
