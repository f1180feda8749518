"""Keep an :class:`Extender` in sync with the API: list, then watch, nodes and pods.

Each resource runs the usual informer loop: list (which gives a resourceVersion), apply the list,
watch from that version, apply each event; on any error or an expired version ("410 Gone"),
list again after a short pause. Event application is pure and tested on real event documents;
the loop runs against anything with ``list_nodes`` / ``watch_nodes`` / ``list_pods`` /
``watch_pods`` (:class:`~seedance.k8s.kubeapi.KubernetesApi` in production, fakes in tests).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from seedance.core.errors import InputError
from seedance.k8s.extender import Extender

log = logging.getLogger(__name__)

Event = Mapping[str, Any]


class WatchSource(Protocol):
    """List and watch of nodes and pods, as plain API documents."""

    def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        """All nodes and the list's resourceVersion."""

    def watch_nodes(self, resource_version: str, timeout_s: int = 300) -> Iterator[dict[str, Any]]:
        """Node events after ``resource_version``."""

    def list_pods(self) -> tuple[list[dict[str, Any]], str]:
        """All unfinished pods and the list's resourceVersion."""

    def watch_pods(self, resource_version: str, timeout_s: int = 300) -> Iterator[dict[str, Any]]:
        """Pod events after ``resource_version``."""


def apply_node_event(extender: Extender, event: Event) -> None:
    """ADDED / MODIFIED upsert the node; DELETED forgets it; BOOKMARK and ERROR are ignored."""
    kind = event.get("type")
    obj = event.get("object") or {}
    if kind in ("ADDED", "MODIFIED"):
        extender.upsert_node(obj)
    elif kind == "DELETED":
        extender.remove_node(str((obj.get("metadata") or {}).get("name") or ""))


def apply_pod_event(extender: Extender, event: Event) -> None:
    """ADDED / MODIFIED account a bound pod (or forget a finished one); DELETED forgets it."""
    kind = event.get("type")
    obj = event.get("object") or {}
    if kind in ("ADDED", "MODIFIED"):
        try:
            extender.observe_pod(obj)
        except InputError as exc:  # a pod Seedance cannot parse is not Seedance's to account
            log.warning("ignoring pod: %s", exc)
    elif kind == "DELETED":
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            extender.forget_pod(str(uid))


def _expired(event: Event) -> bool:
    obj = event.get("object") or {}
    return event.get("type") == "ERROR" and obj.get("code") == 410


class Informer:
    """Runs the node and pod loops in two daemon threads until ``stop`` is set.

    Args:
        extender: The extender to keep in sync.
        source: List/watch source.
        retry_s: Pause before listing again after an error.
    """

    def __init__(self, extender: Extender, source: WatchSource, *, retry_s: float = 2.0) -> None:
        self.extender = extender
        self.source = source
        self.retry_s = retry_s
        self.stop = threading.Event()
        self._listed = {"nodes": threading.Event(), "pods": threading.Event()}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start both loops; ``extender.synced`` turns true once both initial lists are applied."""
        ext = self.extender
        self._threads = [
            threading.Thread(target=self._loop, name="seedance-informer-nodes", daemon=True,
                             args=("nodes", self.source.list_nodes, self.source.watch_nodes,
                                   lambda items, _t: ext.set_nodes(items), lambda e: apply_node_event(ext, e))),
            threading.Thread(target=self._loop, name="seedance-informer-pods", daemon=True,
                             args=("pods", self.source.list_pods, self.source.watch_pods,
                                   self._set_pods, lambda e: apply_pod_event(ext, e))),
        ]
        for t in self._threads:
            t.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until both initial lists are applied."""
        return all(e.wait(timeout) for e in self._listed.values())

    def _set_pods(self, pods: Iterable[Mapping[str, Any]], listed_at: float) -> None:
        uids = []
        for pod in pods:
            apply_pod_event(self.extender, {"type": "ADDED", "object": pod})
            uids.append(str((pod.get("metadata") or {}).get("uid") or ""))
        self.extender.retain_pods(uids, listed_at)

    def _loop(
        self,
        what: str,
        lister: Callable[[], tuple[list[dict[str, Any]], str]],
        watcher: Callable[[str], Iterator[dict[str, Any]]],
        apply_list: Callable[[list[dict[str, Any]], float], None],
        apply_event: Callable[[Event], None],
    ) -> None:
        while not self.stop.is_set():
            try:
                listed_at = time.monotonic()
                items, rv = lister()
                apply_list(items, listed_at)
                self._listed[what].set()
                self.extender.synced = all(e.is_set() for e in self._listed.values())
                for event in watcher(rv):
                    if self.stop.is_set():
                        return
                    if _expired(event):
                        break
                    apply_event(event)
            except Exception:
                log.exception("%s informer failed; listing again", what)
                self.stop.wait(self.retry_s)
