"""The telemetry post (agent → control plane) as pydantic models, and its conversion to node-windows.

An agent posts, every tick, the running accumulation of its node's current ledger window (and any
window that just closed) plus the newest state of its GPUs, in parts of at most
:data:`MAX_CONTAINERS` containers. The server prices each part with its own price sheet, replaces those
containers' lines and recomputes the node's idle from everything stored for the window, so a repeated
or re-sent part changes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from seedance.control.schemas import NO_NUL_PATTERN
from seedance.core.numbers import Int
from seedance.finops.ingest import ContainerKey, NodeWindow

#: A string the store can keep: no NUL (PostgreSQL's text and JSONB refuse it); the schema states it.
Text = Annotated[str, StringConstraints(pattern=NO_NUL_PATTERN)]

NAME = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
MAX_CONTAINERS = 64
"""Containers per posted window: an agent splits a node-window into parts (each replaces its own
containers' lines), so every post stays well inside the server's body limit."""
MAX_WINDOW_S = 86400.0
"""The longest ledger window (``window_s``); a node is up at most this long in one window."""
MAX_SECONDS = 1e15
"""Bound of a posted sum of seconds (run-, core-, GPU-seconds; 10**15 s is 31.7 million core-years): far above
any real window, and low enough that prices and sums over it stay finite (no inf or NaN is ever stored)."""
MAX_BYTE_SECONDS = 1e21
"""Bound of a posted byte-seconds sum (2**50 bytes for a whole day is 9.7e19)."""
MAX_EPOCH_S = 253402300799.0
"""9999-12-31T23:59:59Z, the last second a date-time can name."""
_S = Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)
_B = Field(ge=0, le=MAX_BYTE_SECONDS, allow_inf_nan=False)
_T = Field(ge=0, le=MAX_EPOCH_S, allow_inf_nan=False, description="Unix seconds.")
_FIRST_START = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
_LAST_START = dt.datetime(9999, 12, 30, tzinfo=dt.UTC)


def _rfc3339(v: object) -> object:
    if not isinstance(v, str | dt.datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return v


def _representable(v: dt.datetime) -> dt.datetime:
    """A window start whose window (up to a day long) has UTC dates: years 0001 to 9999."""
    try:
        utc = v.astimezone(dt.UTC) if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
    except OverflowError:
        utc = None
    if utc is None or not _FIRST_START <= utc <= _LAST_START:
        raise ValueError("must lie between 0001-01-01T00:00:00Z and 9999-12-30T00:00:00Z in UTC")
    return v


class ContainerWindow(BaseModel):
    """One container's sums over a node-window (seconds × cores / bytes / GPUs)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    namespace: Text = Field(min_length=1, max_length=253)
    pod: Text = Field(min_length=1, max_length=253)
    container: Text = Field(default="", max_length=253)
    controller: Text = Field(default="", max_length=253)
    controller_kind: Text = Field(default="", max_length=63)
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=32)
    gpu_model: Text = Field(default="", max_length=64)
    first_seen: float = _T
    last_seen: float = _T
    run_s: float = _S
    cpu_request_s: float = _S
    cpu_usage_s: float = _S
    cpu_billed_s: float = _S
    ram_request_s: float = _B
    ram_usage_s: float = _B
    ram_billed_s: float = _B
    gpu_request_s: float = _S
    gpu_usage_s: float = _S
    gpu_billed_s: float = _S


class NodeWindowIn(BaseModel):
    """A node's accumulation for one ledger window."""

    model_config = ConfigDict(extra="forbid", strict=True)
    window_start: Annotated[dt.datetime, BeforeValidator(_rfc3339), AfterValidator(_representable)] = Field(
        strict=False)
    node_s: float = Field(ge=0, le=MAX_WINDOW_S, allow_inf_nan=False)
    cpu_core_s: float = _S
    ram_byte_s: float = _B
    gpu_s: dict[Annotated[str, Field(max_length=64)], Annotated[float, _S]] = Field(default_factory=dict,
                                                                                 max_length=32)
    containers: list[ContainerWindow] = Field(default_factory=list, max_length=MAX_CONTAINERS)


class HolderIn(BaseModel):
    """A container's share of a device."""

    model_config = ConfigDict(extra="forbid", strict=True)
    namespace: Text = Field(max_length=253)
    pod: Text = Field(max_length=253)
    container: Text = Field(default="", max_length=253)
    allocated: float = Field(ge=0, le=64, allow_inf_nan=False)
    used: float | None = Field(default=None, ge=0, le=64, allow_inf_nan=False)


