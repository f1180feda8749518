"""Tuned baselines: each baseline's main knobs swept for the highest SLO capacity.

NOTE(seedance): a comparison against a baseline at its default setting measures the default, not
the method. Every baseline here is swept the way its own paper sets it, by coordinate descent over
its knobs in the order listed in :data:`BASELINE_GRIDS` (each knob in turn, the others held at the
best value found so far), with :meth:`Experiment.capacity` as the objective:

* ``continuous-chunked`` (Sarathi-Serve, OSDI'24 §4.3: the token budget is chosen per SLO, smaller
  for tighter TPOT targets; vLLM v1's ``max_num_batched_tokens`` default is 2,048 on A100 class
  GPUs): the chunk token budget over powers of two 256..8192 plus the SLO-derived budget (the
  largest prefill chunk whose iteration, profiled, fits the TPOT target), then ``max_num_seqs``.
* ``continuous`` (vLLM v0): ``max_num_batched_tokens`` and ``max_num_seqs``.
* ``dynamic`` (Triton dynamic batcher): ``max_batch`` and ``max_queue_delay_ms``.
* ``static``: ``batch_size``.

The best setting is reported beside the default (``default_capacity_rps``); on ties the default
is kept. Tuning reads the step-time profile only to propose the SLO-derived budget (what an
operator who profiled the GPU would do); the policy itself still never reads simulator state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seedance.inference.capacity import CapacityResult
from seedance.inference.perf import StepTimes

#: Knob grids per baseline, swept in order (coordinate descent).
BASELINE_GRIDS: dict[str, list[tuple[str, tuple[float, ...]]]] = {
    "continuous-chunked": [("max_num_batched_tokens", (256, 512, 1024, 2048, 4096, 8192)),
                           ("max_num_seqs", (64, 128, 256, 512))],
    "continuous": [("max_num_batched_tokens", (2048, 4096, 8192, 16384)), ("max_num_seqs", (64, 128, 256, 512))],
    "dynamic": [("max_batch", (8, 16, 32, 64)), ("max_queue_delay_ms", (10.0, 50.0, 100.0, 200.0))],
    "static": [("batch_size", (4, 8, 16, 32, 64))],
}


def slo_token_budget(step: StepTimes, tpot_ms: float, share: float = 0.9) -> int:
    """The largest prefill chunk whose iteration (from the profile) fits ``share`` of the TPOT target."""
    return max(step.max_prefill_tokens(share * tpot_ms, 65536), 1)


@dataclass(slots=True)
class TuningResult:
    """A baseline's default and tuned settings with their capacities."""

    policy: str
    default_options: dict[str, Any]
    tuned_options: dict[str, Any]
    default: CapacityResult
    tuned: CapacityResult
    tried: list[tuple[dict[str, Any], float]] = field(default_factory=list)

    def as_row(self, rate_of: Callable[[CapacityResult], float]) -> dict[str, Any]:
        """The keys added to the policy's result row."""
        return {
            "tuned_options": self.tuned_options,
            "capacity_rps": rate_of(self.tuned),
            "capacity_rate_scale": round(self.tuned.rate_scale, 6),
            "default_options": self.default_options,
            "default_capacity_rps": rate_of(self.default),
            "default_capacity_rate_scale": round(self.default.rate_scale, 6),
            "tuning_settings_tried": len(self.tried),
            "tuning_grid": [[dict(o), round(s, 6)] for o, s in self.tried],
        }


def tune(policy: str, defaults: dict[str, Any], capacity: Callable[[dict[str, Any], float], CapacityResult], *,
         extra: dict[str, tuple[float, ...]] | None = None, start: float = 1.0) -> TuningResult:
    """Coordinate descent over ``BASELINE_GRIDS[policy]`` maximising ``capacity(options, start).rate_scale``.

    Args:
        policy: Canonical baseline name.
        defaults: The policy's options (its defaults overridden by the user's).
        capacity: Runs a capacity search for one option set from a starting scale.
        extra: Further values per knob (e.g. the SLO-derived token budget).
        start: First rate scale of the first search.
    """
    grid = BASELINE_GRIDS.get(policy, [])
    seen: dict[tuple[tuple[str, Any], ...], CapacityResult] = {}
    tried: list[tuple[dict[str, Any], float]] = []

    def run(opts: dict[str, Any], s0: float) -> CapacityResult:
        key = tuple(sorted(opts.items()))
        if key not in seen:
            seen[key] = capacity(dict(opts), s0)
            tried.append((dict(opts), seen[key].rate_scale))
        return seen[key]

    best_opts = dict(defaults)
    default = best = run(best_opts, start)
    for knob, values in grid:
        vals = sorted({*values, *(extra or {}).get(knob, ()), defaults[knob]})
        for v in vals:
            cast = type(defaults[knob])(v)
            cand = {**best_opts, knob: cast}
            res = run(cand, best.rate_scale if best.rate_scale > 0 else start)
            if res.rate_scale > best.rate_scale * (1.0 + 1e-9):
                best, best_opts = res, cand
    return TuningResult(policy, dict(defaults), best_opts, default, best, tried)
