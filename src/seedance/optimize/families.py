"""Served model families and the deployment variants users choose among.

A family is one task and one accuracy metric (Llama 3: MMLU 5-shot; BERT-style readers: SQuAD 2.0 dev
F1; ResNet: ImageNet top-1; DETR and YOLOv8: COCO val mAP). Its variants are published
checkpoints with their parameter counts, FLOPs per request unit and accuracy, per precision,
each citing :mod:`seedance.optimize.sources`. A precision appears for a variant only where a
published figure (or a published delta) exists for it.

Quantised accuracies are the published quantised figure where the source gives one, else the
fp16 figure times the published *recovery* (quantised / unquantised) of the cited source; the
``basis`` of each entry says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from seedance.core.registry import Registry


@dataclass(frozen=True, slots=True)
class Precision:
    """A numeric format: bytes per weight, and whether matrix products run on INT8 tensor cores."""

    name: str
    weight_bytes: float
    int8_compute: bool
    describe: str


PRECISIONS: Mapping[str, Precision] = MappingProxyType({
    "fp16": Precision("fp16", 2.0, False, "fp16/bf16 weights and activations"),
    "int8": Precision("int8", 1.0, True, "int8 weights and activations (INT8 tensor cores)"),
    "w8a16": Precision("w8a16", 1.0, False, "int8 weights, fp16 activations (weight-only)"),
    "w4a16": Precision("w4a16", 0.5, False, "int4 weights, fp16 activations (weight-only, GPTQ/AWQ style)"),
})


@dataclass(frozen=True, slots=True)
class Accuracy:
    """A published accuracy of one variant in one precision."""

    value: float
    sources: tuple[str, ...]
    basis: str = "published"


@dataclass(frozen=True, slots=True)
class DecoderShape:
    """The shape of a decoder-only LLM (public config.json), for weights, FLOPs and KV cache."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def matmul_params(self) -> float:
        """Parameters touched by matrix products per token (blocks + LM head; not the input embedding)."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        per_layer = 2 * h * h + 2 * h * kv + 3 * h * self.ffn
        return float(self.layers * per_layer + h * self.vocab)

    @property
    def params(self) -> float:
        """All parameters (untied input embedding included; norms ignored)."""
        return self.matmul_params + self.hidden * self.vocab

    @property
    def kv_bytes_per_token(self) -> int:
        """fp16 KV-cache bytes of one token over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


@dataclass(frozen=True, slots=True)
class EncoderShape:
    """A BERT-style encoder at a fixed sequence length."""

    layers: int
    hidden: int
    ffn: int
    seq_len: int = 384

    @property
    def matmul_params(self) -> float:
        """Parameters in the blocks' matrix products."""
        return float(self.layers * (4 * self.hidden * self.hidden + 2 * self.hidden * self.ffn))

    @property
    def gflops(self) -> float:
        """Forward GFLOPs of one sequence: the products (2 per multiply-add) and attention's two."""
        s = self.seq_len
        return (2 * s * self.matmul_params + self.layers * 4 * s * s * self.hidden) / 1e9


@dataclass(frozen=True, slots=True)
class Variant:
    """One published checkpoint.

    Attributes:
        name: Short name, e.g. ``"llama-3-8b"``.
        params: Parameter count.
        gflops: Forward GFLOPs per request unit (image, sequence, or generated/prompt token for LLMs).
        accuracy: Precision name -> published accuracy.
        sources: Where params/FLOPs come from.
        shape: Decoder or encoder shape (LLM and BERT families), else ``None``.
        published_ms: Published batch-1 latency per GPU (vision families), for calibration or checks.
        profile_model: The benchmark model whose measured compile/fuse ratios apply to it, if any.
    """

    name: str
    params: float
    gflops: float
    accuracy: Mapping[str, Accuracy]
    sources: tuple[str, ...]
    shape: DecoderShape | EncoderShape | None = None
    published_ms: Mapping[str, float] = field(default_factory=dict)
    profile_model: str | None = None


@dataclass(frozen=True, slots=True)
class WhitepaperRow:
    """The whitepaper's claimed Pareto point for a family's benchmark (§3.1), printed beside ours."""

    benchmark: str
    gflops: float
    latency_ms: float
    accuracy: float
    claim: str


