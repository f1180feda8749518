"""Model shapes: what a decoder-only transformer costs in weights and KV cache.

The KV cache of one token holds, in every layer, one key and one value vector per KV head:
``2 * layers * kv_heads * head_dim * dtype_bytes`` bytes. This is the "KV-cache growth per decode
step" of a request's profile (each decode step appends one token), and the unit of every memory
figure in the serving simulator and the real executor.

Shapes are the public ``config.json`` values of the Hugging Face model cards named on each entry;
``params`` is the parameter count the card reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from seedance.core.registry import Registry

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The shape of a decoder-only transformer.

    Attributes:
        name: Registry name, e.g. ``"llama2-70b"``.
        layers: Transformer blocks.
        hidden: Model width (``hidden_size``).
        heads: Attention (query) heads.
        kv_heads: Key/value heads (``< heads`` with grouped-query attention).
        head_dim: Width of one head.
        ffn: Feed-forward inner width.
        vocab: Vocabulary size.
        params: Parameter count.
        dtype_bytes: Bytes per weight and per KV element (2 for fp16/bf16).
        source: Where the figures come from.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    params: float
    dtype_bytes: int = 2
    source: str = ""

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "dtype_bytes"):
            if getattr(self, f) <= 0:
                raise ValueError(f"model {self.name}: {f} must be > 0")
        if self.heads % self.kv_heads:
            raise ValueError(f"model {self.name}: heads must be a multiple of kv_heads")

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies over all layers (keys and values)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> float:
        """Bytes of the weights at ``dtype_bytes`` per parameter."""
        return self.params * self.dtype_bytes


MODELS: Registry[ModelShape] = Registry("model")


def _add(m: ModelShape, *aliases: str) -> None:
    MODELS.add(m.name, m, aliases=aliases)


_HF = "Hugging Face config.json of"
_add(ModelShape("llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672,
                vocab=32000, params=68.98e9, source=f"{_HF} meta-llama/Llama-2-70b-hf"), "llama-2-70b")
_add(ModelShape("llama2-7b", layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008,
                vocab=32000, params=6.74e9, source=f"{_HF} meta-llama/Llama-2-7b-hf"), "llama-2-7b")
_add(ModelShape("bloom-176b", layers=70, hidden=14336, heads=112, kv_heads=112, head_dim=128, ffn=57344,
                vocab=250880, params=176.25e9, source=f"{_HF} bigscience/bloom"), "bloom")


def get_model(name: str) -> ModelShape:
    """The registered model called ``name`` (unknown names list the valid ones)."""
    return MODELS.get(name)
