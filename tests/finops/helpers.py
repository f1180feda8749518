"""Builders of usage samples for the ledger tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seedance.finops.ingest import AssetBatch, ContainerKey, UsageBatch

GIB = 2**30


def usage(rows: Sequence[tuple], *, nodes: Sequence[str], keys: Sequence[ContainerKey], models: Sequence[str]
          ) -> UsageBatch:
    """Rows ``(t, dt, node, key, model, cpu_req, cpu_use, ram_req, ram_use, gpu_req, gpu_use)``."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 11)
    return UsageBatch(t=a[:, 0], dt=a[:, 1], node=a[:, 2].astype(np.int64), key=a[:, 3].astype(np.int64),
                      model=a[:, 4].astype(np.int64), cpu_req=a[:, 5], cpu_use=a[:, 6], ram_req=a[:, 7],
                      ram_use=a[:, 8], gpu_req=a[:, 9], gpu_use=a[:, 10], nodes=list(nodes), keys=list(keys),
                      models=list(models))


def assets(rows: Sequence[tuple], *, nodes: Sequence[str], models: Sequence[str]) -> AssetBatch:
    """Rows ``(t, dt, node, cpu_cores, ram_bytes, model or -1, gpus, primary)``."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 8)
    return AssetBatch(t=a[:, 0], dt=a[:, 1], node=a[:, 2].astype(np.int64), cpu_cores=a[:, 3], ram_bytes=a[:, 4],
                      model=a[:, 5].astype(np.int64), gpus=a[:, 6], primary=a[:, 7].astype(bool), nodes=list(nodes),
                      models=list(models))


def ticks(t0: float, t1: float, step: float) -> np.ndarray:
    """Sample end times of ticks of ``step`` seconds covering ``[t0, t1)``."""
    n = int(round((t1 - t0) / step))
    return t0 + step * np.arange(1, n + 1, dtype=np.float64)
