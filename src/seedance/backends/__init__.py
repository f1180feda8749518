"""Backends that run placed jobs, each a ``seedance.control.dispatch.Dispatcher`` registered by name.

* ``ray_backend``: ``--dispatcher ray`` runs each bound job as a Ray task pinned to the Ray node of
  Seedance's decision (fractional ``num_gpus``, per-GPU and label custom resources), reports its
  status, the loss of its node, and its captured output (``seedancectl logs``). See ``docs/ray.md``.

Contract: importing this package imports nothing heavy (``ray`` and ``torch`` load on use);
``seedance.control.dispatch`` imports it so the names are registered wherever the registry is used.
"""

from seedance.backends import ray_backend as ray_backend
