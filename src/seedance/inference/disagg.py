"""Disaggregated prefill/decode (Splitwise, ISCA'24; DistServe, OSDI'24): separate pools, KV moved over a link.

NOTE(seedance): with ``Disaggregation(prefill=P)`` the first ``P`` replicas only prefill and the
other ``N - P`` only decode. An arriving request is routed among the prefill replicas; when its
prefill ends there (first token emitted) its KV (``prompt × kv_bytes_per_token``) is sent to a
decode replica over the link: it keeps its blocks on the prefill replica for the transfer time
``latency + bytes / bandwidth`` and frees them when the transfer ends; then it joins the
least-loaded decode replica's queue with its KV *ready* (``RequestBook.ready``): admission there
allocates blocks for its prompt and computes one token (its first decode step), and it decodes
from there. Its KV is never counted on both pools at once (blocks freed on the sender before the
receiver allocates; a request waiting in a decode queue holds no GPU blocks: its KV is parked in
host memory, as Splitwise's and Mooncake's KV pools do; the host side is not modelled). A decode
replica that preempts a request recomputes it locally.

Link bandwidths (nominal, one direction, per replica of 8 GPUs on its own node; transfers of the
8 tensor-parallel shards go in parallel, one NIC or NVLink port per GPU):

* ``ib-hdr``: DGX A100, 8 × 200 Gb/s HDR InfiniBand (ConnectX-6) = 200 GB/s (NVIDIA DGX A100
  datasheet; Splitwise §5 uses these links between its A100 machines).
* ``ib-ndr``: DGX H100, 8 × 400 Gb/s NDR InfiniBand (ConnectX-7) = 400 GB/s (NVIDIA DGX H100 datasheet).
* ``nvlink3`` / ``nvlink4``: both pools inside one NVLink domain: A100 NVLink 600 GB/s and H100
  NVLink 900 GB/s per GPU bidirectional, so 300 / 450 GB/s per direction per GPU, × 8 GPUs
  (NVIDIA A100 / H100 datasheets).

These are nominal peaks: the model has no protocol efficiency, so transfer times are lower bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seedance.core.errors import InputError

#: Link name -> (GB/s one direction for an 8-GPU replica, source).
LINKS: dict[str, tuple[float, str]] = {
    "ib-hdr": (8 * 25.0, "DGX A100 datasheet: 8 x 200 Gb/s HDR InfiniBand"),
    "ib-ndr": (8 * 50.0, "DGX H100 datasheet: 8 x 400 Gb/s NDR InfiniBand"),
    "nvlink3": (8 * 300.0, "A100 datasheet: NVLink 600 GB/s bidirectional per GPU"),
    "nvlink4": (8 * 450.0, "H100 datasheet: NVLink 900 GB/s bidirectional per GPU"),
}


def link_gbs(name: str, gpus: int = 8) -> float:
    """One-direction GB/s of link ``name`` for a replica of ``gpus`` GPUs (one port per GPU)."""
    if name not in LINKS:
        raise InputError(f"unknown link {name!r}; valid links: {', '.join(LINKS)}", source="--kv-link")
    return LINKS[name][0] / 8.0 * gpus


@dataclass(frozen=True, slots=True)
class Disaggregation:
    """Prefill/decode pools of one deployment.

    Attributes:
        prefill: Replicas of the prefill pool (the rest decode).
        link_gbs: KV transfer bandwidth between a prefill and a decode replica (GB/s).
        latency_ms: Fixed cost per transfer.
        prefill_options: Batcher options of the prefill replicas (over the common ones).
    """

    prefill: int
    link_gbs: float = LINKS["ib-hdr"][0]
    latency_ms: float = 0.0
    prefill_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prefill < 1:
            raise InputError(f"must be >= 1, got {self.prefill}", source="--prefill-replicas")
        if not (self.link_gbs > 0 and math.isfinite(self.link_gbs)) or self.latency_ms < 0:
            raise InputError("link bandwidth must be > 0 and latency >= 0", source="--kv-link")

    def transfer_s(self, tokens: int, kv_bytes_per_token: int) -> float:
        """Seconds to move ``tokens`` tokens of KV."""
        return self.latency_ms / 1000.0 + tokens * kv_bytes_per_token / (self.link_gbs * 1e9)


def split_search(replicas: int, score: Callable[[int], float]) -> tuple[int, list[tuple[int, float]]]:
    """Try every prefill:decode split ``P : replicas - P`` and return the best ``P`` (by ``score``,
    higher is better; ties to fewer prefill replicas) and every ``(P, score)``."""
    if replicas < 2:
        raise InputError("disaggregation needs >= 2 replicas", source="--replicas")
    tried = [(p, score(p)) for p in range(1, replicas)]
    best = max(tried, key=lambda x: (x[1], -x[0]))
    return best[0], tried
