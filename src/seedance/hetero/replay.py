"""Replay of the Gavel workload mix on a heterogeneous fleet, with checkpoint stalls on storage tiers.

Two drivers, one accounting:

* ``agnostic`` (today's best-fit, no throughput knowledge): event-driven, FIFO, non-preemptive; a job
  starts on a free GPU as soon as one exists (the node with the fewest free GPUs, ties in fleet order)
  and runs to completion there. Knobs (swept by :func:`tune_agnostic`): placement ``best-fit`` /
  ``worst-fit`` / ``first-fit`` and the fleet's type order.
* round-based policies (``seedance.hetero.policies``): every ``round_s`` the policy re-allocates; a job
  arriving mid-round waits for the next boundary (as in Gavel), one finishing frees its GPU for the next
  round. A job leaving its GPU checkpoints (snapshot + persist); one starting again pays restart and
  restore (from the same node's staging copy, else over the network from the persistent copy); one
  starting on a different node than it last ran on is a *migration*.

Every running job checkpoints periodically at the interval of the *interval rule* (CheckFreq's, or
Young's optimum of stall + rework; ``seedance.storage.checkpoint``), computed per (job, GPU type) at the
job's measured iteration time there (as CheckFreq's online profiler sees it) on the *interval layout*
(``tiered`` unless told otherwise) so that ``--storage remote-only`` replays the same recovery points on
slower storage. ``checkpoint_stall_s`` sums periodic snapshots (``stall_periodic_s``), the snapshot of a
job leaving its GPU on preemption or migration (``stall_leave_s``; the persist overlaps its time off the
GPU) and restores (``stall_restore_s``). ``expected_rework_s`` is the work expected lost to unplanned
interruptions at ``interruptions_per_gpu_hour``: per interruption, half an interval plus the time the
last checkpoint takes to become durable (``expected_rework_per_interruption_s``, GPU-time weighted).

Job speeds are the workload's true rates (profile x per-job noise) times the node's power factor;
policies see only the profile.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from seedance.core.errors import InputError
from seedance.hetero.fleet import Fleet, FleetNode
from seedance.hetero.policies import ROUND_POLICIES, RoundView
from seedance.hetero.workload import Workload
from seedance.storage.checkpoint import (
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    checkfreq_interval,
    checkpoint_cost,
    durable_lag_s,
    job_checkpoint_gb,
    leave_stall_s,
    periodic_stall_s,
    young_daly_interval,
)
from seedance.storage.tiers import STORAGE, TierSet


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """Knobs of a replay."""

    round_s: float = 360.0
    restart_s: float = 10.0
    checkfreq_overhead: float = 0.035
    interval_layout: str = "tiered"
    placement: str = "best-fit"
    interval_rule: str = "checkfreq"
    interruptions_per_gpu_hour: float = LLAMA3_INTERRUPTIONS_PER_GPU_HOUR
    snapshot_overlap: float = 0.0
    """Share of an iteration a staged snapshot may overlap (``seedance.storage.checkpoint.periodic_stall_s``);
    0 = CheckFreq's profiler's assumption, the default; a sensitivity, not a measured figure."""

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise InputError("must be > 0", field="round_s")
        if not 0.0 <= self.snapshot_overlap <= 1.0:
            raise InputError(f"must be in [0, 1], got {self.snapshot_overlap!r}", field="snapshot_overlap")
        if self.interval_rule not in INTERVAL_RULES:
            raise InputError(f"checkpoint interval rule must be one of {', '.join(INTERVAL_RULES)}, not "
                             f"{self.interval_rule!r}", field="interval_rule")
        if not (math.isfinite(self.interruptions_per_gpu_hour) and self.interruptions_per_gpu_hour > 0):
            raise InputError(f"must be > 0, got {self.interruptions_per_gpu_hour!r}",
                             field="interruptions_per_gpu_hour")
        if self.placement not in ("best-fit", "worst-fit", "first-fit"):
            raise InputError(f"placement must be best-fit, worst-fit or first-fit, not {self.placement!r}",
                             field="placement")


INTERVAL_RULES = ("checkfreq", "young-daly")


class _Costs:
    """Per (job, GPU type) checkpoint figures on the fleet's layout; interval from the interval layout, at the
    job's measured iteration time on that type (as CheckFreq's online profiling sees it; the power cap of the
    type's first node)."""

    __slots__ = ("interval", "interval_s", "leave", "persist", "restore_local", "restore_remote", "rework",
                 "snapshot")

    def __init__(self, wl: Workload, fleet: Fleet, types: list[FleetNode], opts: ReplayOptions) -> None:
        n, k = len(wl), len(types)
        self.snapshot = np.zeros((n, k))
        self.persist = np.zeros((n, k))
        self.interval = np.ones((n, k))
        self.interval_s = np.full((n, k), np.nan)
        self.restore_local = np.zeros((n, k))
        self.restore_remote = np.zeros((n, k))
        self.leave = np.zeros((n, k))
        self.rework = np.zeros((n, k))
        mtbf_s = 3600.0 / opts.interruptions_per_gpu_hour
        ref_layout: TierSet = STORAGE.get(opts.interval_layout)
        size = {t: job_checkpoint_gb(wl.matrix.job_types[t]) for t in set(wl.job_type.tolist())}
        cols = _matrix_cols(wl, fleet)  # fleet type c is matrix column cols[c] (the orders differ)
        for j in range(n):
            gb = size[int(wl.job_type[j])]
            for c, node in enumerate(types):
                pcie = node.gpu.pcie_gbs
                ck = checkpoint_cost(gb, node.storage, pcie)
                ref = checkpoint_cost(gb, ref_layout, pcie)
                # CheckFreq profiles the running job's own iterations (cf_iterator: iterations 5-100), so the
                # interval follows the job's true speed on this type (x the power cap), not the matrix's profile
                prof = float(wl.true_rate[j, cols[c]]) * node.power_factor
                if not prof > 0:
                    continue
                ov = opts.snapshot_overlap
                self.snapshot[j, c] = periodic_stall_s(ck, 1.0 / prof, ov)
                self.persist[j, c] = ck.persist_s
                self.leave[j, c] = leave_stall_s(ck)
                ref_stall = periodic_stall_s(ref, 1.0 / prof, ov)
                if opts.interval_rule == "young-daly":
                    self.interval[j, c] = young_daly_interval(1.0 / prof, ref_stall, ref.persist_s, mtbf_s)
                else:
                    self.interval[j, c] = checkfreq_interval(1.0 / prof, ref_stall, ref.persist_s,
                                                             opts.checkfreq_overhead)
                self.interval_s[j, c] = self.interval[j, c] / prof
                self.rework[j, c] = self.interval_s[j, c] / 2 + durable_lag_s(ck)
                self.restore_local[j, c] = ck.restore_s(node.storage, pcie, same_node=True,
                                                        network_gbs=node.network_gbs)
                self.restore_remote[j, c] = ck.restore_s(node.storage, pcie, same_node=False,
                                                         network_gbs=node.network_gbs)

    def effective_rate(self, rate: float, j: int, c: int) -> float:
        """Steps/s including the periodic snapshot stall."""
        k = float(self.interval[j, c])
        return k / (k / rate + float(self.snapshot[j, c]))

    def stall_per_step(self, j: int, c: int) -> float:
        return float(self.snapshot[j, c] / self.interval[j, c])


