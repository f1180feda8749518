"""ResNet (He et al., 2016) in plain PyTorch: torchvision's v1.5 layout (stride on the 3x3 conv).

``resnet50()`` has blocks ``[3, 4, 6, 3]`` of bottlenecks and 25,557,032 parameters, the figure
torchvision's model table lists for ``resnet50``. Weights are random; nothing is downloaded.

:func:`fold_resnet_bn` is the inference-time fusion of a CNN: every BatchNorm is folded into the
convolution before it (``torch.nn.utils.fusion.fuse_conv_bn_eval``), so each conv + BN pair is one
kernel and the BN's output tensor is never materialised; ReLUs run in place.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand x4, with a projected shortcut when needed."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1: nn.Module = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2: nn.Module = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3: nn.Module = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        idn = x if self.down is None else self.down(x)
        return self.relu(y + idn)  # type: ignore[no-any-return]


class ResNet(nn.Module):
    """Stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool), four stages of bottlenecks, pool, classifier."""

    def __init__(self, blocks: tuple[int, int, int, int] = (3, 4, 6, 3), num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1: nn.Module = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        stages: list[nn.Module] = []
        cin = 64
        for i, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True)):
            layers: list[nn.Module] = []
            for j in range(n):
                layers.append(Bottleneck(cin, width, stride=2 if (j == 0 and i > 0) else 1))
                cin = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.stages(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))  # type: ignore[no-any-return]


def resnet50(num_classes: int = 1000) -> ResNet:
    """ResNet-50: bottleneck blocks ``[3, 4, 6, 3]``."""
    return ResNet((3, 4, 6, 3), num_classes)


def _fold(conv: nn.Conv2d, bn: nn.Module) -> tuple[nn.Conv2d, nn.Module]:
    if not isinstance(bn, nn.BatchNorm2d):
        return conv, bn
    return fuse_conv_bn_eval(conv, bn), nn.Identity()


def fold_resnet_bn(model: ResNet) -> ResNet:
    """Fold every BatchNorm into its convolution, in place; the model must be in ``eval()`` mode."""
    if model.training:
        raise ValueError("fold BatchNorm only in eval() mode (it uses the running statistics)")
    model.conv1, model.bn1 = _fold(model.conv1, model.bn1)
    for m in model.modules():
        if isinstance(m, Bottleneck):
            m.conv1, m.bn1 = _fold(m.conv1, m.bn1)
            m.conv2, m.bn2 = _fold(m.conv2, m.bn2)
            m.conv3, m.bn3 = _fold(m.conv3, m.bn3)
            if isinstance(m.down, nn.Sequential) and len(m.down) == 2:
                first = m.down[0]
                assert isinstance(first, nn.Conv2d)
                conv, bn = _fold(first, m.down[1])
                m.down = nn.Sequential(conv, bn)
    return model


__all__ = ["Bottleneck", "ResNet", "fold_resnet_bn", "resnet50"]
