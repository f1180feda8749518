"""Published sources behind every accuracy, size and latency figure of the deployment space.

Each figure in :mod:`seedance.optimize.families` names one of these ids; reports print them. No
figure is measured here or invented: where a source does not give a number (e.g. an int4 accuracy
for BERT), the combination is left out of the space.
"""

from __future__ import annotations

from types import MappingProxyType

SOURCES = MappingProxyType({
    "llama3-card": "Meta Llama 3 model card (meta-llama/Meta-Llama-3-8B, -70B; 'Instruction tuned models' table: "
                   "MMLU 5-shot 68.4 (8B), 82.0 (70B)); shapes from the public config.json (parameter counts 8.03B / "
                   "70.55B follow from them)",
    "nm-llama3-8b-w8a16": "Neural Magic, neuralmagic/Meta-Llama-3-8B-Instruct-quantized.w8a16 model card "
                          "(lm-evaluation-harness on vLLM): MMLU 5-shot 66.54 (bf16) -> 66.55 (int8 weights)",
    "nm-llama3-70b-w8a16": "Neural Magic, neuralmagic/Meta-Llama-3-70B-Instruct-quantized.w8a16 model card: "
                           "MMLU 5-shot 80.18 (bf16) -> 78.69 (int8 weights)",
    "nm-llama31-8b-w4a16": "Neural Magic, neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 model card: "
                           "98.9% recovery on OpenLLM v1 (GPTQ, int4 weights, group 128)",
    "nm-llama31-70b-w4a16": "Neural Magic, neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w4a16 model card: "
                            "99.4% recovery on OpenLLM v1 (GPTQ, int4 weights)",
    "nemo-bertbase-squad2": "NVIDIA NGC, nemo/qa_squadv2_0_bertbase model card: SQuAD2.0 dev EM 75.04, F1 78.08",
    "nemo-bertlarge-squad2": "NVIDIA NGC, nemo/qa_squadv2_0_bertlarge model card: SQuAD2.0 dev EM 80.22, F1 83.05",
    "tao-megatron-squad2": "NVIDIA NGC, tao/questionanswering_squad_english_megatron (Megatron uncased, 340M): "
                           "SQuAD2.0 EM 81.35, F1 84.75",
    "deepset-tinybert-squad2": "deepset/tinybert-6l-768d-squad2 model card (Hugging Face verified model-index): "
                               "squad_v2 validation EM 73.82, F1 77.17",
    "deepset-tinyroberta-squad2": "deepset/tinyroberta-squad2 model card (Hugging Face verified model-index): "
                                  "squad_v2 validation EM 78.86, F1 82.04",
    "q8bert": "Zafrir et al., Q8BERT: Quantized 8Bit BERT (arXiv:1910.06188), Table 1: SQuAD v1.1 dev F1 "
              "88.46 (fp32 BERT-base) -> 87.74 (int8 quantization-aware training)",
    "torchvision-resnet": "torchvision model zoo (classification table, IMAGENET1K_V1 weights): top-1 / GFLOPS / "
                          "params: resnet18 69.758 / 1.81 / 11.7M, resnet34 73.314 / 3.66 / 21.8M, resnet50 76.130 / "
                          "4.09 / 25.6M, resnet101 77.374 / 7.80 / 44.5M, resnet152 78.312 / 11.51 / 60.2M",
    "torchvision-quantized": "torchvision quantized model zoo (FBGEMM int8): resnet18 69.494, resnet50 75.920 top-1",
    "detr-paper": "Carion et al., End-to-End Object Detection with Transformers (ECCV 2020), Table 1: COCO val AP / "
                  "GFLOPS / FPS (V100) / params: DETR 42.0 / 86 / 28 / 41M, DETR-DC5 43.3 / 187 / 12 / 41M, "
                  "DETR-R101 43.5 / 152 / 20 / 60M, DETR-DC5-R101 44.9 / 253 / 10 / 60M",
    "ultralytics-yolov8": "Ultralytics YOLOv8 docs, detection (COCO) table at 640 px: mAP50-95 / A100 TensorRT "
                          "batch-1 ms / params / GFLOPs: n 37.3 / 0.99 / 3.2M / 8.7, s 44.9 / 1.20 / 11.2M / 28.6, "
                          "m 50.2 / 1.83 / 25.9M / 78.9, l 52.9 / 2.39 / 43.7M / 165.2, x 53.9 / 3.53 / 68.2M / 257.8",
    "yolov8-trt-int8": "the0807/YOLOv8-ONNX-TensorRT README (TensorRT on Jetson Orin Nano, COCO mAP50-95): "
                       "FP16 -> INT8 engine n 37.1 -> 33.0, s 44.7 -> 41.2, m 50.0 -> 46.2",
    "nvidia-datasheets": "NVIDIA datasheets, dense INT8 tensor TOPS: T4 130, A10 250, L40S 733, A100 624, H100 SXM "
                         "1979, H200 1979 (V100 has no INT8 tensor cores)",
    "splitwise-vidur": "the serving model's measured profiles (inference.perf): SplitwiseSim perf_model.csv "
                       "(llama2-70b on DGX-A100/H100, TP2/4/8; the latency model is fitted on it) and Vidur's "
                       "Llama-2-7B operator profiles (A100/H100; used to check the fit)",
    "azure-conv": "Azure LLM inference trace 2023, conversation (Splitwise): prompt and output token counts",
})
"""Source id -> citation."""


def cite(ids: tuple[str, ...]) -> list[str]:
    """The citations of ``ids`` (unknown ids raise ``KeyError``)."""
    return [f"[{i}] {SOURCES[i]}" for i in ids]
