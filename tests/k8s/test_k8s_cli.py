"""``seedancectl k8s``: pod-fragment, validate, and the extender as a real process."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.k8s.render import pod_spec_fragment
from tests.k8s.k8s_docs import DEPLOY, REPO, make_pod


def test_pod_fragment_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "pod-fragment", "gold", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == pod_spec_fragment("gold")


def test_pod_fragment_unknown_tier_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "pod-fragment", "platinum"]) == 2
    assert capsys.readouterr().err == "error: unknown tier 'platinum'; valid names: gold, silver, bronze\n"


def test_validate_reports_each_bad_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: oops}\n---\n"
                   "apiVersion: seedance.ai/v1alpha1\nkind: CostPolicy\nmetadata: {name: c}\n"
                   "spec: {maxDeferralHours: -1}\n")
    assert main(["k8s", "validate", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"{bad}: document 1 (Service): spec.ports: 'oops' is not of type 'array', 'null'",
        f"{bad}: document 2 (CostPolicy): spec.maxDeferralHours: -1 is less than the minimum of 0",
    ]
    assert captured.out == "2 document(s) from 1 file(s) and 0 rendered chart(s), 2 error(s)\n"


def test_validate_the_whole_deploy_folder_renders_the_chart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "validate", str(DEPLOY), "--kube-version", "1.30.0"]) == 0
    out = capsys.readouterr().out
    assert "and 1 rendered chart(s), 0 error(s)" in out


def test_validate_unreadable_yaml_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("a: [1, 2\n")
    assert main(["k8s", "validate", str(f)]) == 2
    assert capsys.readouterr().err == f"error: {f}:2: not valid YAML: expected ',' or ']', but got '<stream end>'\n"


def test_extender_node_list_errors_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "nodes.yaml"
    broken.write_text("apiVersion: v1\nkind: NodeList\nitems:\n  - {metadata: {name: n1}\n")
    assert main(["k8s", "extender", "--nodes", str(broken)]) == 2
    assert capsys.readouterr().err == (
        f"error: {broken}:5: not valid YAML: expected ',' or '}}', but got '<stream end>'\n")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("apiVersion: v1\nkind: NodeList\nitems: 3\n")
    assert main(["k8s", "extender", "--nodes", str(wrong)]) == 2
    assert capsys.readouterr().err == (
        f"error: {wrong}:3: field items: a node list is a NodeList (items: [...]) or a list of Node objects\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_extender_command_serves_a_node_list() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "seedance.cli.main", "k8s", "extender", "--port", str(port), "--policy", "packing",
         "--nodes", str(DEPLOY / "examples" / "nodes.yaml")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/readyz")
                ready = conn.getresponse()
                ready.read()
                if ready.status == 200:
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.stdout.read() if proc.stdout else "extender did not start") from None
                time.sleep(0.1)
        body = json.dumps({"Pod": make_pod("p", gpus=2, tier="silver"), "Nodes": None,
                           "NodeNames": ["gpu-gold-0", "gpu-silver-0", "gpu-bronze-0"]})
        conn.request("POST", "/filter", body=body, headers={"Content-Type": "application/json"})
        res = json.loads(conn.getresponse().read())
        assert res["NodeNames"] == ["gpu-silver-0"]
        conn.request("POST", "/bind", body=json.dumps({"PodName": "p", "PodNamespace": "default",
                                                       "PodUID": "uid-p", "Node": "gpu-silver-0"}))
        assert json.loads(conn.getresponse().read()) == {
            "Error": "Seedance extender has no Kubernetes binder configured"}
        conn.close()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()


def test_extender_refuses_an_unknown_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s", "extender", "--policy", "nope", "--nodes", str(DEPLOY / "examples" / "nodes.yaml")]) == 2
    assert "unknown placement policy 'nope'" in capsys.readouterr().err
