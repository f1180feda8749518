"""Builders shared by the inference tests: state only what a test varies."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from seedance.inference.batchers.base import ReplicaView, RequestBook
from seedance.inference.memory import KVBudget
from seedance.inference.model import ModelShape
from seedance.inference.perf import StepTimes
from seedance.inference.sim import ServingRun, ServingSimulator
from seedance.inference.trace import RequestTrace, from_arrays

# 1 KiB of KV per token: a block of 16 tokens is 16 KiB.
TOY_MODEL = ModelShape("toy", layers=1, hidden=64, heads=4, kv_heads=4, head_dim=64, ffn=128, vocab=100,
                       params=1e6, dtype_bytes=2)


def toy_step(kv_ms: float = 0.0) -> StepTimes:
    """Prefill ``10 + 0.1 * tokens`` ms; decode ``5 + batch`` ms (+ ``kv_ms`` per KV token)."""
    return StepTimes(model="toy", gpu="A100-80GB", tp=1, source="toy", prefill_x=(0.0, 1000.0),
                     prefill_y=(10.0, 110.0), prefill_sq_ms=0.0, decode_x=(0.0, 100.0), decode_y=(5.0, 105.0),
                     decode_ref_ctx=0.0, kv_ms_per_token=kv_ms)


def trace(arrival: list[float], prompt: list[int], output: list[int]) -> RequestTrace:
    """A trace from lists."""
    return from_arrays(arrival, prompt, output, source="test")


def simulate(tr: RequestTrace, batcher: str, *, blocks: int = 10_000, block_tokens: int = 16, replicas: int = 1,
             options: dict[str, Any] | None = None, step: StepTimes | None = None, audit: bool = True,
             **kw: Any) -> ServingRun:
    """Run the simulator on the toy model and step times."""
    budget = KVBudget(blocks, block_tokens, TOY_MODEL.kv_bytes_per_token)
    return ServingSimulator(tr, step=step or toy_step(), shape=TOY_MODEL, budget=budget, batcher=batcher,
                            options=options, replicas=replicas, audit=audit, **kw).run()


def view(prompts: list[int], *, predicted: list[float] | None = None, waiting: list[int] | None = None,
         decoding: list[int] | None = None, out: list[int] | None = None, arrival: list[float] | None = None,
         total_blocks: int = 1000, free_blocks: int | None = None, block_tokens: int = 16, now: float = 0.0,
         step: StepTimes | None = None, tpot_ms: float = math.inf, ttft_ms: float = math.inf,
         kv_tokens: int = 0) -> ReplicaView:
    """A hand-made replica view over requests ``0..len(prompts)-1``."""
    n = len(prompts)
    pred = np.asarray(predicted if predicted is not None else [100.0] * n, dtype=np.float64)
    p = np.asarray(prompts, dtype=np.int64)
    feats = np.stack([np.log2(p), np.log2(np.maximum(pred, 1.0)), np.zeros(n)], axis=1)
    book = RequestBook(
        arrival=np.asarray(arrival if arrival is not None else [0.0] * n, dtype=np.float64), prompt=p,
        predicted=pred, features=feats,
        out=np.asarray(out if out is not None else [0] * n, dtype=np.int64), computed=np.zeros(n, np.int64),
        first_token=np.full(n, np.nan),
    )
    return ReplicaView(replica=0, book=book, total_blocks=total_blocks, block_tokens=block_tokens, now=now,
                       waiting=list(range(n)) if waiting is None else list(waiting),
                       decoding=list(decoding or []), free_blocks=total_blocks if free_blocks is None else free_blocks,
                       kv_tokens=kv_tokens, step=step, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
