"""MIG audit: the fault corpus (acceptance), the legal-layout property, each check on hand-made input, the CLI."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedance.cli.main import main
from seedance.core.errors import InputError
from seedance.slicing.mig import Instance, enumerate_layouts, mig_gpu, mig_gpus
from seedance.trust.audit import Severity, audit, model_of_product
from seedance.trust.corpus import all_faults, build_corpus, evaluate_corpus
from seedance.trust.faults import FAULT_CLASSES
from seedance.trust.nvsmi import parse_output
from seedance.trust.plan import parse_plan_document, planned_by_index
from seedance.trust.render import (
    RenderGpu,
    compute_instance_rows,
    fake_uuid,
    gpu_instance_rows,
    render_compute_instances,
    render_gpu_instances,
    render_list,
    render_query,
)

FIX = Path(__file__).parent / "fixtures" / "nvsmi"
LGI_HEAD = """+----------------------------------------------------+
| GPU instances:                                     |
| GPU   Name          Profile  Instance   Placement  |
|                       ID       ID       Start:Size |
|====================================================|
"""


def lgi(*rows: tuple[int, str, int, int, int, int], wide: bool = False) -> str:
    return render_gpu_instances(list(rows), wide=wide)


def run(*texts: str, plan: dict[int, tuple[Instance, ...]] | None = None) -> list[tuple[str, int | None, int | None]]:
    report = audit([parse_output(t, f"f{i}") for i, t in enumerate(texts)], plan)
    return [(f.check.value, f.gpu, f.line) for f in report.findings]


@pytest.fixture(scope="module")
def corpus() -> tuple[list, list]:
    return build_corpus(FIX, time_limit_s=2.0)


def test_corpus_every_fault_found_and_no_false_finding(corpus: tuple[list, list]) -> None:
    clean, faulty = corpus
    result = evaluate_corpus(clean, faulty)
    assert result.clean_files + result.faulty_files >= 30
    assert result.clean_cases == result.faulty_cases == len(clean)  # half of the corpus has one fault each
    assert set(result.by_class) == {c.value for c in FAULT_CLASSES}
    assert all(n >= 3 for _, n in result.by_class.values())  # every class injected at least 3 times
    assert result.false_findings == ()
    assert result.missed == ()
    assert result.extra == ()  # each faulty case reports its own class only


def test_every_injector_on_every_case_it_applies_to(corpus: tuple[list, list]) -> None:
    clean, _ = corpus
    result = evaluate_corpus(clean, all_faults(clean))
    assert result.faulty_cases >= 90
    assert result.missed == () and result.extra == ()


_LAYOUTS = {g.model: [lay for lay in enumerate_layouts(g, media=True) if lay] for g in mig_gpus()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_legal_layout_rendered_as_nvidia_smi_output_has_no_finding(data: st.DataObject) -> None:
    g = data.draw(st.sampled_from(mig_gpus()))
    n = data.draw(st.integers(1, 3))
    gpus = [
        RenderGpu(
            i, g, f"NVIDIA {g.product}", fake_uuid("GPU", g.model, i), data.draw(st.sampled_from(_LAYOUTS[g.model]))
        )
        for i in range(n)
    ]
    wide = data.draw(st.booleans())
    assert run(render_gpu_instances(gpu_instance_rows(gpus), wide=wide)) == []
    full = (
        render_list(gpus),
        render_gpu_instances(gpu_instance_rows(gpus), wide=wide),
        render_compute_instances(compute_instance_rows(gpus), placement=data.draw(st.booleans())),
        render_query((FIX / "a100-80gb_q_4gpu.txt").read_text(), gpus),
    )
    plan = {gp.index: gp.layout for gp in gpus}
    assert run(*full, plan=plan) == []


def test_gi_checks_give_the_exact_findings() -> None:
    text = lgi(
        (0, "3g.20gb", 9, 1, 2, 4),
        (0, "2g.10gb", 14, 3, 6, 1),
        (1, "4g.20gb", 9, 1, 0, 4),
        (1, "3g.20gb", 9, 2, 0, 4),
        (2, "1g.5gb+me", 20, 7, 0, 1),
        (2, "1g.5gb+me", 20, 8, 1, 1),
        (3, "1g.5gb", 19, 7, 0, 1),
        (3, "1g.5gb", 19, 7, 1, 1),
    )
    report = audit([parse_output(text, "lgi.txt")])
    assert [(f.check.value, f.gpu, f.line) for f in report.findings] == [
        ("gi-illegal-placement", 0, 6),
        ("gi-illegal-placement", 0, 8),
        ("gi-illegal-placement", 1, 10),
        ("gi-overlap", 1, 12),
        ("gi-illegal-placement", 2, 16),
        ("duplicate-id", 3, 20),
    ]
    first = report.findings[0]
    assert "start 2 is not a legal start of 3g.20gb {0,4}" in first.message
    assert first.fix == (
        "nvidia-smi mig -i 0 -dci -gi 1 && nvidia-smi mig -i 0 -dgi -gi 1 && nvidia-smi mig -i 0 -cgi 9:4 -C"
    )
    assert report.findings[3].message.endswith("overlaps GI 1 4g.20gb at 0:4")
    assert report.has_errors and all(f.severity is Severity.ERROR for f in report.findings)


def test_unknown_profile_and_unsupported_model() -> None:
    assert run(lgi((0, "1g.12gb", 19, 7, 0, 1))) == [("unsupported-model", 0, 6)]  # H100 NVL names: no table
    listing = "GPU 0: NVIDIA H100 NVL (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
    assert run(listing, lgi((0, "1g.12gb", 19, 7, 0, 1))) == [("unsupported-model", 0, 6)]
    a100 = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
    assert run(a100, lgi((0, "1g.10gb", 19, 7, 0, 1))) == [("gi-illegal-placement", 0, 6)]  # 1g.10gb: wrong ID
    assert run(a100, lgi((0, "1g.20gb", 15, 3, 0, 2))) == [("gi-illegal-placement", 0, 6)]  # not an A100-40 name


def test_products_map_to_mig_tables() -> None:
    for product, model in [
        ("A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA H100 PCIe", "H100-80GB"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
    ]:
        got = model_of_product(product)
        assert got is not None and got.model == model, product
    assert model_of_product("NVIDIA H100 NVL") is None and model_of_product("Tesla T4") is None


def test_compute_instance_checks() -> None:
    gi = lgi((0, "3g.20gb", 9, 1, 0, 4), (0, "2g.10gb", 14, 3, 4, 2), (0, "1g.5gb", 19, 13, 6, 1))
    lci = render_compute_instances(
        [
            (0, 1, "1c.3g.20gb", 0, 0, 0, 1),
            (0, 1, "2c.3g.20gb", 1, 1, 1, 2),
            (0, 1, "1c.3g.20gb", 0, 2, 2, 1),  # 4 slices in a 3-slice GI
            (0, 3, "2g.10gb", 1, 0, 0, 3),  # placement 0:3 past a 2-slice GI
            (0, 9, "1g.5gb", 0, 0, 0, 1),  # GI 9 does not exist
        ]
    )
    report = audit([parse_output(gi, "lgi.txt"), parse_output(lci, "lci.txt")])
    assert [(f.check.value, f.source, f.line) for f in report.findings] == [
        ("ci-exceeds-gi", "lci.txt", 11),
        ("ci-exceeds-gi", "lci.txt", 13),
        ("ci-orphan", "lci.txt", 15),
        ("gi-without-ci", "lgi.txt", 10),  # the 1g GI (13) has no CI
    ]
    assert "add up to 4 slices, more than its 3" in report.findings[0].message
    assert "runs past the GI's 2 slices" in report.findings[1].message
    assert report.findings[3].fix == "nvidia-smi mig -i 0 -gi 13 -cci 0"
    assert report.findings[3].severity is Severity.WARNING


def test_mig_mode_checks_against_a_real_query_output() -> None:
    q = (FIX / "h100-80gb_q_della.txt").read_text()
    pending = q.replace(
        "Pending                           : Disabled", "Pending                           : Enabled", 1
    )
    assert run(pending) == [("mig-pending-reset", 0, 17)]
    enabled = pending.replace(
        "Current                           : Disabled", "Current                           : Enabled", 1
    )
    listing = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-f7b02328-d6fe-5b1f-9683-15041689bb03)\n"
    assert run(listing, enabled) == [("mig-no-instances", 0, 17)]
    assert run(enabled, (FIX / "mig-lgi_none.txt").read_text()) == [("mig-no-instances", 0, 17)]
    assert run(enabled, (FIX / "mig-lgi_disabled.txt").read_text()) == [("view-mismatch", 0, 1)]
    # a GPU with instances whose -q says MIG is off, and a -q of another node
    with_mig = listing + "  MIG 7g.80gb     Device  0: (UUID: MIG-1c5876e6-d3b9-524a-9eb4-664fcfbd4de2)\n"
    assert run(with_mig, q) == [("view-mismatch", 0, 2)]
    other = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-d6fe-5b1f-9683-15041689bb03)\n"
    assert run(other, q) == [("view-mismatch", None, 8), ("view-mismatch", 0, 1)]  # each side misses the other


def test_uuid_and_listing_checks() -> None:
    a = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-31515c3d-1414-7c2c-004a-f86a898946ac)\n"
    b = "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-31515c3d-1414-7c2c-004a-f86a898946ac)\n"
    assert run(a + b) == [("duplicate-uuid", 1, 2)]
    r450 = a + "  MIG 3g.40gb Device 0: (UUID: MIG-GPU-72d87681-01db-370e-567d-41afcf20fad0/1/0)\n"
    assert run(r450) == [("duplicate-uuid", 0, 2)]  # a R450 MIG UUID naming another GPU as its parent
    three = a + "".join(
        f"  MIG 3g.40gb     Device  {i}: (UUID: MIG-{i}1c5876e-d3b9-524a-9eb4-664fcfbd4de2)\n" for i in range(3)
    )
    assert run(three) == [("gi-illegal-placement", 0, 4)]  # no legal layout holds 3 x 3g.40gb
    lci = render_compute_instances([(0, 1, "3g.40gb", 2, 0, 0, 3)])
    two = a + "".join(
        f"  MIG 3g.40gb     Device  {i}: (UUID: MIG-{i}1c5876e-d3b9-524a-9eb4-664fcfbd4de2)\n" for i in range(2)
    )
    assert run(two, lci) == [("view-mismatch", 0, 2)]  # -L shows 2 devices, -lci 1 compute instance


def test_drift_against_the_planners_json_plan(tmp_path: Path) -> None:
    plan_yaml = tmp_path / "demand.yaml"
    plan_yaml.write_text(
        "gpus:\n  - {model: A100-80GB, count: 2, name: node-7/gpu}\n"
        "demand:\n  - {name: chat, gpu_milli: 250, count: 6}\n  - {name: train, gpu_milli: 470, count: 2}\n"
        "options: {time_limit_s: 2}\n"
    )
    out = tmp_path / "plan.json"
    assert main(["mig", "plan", "--demand", str(plan_yaml), "-o", "json", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    by_index = planned_by_index(parse_plan_document(doc, "plan.json"), node="node-7")
    assert set(by_index) == {0, 1}
    g = mig_gpu("A100-80GB")
    gpus = [RenderGpu(i, g, "NVIDIA A100-SXM4-80GB", fake_uuid("GPU", i), lay) for i, lay in by_index.items()]
    rows = gpu_instance_rows(gpus)
    assert run(lgi(*rows), plan=by_index) == []
    assert [c for c, *_ in run(lgi(*rows[1:]), plan=by_index)] == ["drift"]
    # the CLI path: --plan with --node, exit 1 on drift, the fix names the missing instance
    cap = tmp_path / "lgi.txt"
    cap.write_text(lgi(*rows[1:]))
    report = tmp_path / "audit.json"
    assert (
        main(
            [
                "mig",
                "audit",
                "--from",
                str(cap),
                "--plan",
                str(out),
                "--node",
                "node-7",
                "-o",
                "json",
                "--out",
                str(report),
            ]
        )
        == 1
    )
    finding = json.loads(report.read_text())["findings"][0]
    assert finding["check"] == "drift" and finding["gpu"] == rows[0][0]
    assert f"-cgi {rows[0][2]}:{rows[0][4]} -C" in finding["fix"]


def test_plan_index_rules() -> None:
    gpus = [("node-a/gpu-0", (Instance("7g.80gb", 0),)), ("node-b/gpu-0", ()), ("a100-80gb-3", ())]
    assert planned_by_index(gpus, node="node-a") == {0: (Instance("7g.80gb", 0),)}
    assert planned_by_index(gpus[2:]) == {3: ()}
    assert planned_by_index(gpus, gpu_map={"node-b/gpu-0": 5}) == {5: ()}
    with pytest.raises(InputError, match="both map to GPU 0"):
        planned_by_index(gpus[:2])
    with pytest.raises(InputError, match="no plan GPU maps"):
        planned_by_index(gpus, node="node-z")
    with pytest.raises(InputError, match="'gpus' list"):
        parse_plan_document({"layouts": []}, "p.json")


def test_two_outputs_of_one_kind_are_refused() -> None:
    text = (FIX / "a100-40gb_L_guide.txt").read_text()
    with pytest.raises(InputError, match="audit one node at a time"):
        audit([parse_output(text, "a"), parse_output(text, "b")])


def test_cli_exit_codes_and_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [str(FIX / "a100-40gb_L_guide.txt"), str(FIX / "a100-40gb_mig-lgi_guide-3g3g.txt")]
    assert main(["mig", "audit", "--from", good[0], "--from", good[1]]) == 0
    assert "no findings: GPU 0 A100-40GB" in capsys.readouterr().out
    bad = tmp_path / "lgi.txt"
    bad.write_text((FIX / "a100-40gb_mig-lgi_guide-3g3g.txt").read_text().replace("4:4", "0:4"))
    assert main(["mig", "audit", "--from", str(bad), "-o", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [set(f) for f in doc["findings"]] == [{"check", "severity", "gpu", "line", "message", "fix", "source"}]
    assert doc["findings"][0]["check"] == "gi-overlap" and doc["summary"]["error"] == 1
    warn = str(FIX / "mig-lgi_none.txt")
    assert main(["mig", "audit", "--from", warn]) == 0  # a warning is not an error
    trunc = tmp_path / "trunc.txt"
    trunc.write_text((FIX / "a100-40gb_mig-lgi_guide-3g3g.txt").read_text()[:-60])
    assert main(["mig", "audit", "--from", str(trunc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {trunc}:")
    assert main(["mig", "audit"]) == 2


def test_live_capture_runs_the_four_listings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = tmp_path / "L.txt"
    listing.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-f7b02328-d6fe-5b1f-9683-15041689bb03)\n")
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  "-L") cat "{listing}";;\n'
        '  "mig -lgi"|"mig -lci") echo "No MIG-enabled devices found."; exit 6;;\n'
        f'  "-q") cat "{FIX / "h100-80gb_q_della.txt"}";;\n'
        "esac\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{fake.parent}:{old}"
    try:
        assert main(["mig", "audit", "--live", "-o", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["findings"] == []
        assert [f["kind"] for f in doc["files"]] == ["-L", "mig -lgi", "mig -lci", "-q"]
        listing.write_text((FIX / "h100-80gb_L_guide.txt").read_text())  # MIG devices, but "No MIG-enabled"
        assert main(["mig", "audit", "--live", "-o", "json"]) == 1
        checks = [f["check"] for f in json.loads(capsys.readouterr().out)["findings"]]
        assert checks == ["view-mismatch"] * 4  # -q of another GPU, GPU 0 not in -q, devices vs -lgi and -lci
    finally:
        os.environ["PATH"] = old
    os.environ["PATH"] = str(tmp_path / "empty")
    try:
        assert main(["mig", "audit", "--live"]) == 2
    finally:
        os.environ["PATH"] = old
    assert "nvidia-smi not found" in capsys.readouterr().err
