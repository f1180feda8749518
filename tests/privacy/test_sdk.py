"""The Python SDK against a live server over real HTTP: consent gate, batches, the challenge flow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from seedance.privacy.models import TelemetryEvent
from seedance.privacy.sdk import Blacklisted, ChallengeRequired, TelemetryClient, TelemetryError
from tests.control.helpers import ADMIN_TOKEN, serve_in_thread
from tests.privacy.authenticator import AttestationCA, SoftwareAuthenticator
from tests.privacy.conftest import Env
from tests.privacy.helpers import WEBGL, occurrences, table_count


@pytest.fixture
def ca() -> AttestationCA:
    return AttestationCA.make()


@pytest.fixture
def server(make_env: Callable[..., Env], sqlite_url: str, ca: AttestationCA,
           tmp_path: Path) -> Iterator[tuple[str, Env]]:
    from seedance.control.app import create_app

    root = tmp_path / "root.pem"
    root.write_bytes(ca.root_pem)
    env = make_env(sqlite_url, cluster_threshold=3, attestation_roots=(root,))
    app = create_app(service=env.control)
    app.state.privacy = env.privacy
    url, stop = serve_in_thread(app)
    try:
        yield url, env
    finally:
        stop()


def test_refused_consent_sends_nothing(server: tuple[str, Env]) -> None:
    url, env = server
    c = TelemetryClient(url, ADMIN_TOKEN, consent="refused")
    c.track("view")
    assert c.queue == [] and c.flush() is None
    c.close()
    assert table_count(env, TelemetryEvent) == 0
    with pytest.raises(ValueError, match="consent"):
        TelemetryClient(url, ADMIN_TOKEN, consent="maybe")  # type: ignore[arg-type]


def test_batches_challenge_and_resume(server: tuple[str, Env], ca: AttestationCA) -> None:
    url, env = server
    clients = [TelemetryClient(url, ADMIN_TOKEN, consent="granted", fingerprint=WEBGL) for _ in range(4)]
    clients[0].identify("ada@example.org", {"email": "ada@example.org"})
    for c in clients[:3]:
        c.track("view")
        c.track("click")
        assert c.flush()["accepted"] == 2
    clients[3].track("view")
    with pytest.raises(ChallengeRequired, match="paused"):
        clients[3].flush()  # the 4th device on one signature (threshold 3)
    assert len(clients[3].queue) == 1  # kept for later
    ch = clients[3].challenge()
    cred = SoftwareAuthenticator("packed-x5c", ca=ca).create(ch["public_key"], "http://localhost:8080")
    assert clients[3].answer(ch["challenge_id"], cred)["result"] == "passed"
    assert clients[3].flush()["accepted"] == 1
    # a failed challenge blacklists
    clients[1].track("view")
    with pytest.raises(ChallengeRequired):
        clients[1].flush()
    ch = clients[1].challenge()
    with pytest.raises(TelemetryError, match="attestation failed"):
        clients[1].answer(ch["challenge_id"], SoftwareAuthenticator("none").create(ch["public_key"],
                                                                                   "http://localhost:8080"))
    with pytest.raises(Blacklisted):
        clients[1].flush()
    with env.control.db.read() as s:
        assert len(list(s.scalars(select(TelemetryEvent)))) == 7
    assert occurrences(env, *[c.device_id for c in clients]) == []
    for c in clients:
        c.close()
