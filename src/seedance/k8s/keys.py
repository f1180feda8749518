"""Names Seedance reads from and writes to Kubernetes objects (one place, documented in docs/kubernetes.md)."""

from __future__ import annotations

#: API group and version of Seedance's custom resources.
GROUP = "seedance.ai"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

#: Extended resource of whole GPUs (NVIDIA device plugin).
GPU_RESOURCE = "nvidia.com/gpu"

#: Pod annotation: share of one GPU in milli-GPU (``"250"`` = a quarter GPU); 1..1000.
ANN_GPU_MILLI = "seedance.ai/gpu-milli"
#: Pod annotation: acceptable GPU models, comma-separated catalog names or aliases (``"A100-80GB,H100"``).
ANN_GPU_TYPES = "seedance.ai/gpu-types"
#: Pod annotation written by the extender at bind time: the GPU indices chosen on the node (``"0,1"``).
ANN_GPU_INDEX = "seedance.ai/gpu-index"
#: Pod annotation: ``"true"`` when the pod may borrow capacity on its tier's borrow labels.
ANN_BORROW = "seedance.ai/borrow"
#: Pod annotation written by the operator: the job's cost score (whitepaper §1 ``cost_score``).
ANN_COST_SCORE = "seedance.ai/cost_score"

#: Pod label: the SLA tier (``gold`` / ``silver`` / ``bronze``).
LABEL_TIER = "seedance.ai/tier"
#: Pod labels written by the operator: owning TrainingJob and replica index.
LABEL_JOB = "seedance.ai/job"
LABEL_REPLICA = "seedance.ai/replica-index"
#: Cost-tag pod labels (whitepaper §3.3): team from the pod's ``team`` label, env from the namespace's ``env``.
LABEL_COST_TEAM = "cost.seedance.ai/team"
LABEL_COST_ENV = "cost.seedance.ai/env"
#: Prefix of every cost-tag pod label the operator writes (``cost.seedance.ai/<tag>``).
COST_TAG_PREFIX = "cost.seedance.ai/"
#: Cost tags written by default: each from the pod's label of that name, else the namespace's.
COST_TAG_KEYS = ("team", "env")
#: Value of a cost tag whose source label is missing.
UNASSIGNED = "unassigned"

#: Node labels naming the GPU model: Seedance's own first, then NVIDIA GPU feature discovery's.
NODE_LABEL_GPU_MODEL = "gpu.model"
NODE_LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"

#: Scheduler profile name of the kube-scheduler that calls the extender.
SCHEDULER_NAME = "seedance-scheduler"