def _type_nodes(fleet: Fleet) -> list[FleetNode]:
    return [next(n for n in fleet.nodes if n.gpu.name == t) for t in fleet.types]


def _matrix_cols(wl: Workload, fleet: Fleet) -> list[int]:
    from seedance.hetero.stages import matrix_column

    cols = []
    for t in fleet.types:
        c = matrix_column(wl.matrix, t)
        if c is None:
            raise InputError(f"GPU type {t} has no column in the throughput matrix ({', '.join(wl.matrix.gpu_types)})",
                             field="gpu_type")
        cols.append(c)
    return cols


class _Books:
    """Stall by kind and the GPU-time-weighted rework per interruption, summed over jobs."""

    __slots__ = ("gpu_s", "leave", "periodic", "restore", "rework_gpu_s")

    def __init__(self) -> None:
        self.periodic = self.leave = self.restore = self.gpu_s = self.rework_gpu_s = 0.0

    def run(self, costs: _Costs, j: int, c: int, seconds: float, steps: float) -> float:
        """A job ran ``seconds`` (``steps`` steps) on a GPU of type ``c``; its periodic stall."""
        st = steps * costs.stall_per_step(j, c)
        self.periodic += st
        self.gpu_s += seconds
        self.rework_gpu_s += seconds * float(costs.rework[j, c])
        return st

    def fields(self, opts: ReplayOptions) -> dict[str, float]:
        per = self.rework_gpu_s / self.gpu_s if self.gpu_s > 0 else 0.0
        rework = self.rework_gpu_s * opts.interruptions_per_gpu_hour / 3600.0
        total = self.periodic + self.leave + self.restore
        return {"stall_periodic_s": self.periodic, "stall_leave_s": self.leave, "stall_restore_s": self.restore,
                "expected_rework_per_interruption_s": per, "expected_rework_s": rework,
                "stall_plus_rework_s": total + rework, "gpu_hours": self.gpu_s / 3600.0}


