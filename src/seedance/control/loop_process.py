"""``run_scheduler``: the scheduling loop alone in a process (``seedancectl scheduler run``), no HTTP.

The API process then only serves requests (``seedancectl serve --no-scheduler``): the loop's
cycles (reads, decisions, commits, dispatch) no longer hold that process's GIL while requests
wait. The process builds the same ``ControlService`` as the API (store, dispatcher, cost scorer,
metrics, trust stages) and runs its loop:

1. take the store's scheduler lease (``services/lease.py``), or wait as a standby and retry
   every ``retry_s`` until the holder goes away;
2. run the loop thread; on PostgreSQL the lease's connection also ``LISTEN``s on the store's
   channel (``services/wakeup.py``), so a submission to an API process starts a cycle at once;
   on SQLite the loop cycles every ``scheduler_interval_s``;
3. on ``stop`` (the command sets it on SIGTERM or SIGINT): finish the cycle in progress, give the
   lease up, close the store. A lost lease connection stops the loop and goes back to step 1.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from seedance.control.service import ControlService
from seedance.control.services.lease import Lease, try_lease
from seedance.control.services.wakeup import listen
from seedance.control.settings import ControlSettings

log = logging.getLogger("seedance.control.loop_process")


def run_scheduler(
    settings: ControlSettings, stop: threading.Event, *, report: Callable[[str], None] = log.info,
    retry_s: float = 1.0,
) -> None:
    """Run the scheduling loop of ``settings``' store until ``stop`` is set (see the module doc).

    ``report`` gets one line at each change: waiting for the lease, scheduling, lease lost, stopped.
    """
    # no submissions arrive here: no group committer threads; the loop is started under the lease only
    svc = ControlService(settings.model_copy(update={"scheduler_enabled": True, "group_commit": False}))
    try:
        if svc.bootstrap_value:  # this process made the store's first admin token: show it, as serve does
            report(f"admin token (shown once; only its hash is stored): {svc.bootstrap_value}")
        svc.start(loop=False)  # the metrics listener, when ``metrics_listen`` is set
        waiting = False
        while not stop.is_set():
            try:
                lease = try_lease(svc.db)
            except Exception as exc:  # the store is unreachable: try again later
                report(f"scheduler lease: {exc}")
                stop.wait(retry_s)
                continue
            if lease is None:
                if not waiting:
                    report("standby: another scheduler process holds this store's lease")
                    waiting = True
                stop.wait(retry_s)
                continue
            waiting = False
            report(f"scheduling {svc.db.describe()}")
            _hold(svc, lease, stop, report)
        report("scheduler stopped")
    finally:
        svc.close()


def _hold(svc: ControlService, lease: Lease, stop: threading.Event, report: Callable[[str], None]) -> None:
    """Run the loop while the lease is held and ``stop`` is not set."""
    svc.loop.start()
    try:
        if lease.conn is not None:
            listen(lease.conn, svc.loop.wake, stop)
        else:
            stop.wait()
    except Exception as exc:  # the lease's connection broke: the server released the lock
        report(f"scheduler lease lost: {exc}")
    finally:
        svc.loop.stop()
        lease.release()
