"""The "First five minutes" block of ``docs/control-plane.md``, run verbatim with bash on a fresh server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.control.helpers import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "control-plane.md"


def first_five_minutes_block() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## First five minutes", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m is not None, "docs/control-plane.md lost its First five minutes block"
    return m.group(1)


def test_first_five_minutes_run_verbatim(tmp_path: Path) -> None:
    script = first_five_minutes_block()
    bindir = str(Path(sys.executable).parent)  # seedancectl of this environment
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SEEDANCE_")},
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "SEEDANCE_PORT": str(free_port()),
           "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    logs = "".join(p.read_text() for p in tmp_path.glob("*/serve.log"))
    assert proc.returncode == 0, out[-3000:] + "\nserver log:\n" + logs[-3000:]
    assert '"status":"ok"' in out.replace(" ", "")
    assert "ml-team" in out
    assert re.search(r"^sdt_[A-Za-z0-9_-]{43}$", out, re.M) is None  # alice's value stays in $ALICE
    assert re.search(r"first-job.*running.*node-0", out), out[-3000:]
    assert "best-fit" in out
    assert '"status": "cancelled"' in out
