"""Where the shared public data sets are: ``$SEEDANCE_DATA_DIR`` or a ``shared/data`` folder found
beside the project (``../shared/data`` from the repository root) or above the working directory."""

from __future__ import annotations

import os
from pathlib import Path

from seedance.core.errors import InputError

ENV_VAR = "SEEDANCE_DATA_DIR"
ALIBABA = "alibaba-gpu-v2023"
DEFAULT_NODES = f"{ALIBABA}/openb_node_list_gpu_node.csv"
DEFAULT_PODS = f"{ALIBABA}/openb_pod_list_default.csv"
FGD_EXPECTED = "fgd-atc23-expected-results/analysis_allo_discrete.csv"


def data_dir() -> Path:
    """The data folder; raises ``InputError`` with a hint when none is found."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        if not p.is_dir():
            raise InputError(f"{ENV_VAR} points to a missing folder", source=env)
        return p
    starts = [Path.cwd(), Path(__file__).resolve()]
    for start in starts:
        for parent in [start, *start.parents]:
            cand = parent / "shared" / "data"
            if cand.is_dir():
                return cand
    raise InputError(f"no shared/data folder found; set {ENV_VAR} or pass file paths explicitly")


def data_file(relative: str) -> Path:
    """Path of ``relative`` inside the data folder."""
    return data_dir() / relative
