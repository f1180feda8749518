"""Optional eBPF process sampler (whitepaper §3.3's "eBPF kernel-level collection").

Never imported by default and never in CI: it needs BCC's Python bindings, which come only from
Debian's ``python3-bpfcc`` (PyPI's ``bcc`` is an unrelated package), and BCC compiles the program
against the running kernel's headers — which the machines this project is built on do not have
(``Unable to find kernel headers``; see docs/finops.md). Kepler, the reference for this kind of
attribution, dropped eBPF for ``/proc`` reads in its v0.10 rewrite, and Seedance's default sampler
(:class:`~seedance.telemetry.procfs.ProcessSampler`) does the same. Status: **not run** anywhere yet.

The program adds each task's on-CPU nanoseconds to its thread group at every ``sched_switch``
(Kepler's old probe, ~1.6 µs per context switch by kepler#668); :meth:`EbpfProcessSampler.sample`
reads the map and returns the same :class:`~seedance.telemetry.procfs.ProcessReading` rows as the
procfs sampler (RSS and cgroups still from ``/proc``).
"""

from __future__ import annotations

from typing import Any

from seedance.telemetry.nvsmi import CollectorUnavailable
from seedance.telemetry.procfs import ProcessReading, ProcessSampler, parse_cgroup

BPF_PROGRAM = r"""
#include <linux/sched.h>
BPF_HASH(start, u32, u64);
BPF_HASH(oncpu_ns, u32, u64);
TRACEPOINT_PROBE(sched, sched_switch) {
    u64 now = bpf_ktime_get_ns();
    u32 prev = args->prev_pid, next = args->next_pid;
    u64 *t0 = start.lookup(&prev);
    if (t0) {
        struct task_struct *task = (struct task_struct *)bpf_get_current_task();
        u32 tgid = task->tgid;
        u64 d = now - *t0, zero = 0;
        u64 *acc = oncpu_ns.lookup_or_try_init(&tgid, &zero);
        if (acc) { __sync_fetch_and_add(acc, d); }
    }
    start.update(&next, &now);
    return 0;
}
"""


def load_bcc() -> Any:
    """BCC's ``BPF`` class, or :class:`CollectorUnavailable` saying how to get it."""
    try:
        from bcc import BPF
    except ImportError:
        raise CollectorUnavailable(
            "eBPF needs BCC's Python bindings from the OS (Debian: apt-get install python3-bpfcc; PyPI's 'bcc' "
            "is a different package) and kernel headers; use the default procfs sampler", source="ebpf") from None
    return BPF


class EbpfProcessSampler(ProcessSampler):
    """CPU time per process from an eBPF map; memory and cgroups from ``/proc`` (psutil)."""

    def __init__(self, psutil_module: Any | None = None) -> None:
        super().__init__(psutil_module)
        bpf_cls = load_bcc()
        try:
            self.bpf = bpf_cls(text=BPF_PROGRAM)
        except Exception as exc:  # BCC raises plain Exceptions when it cannot compile
            raise CollectorUnavailable(f"the eBPF program did not load: {exc}", source="ebpf") from None
        self.table = self.bpf["oncpu_ns"]

    def sample(self, pids: Any = None) -> list[ProcessReading]:
        """Every process, with CPU-seconds from the eBPF map."""
        ns = {int(k.value): int(v.value) for k, v in self.table.items()}
        out = []
        for r in super().sample(pids):
            cpu = ns.get(r.pid)
            out.append(r if cpu is None else ProcessReading(r.pid, r.start, cpu / 1e9, r.rss_bytes, r.cgroup))
        return out


__all__ = ["BPF_PROGRAM", "EbpfProcessSampler", "load_bcc", "parse_cgroup"]
