"""Sub-GPU slicing: MIG profiles and legal placements, slices per backend, the MIG geometry planner
(``seedance.slicing.planner``, imports OR-Tools) and MIG-aware placement for the simulator
(``seedance.slicing.placement``, ``seedance.slicing.sim``). See ``docs/slicing.md``."""

from seedance.slicing.mig import Instance, MigGpu, MigProfile, check_layout, is_legal, mig_gpu, mig_gpus
from seedance.slicing.slices import SLICE_PROVIDERS, Slice, SliceProvider, resolve_slice, smallest_profile

__all__ = [
    "SLICE_PROVIDERS",
    "Instance",
    "MigGpu",
    "MigProfile",
    "Slice",
    "SliceProvider",
    "check_layout",
    "is_legal",
    "mig_gpu",
    "mig_gpus",
    "resolve_slice",
    "smallest_profile",
]
