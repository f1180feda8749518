"""Benchmark models built from their public configurations with random weights (nothing downloaded)."""

from seedance.kernels.models.bert import BertConfig, BertModel, fuse_bert_ffn
from seedance.kernels.models.resnet import ResNet, fold_resnet_bn, resnet50

__all__ = ["BertConfig", "BertModel", "ResNet", "fold_resnet_bn", "fuse_bert_ffn", "resnet50"]