@dataclass(frozen=True, slots=True)
class Family:
    """A served model family and its deployment space."""

    name: str
    task: str
    metric: str
    kind: str  # "llm" | "encoder" | "vision"
    variants: tuple[Variant, ...]
    gpus: tuple[str, ...]
    counts: tuple[int, ...]
    batches: tuple[int, ...]
    modes: tuple[str, ...] = ("eager",)
    whitepaper: WhitepaperRow | None = None
    notes: str = ""

    @property
    def precisions(self) -> tuple[str, ...]:
        """Every precision any variant has, in the order of :data:`PRECISIONS`."""
        have = {p for v in self.variants for p in v.accuracy}
        return tuple(p for p in PRECISIONS if p in have)

    def variant(self, name: str) -> Variant:
        """The variant called ``name``."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


FAMILIES: Registry[Family] = Registry("model family")

_GPUS = ("T4", "A10", "V100-32GB", "L40S", "A100-40GB", "A100-80GB", "H100-80GB", "H200")
_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


def _acc(value: float, *sources: str, basis: str = "published") -> Accuracy:
    return Accuracy(round(value, 3), sources, basis)


def _recovered(base: float, quant: float, of_base: float, *sources: str) -> Accuracy:
    """``base`` times the published recovery ``quant / of_base``."""
    return _acc(base * quant / of_base, *sources, basis=f"recovery {quant:g}/{of_base:g} of the cited source")


# ------------------------------------------------------------------------------------- Llama 3
_L3_8B = DecoderShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256)
_L3_70B = DecoderShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256)
FAMILIES.add("llama-3", Family(
    name="llama-3", task="chat / text generation", metric="MMLU 5-shot (instruct)", kind="llm",
    variants=(
        Variant("llama-3-8b", _L3_8B.params, 2 * _L3_8B.matmul_params / 1e9, {
            "fp16": _acc(68.4, "llama3-card"),
            "w8a16": _recovered(68.4, 66.55, 66.54, "llama3-card", "nm-llama3-8b-w8a16"),
            "w4a16": _recovered(68.4, 98.9, 100.0, "llama3-card", "nm-llama31-8b-w4a16"),
        }, ("llama3-card",), shape=_L3_8B),
        Variant("llama-3-70b", _L3_70B.params, 2 * _L3_70B.matmul_params / 1e9, {
            "fp16": _acc(82.0, "llama3-card"),
            "w8a16": _recovered(82.0, 78.69, 80.18, "llama3-card", "nm-llama3-70b-w8a16"),
            "w4a16": _recovered(82.0, 99.4, 100.0, "llama3-card", "nm-llama31-70b-w4a16"),
        }, ("llama3-card",), shape=_L3_70B),
    ),
    gpus=_GPUS, counts=(1, 2, 4, 8), batches=_BATCHES,
    notes="int4 recovery is Llama 3.1's (OpenLLM v1 average) applied to Llama 3's MMLU; the GPU count is the "
          "tensor-parallel degree of one replica; GFLOPs are per generated token",
), aliases=("llama3", "llama"))

# ------------------------------------------------------------------------ BERT-style SQuAD 2.0
_Q8 = ("q8bert",)


def _reader(name: str, layers: int, hidden: int, ffn: int, params: float, f1: float, src: str,
            profile: str | None = None) -> Variant:
    shape = EncoderShape(layers, hidden, ffn)
    return Variant(name, params, shape.gflops, {
        "fp16": _acc(f1, src),
        "int8": _recovered(f1, 87.74, 88.46, src, *_Q8),
    }, (src,), shape=shape, profile_model=profile)


FAMILIES.add("bert", Family(
    name="bert", task="extractive question answering", metric="SQuAD 2.0 dev F1", kind="encoder",
    variants=(
        _reader("tinybert-6l", 6, 768, 3072, 67.0e6, 77.17, "deepset-tinybert-squad2", "bert-base"),
        _reader("tinyroberta-6l", 6, 768, 3072, 82.0e6, 82.04, "deepset-tinyroberta-squad2", "bert-base"),
        _reader("bert-base", 12, 768, 3072, 110.0e6, 78.08, "nemo-bertbase-squad2", "bert-base"),
        _reader("bert-large", 24, 1024, 4096, 340.0e6, 83.05, "nemo-bertlarge-squad2", "bert-base"),
        _reader("megatron-bert-345m", 24, 1024, 4096, 345.0e6, 84.75, "tao-megatron-squad2", "bert-base"),
    ),
    gpus=_GPUS, counts=(1,), batches=_BATCHES, modes=("eager", "compiled", "fused"),
    whitepaper=WhitepaperRow("SQuAD v2", 0.6, 18.0, 79.3, "+3.2% F1, -31% cost"),
    notes="sequence length 384 (the SQuAD setting of every cited card); int8 is Q8BERT's SQuAD v1.1 recovery "
          "applied to each reader's v2 F1; the compile/fuse ratios are the measured BERT-base ones",
), aliases=("squad", "bert-squad2"))

# ------------------------------------------------------------------------------------- ResNet
_TV = "torchvision-resnet"
FAMILIES.add("resnet", Family(
    name="resnet", task="image classification", metric="ImageNet top-1", kind="vision",
    variants=(
        Variant("resnet-18", 11.69e6, 2 * 1.81, {"fp16": _acc(69.758, _TV),
                                            "int8": _acc(69.494, "torchvision-quantized")}, (_TV,),
                profile_model="resnet-50"),
        Variant("resnet-34", 21.80e6, 2 * 3.66, {"fp16": _acc(73.314, _TV)}, (_TV,), profile_model="resnet-50"),
        Variant("resnet-50", 25.56e6, 2 * 4.09, {"fp16": _acc(76.130, _TV),
                                            "int8": _acc(75.920, "torchvision-quantized")}, (_TV,),
                profile_model="resnet-50"),
        Variant("resnet-101", 44.55e6, 2 * 7.80, {"fp16": _acc(77.374, _TV)}, (_TV,), profile_model="resnet-50"),
        Variant("resnet-152", 60.19e6, 2 * 11.51, {"fp16": _acc(78.312, _TV)}, (_TV,), profile_model="resnet-50"),
    ),
    gpus=_GPUS, counts=(1,), batches=_BATCHES, modes=("eager", "compiled", "fused"),
    notes="torchvision's GFLOPS column counts multiply-adds (4.09 for ResNet-50); FLOPs here are 2 per "
          "multiply-add, as Ultralytics counts them",
), aliases=("resnet50", "imagenet"))

# --------------------------------------------------------------------------------------- DETR
_DP = "detr-paper"
FAMILIES.add("detr", Family(
    name="detr", task="object detection", metric="COCO val AP", kind="vision",
    variants=(
        Variant("detr-r50", 41e6, 2 * 86, {"fp16": _acc(42.0, _DP)}, (_DP,), published_ms={"V100-32GB": 1000 / 28}),
        Variant("detr-r101", 60e6, 2 * 152, {"fp16": _acc(43.5, _DP)}, (_DP,),
                published_ms={"V100-32GB": 1000 / 20}),
        Variant("detr-dc5-r50", 41e6, 2 * 187, {"fp16": _acc(43.3, _DP)}, (_DP,),
                published_ms={"V100-32GB": 1000 / 12}),
        Variant("detr-dc5-r101", 60e6, 2 * 253, {"fp16": _acc(44.9, _DP)}, (_DP,),
                published_ms={"V100-32GB": 1000 / 10}),
    ),
    gpus=_GPUS, counts=(1,), batches=_BATCHES,
    whitepaper=WhitepaperRow("COCO", 1.8, 23.0, 42.1, "+5.7% accuracy, -22% latency"),
    notes="DETR's GFLOPS (fvcore, per 800-px image) count multiply-adds: FLOPs here are twice them; its FPS "
          "(V100, PyTorch) checks the latency model, it does not fit it",
), aliases=("detr-coco",))

# ------------------------------------------------------------------------------------- YOLOv8
_UL = "ultralytics-yolov8"
_I8 = "yolov8-trt-int8"
FAMILIES.add("yolo", Family(
    name="yolo", task="object detection", metric="COCO val mAP50-95", kind="vision",
    variants=(
        Variant("yolov8n", 3.2e6, 8.7, {"fp16": _acc(37.3, _UL), "int8": _recovered(37.3, 33.0, 37.1, _UL, _I8)},
                (_UL,), published_ms={"A100-80GB": 0.99}),
        Variant("yolov8s", 11.2e6, 28.6, {"fp16": _acc(44.9, _UL), "int8": _recovered(44.9, 41.2, 44.7, _UL, _I8)},
                (_UL,), published_ms={"A100-80GB": 1.20}),
        Variant("yolov8m", 25.9e6, 78.9, {"fp16": _acc(50.2, _UL), "int8": _recovered(50.2, 46.2, 50.0, _UL, _I8)},
                (_UL,), published_ms={"A100-80GB": 1.83}),
        Variant("yolov8l", 43.7e6, 165.2, {"fp16": _acc(52.9, _UL)}, (_UL,), published_ms={"A100-80GB": 2.39}),
        Variant("yolov8x", 68.2e6, 257.8, {"fp16": _acc(53.9, _UL)}, (_UL,), published_ms={"A100-80GB": 3.53}),
    ),
    gpus=_GPUS, counts=(1,), batches=_BATCHES,
    whitepaper=WhitepaperRow("COCO", 1.8, 23.0, 42.1, "+5.7% accuracy, -22% latency"),
    notes="the A100 TensorRT batch-1 latencies calibrate the vision latency model",
), aliases=("yolov8",))


def get_family(name: str) -> Family:
    """The family called ``name``; unknown names raise an InputError listing the valid ones."""
    from seedance.core.errors import InputError, UnknownNameError

    try:
        return FAMILIES.get(name)
    except UnknownNameError:
        raise InputError(f"unknown family {name!r}; valid: {', '.join(FAMILIES.names())}", source="--family",
                         ) from None
