"""Topology of GPU nodes: nvidia-smi topo -m graphs, link bandwidths, the CUDA compatibility matrix."""
