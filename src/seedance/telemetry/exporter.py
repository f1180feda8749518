"""Prometheus exposition: dcgm-exporter's metric names and labels, plus Seedance's attribution series.

GPU series keep dcgm-exporter's names (``DCGM_FI_DEV_GPU_UTIL`` %, ``DCGM_FI_DEV_FB_USED`` /
``FB_FREE`` MiB, ``DCGM_FI_DEV_POWER_USAGE`` W, ``DCGM_FI_DEV_GPU_TEMP`` °C, ``DCGM_FI_DEV_SM_CLOCK``
MHz, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` mJ counter, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` 0..1) and
labels (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``; MIG instances add ``GPU_I_PROFILE``
and ``GPU_I_ID`` with the parent's UUID; ``pod``, ``namespace``, ``container`` when one container holds
the device, as dcgm-exporter does), so existing dashboards keep working.

What dcgm-exporter cannot do under sharing, the ``seedance_*`` series do per (device, container):
``seedance_gpu_allocated_share`` (the share the container holds), ``seedance_gpu_used_share`` (its
attributed share of the device's time, where known) and ``seedance_gpu_attributed_energy_joules_total``.
Cost: ``seedance_allocation_cost_usd_total{namespace,pod,container,resource,<tags>}`` accumulates
billed × rate × time per tick, ``seedance_idle_cost_usd_total{Hostname,resource}`` what nobody was
billed for; ``seedance_gpu_cost_usd_per_hour`` is the device's rate × its fraction. Counters never
decrease (a device whose energy counter went backwards after a driver reload is counted from the new
value on). The text is written here (prometheus_client renames counters to ``*_total`` in HELP/TYPE,
which would not match dcgm-exporter) and parsed back with prometheus_client in the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from seedance.finops.prices import GIB, PriceSheet
from seedance.telemetry.sampler import DeviceState, Tick

LabelSet = tuple[tuple[str, str], ...]

_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "seedance_gpu_allocated_share": ("gauge", "Share of the device (GPU or MIG instance) the container holds."),
    "seedance_gpu_used_share": ("gauge", "Share of the device's time attributed to the container."),
    "seedance_gpu_attributed_energy_joules_total": ("counter", "Active device energy attributed to the container."),
    "seedance_gpu_cost_usd_per_hour": ("gauge", "$/h of the device (rate x fraction of the GPU)."),
    "seedance_allocation_cost_usd_total": ("counter", "Billed cost: max(request, usage) x rate x time."),
    "seedance_idle_cost_usd_total": ("counter", "Cost of capacity nobody was billed for."),
    "seedance_gpu_lost": ("gauge", "1 for a GPU the driver could not reach."),
    "seedance_telemetry_skipped_total": ("counter", "Collector lines or values skipped, by kind."),
}


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(ls: LabelSet) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in ls) + "}" if ls else ""


def _fmt(v: float) -> str:
    return repr(float(v))


class Exporter:
    """Keeps the newest gauges and the running counters of one node; renders exposition text.

    Args:
        hostname: The node (``Hostname`` label).
        prices: Rates for the cost counters.
        tag_keys: Cost tags copied onto ``seedance_allocation_cost_usd_total``.
    """

    def __init__(self, hostname: str, prices: PriceSheet | None = None,
                 tag_keys: Sequence[str] = ("team", "env")) -> None:
        self.hostname = hostname
        self.prices = prices or PriceSheet()
        self.tag_keys = tuple(tag_keys)
        self._gauges: dict[str, dict[LabelSet, float]] = {}
        self._counters: dict[str, dict[LabelSet, float]] = {}
        self._energy_raw: dict[str, float] = {}

    def _add(self, name: str, labels: LabelSet, v: float) -> None:
        c = self._counters.setdefault(name, {})
        c[labels] = c.get(labels, 0.0) + max(0.0, v)

    def _device_labels(self, d: DeviceState) -> list[tuple[str, str]]:
        ls = [("gpu", str(d.gpu)), ("UUID", d.uuid), ("device", f"nvidia{d.gpu}"), ("modelName", d.model),
              ("Hostname", self.hostname)]
        if d.slice:
            ls += [("GPU_I_PROFILE", d.profile), ("GPU_I_ID", d.slice.split("/")[0])]
        return ls

    def update(self, tick: Tick, energy_mj: Mapping[str, float] | None = None) -> None:
        """Fold one tick in: replace the gauges, advance the counters."""
        g: dict[str, dict[LabelSet, float]] = {}

        def gauge(name: str, ls: Iterable[tuple[str, str]], v: float | None) -> None:
            if v is not None:
                g.setdefault(name, {})[tuple(ls)] = float(v)

        for d in tick.devices:
            if d.lost:
                gauge("seedance_gpu_lost", (("Hostname", self.hostname), ("where", d.uuid)), 1.0)
                continue
            base = self._device_labels(d)
            single = [("container", d.holders[0].container), ("namespace", d.holders[0].namespace),
                      ("pod", d.holders[0].pod)] if len(d.holders) == 1 else []
            ls = base + single
            if not d.slice:
                gauge("DCGM_FI_DEV_GPU_UTIL", ls, d.util_pct)
                gauge("DCGM_FI_DEV_POWER_USAGE", ls, d.power_w)
                gauge("DCGM_FI_DEV_GPU_TEMP", ls, d.temp_c)
                gauge("DCGM_FI_DEV_SM_CLOCK", ls, d.sm_clock_mhz)
                self._energy(d, ls, tick.dt, (energy_mj or {}).get(d.uuid))
            else:
                gauge("DCGM_FI_PROF_GR_ENGINE_ACTIVE", ls, None if d.util_pct is None else d.util_pct / 100.0)
            gauge("DCGM_FI_DEV_FB_USED", ls, d.mem_used_mib)
            if d.mem_total_mib is not None and d.mem_used_mib is not None:
                gauge("DCGM_FI_DEV_FB_FREE", ls, d.mem_total_mib - d.mem_used_mib)
            gauge("seedance_gpu_cost_usd_per_hour", base, d.cost_usd_h)
            for h in d.holders:
                hl = [*base, ("container", h.container), ("namespace", h.namespace), ("pod", h.pod)]
                gauge("seedance_gpu_allocated_share", hl, h.allocated)
                gauge("seedance_gpu_used_share", hl, h.used)
                self._add("seedance_gpu_attributed_energy_joules_total", tuple(hl), h.energy_j)
        self._gauges = g
        self._costs(tick)
        for kind, n in tick.issues.counts.items():
            self._add("seedance_telemetry_skipped_total", (("kind", kind),), float(n))

    def _energy(self, d: DeviceState, ls: list[tuple[str, str]], dt: float, raw_mj: float | None) -> None:
        """Advance the device's energy counter (a driver counter that went back is a reset)."""
        if raw_mj is not None:
            prev = self._energy_raw.get(d.uuid)
            self._energy_raw[d.uuid] = raw_mj
            delta = raw_mj - prev if prev is not None and raw_mj >= prev else (0.0 if prev is None else raw_mj)
        else:
            delta = (d.power_w or 0.0) * dt * 1000.0
        self._add("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", tuple(ls), delta)

    def _costs(self, tick: Tick) -> None:
        if tick.dt <= 0:
            return
        a = tick.asset
        rates = self.prices.node_rates(a.node, a.cpu_cores, a.ram_bytes, a.gpus)
        h = tick.dt / 3600.0
        billed = {"cpu": 0.0, "ram": 0.0, "gpu": 0.0}
        for c in tick.containers:
            tags = tuple((k, c.labels[k]) for k in self.tag_keys if k in c.labels)
            base = (("Hostname", self.hostname), ("namespace", c.namespace), ("pod", c.pod), ("container", c.container))
            cost = {"cpu": max(c.cpu_request, c.cpu_usage) * h * rates.cpu,
                    "ram": max(c.ram_request, c.ram_usage) / GIB * h * rates.ram_gib,
                    "gpu": max(c.gpu_request, c.gpu_usage) * h * (rates.gpu_rate(c.gpu_model) if c.gpu_model else 0.0)}
            for r, v in cost.items():
                billed[r] += v
                self._add("seedance_allocation_cost_usd_total", (*base, ("resource", r), *tags), v)
        capacity = {"cpu": a.cpu_cores * h * rates.cpu, "ram": a.ram_bytes / GIB * h * rates.ram_gib,
                    "gpu": sum(n * h * rates.gpu_rate(m) for m, n in a.gpus.items())}
        for r in capacity:
            self._add("seedance_idle_cost_usd_total", (("Hostname", self.hostname), ("resource", r)),
                      capacity[r] - billed[r])

    def render(self) -> str:
        """The exposition text."""
        out: list[str] = []
        for name, (kind, text) in _HELP.items():
            series = self._gauges.get(name) if kind == "gauge" else self._counters.get(name)
            if not series:
                continue
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(f"{name}{_labels(ls)} {_fmt(v)}" for ls, v in sorted(series.items()))
        return "\n".join(out) + "\n"

    def counters(self) -> dict[str, dict[LabelSet, float]]:
        """A copy of the running counters (tests check they never decrease)."""
        return {k: dict(v) for k, v in self._counters.items()}
