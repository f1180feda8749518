"""Parsers of real ``nvidia-smi`` output: exact records from the fixtures, the renderer reproducing them, bad input."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from seedance.core.errors import InputError
from seedance.slicing.mig import Instance, mig_gpu
from seedance.trust.nvsmi import OutputKind, detect_kind, parse_output
from seedance.trust.render import (
    RenderGpu,
    compute_instance_rows,
    gpu_instance_rows,
    render_compute_instances,
    render_gpu_instances,
    render_list,
    render_query,
)

FIX = Path(__file__).parent / "fixtures" / "nvsmi"


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_every_fixture_kind_is_recognised_from_content() -> None:
    expected = {
        "_L_": OutputKind.LIST,
        "_mig-lgi": OutputKind.GPU_INSTANCES,
        "_mig-lci": OutputKind.COMPUTE_INSTANCES,
        "_q_": OutputKind.QUERY,
    }
    files = sorted(FIX.glob("*.txt"))
    assert len(files) == 18
    for f in files:
        kind = next(k for tag, k in expected.items() if tag in f.name or f.name.startswith(tag.strip("_")))
        assert detect_kind(f.read_text(), f.name) is kind, f.name


def test_list_records_of_the_mig_user_guide() -> None:
    p = parse_output(read("a100-40gb_L_guide.txt"), "L")
    assert [(g.index, g.product, g.uuid, g.line) for g in p.gpus] == [
        (0, "A100-SXM4-40GB", "GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0", 1)
    ]
    assert [(d.gpu, d.profile, d.device, d.uuid, d.line) for d in p.mig_devices] == [
        (0, "3g.20gb", 0, "MIG-c7384736-a75d-5afc-978f-d2f1294409fd", 2),
        (0, "3g.20gb", 1, "MIG-a28ad590-3fda-56dd-84fc-0a0b96edc58d", 3),
    ]
    h200 = parse_output(read("h200_L_blog.txt"), "L")
    assert [g.index for g in h200.gpus] == list(range(8))
    assert [d.profile for d in h200.mig_devices] == ["2g.35gb"] + ["1g.18gb"] * 5
    assert {d.gpu for d in h200.mig_devices} == {0}


def test_gpu_instance_rows_and_placeholders() -> None:
    p = parse_output(read("a100-40gb_mig-lgi_guide-421.txt"), "lgi")
    assert [(r.gpu, r.profile, r.profile_id, r.gi, r.start, r.size, r.line) for r in p.gpu_instances] == [
        (0, "1g.5gb", 19, 13, 6, 1, 6),
        (0, "2g.10gb", 14, 5, 4, 2, 8),
        (0, "4g.20gb", 5, 1, 0, 4, 10),
    ]
    assert parse_output(read("mig-lgi_none.txt")).empty
    assert parse_output(read("mig-lgi_disabled.txt")).no_mig


def test_compute_instance_rows_with_and_without_placement() -> None:
    old = parse_output(read("a100-40gb_mig-lci_guide.txt"))
    assert [(c.gpu, c.gi, c.profile, c.profile_id, c.ci, c.start, c.size) for c in old.compute_instances] == [
        (0, 1, "1c.3g.20gb", 0, 0, None, None),
        (0, 1, "1c.3g.20gb", 0, 1, None, None),
        (0, 1, "1c.3g.20gb", 0, 2, None, None),
    ]
    new = parse_output(read("a100-40gb_mig-lci_howto.txt"))
    assert [(c.gi, c.profile, c.profile_id, c.ci, c.start, c.size) for c in new.compute_instances] == [
        (1, "3g.20gb", 2, 0, 0, 3),
        (2, "1c.3g.20gb", 0, 0, 0, 1),
        (2, "1c.3g.20gb", 0, 1, 1, 1),
        (2, "1c.3g.20gb", 0, 2, 2, 1),
    ]


def test_query_blocks_of_real_a100_and_h100_outputs() -> None:
    a100 = parse_output(read("a100-80gb_q_4gpu.txt"))
    assert a100.attached == 4 and a100.driver == "555.42.02"
    assert [(q.position, q.bus_id, q.product, q.mig_current, q.mig_pending) for q in a100.queried] == [
        (i, bus, "NVIDIA A100-SXM4-80GB", "Disabled", "Disabled")
        for i, bus in enumerate(["00000000:68:00.0", "00000000:9E:00.0", "00000000:C2:00.0", "00000000:D4:00.0"])
    ]
    assert a100.queried[0].uuid == "GPU-31515c3d-1414-7c2c-004a-f86a898946ac"
    h100 = parse_output(read("h100-80gb_q_della.txt"))
    (q,) = h100.queried
    assert (q.product, q.uuid, q.mig_line) == ("NVIDIA H100 80GB HBM3", "GPU-f7b02328-d6fe-5b1f-9683-15041689bb03", 17)


@pytest.mark.parametrize(
    ("name", "wide"),
    [
        ("a100-40gb_mig-lgi_guide-3g3g.txt", False),
        ("a100-40gb_mig-lgi_guide-421.txt", False),
        ("a100-40gb_mig-lgi_guide-3211.txt", False),
        ("a100-40gb_mig-lgi_guide-211111.txt", False),
        ("a100-40gb_mig-lgi_howto.txt", True),
    ],
)
def test_renderer_reproduces_real_gpu_instance_tables_byte_for_byte(name: str, wide: bool) -> None:
    text = read(name)
    rows = [(r.gpu, r.profile, r.profile_id, r.gi, r.start, r.size) for r in parse_output(text).gpu_instances]
    assert render_gpu_instances(rows, wide=wide) == text


@pytest.mark.parametrize(
    ("name", "placement"), [("a100-40gb_mig-lci_guide.txt", False), ("a100-40gb_mig-lci_howto.txt", True)]
)
def test_renderer_reproduces_real_compute_instance_tables(name: str, placement: bool) -> None:
    text = read(name)
    rows = [
        (c.gpu, c.gi, c.profile, c.profile_id, c.ci, c.start or 0, c.size or 0)
        for c in parse_output(text).compute_instances
    ]
    assert render_compute_instances(rows, placement=placement) == text


def test_rendered_node_parses_back_to_its_layout() -> None:
    g = mig_gpu("H200")
    gpus = [
        RenderGpu(
            0,
            g,
            "NVIDIA H200",
            "GPU-00000000-0000-0000-0000-000000000001",
            (Instance("4g.71gb", 0), Instance("2g.35gb", 4), Instance("1g.18gb", 6)),
        ),
        RenderGpu(1, g, "NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000002", mig=False),
    ]
    lgi = parse_output(render_gpu_instances(gpu_instance_rows(gpus)))
    assert sorted((r.profile, r.start) for r in lgi.gpu_instances) == [("1g.18gb", 6), ("2g.35gb", 4), ("4g.71gb", 0)]
    lci = parse_output(render_compute_instances(compute_instance_rows(gpus)))
    assert {(c.profile, c.profile_id, c.size) for c in lci.compute_instances} == {
        ("4g.71gb", 3, 4),
        ("2g.35gb", 1, 2),
        ("1g.18gb", 0, 1),
    }
    listing = parse_output(render_list(gpus))
    assert [d.profile for d in listing.mig_devices] == ["4g.71gb", "2g.35gb", "1g.18gb"]
    q = parse_output(render_query(read("h100-80gb_q_della.txt"), gpus))
    assert [(x.product, x.uuid, x.mig_current) for x in q.queried] == [
        ("NVIDIA H200", gpus[0].uuid, "Enabled"),
        ("NVIDIA H200", gpus[1].uuid, "Disabled"),
    ]


def _lines(name: str) -> list[str]:
    return read(name).splitlines(keepends=True)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", None, "empty file"),
        ("".join(_lines("a100-40gb_mig-lgi_guide-421.txt")[:-1]), 10, "not closed"),  # cut after a row
        ("".join(_lines("a100-40gb_mig-lgi_guide-421.txt")[:4]), 4, "no '|====|' rule"),
        (
            "".join(_lines("a100-40gb_mig-lgi_guide-421.txt")[:7])[:-20] + "\n+----+\n",
            7,
            "unrecognised GPU-instance row",
        ),
        (read("a100-40gb_mig-lgi_guide-421.txt").replace("GPU instances:", "GPU-Instanzen:"), 2, "localized"),
        (read("a100-40gb_mig-lci_howto.txt").replace("Compute instances:", "Compute-Instanzen:"), 2, "localized"),
        (read("a100-40gb_L_guide.txt")[:-30], 3, "unrecognised -L line"),
        ("GPU 0: A100-SXM4-40GB (UUID: GPU-e86cb44c)\nGPU 0: A100-SXM4-40GB (UUID: GPU-e86cb44d)\n", 2, "listed twice"),
        (read("a100-80gb_q_4gpu.txt").replace("Product Name", "Produktname"), 8, "no 'Product Name'"),
        (read("h100-80gb_q_della.txt").replace("    MIG Mode\n", "    MIG-Modus\n"), 8, "no 'MIG Mode'"),
        (
            read("h100-80gb_q_della.txt").replace(
                "Current                           : Disabled\n        Pending",
                "Current                           : Désactivé\n        Pending",
                1,
            ),
            17,
            "expected one of",
        ),
        ("".join(_lines("a100-80gb_q_4gpu.txt")[:20]), 8, "no 'GPU UUID'"),
        ("".join(_lines("a100-80gb_q_4gpu.txt")[:40]), 40, "ends before its 'Processes'"),
        ("".join(_lines("a100-80gb_q_4gpu.txt")[:7]), 7, "no GPU block follows"),
        ("+---------+\n| GPU instance profiles: |\n", 1, "-lgip"),
        ("Mon Jul 28 01:58:33 2025\n| NVIDIA-SMI 570.86.15 |\n", 1, "not nvidia-smi"),
    ],
)
def test_truncated_or_localized_output_is_a_located_input_error(text: str, line: int | None, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_output(text, "capture.txt")
    assert err.value.source == "capture.txt"
    assert err.value.line == line
    assert words in err.value.message


def test_the_whitepapers_awk_one_liner_prints_header_words_not_instances() -> None:
    awk = shutil.which("awk")
    assert awk is not None, "awk is needed to show what the whitepaper's one-liner prints"
    text = read("a100-40gb_mig-lgi_guide-3g3g.txt")
    paper = subprocess.run(
        [awk, "/GPU/{g=$2} /Instance/{print g,$4,$6}"], input=text, capture_output=True, text=True, check=True
    )
    assert paper.stdout == "GPU Profile Placement\n"  # the column-header line only; no instance is printed
    fixed = subprocess.run([awk, "/MIG/{print $2, $4, $6, $7}"], input=text, capture_output=True, text=True, check=True)
    assert fixed.stdout == "0 3g.20gb 1 4:4\n0 3g.20gb 2 0:4\n"  # GPU, profile, GI id, placement
