"""GPU checks, run in one call on a machine with a GPU (``python benchmarks/gpu/run_all.py``)."""