def _summary(policy: str, wl: Workload, finish: NDArray[np.float64], stall: NDArray[np.float64],
             migrations: int, preemptions: int, restarts: int, fleet: Fleet, costs: _Costs, books: _Books,
             opts: ReplayOptions) -> dict[str, Any]:
    jct = finish - wl.arrival
    return {
        "policy": policy,
        "jobs": len(wl),
        "avg_jct_s": float(jct.mean()),
        "p99_jct_s": float(np.percentile(jct, 99)),
        "median_jct_s": float(np.median(jct)),
        "makespan_s": float(finish.max()),
        "migrations": int(migrations),
        "preemptions": int(preemptions),
        "restarts": int(restarts),
        "checkpoint_stall_s": float(stall.sum()),
        "mean_checkpoint_interval_s": float(np.nanmean(costs.interval_s)),
        **books.fields(opts),
        "interval_rule": opts.interval_rule,
        "interval_layout": opts.interval_layout,
        "storage": fleet.nodes[0].storage.name,
    }


def replay_agnostic(wl: Workload, fleet: Fleet, opts: ReplayOptions) -> dict[str, Any]:
    """FIFO, non-preemptive, throughput-blind placement, event-driven."""
    types = _type_nodes(fleet)
    cols = _matrix_cols(wl, fleet)
    costs = _Costs(wl, fleet, types, opts)
    books = _Books()
    tindex = {t: i for i, t in enumerate(fleet.types)}
    free = np.array([n.gpus for n in fleet.nodes], dtype=np.int64)
    node_type = np.array([tindex[n.gpu.name] for n in fleet.nodes])
    factor = np.array([n.power_factor for n in fleet.nodes])
    finish = np.zeros(len(wl))
    stall = np.zeros(len(wl))
    order = np.argsort(wl.arrival, kind="stable")
    queue: list[int] = []
    events: list[tuple[float, int, int]] = []  # (time, job, node)
    nxt = 0
    t = 0.0
    while nxt < len(order) or queue or events:
        t_arr = wl.arrival[order[nxt]] if nxt < len(order) else math.inf
        t_fin = events[0][0] if events else math.inf
        if t_fin <= t_arr:
            t, _, node = heapq.heappop(events)
            free[node] += 1
        else:
            t = float(t_arr)
            queue.append(int(order[nxt]))
            nxt += 1
        while queue:
            j = queue[0]
            runnable = (free > 0) & ~np.isnan(wl.true_rate[j, np.array(cols)[node_type]])
            cand = np.flatnonzero(runnable)
            if not len(cand):
                break
            if opts.placement == "best-fit":
                node = int(cand[np.argmin(free[cand])])
            elif opts.placement == "worst-fit":
                node = int(cand[np.argmax(free[cand])])
            else:
                node = int(cand[0])
            queue.pop(0)
            free[node] -= 1
            c = int(node_type[node])
            rate = costs.effective_rate(float(wl.true_rate[j, cols[c]]) * factor[node], j, c)
            finish[j] = t + opts.restart_s + wl.steps[j] / rate
            stall[j] = books.run(costs, j, c, float(wl.steps[j] / rate), float(wl.steps[j]))
            heapq.heappush(events, (float(finish[j]), j, node))
    return _summary("agnostic", wl, finish, stall, 0, 0, len(wl), fleet, costs, books, opts)


