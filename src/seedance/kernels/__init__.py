"""Kernels and compiled graphs: the fused linear + activation + dropout kernel and its benchmarks.

* :mod:`seedance.kernels.fused`: the operator, its Triton kernels' host side, the PyTorch reference.
* :mod:`seedance.kernels.philox`: the counter-based dropout mask, reproduced on the host.
* :mod:`seedance.kernels.models`: BERT-base and ResNet-50 from their public configurations.
* :mod:`seedance.kernels.bench`: eager vs ``torch.compile`` vs fused, latency and peak memory.
* :mod:`seedance.kernels.profile`: the measured-profile file the deployment optimiser reads.

Importing this package imports neither torch nor triton.
"""
