"""The FGD paper's published results (``analysis_allo_discrete.csv``), for side-by-side tables.

Any file of that format loads: ``workload,sc_policy,tune,seed,total_gpus,0,1,...,130``.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from seedance.core.errors import InputError

POLICY_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dot-product",
    "03-GpuClustering": "clustering",
    "04-GpuPacking": "packing",
    "05-BestFit": "best-fit",
    "06-FGD": "fgd",
}


@dataclass(frozen=True, slots=True)
class PaperResults:
    """Allocation % at each arrived % per (workload, policy, seed), as the file's text."""

    alloc: dict[tuple[str, str, int], list[str]]

    def unallocated_at(
        self, workload: str, policy: str, column: int = 100, seeds: list[int] | None = None
    ) -> float | None:
        """Mean over seeds of ``100 - alloc[column]`` (``None`` if the paper has no such run)."""
        vals = [
            100.0 - float(row[column])
            for (w, p, s), row in self.alloc.items()
            if w == workload and p == policy and (seeds is None or s in seeds)
        ]
        return round(sum(vals) / len(vals), 2) if vals else None

    def workloads(self) -> list[str]:
        """Workloads present."""
        return sorted({w for w, _, _ in self.alloc})


def load_paper_results(path: str | Path) -> PaperResults:
    """Load the paper's allocation table; policies are renamed to Seedance registry names."""
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise InputError("cannot open file", source=src) from None
    alloc: dict[tuple[str, str, int], list[str]] = {}
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise InputError("empty file", source=src, line=1)
    for col in ("workload", "sc_policy", "seed", "0", "100"):
        if col not in header:
            raise InputError("missing column", source=src, line=1, field=col)
    iw, ip, iseed = header.index("workload"), header.index("sc_policy"), header.index("seed")
    first = header.index("0")
    for row in reader:
        line = reader.line_num
        values = row[first:]  # kept as text, converted when read: a table needs one column of 131
        try:
            seed = int(row[iseed])
            float(values[100])
        except (ValueError, IndexError) as exc:
            raise InputError(f"not a number ({exc})", source=src, line=line) from None
        policy = POLICY_NAMES.get(row[ip], row[ip])
        alloc[(row[iw].removeprefix("openb_pod_list_"), policy, seed)] = values
    return PaperResults(alloc)
