"""The real executor: batchers drive a small PyTorch decoder-only model with a real KV cache.

NOTE(seedance): the same :class:`Batcher` objects as in the simulator decide every iteration;
here the iteration really runs. The model is a Llama-shaped decoder (RMSNorm, rotary
embeddings, grouped-query attention, SwiGLU MLP) with seeded random weights in float64 on the
CPU. An iteration is a flat list of tokens from several sequences (prefill chunks and one decode
token per running request): the linear layers run once over all of them, attention runs per
sequence over that sequence's cache (vLLM's split). Iteration-level batchers use a paged cache:
one tensor ``[layers, 2, block_tokens, kv_heads, head_dim]`` per block id of a
:class:`BlockAllocator`, created the first time the id is handed out and reused (elastic reuse)
after the owner finishes or is preempted (recompute: its prompt and generated tokens are
prefilled again). Request-level batchers use one padded tensor per batch, grown a column per
step. After every iteration the engine's KV accounting (the simulator's formula from the
model's shape) is compared with the bytes of the KV tensors the live sequences actually hold.
Outputs are greedy and are checked token for token against an unbatched run of each request.
The clock is the measured wall time of each iteration unless a step-time model is given.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from seedance.core.errors import InputError
from seedance.inference.batchers.base import BATCHERS, Batcher, ReplicaView, RequestBook, make_batcher
from seedance.inference.memory import BlockAllocator
from seedance.inference.model import MIB, ModelShape
from seedance.inference.perf import StepTimes
from seedance.inference.profiles import DecodeLengthPredictor, kv_growth_feature
from seedance.inference.trace import RequestTrace


@dataclass(frozen=True, slots=True)
class TinyConfig:
    """Shape of the executor's model (small enough for a CPU)."""

    layers: int = 2
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 128
    vocab: int = 512

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    def shape(self) -> ModelShape:
        """The :class:`ModelShape` the accounting uses (float64: 8 bytes per element)."""
        h, f, v, kvw = self.hidden, self.ffn, self.vocab, self.kv_heads * self.head_dim
        per_layer = h * h * 2 + h * kvw * 2 + 3 * h * f + 2 * h
        return ModelShape("tiny-executor", layers=self.layers, hidden=h, heads=self.heads, kv_heads=self.kv_heads,
                          head_dim=self.head_dim, ffn=f, vocab=v, params=float(self.layers * per_layer + 2 * v * h + h),
                          dtype_bytes=8, source="seedance executor (random weights)")


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """The executor's replica.

    Attributes:
        model: Model shape.
        kv_blocks: Blocks in the paged KV pool.
        block_tokens: Tokens per block.
        seed: Seed of the weights and of the prompt tokens.
        step: Iteration-time model for the clock (``None``: measured wall time).
    """

    model: TinyConfig = field(default_factory=TinyConfig)
    kv_blocks: int = 256
    block_tokens: int = 16
    seed: int = 0
    step: StepTimes | None = None