class DeviceIn(BaseModel):
    """The newest state of one GPU or MIG instance."""

    model_config = ConfigDict(extra="forbid", strict=True)
    gpu: Int = Field(ge=-1, le=1024)
    slice: Text = Field(default="", max_length=16)
    uuid: Text = Field(max_length=253)
    model: Text = Field(default="unknown", max_length=64)
    profile: Text = Field(default="", max_length=32)
    fraction: float = Field(default=1.0, gt=0, le=1, allow_inf_nan=False)
    util_pct: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    mem_used_mib: float | None = Field(default=None, ge=0, le=2**40, allow_inf_nan=False)
    mem_total_mib: float | None = Field(default=None, ge=0, le=2**40, allow_inf_nan=False)
    power_w: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    temp_c: float | None = Field(default=None, ge=-50, le=200, allow_inf_nan=False)
    sm_clock_mhz: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    lost: bool = False
    holders: list[HolderIn] = Field(default_factory=list, max_length=16)
    cost_usd_h: float = Field(default=0.0, ge=0, le=1e9, allow_inf_nan=False)


class TelemetryPost(BaseModel):
    """``POST /api/v1/telemetry``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    cluster: str = Field(default="default", pattern=NAME)
    node: Text = Field(min_length=1, max_length=253)
    source: Text = Field(default="live", max_length=63)
    window_s: float = Field(default=3600.0, ge=60, le=MAX_WINDOW_S, allow_inf_nan=False)
    windows: list[NodeWindowIn] = Field(default_factory=list, max_length=4)
    gpus: list[DeviceIn] | None = Field(default=None, max_length=128)


def window_index(start: dt.datetime, window_s: float, *, field: str = "window_start") -> int:
    """The ledger window number of a window start (it must sit on a window edge)."""
    t = start.timestamp()
    w = round(t / window_s)
    if abs(w * window_s - t) > 1e-6:
        from seedance.core.errors import InputError

        raise InputError(f"window_start {start.isoformat()} is not on a {window_s:g} s edge", source="body",
                         field=field)
    return int(w)


def to_node_window(node: str, w: NodeWindowIn, window_s: float, *, field: str = "window_start") -> NodeWindow:
    """The :class:`NodeWindow` of a posted window (``field`` names its ``window_start`` in errors)."""
    nw = NodeWindow(window=window_index(w.window_start, window_s, field=field), node=node, node_s=w.node_s,
                    cpu_core_s=w.cpu_core_s, ram_byte_s=w.ram_byte_s, gpu_s=dict(w.gpu_s))
    for c in w.containers:
        key = (ContainerKey(c.namespace, c.pod, c.container, c.controller, c.controller_kind,
                            tuple(sorted(c.labels.items()))), c.gpu_model)
        nw.containers[key] = np.array([c.run_s, c.cpu_request_s, c.cpu_usage_s, c.cpu_billed_s, c.ram_request_s,
                                       c.ram_usage_s, c.ram_billed_s, c.gpu_request_s, c.gpu_usage_s,
                                       c.gpu_billed_s], dtype=np.float64)
        nw.first[key], nw.last[key] = c.first_seen, c.last_seen
    return nw


def from_node_window(nw: NodeWindow, window_s: float) -> dict[str, Any]:
    """The JSON of a :class:`NodeWindow` (what an agent posts)."""
    cs = []
    for (key, model), s in nw.containers.items():
        cs.append({
            "namespace": key.namespace, "pod": key.pod, "container": key.container, "controller": key.controller,
            "controller_kind": key.controller_kind, "labels": dict(key.labels), "gpu_model": model,
            "first_seen": nw.first[(key, model)], "last_seen": nw.last[(key, model)], "run_s": float(s[0]),
            "cpu_request_s": float(s[1]), "cpu_usage_s": float(s[2]), "cpu_billed_s": float(s[3]),
            "ram_request_s": float(s[4]), "ram_usage_s": float(s[5]), "ram_billed_s": float(s[6]),
            "gpu_request_s": float(s[7]), "gpu_usage_s": float(s[8]), "gpu_billed_s": float(s[9]),
        })
    return {"window_start": dt.datetime.fromtimestamp(nw.window * window_s, dt.UTC).isoformat(),
            "node_s": nw.node_s, "cpu_core_s": nw.cpu_core_s, "ram_byte_s": nw.ram_byte_s, "gpu_s": dict(nw.gpu_s),
            "containers": cs}
