"""Periodic work: expire unanswered challenges, prune the expiring sets, destroy retired HMAC keys,
and run pending erasures (``PrivacyWorker``, a thread of the server process)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from seedance.privacy.challenge import sweep_challenges
from seedance.privacy.erasure import run_erasures
from seedance.privacy.keys import destroy_expired_keys
from seedance.privacy.schemas import SweepResult

if TYPE_CHECKING:
    from seedance.privacy.service import PrivacyService

log = logging.getLogger(__name__)


def sweep(svc: PrivacyService) -> SweepResult:
    """One maintenance pass (safe to run from several processes)."""
    now = svc.now()
    ts = now.timestamp()
    with svc.redis_errors():
        timed_out = sweep_challenges(svc, now)
        bl = svc.blacklist.prune(ts)
        ver = svc.verified.prune(ts)
    with svc.db.write() as s:
        destroyed = destroy_expired_keys(s, now)  # needs no master key: an idle server never creates one
    svc.forget_keys(destroyed)
    return SweepResult(timed_out=timed_out, blacklist_pruned=bl, verified_pruned=ver, keys_destroyed=destroyed)


class PrivacyWorker:
    """Runs ``sweep`` and ``run_erasures`` every ``worker_interval_s`` in a daemon thread."""

    def __init__(self, svc: PrivacyService) -> None:
        self.svc = svc
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="seedance-privacy", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop and join the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.svc.settings.worker_interval_s):
            try:
                sweep(self.svc)
                run_erasures(self.svc)
            except Exception:  # keep the worker alive; the next pass retries
                log.exception("privacy maintenance pass failed")