class TinyDecoder(torch.nn.Module):
    """A Llama-shaped decoder with random weights (float64)."""

    embed: torch.nn.Parameter
    head: torch.nn.Parameter
    inv_freq: torch.Tensor

    def __init__(self, cfg: TinyConfig, seed: int) -> None:
        super().__init__()
        if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads or cfg.head_dim % 2:
            raise InputError("hidden must split into heads, heads into kv_heads, and head_dim be even",
                             source="executor model")
        self.cfg = cfg
        g = torch.Generator().manual_seed(seed)

        def w(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(*shape, generator=g, dtype=torch.float64) / math.sqrt(shape[0]),
                                      requires_grad=False)

        h, kvw = cfg.hidden, cfg.kv_heads * cfg.head_dim
        self.embed = w(cfg.vocab, h)
        self.wq = torch.nn.ParameterList([w(h, h) for _ in range(cfg.layers)])
        self.wk = torch.nn.ParameterList([w(h, kvw) for _ in range(cfg.layers)])
        self.wv = torch.nn.ParameterList([w(h, kvw) for _ in range(cfg.layers)])
        self.wo = torch.nn.ParameterList([w(h, h) for _ in range(cfg.layers)])
        self.w1 = torch.nn.ParameterList([w(h, cfg.ffn) for _ in range(cfg.layers)])
        self.w3 = torch.nn.ParameterList([w(h, cfg.ffn) for _ in range(cfg.layers)])
        self.w2 = torch.nn.ParameterList([w(cfg.ffn, h) for _ in range(cfg.layers)])
        self.head = w(h, cfg.vocab)
        inv = 1.0 / (10000.0 ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        ang = pos[:, None].to(torch.float64) * self.inv_freq[None, :]  # [T, hd/2]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x1 * sin + x2 * cos
        return out

    @torch.no_grad()
    def forward_segments(self, tokens: torch.Tensor, positions: torch.Tensor,
                         segments: list[tuple[int, int, int]], cache: KVCache) -> torch.Tensor:
        """Run one iteration.

        Args:
            tokens: ``[T]`` token ids of all sequences, segment after segment.
            positions: ``[T]`` position of each token in its sequence.
            segments: ``(sequence, start, end)`` slices of ``tokens``; a segment's tokens are the
                next positions of its sequence.
            cache: Where each sequence's keys and values live.

        Returns:
            ``[len(segments), vocab]`` logits of each segment's last token.
        """
        cfg = self.cfg
        hd, nh, nkv = cfg.head_dim, cfg.heads, cfg.kv_heads
        x = self.embed[tokens]
        for layer in range(cfg.layers):
            h = self._norm(x)
            q = self._rope((h @ self.wq[layer]).view(-1, nh, hd), positions)
            k = self._rope((h @ self.wk[layer]).view(-1, nkv, hd), positions)
            v = (h @ self.wv[layer]).view(-1, nkv, hd)
            att = torch.empty_like(q)
            for seq, a, b in segments:
                cache.write(layer, seq, positions[a:b], k[a:b], v[a:b])
                kk, vv = cache.read(layer, seq, int(positions[b - 1]) + 1)  # [L, nkv, hd]
                rep = nh // nkv
                kk, vv = kk.repeat_interleave(rep, dim=1), vv.repeat_interleave(rep, dim=1)
                scores = torch.einsum("qhd,khd->hqk", q[a:b], kk) / math.sqrt(hd)
                qpos = positions[a:b][:, None]
                kpos = torch.arange(kk.shape[0])[None, :]
                scores = scores.masked_fill((kpos > qpos)[None, :, :], float("-inf"))
                att[a:b] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), vv)
            x = x + att.reshape(-1, cfg.hidden) @ self.wo[layer]
            h = self._norm(x)
            x = x + (torch.nn.functional.silu(h @ self.w1[layer]) * (h @ self.w3[layer])) @ self.w2[layer]
        last = torch.tensor([b - 1 for _, _, b in segments], dtype=torch.long)
        return self._norm(x[last]) @ self.head


