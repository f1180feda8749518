"""BERT (Devlin et al., 2019) encoder in plain PyTorch, built from its public configuration.

Defaults are ``bert-base-uncased``'s ``config.json`` on the Hugging Face hub: hidden 768, 12 layers,
12 heads, intermediate 3072, vocabulary 30522, 512 positions, 2 token types, GELU (erf), LayerNorm
eps 1e-12. Weights are random (``torch.manual_seed``); nothing is downloaded. With the pooler the
parameter count is 109,482,240, the figure the hub reports for ``bert-base-uncased``.

:func:`fuse_bert_ffn` swaps every layer's feed-forward up-projection + GELU (``intermediate``) for
:class:`~seedance.kernels.fused.FusedLinear` sharing the same parameters, so the model's function
is unchanged and the fused kernel runs where a GPU (or Triton's interpreter) is present.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seedance.kernels.fused import FusedLinear, Tiles


@dataclass(frozen=True, slots=True)
class BertConfig:
    """The public ``bert-base-uncased`` configuration."""

    vocab_size: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_positions: int = 512
    type_vocab: int = 2
    dropout: float = 0.1
    eps: float = 1e-12


class _Attention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.qkv = nn.Linear(c.hidden, 3 * c.hidden)
        self.out = nn.Linear(c.hidden, c.hidden)
        self.drop = nn.Dropout(c.dropout)
        self.norm = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, h: Tensor, mask: Tensor | None) -> Tensor:
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                       dropout_p=self.drop.p if self.training else 0.0)
        a = a.transpose(1, 2).reshape(b, s, d)
        return self.norm(h + self.drop(self.out(a)))  # type: ignore[no-any-return]


class _Intermediate(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.intermediate)

    def forward(self, h: Tensor) -> Tensor:
        return nn.functional.gelu(self.dense(h))


class _Layer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate: nn.Module = _Intermediate(c)
        self.output = nn.Linear(c.intermediate, c.hidden)
        self.drop = nn.Dropout(c.dropout)
        self.norm = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, h: Tensor, mask: Tensor | None) -> Tensor:
        h = self.attention(h, mask)
        return self.norm(h + self.drop(self.output(self.intermediate(h))))  # type: ignore[no-any-return]


class BertModel(nn.Module):
    """Embeddings, ``layers`` encoder layers and the pooler; returns (sequence output, pooled)."""

    def __init__(self, config: BertConfig = BertConfig()) -> None:
        super().__init__()
        c = config
        self.config = c
        self.word = nn.Embedding(c.vocab_size, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.emb_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.emb_drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:  # BERT's initialiser: N(0, 0.02), zero biases
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        s = ids.shape[1]
        pos = torch.arange(s, device=ids.device)
        h = self.word(ids) + self.position(pos)[None] + self.token_type(torch.zeros_like(ids))
        h = self.emb_drop(self.emb_norm(h))
        mask = None
        if attention_mask is not None:  # additive mask: 0 where attended, -inf-like where padded
            mask = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        for layer in self.layers:
            h = layer(h, mask)
        return h, torch.tanh(self.pooler(h[:, 0]))

    def flops_per_sequence(self, seq_len: int) -> float:
        """Forward FLOPs of one sequence (2 per multiply-add; matrix products only)."""
        c = self.config
        per_layer = 2 * seq_len * (4 * c.hidden * c.hidden + 2 * c.hidden * c.intermediate)
        attn = 2 * 2 * seq_len * seq_len * c.hidden
        return float(c.layers * (per_layer + attn) + 2 * c.hidden * c.hidden)


def fuse_bert_ffn(model: BertModel, *, tiles: Tiles = Tiles(), seed: int = 0, backend: str = "triton") -> BertModel:
    """Replace each layer's up-projection + GELU with a fused kernel, in place.

    ``backend="triton"``: :class:`~seedance.kernels.fused.FusedLinear` sharing the parameters (the
    Triton kernel on a GPU). ``backend="tvm"``: the TVM CPU kernel (:mod:`seedance.kernels.tvm_fused`,
    inference only; the weight is moved to ``K x N`` layout).
    """
    if backend not in ("triton", "tvm"):
        raise ValueError(f"unknown backend {backend!r}; valid: triton, tvm")
    for i, layer in enumerate(model.layers):
        inter = layer.intermediate
        if isinstance(inter, _Intermediate):
            if backend == "tvm":
                from seedance.kernels.tvm_fused import tvm_linear_module

                layer.intermediate = tvm_linear_module(inter.dense, "gelu")
            else:
                layer.intermediate = FusedLinear.from_linear(inter.dense, activation="gelu", p=0.0,
                                                             seed=(seed + i) % 2**31, tiles=tiles)
    return model


def random_inputs(batch: int, seq_len: int, config: BertConfig = BertConfig(), *, seed: int = 0) -> Tensor:
    """Token ids of ``batch`` sequences of ``seq_len`` tokens."""
    if not 1 <= seq_len <= config.max_positions:
        raise ValueError(f"seq_len must be in [1, {config.max_positions}], got {seq_len}")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, seq_len), generator=g)


__all__ = ["BertConfig", "BertModel", "fuse_bert_ffn", "random_inputs"]
