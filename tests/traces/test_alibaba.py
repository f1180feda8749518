"""Alibaba GPU v2023 loaders: real files load exactly; malformed files name file, line and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seedance.core.errors import InputError
from seedance.traces import load_nodes, load_pods

HEADER11 = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


def write(tmp_path: Path, text: str, name: str = "pods.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_real_node_list_matches_its_documented_totals(alibaba: Path) -> None:
    spec = load_nodes(alibaba / "openb_node_list_gpu_node.csv")
    assert len(spec.nodes) == 1213 and spec.total_gpus == 6212
    by_model: dict[str, int] = {}
    for n in spec.nodes:
        by_model[n.gpu_model or ""] = by_model.get(n.gpu_model or "", 0) + n.gpu_count
    assert by_model == {
        "G2": 4392,
        "T4": 842,
        "P100": 265,
        "G3": 312,
        "V100-32GB": 204,
        "V100-16GB": 195,
        "A10": 2,
    }
    all_nodes = load_nodes(alibaba / "openb_node_list_all_node.csv")
    assert len(all_nodes.nodes) == 1523 and sum(1 for n in all_nodes.nodes if n.gpu_count == 0) == 310


def test_real_default_pod_list_matches_its_documented_facts(alibaba: Path) -> None:
    tr = load_pods(alibaba / "openb_pod_list_default.csv")
    assert len(tr) == 8152 and tr.total_gpu_milli == 6_086_800
    counts = {k: int((tr.num_gpu == k).sum()) for k in (0, 1, 2, 4, 8)}
    assert counts == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    assert int(((tr.num_gpu == 1) & (tr.gpu_milli < 1000)).sum()) == 3078
    assert tr.has_times and float(np.nanmax(tr.creation)) == 12_901_761
    assert int(tr.cpu_milli.sum()) == 85_436_012


def test_five_column_multigpu_files_load_without_times(alibaba: Path) -> None:
    tr = load_pods(alibaba / "openb_pod_list_multigpu50.csv")
    assert len(tr) == 9061 and not tr.has_times and set(tr.gpu_spec.tolist()) == {""}


def test_gpu_spec_is_resolved_to_catalog_models(alibaba: Path) -> None:
    tr = load_pods(alibaba / "openb_pod_list_gpuspec33.csv")
    specs = {s: t for s, t in tr.gpu_types.items() if s}
    assert specs and all(t for t in specs.values())
    assert specs.get("V100M16|V100M32") in (None, ("V100-16GB", "V100-32GB"))


@pytest.mark.parametrize(
    ("body", "line", "field", "msg"),
    [
        ("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", 1, "gpu_milli", "missing column"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,-5,1,0,0\n", 2, "cpu_milli", ">= 0"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1200\n", 2, "gpu_milli", "0..1000"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,500\nq,1,1,2,500\n",
            3,
            "num_gpu",
            "fractional",
        ),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,300\n", 2, "gpu_milli", "CPU-only"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,abc,1,0,0\n", 2, "cpu_milli", "not an integer"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,0\np,1,1,0,0\n", 3, "name", "duplicate"),
        (HEADER11 + "\np,1,1,1,1000,K9000,LS,Running,0,10,0\n", 2, "gpu_spec", "unknown GPU model"),
        (HEADER11 + "\np,1,1,1,1000,,LS,Running,50,10,0\n", 2, "deletion_time", "before creation"),
        (HEADER11 + "\np,1,1,1,1000,,LS,Running,x,10,0\n", 2, "creation_time", "not a number"),
    ],
)
def test_malformed_pod_lists_name_file_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, msg: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(InputError, match=msg) as exc:
        load_pods(path)
    err = exc.value
    assert (err.source, err.line, err.field) == (str(path), line, field)
    assert str(err).startswith(f"{path}:{line}: field {field}: ")


def test_short_rows_missing_files_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected 5 fields, found 3") as exc:
        load_pods(write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1\n"))
    assert exc.value.line == 2
    with pytest.raises(InputError, match="file not found"):
        load_pods(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="empty file"):
        load_pods(write(tmp_path, ""))
    with pytest.raises(InputError, match="no pods"):
        load_pods(write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"))


@pytest.mark.parametrize(
    ("body", "line", "field", "msg"),
    [
        ("sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n", 1, "model", "missing column"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,Z80\n", 2, "model", "unknown GPU model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", 2, "model", "needs a GPU model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,-2,T4\n", 2, "gpu", ">= 0"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n", 3, "sn", "duplicate"),
    ],
)
def test_malformed_node_lists(tmp_path: Path, body: str, line: int, field: str, msg: str) -> None:
    path = write(tmp_path, body, "nodes.csv")
    with pytest.raises(InputError, match=msg) as exc:
        load_nodes(path)
    assert (exc.value.line, exc.value.field) == (line, field)


def test_any_file_of_the_format_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER11 + "\nb,2000,10,1,250,T4|A10,BE,Pending,5,9,\na,1000,20,8,1000,,LS,Running,0,100,0\n",
    )
    tr = load_pods(path)
    assert tr.name.tolist() == ["b", "a"] and tr.gpu_types["T4|A10"] == ("A10", "T4")
    assert np.isnan(tr.scheduled[0]) and tr.scheduled[1] == 0 and tr.request(0).is_sharing
