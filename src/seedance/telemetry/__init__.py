"""GPU and process telemetry: collectors (nvidia-smi, NVML, procfs/cgroup), attribution, exporter.

A collector reads one node's GPUs (whole GPUs and MIG instances) and the processes on them; the
node sampler joins processes to containers and pods (cgroup paths, the pod directory) and turns a
tick into usage samples for the FinOps ledger (:mod:`seedance.finops`) and into the per-GPU state
the heatmap draws. ``docs/finops.md`` has the formats, the join rules and the measured overhead.
"""
