"""schemathesis over the OpenAPI document, against a live server on SQLite and on PostgreSQL.

Runs the ``schemathesis`` CLI (all phases: examples, coverage, fuzzing, stateful) over real HTTP
with an admin token, so every branch is reachable, while the scheduling loop runs. The run fails
on any 5xx, an undocumented status code or content type, a response that does not match its
schema, or an invalid request that is accepted. (The pytest plug-in's lazy fixture loader of
schemathesis 4.32 does not work with pytest 9, hence the CLI.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.control.conftest import LiveServer
from tests.control.helpers import ADMIN_TOKEN

CHECKS = "all"
MAX_EXAMPLES = int(os.environ.get("SEEDANCE_FUZZ_EXAMPLES", "12"))


# Revoking tokens runs last, alone: the fuzzer would otherwise revoke the admin token it uses (the
# service refuses to revoke the *last* admin token, but fuzzing also creates admin tokens).
REVOKE = "revoke_token_api_v1_tokens__token_id__delete"


# A schema-violating body that is also over the body limit is refused with 413 before validation: that is a
# rejection too (schemathesis' default list of rejecting statuses lacks 413).
#
# positive_data_acceptance (schema-valid data must be accepted; schemathesis 4.32 counts any other answer
# than 2xx, 3xx, 401, 403, 404, 409, 429 or 5xx as a mismatch, *whether or not the 422 is documented*) is
# checked strictly on every operation: every rule a validator enforces is in the published schema, but for
# the few that JSON Schema cannot state (a YAML document's content, an order between two values, times
# relative to the server's clock, a signature, arithmetic across fields, stored state). Those are listed in
# `fuzz_hooks.UNSTATEABLE`, whose filter drops a failure only when every error of its 422 is one of them,
# matched by operation, error location and message; any other 422 still fails the run.
HOOKS = Path(__file__).with_name("fuzz_hooks.py")
CONFIG = """[checks]
# a latency check, not a correctness one: the benchmarks measure latency; this host is shared
max_response_time = 60

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "406", "413", "422", "428", "5xx"]
"""


def schemathesis_run(server: LiveServer, tmp: Path, *selection: str) -> str:
    exe = Path(sys.executable).with_name("schemathesis")
    (tmp / "schemathesis.toml").write_text(CONFIG)
    proc = subprocess.run(
        [str(exe), "run", f"{server.url}/openapi.json", "--checks", CHECKS, "-H",
         f"Authorization: Bearer {ADMIN_TOKEN}", "--max-examples", str(MAX_EXAMPLES), "--seed", "20261130",
         "--workers", "1", "--request-timeout", "30", "--max-failures", "20", *selection],
        capture_output=True, text=True, timeout=600, cwd=tmp,
        env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": str(HOOKS),
             "SEEDANCE_FUZZ_FILTERED": str(tmp / "filtered.jsonl")},
    )
    out = proc.stdout + proc.stderr
    (tmp / "schemathesis.out").write_text(out)
    if os.environ.get("SEEDANCE_FUZZ_OUT"):  # every run's report, appended
        with Path(os.environ["SEEDANCE_FUZZ_OUT"]).open("a", encoding="utf-8") as f:
            f.write(out)
    tail = "\n".join(out.splitlines()[-70:])
    assert proc.returncode == 0, f"schemathesis found problems:\n{tail}"
    assert "Authentication failed" not in out, tail  # every operation was really exercised
    m = re.search(r"(\d+) generated", out)
    assert m is not None and int(m.group(1)) > 0, tail
    return out


def fuzz(server: LiveServer, tmp: Path) -> dict[str, int]:
    c = server.client()
    c.post("/api/v1/clusters", json={"name": "default"})
    c.post("/api/v1/clusters/default/nodes", json={"name": "node-0", "cpu_milli": 64000, "memory_mib": 512000,
                                                   "gpu_count": 8, "gpu_model": "A100-80GB"})
    c.post("/api/v1/jobs", json={"gpus": 1, "name": "seed-job"})
    assert c.get("/openapi.json").status_code == 200  # generated once now: schemathesis' loader times out at 10 s
    main = schemathesis_run(server, tmp, "--exclude-operation-id", REVOKE)
    last = schemathesis_run(server, tmp, "--include-operation-id", REVOKE)
    counts = {k: int(re.search(r"(\d+) generated", out).group(1))  # type: ignore[union-attr]
              for k, out in (("main", main), ("revoke", last))}
    filtered = tmp / "filtered.jsonl"  # failures dropped as rules JSON Schema cannot state (fuzz_hooks)
    dropped = Counter(json.loads(x)["operation"] for x in filtered.read_text().splitlines()) if filtered.exists() \
        else Counter()
    counts["filtered_unstateable"] = sum(dropped.values())
    print(json.dumps({"filtered_unstateable_by_operation": dict(sorted(dropped.items()))}))
    assert server.client().get("/healthz").status_code == 200
    return counts


def test_fuzz_sqlite(live_server_factory: Callable[..., LiveServer], sqlite_url: str, tmp_path: Path) -> None:
    server = live_server_factory(sqlite_url, scheduler_enabled=True, scheduler_interval_s=0.05,
                                 failed_auth_per_address=0)  # ignored_auth sends bad tokens on purpose
    print(json.dumps(fuzz(server, tmp_path)))


def test_fuzz_postgresql(live_server_factory: Callable[..., LiveServer], pg_schema_url: str, tmp_path: Path) -> None:
    server = live_server_factory(pg_schema_url, scheduler_enabled=True, scheduler_interval_s=0.05,
                                 failed_auth_per_address=0)
    print(json.dumps(fuzz(server, tmp_path)))