def replay_rounds(policy_name: str, wl: Workload, fleet: Fleet, opts: ReplayOptions, *,
                  explain: int | None = None, log: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A round-based policy of :data:`ROUND_POLICIES`; with ``explain`` (a job index) every start of that
    job on another node is appended to ``log`` with the migration planner's breakdown."""
    from seedance.hetero.migration import MigrationPlanner, MigrationRequest
    from seedance.topology.compat import CudaBuild

    policy = ROUND_POLICIES.get(policy_name)()
    types = _type_nodes(fleet)
    cols = _matrix_cols(wl, fleet)
    costs = _Costs(wl, fleet, types, opts)
    books = _Books()
    k_types = len(types)
    n = len(wl)
    profile = wl.matrix.steps_per_s[wl.job_type][:, 0, :][:, cols]
    true = wl.true_rate[:, cols]
    capacity = np.array([fleet.gpus_of(t) for t in fleet.types], dtype=np.int64)
    nodes_of = [[i for i, nd in enumerate(fleet.nodes) if nd.gpu.name == t] for t in fleet.types]
    factor = np.array([nd.power_factor for nd in fleet.nodes])
    # planner cost of a type change, per (job type, from, to): same model as the explanations
    planner = MigrationPlanner(restart_s=opts.restart_s)
    build = CudaBuild.of("11.2")
    move_s = np.zeros((n, k_types, k_types))
    size_of = {t: job_checkpoint_gb(wl.matrix.job_types[t]) for t in set(wl.job_type.tolist())}
    memo: dict[tuple[int, int, int], float] = {}
    for j in range(n):
        for a in range(k_types):
            for b in range(k_types):
                key = (int(wl.job_type[j]), a, b)
                if key not in memo:
                    req = MigrationRequest("replay", size_of[key[0]], build, types[a], 0.0)
                    memo[key] = planner.cost(req, types[b]).transfer_s if a != b else 0.0
                move_s[j, a, b] = memo[key]
    done_steps = np.zeros(n)
    finish = np.full(n, np.nan)
    stall = np.zeros(n)
    attained = np.zeros(n)
    attained_norm = np.zeros(n)
    received = np.zeros((n, k_types))
    rounds_active = np.zeros(n)
    last_node = np.full(n, -1, dtype=np.int64)
    running_node = np.full(n, -1, dtype=np.int64)
    pending = np.zeros(n)  # checkpoint time owed before the next start
    migrations = preemptions = restarts = 0
    norm = profile / np.nanmax(profile, axis=1, keepdims=True)
    t = 0.0
    remaining = n
    while remaining:
        active = np.flatnonzero((wl.arrival <= t) & np.isnan(finish))
        if not len(active):
            t = math.ceil(float(wl.arrival[np.isnan(finish)].min()) / opts.round_s) * opts.round_s
            continue
        cur_type = np.array([_type_of(fleet, running_node[j], types) if running_node[j] >= 0 else -1
                             for j in active], dtype=np.int64)
        mig = np.zeros((len(active), k_types))
        for i, j in enumerate(active.tolist()):
            if cur_type[i] >= 0:
                mig[i] = move_s[j, cur_type[i]]
        view = RoundView(active, profile[active], attained[active], attained_norm[active], cur_type,
                         received[active], rounds_active[active], capacity, mig, opts.round_s)
        assign = policy.allocate(view)
        # nodes: keep a job on its node when it stays on the type, else the node of that type with most room
        free = np.array([nd.gpus for nd in fleet.nodes], dtype=np.int64)
        new_node = np.full(len(active), -1, dtype=np.int64)
        for i, j in enumerate(active.tolist()):
            k = int(assign[i])
            if k >= 0 and running_node[j] >= 0 and _type_of(fleet, running_node[j], types) == k:
                new_node[i] = running_node[j]
                free[running_node[j]] -= 1
        for i, j in enumerate(active.tolist()):
            k = int(assign[i])
            if k < 0 or new_node[i] >= 0:
                continue
            cands = nodes_of[k]
            prefer = [x for x in cands if x == last_node[j] and free[x] > 0]
            node = prefer[0] if prefer else max(cands, key=lambda x: (free[x], -x))
            if free[node] <= 0:
                raise AssertionError("policy over-allocated a GPU type")
            new_node[i] = node
            free[node] -= 1
        for i, jj in enumerate(active):
            j = int(jj)
            rounds_active[j] += 1
            was = running_node[j]
            now = new_node[i]
            if was >= 0 and now != was:  # leaves its GPU: snapshot (the persist runs while it is off the GPU)
                c = _type_of(fleet, was, types)
                save = float(costs.leave[j, c])
                stall[j] += save
                books.leave += save
                pending[j] += save
                preemptions += 1 if now < 0 else 0
            if now < 0:
                running_node[j] = -1
                continue
            c = int(assign[i])
            budget = opts.round_s
            if was != now:
                restarts += 1
                over = opts.restart_s + pending[j]
                pending[j] = 0.0
                if done_steps[j] > 0:
                    same = last_node[j] == now
                    rs = costs.restore_local[j, c] if same else costs.restore_remote[j, c]
                    over += rs
                    stall[j] += rs
                    books.restore += rs
                    if not same:
                        migrations += 1
                        if explain == j and log is not None:
                            src = fleet.nodes[int(last_node[j])]
                            req = MigrationRequest(f"job-{j}", size_of[int(wl.job_type[j])], build, src,
                                                   float(attained[j] * profile[j, _type_of(fleet, last_node[j],
                                                                                           types)]),
                                                   wl.matrix.job_types[int(wl.job_type[j])])
                            plan = MigrationPlanner(wl.matrix, restart_s=opts.restart_s).select_target(
                                req, [*types, fleet.nodes[int(now)]])
                            log.append({"t_s": t, "from": src.name, "to": fleet.nodes[int(now)].name,
                                        "was_preempted": bool(was < 0), "steps_done": float(done_steps[j]),
                                        "true_remaining_steps": float(wl.steps[j] - done_steps[j]),
                                        "planner": plan})
                budget -= over
                if budget < 0:  # the overhead runs over into the next round; keep it owed
                    pending[j] += -budget
                    budget = 0.0
            rate = costs.effective_rate(float(true[j, c]) * factor[now], j, c)
            left = wl.steps[j] - done_steps[j]
            used = min(budget, left / rate)
            done_steps[j] += used * rate
            stall[j] += books.run(costs, j, c, used, used * rate)
            attained[j] += used
            attained_norm[j] += used * norm[j, c]
            received[j, c] += 1
            running_node[j] = now
            last_node[j] = now
            if done_steps[j] >= wl.steps[j] * (1 - 1e-12):
                finish[j] = t + (opts.round_s - budget) + used
                running_node[j] = -1
                remaining -= 1
        t += opts.round_s
    return _summary(policy_name, wl, finish, stall, migrations, preemptions, restarts, fleet, costs, books, opts)


def _type_of(fleet: Fleet, node: int, types: list[FleetNode]) -> int:
    name = fleet.nodes[int(node)].gpu.name
    return next(i for i, t in enumerate(types) if t.gpu.name == name)


def replay(policy: str, wl: Workload, fleet: Fleet, opts: ReplayOptions | None = None) -> dict[str, Any]:
    """Replay ``wl`` on ``fleet`` under ``policy`` (``agnostic`` or a round policy)."""
    o = opts or ReplayOptions()
    if policy.strip().lower() == "agnostic":
        return replay_agnostic(wl, fleet, o)
    return replay_rounds(policy.strip().lower(), wl, fleet, o)


POLICY_NAMES: tuple[str, ...] = ("agnostic", *ROUND_POLICIES.names())
