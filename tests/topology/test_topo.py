"""topo -m parsing: the four public fixtures, link bandwidths, and malformed output."""

from __future__ import annotations

import pytest

from seedance.core.errors import InputError
from seedance.topology.links import link_gbs
from seedance.topology.topo import NVLINK, PIX, PXB, SYS, fixture, parse_topo


def test_dgx_a100_fixture() -> None:
    t = fixture("dgx-a100")
    assert len(t.gpus) == 8 and len(t.nics) == 12
    assert t.link(0, 1) == "NV12" and t.kind[0, 7] == NVLINK
    assert t.link(t.index("GPU0"), t.index("NIC0")) == "PXB" and t.link(0, t.index("NIC2")) == "SYS"
    assert t.numa.tolist()[:8] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert t.cpu_affinity[0] == "48-63,176-191"
    assert t.nic_names["NIC11"] == "mlx5_11" and t.index("mlx5_0") == t.index("NIC0")
    assert t.nvlink_islands() == [list(range(8))]
    assert link_gbs(t, 0, 1, (8, 0)) == 300.0  # 12 NVLink-3 links x 25 GB/s per direction


def test_hgx_h100_fixture() -> None:
    t = fixture("hgx-h100")
    assert (len(t.gpus), len(t.nics)) == (8, 9)
    assert link_gbs(t, 0, 5, (9, 0)) == 450.0  # 18 x 25 GB/s
    assert t.devices[t.nearest_nic(0)] == "NIC8" and t.devices[t.nearest_nic(7)] == "NIC1"
    assert t.kind[0, t.index("NIC0")] == SYS and t.numa[4] == 1
    assert link_gbs(t, 0, t.index("NIC8"), (9, 0)) == 63.0  # PIX at PCIe 5.0 x16


def test_pcie_v100_fixture_old_layout() -> None:
    t = fixture("pcie-v100")
    assert len(t.gpus) == 8 and t.devices[-1] == "mlx5_0"
    assert (t.kind[0, 1], t.kind[0, 2], t.kind[0, 4]) == (PIX, PXB, SYS)
    assert t.hops(0, 1) == 1 and t.hops(0, 4) == 5
    assert link_gbs(t, 0, 1, (7, 0)) == 15.75 and link_gbs(t, 0, 4, (7, 0)) == 7.875  # SYS: staged, half
    assert t.nvlink_islands() == [[i] for i in range(8)]
    assert t.numa.tolist() == [-1] * 9  # no NUMA column in this nvidia-smi generation


def test_pcie_l40s_fixture() -> None:
    t = fixture("pcie-l40s")
    assert t.link(0, 1) == "NODE" and t.link(0, 2) == "SYS" and t.numa.tolist()[:4] == [0, 0, 1, 1]
    assert link_gbs(t, 0, 1, (8, 9)) == 31.5
    assert t.devices[t.nearest_nic(2)] == "NIC0" and t.nearest_nic(0) == t.index("NIC0")


def test_space_separated_output() -> None:
    text = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
            "GPU0     X      NV4     0-7     0\n"
            "GPU1    NV4      X      0-7     0\n")
    t = parse_topo(text, source="hand")
    assert t.link(0, 1) == "NV4" and t.cpu_affinity == ("0-7", "0-7") and t.numa.tolist() == [0, 0]


BAD = [
    ("", "empty topo -m output", None, None),
    ("\tNIC0\tCPU Affinity\nNIC0\t X \t\n", "names no GPU column", 1, None),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tQQQ\t X \n", "unknown link 'QQQ'", 3, "GPU0"),
    ("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tSYS\t X \n", "not symmetric", 3, "GPU0"),
    ("\tGPU0\tGPU1\nGPU0\t X \tPIX\n", "row GPU1 missing", 3, "GPU1"),
    ("\tGPU0\tGPU1\nGPU1\t X \tPIX\n", "row 'GPU1' where 'GPU0' was expected", 2, "GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPIX\t X \n", "1 cells, the header has 2", 2, "GPU1"),
    ("\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\t X \n", "X must be exactly the diagonal", 2, "GPU0"),
    ("\tGPU0\tBOGUS COLUMN\n", "unknown column", 1, "BOGUS COLUMN"),
]


@pytest.mark.parametrize(("text", "msg", "line", "field"), BAD)
def test_malformed_output_names_line_and_column(text: str, msg: str, line: int | None, field: str | None) -> None:
    with pytest.raises(InputError) as ei:
        parse_topo(text, source="node7.topo")
    e = ei.value
    assert msg in e.message and e.source == "node7.topo" and e.line == line and e.field == field
    assert str(e).startswith("node7.topo")


def test_unknown_fixture_lists_known() -> None:
    with pytest.raises(InputError, match="known: dgx-a100, hgx-h100, pcie-l40s, pcie-v100"):
        fixture("dgx-b200")
