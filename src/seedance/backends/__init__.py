"""Backends that run placed jobs: ``dispatch`` (the ``Dispatcher`` contract, the ``DISPATCHERS``
registry, the built-in ``noop`` and ``timer``) and each backend registered by name.

* ``ray_backend``: ``--dispatcher ray`` runs each bound job as a Ray task pinned to the Ray node of
  Seedance's decision (fractional ``num_gpus``, per-GPU and label custom resources), reports its
  status, the loss of its node, and its captured output (``seedancectl logs``). See ``docs/ray.md``.

Contract: importing this package imports nothing; the registry loads ``ray_backend`` the first
time a dispatcher name is looked up, and ``ray`` / ``torch`` load only when a dispatcher is built.
The control plane depends on this package, never the other way round.
"""
