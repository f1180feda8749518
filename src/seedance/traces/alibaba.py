"""Loader for the Alibaba GPU cluster trace v2023 format (the ``openb`` node and pod lists).

Node lists: ``sn,cpu_milli,memory_mib,gpu,model``.
Pod lists: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and, in the 11-column files,
``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`` (the ``multigpu`` files
have only the first five). Paths are arguments: any file of this format loads.

Every problem raises :class:`~seedance.core.errors.InputError` naming the file, the line and
the field, and nothing is partially loaded.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from seedance.core.catalog import CATALOG, GpuCatalog
from seedance.core.cluster import ClusterSpec, NodeSpec
from seedance.core.errors import InputError, UnknownNameError
from seedance.core.resources import MILLI_PER_GPU
from seedance.traces.csvio import csv_records
from seedance.traces.schema import PodTrace

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


def _int(row: dict[str, str], col: str, src: str, line: int, *, minimum: int = 0) -> int:
    raw = row[col].strip()
    try:
        value = int(raw)
    except ValueError:
        try:
            f = float(raw)
        except ValueError:
            raise InputError(f"not an integer: {raw!r}", source=src, line=line, field=col) from None
        if not f.is_integer():
            raise InputError(f"not an integer: {raw!r}", source=src, line=line, field=col) from None
        value = int(f)
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", source=src, line=line, field=col)
    return value


def _time(row: dict[str, str], col: str, src: str, line: int) -> float:
    raw = row.get(col, "").strip()
    if not raw:
        return math.nan
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"not a number: {raw!r}", source=src, line=line, field=col) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"must be a finite time >= 0, got {raw!r}", source=src, line=line, field=col)
    return value


def load_nodes(path: str | Path, *, catalog: GpuCatalog = CATALOG) -> ClusterSpec:
    """Load a node list into a :class:`ClusterSpec`.

    Args:
        path: CSV with columns ``sn,cpu_milli,memory_mib,gpu,model``.
        catalog: Catalog used to resolve GPU model codes (``V100M32`` → ``V100-32GB``).

    Raises:
        InputError: On any malformed row, naming file, line and field.
    """
    p = Path(path)
    src = str(p)
    nodes: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for line, row in csv_records(p, NODE_COLUMNS):
        name = row["sn"].strip()
        if not name:
            raise InputError("empty node name", source=src, line=line, field="sn")
        if name in seen:
            raise InputError(
                f"duplicate node name (first on line {seen[name]})", source=src, line=line, field="sn"
            )
        seen[name] = line
        cpu = _int(row, "cpu_milli", src, line)
        mem = _int(row, "memory_mib", src, line)
        gpus = _int(row, "gpu", src, line)
        code = row["model"].strip()
        model: str | None = None
        if gpus > 0:
            if not code:
                raise InputError("a node with GPUs needs a GPU model", source=src, line=line, field="model")
            try:
                model = catalog.resolve(code).name
            except UnknownNameError as exc:
                raise InputError(str(exc), source=src, line=line, field="model") from None
        labels = {"gpu.model": code} if model else {}
        nodes.append(
            NodeSpec(name=name, cpu_milli=cpu, memory_mib=mem, gpu_count=gpus, gpu_model=model, labels=labels)
        )
    if not nodes:
        raise InputError("no nodes in file", source=src)
    return ClusterSpec(nodes=tuple(nodes), name=p.stem)


def load_pods(path: str | Path, *, catalog: GpuCatalog = CATALOG) -> PodTrace:
    """Load a pod list into a columnar :class:`PodTrace`.

    Args:
        path: CSV with at least ``name,cpu_milli,memory_mib,num_gpu,gpu_milli``.
        catalog: Catalog used to check the models named in ``gpu_spec``.

    Raises:
        InputError: On a missing column, a negative request, ``gpu_milli`` outside 0..1000, a
            fractional share with ``num_gpu > 1``, an unknown GPU model, a bad time, ...
    """
    p = Path(path)
    src = str(p)
    names: list[str] = []
    cpu: list[int] = []
    mem: list[int] = []
    ngpu: list[int] = []
    milli: list[int] = []
    spec: list[str] = []
    qos: list[str] = []
    phase: list[str] = []
    times: list[tuple[float, float, float]] = []
    spec_types: dict[str, tuple[str, ...]] = {"": ()}
    seen: dict[str, int] = {}
    for line, row in csv_records(p, POD_COLUMNS):
        name = row["name"].strip()
        if not name:
            raise InputError("empty pod name", source=src, line=line, field="name")
        if name in seen:
            raise InputError(
                f"duplicate pod name (first on line {seen[name]})", source=src, line=line, field="name"
            )
        seen[name] = line
        c = _int(row, "cpu_milli", src, line)
        m = _int(row, "memory_mib", src, line)
        k = _int(row, "num_gpu", src, line)
        gm = _int(row, "gpu_milli", src, line)
        if gm > MILLI_PER_GPU:
            raise InputError(f"must be within 0..1000, got {gm}", source=src, line=line, field="gpu_milli")
        if k == 0 and gm != 0:
            raise InputError(
                f"a CPU-only pod (num_gpu 0) must have gpu_milli 0, got {gm}",
                source=src,
                line=line,
                field="gpu_milli",
            )
        if k > 0 and gm == 0:
            raise InputError("a GPU pod needs gpu_milli > 0", source=src, line=line, field="gpu_milli")
        if k > 1 and gm < MILLI_PER_GPU:
            raise InputError(
                f"a fractional share ({gm} milli) needs num_gpu 1, got {k}",
                source=src,
                line=line,
                field="num_gpu",
            )
        s = row.get("gpu_spec", "").strip()
        if s not in spec_types:
            parts = [x.strip() for x in s.split("|") if x.strip()]
            try:
                resolved = tuple(sorted({catalog.resolve(x).name for x in parts}))
            except UnknownNameError as exc:
                raise InputError(str(exc), source=src, line=line, field="gpu_spec") from None
            spec_types[s] = resolved
        t_c = _time(row, "creation_time", src, line)
        t_d = _time(row, "deletion_time", src, line)
        t_s = _time(row, "scheduled_time", src, line)
        if not math.isnan(t_c) and not math.isnan(t_d) and t_d < t_c:
            raise InputError(
                f"deletion_time {t_d:g} is before creation_time {t_c:g}",
                source=src,
                line=line,
                field="deletion_time",
            )
        names.append(name)
        cpu.append(c)
        mem.append(m)
        ngpu.append(k)
        milli.append(gm)
        spec.append(s)
        qos.append(row.get("qos", "").strip())
        phase.append(row.get("pod_phase", "").strip())
        times.append((t_c, t_d, t_s))
    if not names:
        raise InputError("no pods in file", source=src)
    t = np.array(times, dtype=np.float64).reshape(-1, 3)
    return PodTrace(
        source=src,
        name=np.array(names),
        cpu_milli=np.array(cpu, dtype=np.int64),
        memory_mib=np.array(mem, dtype=np.int64),
        num_gpu=np.array(ngpu, dtype=np.int64),
        gpu_milli=np.array(milli, dtype=np.int64),
        gpu_spec=np.array(spec, dtype=object),
        gpu_types=spec_types,
        qos=np.array(qos, dtype=object),
        phase=np.array(phase, dtype=object),
        creation=t[:, 0].copy(),
        deletion=t[:, 1].copy(),
        scheduled=t[:, 2].copy(),
    )
