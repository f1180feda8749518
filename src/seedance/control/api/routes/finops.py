"""FinOps routes: ``/api/v1/allocation`` (OpenCost's idiom), ``/api/v1/allocation/explain``,
``POST /api/v1/telemetry`` (agents) and ``/api/v1/telemetry/heatmap`` (the heatmap page)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from seedance.control.api.deps import PrincipalDep
from seedance.control.api.errors import ERROR_RESPONSES
from seedance.control.schemas import NAME_PATTERN, Role
from seedance.control.security import Principal
from seedance.finops.service import FinopsService, split_csv
from seedance.finops.wire import TelemetryPost

router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES, tags=["finops"])
Cluster = Annotated[str, Query(pattern=NAME_PATTERN, max_length=63)]
Source = Annotated[str, Query(max_length=63, pattern=r"^[A-Za-z0-9:._-]+$",
                              description="live, or replay:<policy> for a replayed trace.")]
_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP}-02-29)")
RFC3339_UTC = rf"{_DATE}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"
"""A UTC time to the second that exists in the calendar (years 0001-9999, leap days of leap years only), so
every string the pattern admits parses (``finops.window``)."""
WINDOW = (rf"^(today|yesterday|week|lastweek|month|lastmonth|all|[1-9][0-9]{{0,4}}[mhdw]"
          rf"|{RFC3339_UTC},{RFC3339_UTC}|[0-9]{{1,10}},[0-9]{{1,10}})$")
"""The windows ``finops.window.parse_window`` accepts. One rule is beyond a pattern: a pair must end after it
starts (a reversed pair answers 422 naming the parameter)."""
STEP = r"^(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)[smhdw]$"
"""A positive ``step`` duration (``finops.window.parse_duration``: a number above 0 and a unit s, m, h, d, w)."""
_LABEL_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]{0,251}[A-Za-z0-9])?"
_AGG_ITEM = rf"(?:[Ll][Aa][Bb][Ee][Ll]:)?{_LABEL_KEY}"
AGGREGATE = rf"^(?:{_AGG_ITEM}(?:,{_AGG_ITEM})*)?$"
"""``aggregate``: properties and label keys (Kubernetes' label-key characters), ``label:<key>``, comma-separated;
empty means ``namespace``. Every string it admits is a valid query (no empty item, no ``annotation:``)."""
Window = Annotated[str, Query(max_length=100, pattern=WINDOW,
                              description="today, 7d, lastweek, an RFC3339 or Unix pair, or all.")]


def operator(me: PrincipalDep) -> Principal:
    """The caller, who must be an operator (checked before the body is read: 403, not 422)."""
    me.require(Role.OPERATOR, "posting telemetry")
    return me


OperatorDep = Annotated[Principal, Depends(operator)]


def finops(request: Request) -> FinopsService:
    """The app's FinOps service (made on first use from the app's store)."""
    svc = getattr(request.app.state, "finops", None)
    if svc is None:
        svc = request.app.state.finops = FinopsService(request.app.state.service.db)
    return svc


@router.get("/allocation")
def allocation(
    request: Request, me: PrincipalDep,
    window: Window = "7d",
    aggregate: Annotated[str, Query(max_length=300, pattern=AGGREGATE, description=(
        "Comma-separated properties: cluster, node, namespace, pod, container, controller, controllerKind, "
        "gpu_model, label:<key> or a bare label key."))] = "namespace",
    step: Annotated[str | None, Query(max_length=20, pattern=STEP)] = None,
    idle: bool = True,
    share_idle: Annotated[str, Query(alias="shareIdle", max_length=10,
                                     pattern=r"^(none|weighted|even|true|false|)$")] = "none",
    idle_by_node: Annotated[bool, Query(alias="idleByNode")] = False,
    share_namespaces: Annotated[str, Query(alias="shareNamespaces", max_length=1000)] = "",
    share_split: Annotated[str, Query(alias="shareSplit", max_length=10, pattern=r"^(weighted|even)$")] = "weighted",
    cluster: Cluster = "default", source: Source = "live",
    fmt: Annotated[str, Query(alias="format", max_length=10, pattern=r"^(seedance|opencost)$")] = "seedance",
) -> dict[str, Any]:
    """Costs by any aggregation, idle as ``__idle__`` or shared, shared namespaces distributed.

    Cost data is shared infrastructure, like clusters and nodes: every token may read it (showback)."""
    return finops(request).allocation(
        window=window, aggregate=split_csv(aggregate), step=step, idle=idle, share_idle=share_idle,
        idle_by_node=idle_by_node, share_namespaces=split_csv(share_namespaces), share_split=share_split,
        cluster=cluster, source=source, fmt=fmt)


@router.get("/allocation/explain")
def allocation_explain(
    request: Request, me: PrincipalDep,
    window_from: Annotated[str, Query(alias="from", max_length=100, pattern=WINDOW)] = "lastweek",
    window_to: Annotated[str, Query(alias="to", max_length=100, pattern=WINDOW)] = "week",
    step: Annotated[str, Query(max_length=20, pattern=STEP)] = "1h",
    filter_: Annotated[str, Query(alias="filter", max_length=300, description="k=v,k2=v2 (labels or properties)")]
    = "",
    cluster: Cluster = "default", source: Source = "live",
) -> dict[str, Any]:
    """Why the cost changed: volume, price, mix, idle, efficiency and shared effects, hour by hour."""
    filters = [tuple(x.split("=", 1)) for x in split_csv(filter_) if "=" in x]
    return finops(request).explain(window_from=window_from, window_to=window_to, step=step, cluster=cluster,
                                   source=source, filters=[(a, b) for a, b in filters])


@router.post("/telemetry")
def post_telemetry(request: Request, me: OperatorDep, body: TelemetryPost) -> dict[str, Any]:
    """A node agent's ledger windows (or parts of them) and GPU state (operator); idempotent."""
    return finops(request).ingest(body)


@router.get("/telemetry/heatmap")
def telemetry_heatmap(request: Request, me: PrincipalDep, cluster: Cluster = "default") -> dict[str, Any]:
    """Newest state of every GPU and MIG instance, with the pods on it and their shares."""
    return finops(request).heatmap(cluster)
