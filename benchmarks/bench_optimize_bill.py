"""What the optimiser's cheapest point saves against a tuned and an untuned default deployment.

Run: ``.venv/bin/python benchmarks/bench_optimize_bill.py``

For each family and SLO (p95 bound, accuracy floor): the cheapest feasible point of the space
(``$ per 1,000 requests``, catalog prices) against the same model in fp16, eager, on A100-80GB with
the fewest GPUs that fit, (a) at batch 1 (untuned) and (b) with the batch size and GPU count tuned
under the same SLO. Savings are shares of the whole serving bill (GPU-hours).
"""

from __future__ import annotations

import numpy as np

from seedance.optimize.deploy import default_profile
from seedance.optimize.families import FAMILIES
from seedance.optimize.space import SpaceOptions, build_space

CASES = (("llama-3", 60000.0, 80.0), ("bert", 18.0, 79.3), ("resnet", 23.0, 76.0), ("detr", 23.0, 42.0),
         ("yolo", 23.0, 42.1))


def main() -> None:
    prof = default_profile()
    for name, slo, floor in CASES:
        s = build_space(FAMILIES.get(name), SpaceOptions(profile=prof))
        f = s.family
        ok = s.feasible(slo, floor)
        c = s.config(int(np.argmin(np.where(ok, s.cost, np.inf))))
        pos = np.array(np.unravel_index(np.arange(s.size), s.shape)).T
        same = ((pos[:, 0] == f.variants.index(f.variant(c["variant"]))) & (pos[:, 1] == f.precisions.index("fp16"))
                & (pos[:, 2] == f.gpus.index("A100-80GB")) & (pos[:, 5] == 0))
        tuned = s.config(int(np.argmin(np.where(ok & same, s.cost, np.inf))))
        dep = same & (s.reason == 0) & (pos[:, 4] == 0)
        untuned = s.config(int(np.flatnonzero(dep)[0]))
        print(f"{name:8s} p95 <= {slo:g} ms, accuracy >= {floor:g}: cheapest {c['variant']} {c['precision']} "
              f"{c['count']}x{c['gpu']} b{c['batch']} {c['mode']} ${c['cost']:.4g}/1k | tuned default "
              f"{tuned['count']}xA100-80GB fp16 b{tuned['batch']} ${tuned['cost']:.4g} (saving "
              f"{1 - c['cost'] / tuned['cost']:.1%}) | batch-1 default {untuned['count']}xA100-80GB "
              f"${untuned['cost']:.4g} (saving {1 - c['cost'] / untuned['cost']:.1%})")


if __name__ == "__main__":
    main()