class KVCache:
    """Where sequences keep their keys and values (one implementation per batching style)."""

    def write(self, layer: int, seq: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k``, ``v`` (``[n, kv_heads, head_dim]``) of ``seq`` at positions ``pos``."""
        raise NotImplementedError

    def read(self, layer: int, seq: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``seq``'s first ``length`` positions."""
        raise NotImplementedError


class ContiguousKV(KVCache):
    """One growing tensor per sequence (the unbatched reference)."""

    def __init__(self, cfg: TinyConfig, capacity: int) -> None:
        self.kv = torch.zeros(cfg.layers, 2, capacity, cfg.kv_heads, cfg.head_dim, dtype=torch.float64)

    def write(self, layer: int, seq: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        self.kv[layer, 0, pos] = k
        self.kv[layer, 1, pos] = v

    def read(self, layer: int, seq: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.kv[layer, 0, :length], self.kv[layer, 1, :length]


class PagedKV(KVCache):
    """Block tensors indexed by a :class:`BlockAllocator`'s block tables."""

    def __init__(self, cfg: TinyConfig, alloc: BlockAllocator, block_tokens: int) -> None:
        self.cfg = cfg
        self.alloc = alloc
        self.bs = block_tokens
        self.blocks: dict[int, torch.Tensor] = {}

    def block(self, bid: int) -> torch.Tensor:
        """The tensor of block ``bid`` (created on first use, then reused)."""
        t = self.blocks.get(bid)
        if t is None:
            c = self.cfg
            t = torch.zeros(c.layers, 2, self.bs, c.kv_heads, c.head_dim, dtype=torch.float64)
            self.blocks[bid] = t
        return t

    def write(self, layer: int, seq: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        table = self.alloc.tables[seq]
        p0, n, bs = int(pos[0]), int(pos.shape[0]), self.bs  # a segment's positions are consecutive
        j = 0
        while j < n:
            p = p0 + j
            off = p % bs
            m = min(bs - off, n - j)
            b = self.block(table[p // bs])
            b[layer, 0, off:off + m] = k[j:j + m]
            b[layer, 1, off:off + m] = v[j:j + m]
            j += m

    def read(self, layer: int, seq: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        table = self.alloc.tables[seq][: -(-length // self.bs)]
        kv = torch.cat([self.block(b)[layer] for b in table], dim=1)  # [2, n*bs, kvh, hd]
        return kv[0, :length], kv[1, :length]

    def held_bytes(self) -> int:
        """Bytes of the block tensors owned by live sequences."""
        return sum(self.block(b).untyped_storage().nbytes() for t in self.alloc.tables.values() for b in t)


class PaddedKV(KVCache):
    """One rectangular tensor per request-level batch, grown one column per decode step."""

    def __init__(self, cfg: TinyConfig, rows: dict[int, int], width: int) -> None:
        self.cfg = cfg
        self.rows = rows
        self.kv = torch.zeros(cfg.layers, 2, len(rows), width, cfg.kv_heads, cfg.head_dim, dtype=torch.float64)

    def grow(self) -> None:
        """Append one column (a new tensor, as ``torch.cat`` in a dynamic cache does)."""
        c = self.cfg
        col = torch.zeros(c.layers, 2, self.kv.shape[2], 1, c.kv_heads, c.head_dim, dtype=torch.float64)
        self.kv = torch.cat([self.kv, col], dim=3)

    def write(self, layer: int, seq: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        r = self.rows[seq]
        self.kv[layer, 0, r, pos] = k
        self.kv[layer, 1, r, pos] = v

    def read(self, layer: int, seq: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.rows[seq]
        return self.kv[layer, 0, r, :length], self.kv[layer, 1, r, :length]

    def held_bytes(self) -> int:
        """Bytes of the padded tensor."""
        return int(self.kv.untyped_storage().nbytes())


def reference_outputs(model: TinyDecoder, prompt: list[int], n_out: int) -> list[int]:
    """Greedy decoding of one request alone (contiguous cache, one token per step after the prompt)."""
    cache = ContiguousKV(model.cfg, len(prompt) + n_out + 1)
    toks = torch.tensor(prompt, dtype=torch.long)
    logits = model.forward_segments(toks, torch.arange(len(prompt)), [(0, 0, len(prompt))], cache)
    out = [int(logits[0].argmax())]
    while len(out) < n_out:
        pos = len(prompt) + len(out) - 1
        logits = model.forward_segments(torch.tensor([out[-1]]), torch.tensor([pos]), [(0, 0, 1)], cache)
        out.append(int(logits[0].argmax()))
    return out


@dataclass(slots=True)
class ExecutorRun:
    """What one executor run produced."""

    policy: str
    outputs: dict[int, list[int]]
    first_token: list[float]
    finish: list[float]
    batches: list[tuple[tuple[int, int], ...]]
    iterations: int
    preemptions: int
    dropped: list[int]
    kv_block_rel_err: float  # max over iterations of |accounted - tensor bytes| / tensor bytes
    kv_token_rel_err: float  # share of held tensor bytes not holding a token (block rounding, padding)
    peak_kv_mib: float
    peak_tensor_mib: float
    wall_s: float


class Executor:
    """One replica running a batcher on :class:`TinyDecoder`.

    Args:
        trace: Requests (arrival times, prompt and output lengths).
        batcher: Registered batcher name.
        config: Model, KV pool and clock.
        options: Batcher options.
    """

    def __init__(self, trace: RequestTrace, batcher: str, config: ExecutorConfig,
                 options: dict[str, Any] | None = None) -> None:
        self.cfg = config
        self.trace = trace
        self.batcher: Batcher = make_batcher(batcher, options)
        self.policy = type(self.batcher).name
        self.shape = config.model.shape()
        self.model = TinyDecoder(config.model, config.seed)
        rng = np.random.default_rng(config.seed + 1)
        self.prompts: list[list[int]] = [
            [int(t) for t in rng.integers(0, config.model.vocab, int(p))] for p in trace.prompt
        ]
        self.gen = [max(1, int(g)) for g in trace.output]
        n = len(trace)
        self.book = RequestBook(
            arrival=trace.arrival_s.astype(np.float64), prompt=trace.prompt.astype(np.int64), predicted=np.zeros(n),
            features=np.zeros((n, 3)), out=np.zeros(n, np.int64), computed=np.zeros(n, np.int64),
            first_token=np.full(n, np.nan),
        )
        self.alloc = BlockAllocator(config.kv_blocks)
        self.paged = PagedKV(config.model, self.alloc, config.block_tokens)
        self.view = ReplicaView(replica=0, book=self.book, total_blocks=config.kv_blocks,
                                block_tokens=config.block_tokens, free_blocks=config.kv_blocks, step=config.step)
        self.generated: dict[int, list[int]] = {i: [] for i in range(n)}
        self.finish = [math.nan] * n
        self.dropped: list[int] = []
        self.batches: list[tuple[tuple[int, int], ...]] = []
        self.preemptions = 0
        self.iterations = 0
        self.block_err = 0.0
        self.token_bytes = 0
        self.tensor_bytes = 0
        self.peak_mib = 0.0
        self.peak_tensor_mib = 0.0
        self.clock = 0.0

    # ------------------------------------------------------------ helpers
    def _tick(self, started: float, tokens: int, decoders: int, kv_tokens: int) -> None:
        step = self.cfg.step
        if step is None:
            self.clock += time.perf_counter() - started
        else:
            self.clock += step.iteration_ms(tokens, 0.0, decoders, kv_tokens) / 1000.0

    def _account(self, accounted_bytes: int, token_bytes: int, tensor_bytes: int) -> None:
        if tensor_bytes:
            self.block_err = max(self.block_err, abs(accounted_bytes - tensor_bytes) / tensor_bytes)
        self.token_bytes += token_bytes
        self.tensor_bytes += tensor_bytes
        self.peak_mib = max(self.peak_mib, accounted_bytes / MIB)
        self.peak_tensor_mib = max(self.peak_tensor_mib, tensor_bytes / MIB)

    def _tokens_of(self, i: int) -> list[int]:
        return self.prompts[i] + self.generated[i]

    def _admit_arrivals(self, predictor: DecodeLengthPredictor, nxt: int) -> int:
        arr = self.book.arrival
        kvf = kv_growth_feature(self.shape.kv_bytes_per_token)
        while nxt < len(arr) and arr[nxt] <= self.clock:
            p = int(self.book.prompt[nxt])
            guess = predictor.predict(p)
            self.book.predicted[nxt] = guess
            self.book.features[nxt] = (math.log2(p), math.log2(max(guess, 1.0)), kvf)
            if self.view.blocks_for(p + 1) > self.cfg.kv_blocks:
                self.dropped.append(nxt)
            else:
                self.view.waiting.append(nxt)
            nxt += 1
        return nxt

    def _finish(self, i: int, predictor: DecodeLengthPredictor) -> None:
        self.finish[i] = self.clock
        predictor.observe(int(self.book.prompt[i]), self.gen[i])

    # ---------------------------------------------------------------- run
    def run(self) -> ExecutorRun:
        """Serve every request; returns outputs, timings and the KV accounting check."""
        t0 = time.perf_counter()
        predictor = DecodeLengthPredictor()
        n = len(self.trace)
        nxt = 0
        request_level = type(self.batcher).request_level
        while True:
            nxt = self._admit_arrivals(predictor, nxt)
            done = sum(1 for f in self.finish if not math.isnan(f)) + len(self.dropped)
            if done >= n:
                break
            self.view.now = self.clock
            if request_level:
                progressed = self._request_level_batch(predictor)
            else:
                progressed = self._iteration(predictor)
            if not progressed:
                wake = self.batcher.plan(self.view).wake_at if self.view.waiting else None
                if nxt < n:
                    self.clock = max(self.clock, min(float(self.book.arrival[nxt]), wake or math.inf))
                elif wake is not None:
                    self.clock = max(self.clock, wake)
                else:
                    self.dropped.extend(self.view.waiting)  # nothing can serve them
                    self.view.waiting.clear()
        return ExecutorRun(
            policy=self.policy, outputs=self.generated, first_token=self.book.first_token.tolist(),
            finish=self.finish, batches=self.batches, iterations=self.iterations, preemptions=self.preemptions,
            dropped=sorted(self.dropped), kv_block_rel_err=self.block_err,
            kv_token_rel_err=1.0 - self.token_bytes / self.tensor_bytes if self.tensor_bytes else 0.0,
            peak_kv_mib=self.peak_mib, peak_tensor_mib=self.peak_tensor_mib, wall_s=time.perf_counter() - t0,
        )

    # ------------------------------------------------- iteration level
    def _sync(self) -> None:
        v = self.view
        v.free_blocks = self.alloc.free_count
        v.kv_tokens = sum(len(self._tokens_of(i)) - 1 for i in v.decoding)

    def _iteration(self, predictor: DecodeLengthPredictor) -> bool:
        v, book, bs = self.view, self.book, self.cfg.block_tokens
        self._sync()
        plan = self.batcher.plan(v)
        for i in plan.reject:
            v.waiting.remove(i)
            self.dropped.append(i)
        if not plan.prefill and not (plan.decode and v.decoding):
            return False
        for i, _ in plan.prefill:
            if i in v.waiting:
                v.waiting.remove(i)
                book.computed[i] = 0
                self.alloc.ensure(i, v.blocks_for(book.prefill_len(i)))
                v.prefilling.append(i)
        decoders = list(v.decoding) if plan.decode else []
        while decoders:  # room for each decoder's next token, else preempt (recompute)
            need = sum(max(0, v.blocks_for(len(self._tokens_of(i))) - len(self.alloc.tables[i])) for i in decoders)
            if need <= self.alloc.free_count:
                break
            self._sync()
            for j in self.batcher.victims(v, need - self.alloc.free_count):
                self._preempt(j)
            decoders = [i for i in decoders if i in v.decoding]
            plan_prefill = [(i, t) for i, t in plan.prefill if i in v.prefilling]
            plan = type(plan)(prefill=tuple(plan_prefill), decode=plan.decode)
        for i in decoders:
            self.alloc.ensure(i, v.blocks_for(len(self._tokens_of(i))))
        toks: list[int] = []
        pos: list[int] = []
        segs: list[tuple[int, int, int]] = []
        for i, t in plan.prefill:
            c = int(book.computed[i])
            seq = self._tokens_of(i)
            segs.append((i, len(toks), len(toks) + t))
            toks.extend(seq[c:c + t])
            pos.extend(range(c, c + t))
        for i in decoders:
            seq = self._tokens_of(i)
            segs.append((i, len(toks), len(toks) + 1))
            toks.append(seq[-1])
            pos.append(len(seq) - 1)
        if not segs:
            return False
        self.batches.append(tuple((i, b - a) for i, a, b in segs))
        kv_before = sum(len(self._tokens_of(i)) - 1 for i in decoders)
        started = time.perf_counter()
        logits = self.model.forward_segments(torch.tensor(toks), torch.tensor(pos), segs, self.paged)
        self.iterations += 1
        self._tick(started, sum(t for _, t in plan.prefill), len(decoders), kv_before)
        nxt_tok = logits.argmax(dim=-1).tolist()
        for k, (i, _, _) in enumerate(segs):
            if i in v.prefilling:
                book.computed[i] += segs[k][2] - segs[k][1]
                if book.computed[i] < book.prefill_len(i):
                    continue
                v.prefilling.remove(i)
                book.computed[i] = 0
                if math.isnan(book.first_token[i]):
                    book.first_token[i] = self.clock
                v.decoding.append(i)
            self.generated[i].append(int(nxt_tok[k]))
            book.out[i] = len(self.generated[i])
            if book.out[i] >= self.gen[i]:
                v.decoding.remove(i)
                self.alloc.free(i)
                self._finish(i, predictor)
        self._check_paged(bs)
        return True

    def _preempt(self, i: int) -> None:
        v = self.view
        if i in v.decoding:
            v.decoding.remove(i)
        else:
            v.prefilling.remove(i)
        self.alloc.free(i)
        self.book.computed[i] = 0
        v.waiting.insert(0, i)
        self.preemptions += 1

    def _check_paged(self, bs: int) -> None:
        self.alloc.check()
        v = self.view
        per_tok = self.shape.kv_bytes_per_token
        accounted = self.alloc.used * bs * per_tok
        tokens = sum(len(self._tokens_of(i)) - 1 for i in v.decoding)
        tokens += sum(int(self.book.computed[i]) for i in v.prefilling)
        self._account(accounted, tokens * per_tok, self.paged.held_bytes())

    # --------------------------------------------------- request level
    def _request_level_batch(self, predictor: DecodeLengthPredictor) -> bool:
        v, book = self.view, self.book
        v.free_blocks = self.cfg.kv_blocks
        v.kv_tokens = 0
        plan = self.batcher.plan(v)
        for i in plan.reject:
            v.waiting.remove(i)
            self.dropped.append(i)
        if not plan.prefill:
            return False
        members = [i for i, _ in plan.prefill]
        for i in members:
            v.waiting.remove(i)
        lens = [book.prefill_len(i) for i in members]
        width = max(lens)
        cache = PaddedKV(self.cfg.model, {i: r for r, i in enumerate(members)}, width)
        per_tok = self.shape.kv_bytes_per_token
        toks: list[int] = []
        pos: list[int] = []
        segs: list[tuple[int, int, int]] = []
        for i in members:
            seq = self._tokens_of(i)
            segs.append((i, len(toks), len(toks) + len(seq)))
            toks.extend(seq)
            pos.extend(range(len(seq)))
        self.batches.append(tuple((i, b - a) for i, a, b in segs))
        started = time.perf_counter()
        logits = self.model.forward_segments(torch.tensor(toks), torch.tensor(pos), segs, cache)
        self.iterations += 1
        self._tick(started, len(members) * width, 0, 0)
        live = []
        for k, i in enumerate(members):
            book.first_token[i] = self.clock
            self.generated[i].append(int(logits[k].argmax()))
            book.out[i] = 1
            if self.gen[i] <= 1:
                self._finish(i, predictor)
            else:
                live.append(i)
        self._account(len(members) * width * per_tok, sum(lens) * per_tok, cache.held_bytes())
        step = 0
        while live:
            step += 1
            cache.grow()  # every row gets a column, finished rows too (padding)
            toks, pos, segs = [], [], []
            for k, i in enumerate(members):
                seq = self._tokens_of(i)
                segs.append((i, k, k + 1))
                toks.append(seq[-1])
                pos.append(width + step - 1 if i not in live else len(seq) - 1)
            started = time.perf_counter()
            logits = self.model.forward_segments(torch.tensor(toks), torch.tensor(pos), segs, cache)
            self.iterations += 1
            self._tick(started, 0, len(members), len(members) * (width + step - 1))
            self.batches.append(tuple((i, 1) for i in members))
            for k, i in enumerate(members):
                if i in live:
                    self.generated[i].append(int(logits[k].argmax()))
                    book.out[i] = len(self.generated[i])
            for i in [i for i in live if book.out[i] >= self.gen[i]]:
                live.remove(i)
                self._finish(i, predictor)
            rect = len(members) * (width + step) * per_tok
            held = sum(len(self._tokens_of(i)) - 1 for i in members) * per_tok
            self._account(rect, held, cache.held_bytes())
        return True


def run_executor_comparison(
    trace: RequestTrace, policies: list[str], *, requests: int = 48, token_scale: float = 0.05,
    rate_scale: float = 1.0, config: ExecutorConfig | None = None,
    options: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run ``policies`` on the first ``requests`` requests (lengths scaled by ``token_scale``) and
    check each against the unbatched reference."""
    if requests < 1:
        raise InputError(f"must be >= 1, got {requests}", source="--requests")
    if not token_scale > 0:
        raise InputError(f"must be > 0, got {token_scale}", source="--token-scale")
    cfg = config or ExecutorConfig()
    t = trace.head(count=requests).scaled(rate_scale)
    small = RequestTrace(t.arrival_s - t.arrival_s[0], np.maximum(1, np.round(t.prompt * token_scale)).astype(np.int64),
                         np.maximum(1, np.round(t.output * token_scale)).astype(np.int64), t.source)
    ref: dict[int, list[int]] | None = None
    rows = []
    for p in policies:
        opts = dict((options or {}).get(p, {}))
        if "max_new_tokens" in BATCHERS.get(p).options:
            opts.setdefault("max_new_tokens", int(small.output.max()))  # what a static engine is told
        ex = Executor(small, p, cfg, opts)
        if ref is None:
            t0 = time.perf_counter()
            ref = {i: reference_outputs(ex.model, ex.prompts[i], ex.gen[i]) for i in range(len(small))}
            ref_wall = time.perf_counter() - t0
        run = ex.run()
        served = [i for i in range(len(small)) if i not in set(run.dropped)]
        equal = all(run.outputs[i] == ref[i] for i in served)
        rows.append({
            "policy": run.policy, "requests": len(small), "dropped": len(run.dropped),
            "iterations": run.iterations, "outputs_equal_reference": equal,
            "kv_block_accounting_max_rel_err": round(run.kv_block_rel_err, 6),
            "kv_unused_tensor_share": round(run.kv_token_rel_err, 4),
            "peak_kv_mib": round(run.peak_kv_mib, 4), "peak_kv_tensor_mib": round(run.peak_tensor_mib, 4),
            "preemptions": run.preemptions, "wall_s": round(run.wall_s, 3),
            "max_batch": max((len(b) for b in run.batches), default=0),
        })
    shape = (config or ExecutorConfig()).model.shape()
    return {"results": rows, "setup": {
        "model": f"{shape.name}: {shape.layers} layers, hidden {shape.hidden}, {shape.heads} heads / "
                 f"{shape.kv_heads} KV heads, float64, random weights (seed {cfg.seed})",
        "kv_bytes_per_token": shape.kv_bytes_per_token, "kv_blocks": cfg.kv_blocks, "block_tokens": cfg.block_tokens,
        "requests": len(small), "token_scale": token_scale, "reference_wall_s": round(ref_wall, 3) if ref else None,
        "clock": "wall" if cfg.step is None else cfg.step.source,
    }}
