"""Trace loaders: turn cluster traces into columnar pod traces and cluster specs."""

from seedance.traces.alibaba import load_nodes, load_pods
from seedance.traces.schema import PodTrace

__all__ = ["PodTrace", "load_nodes", "load_pods"]
