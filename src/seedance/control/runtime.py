"""``tune_server_process``: interpreter settings of a serving process (GIL hand-over, garbage collector).

Measured on the submission path (2 cores, PostgreSQL, 200 submissions/s): the answer of a request
waits on two things the interpreter does, not the store:

* **GIL hand-over.** The event loop releases the GIL at every system call (``epoll_wait``, ``send``,
  the committer threads' wake-up pipe) and must take it back from whichever thread holds it: the
  scheduling loop or a committer thread running Python code. CPython lets the holder run for the
  switch interval (5 ms by default) before it has to give the GIL up, so each of a request's
  hand-overs could cost up to 5 ms, and a request has several. ``switch_interval_s`` (0.5 ms by
  default here) bounds that wait; the threads doing long work lose a little throughput to the
  extra switches.
* **Full garbage collections.** A generation-2 collection walks every tracked object: with the
  API, ORM, schema and scheduler modules loaded that is several hundred thousand, 150-200 ms with
  the GIL held, during which no request is answered. ``gc.freeze()`` after start-up moves those
  objects (imported modules, the app, its routes and models) to the permanent generation that
  collections skip, and a larger generation-0 threshold makes young collections rarer (their cost
  is per young object, so the total stays the same). Objects made later are collected as before.
"""

from __future__ import annotations

import gc
import sys

DEFAULT_SWITCH_INTERVAL_S = 0.0005
DEFAULT_GC_GEN0_THRESHOLD = 20_000


def tune_server_process(*, switch_interval_s: float = DEFAULT_SWITCH_INTERVAL_S,
                        gc_gen0_threshold: int = DEFAULT_GC_GEN0_THRESHOLD, freeze: bool = True) -> None:
    """Set the GIL switch interval and the collector for a long-running server (see the module doc).

    Call it once the application is built (so its objects are frozen); process-wide.
    """
    sys.setswitchinterval(switch_interval_s)
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gc_gen0_threshold, gen1, gen2)
    if freeze:
        gc.collect()
        gc.freeze()
