"""The engine's front end: arrivals, closed-loop follow-ups, routing, admission, KV transfers.

NOTE(seedance): part of :class:`~seedance.inference.sim.ServingSimulator` (see :mod:`engine_core`).
Arrivals stream from the sorted trace; requests arriving at the same instant form one event, so a
replica woken by the first sees them all. The router (:mod:`routing`) sees a
:class:`~seedance.inference.routing.RouteQuery`, never simulator ground truth; the predictor
learns from a request only once its completion time has passed.
"""

from __future__ import annotations

import heapq
import math

from seedance.inference.engine_core import EV_SEND, RUN_IDLE
from seedance.inference.engine_steps import Steps
from seedance.inference.routing import RouteQuery
from seedance.inference.run import DROPPED, REJECTED, WAITING


class FrontEnd(Steps):
    """Arrivals, follow-up turns, routing, admission control, the decode pool's intake."""

    def _on_arrival(self, now: float, first: int) -> None:
        arr = self._trace_arrival
        parent = self._parent
        i = first
        while i < len(arr) and arr[i] == now:
            if parent is None or parent[i] < 0:
                self._arrive(now, i)
            else:
                self._follow_up(now, i, int(parent[i]))
            i += 1

    def _follow_up(self, now: float, i: int, p: int) -> None:
        """Closed loop: ``i``'s trace slot came; it is sent once turn ``p`` has answered and the
        user has thought (the engine's knowledge of ``p``'s completion, never a batcher's)."""
        assert self._think is not None
        f = self.finish[p]
        if not math.isnan(f):  # answered (request-level batchers know the time of their batch's end)
            t = float(f) + float(self._think[i])
            if t > now:
                self.book.arrival[i] = t
                self.loop.schedule(t, EV_SEND, i)
            else:
                self._arrive(now, i)
        elif self.state[p] == DROPPED or self.state[p] == REJECTED:
            self.state[i] = DROPPED  # the conversation ended without an answer
        else:
            self._parked[p] = i

    def _answered(self, p: int) -> None:
        """Turn ``p``'s completion time is known: send its parked follow-up after the think time."""
        i = self._parked.pop(p, -1)
        if i >= 0:
            assert self._think is not None
            t = max(float(self.finish[p]) + float(self._think[i]), self.loop.now)
            self.book.arrival[i] = t
            self.loop.schedule(t, EV_SEND, i)

    def _on_send(self, now: float, i: int) -> None:
        self._arrive(now, i)

    def _arrive(self, now: float, i: int) -> None:
        obs = self._observe
        pred = self.predictor
        book = self.book
        while obs and obs[0][0] <= now:
            _, j = heapq.heappop(obs)
            pred.observe(int(book.prompt[j]), int(self._gen[j]))
        p = int(book.prompt[i])
        guess = pred.predict(p)
        self.baseline_pred[i] = pred.mean
        book.predicted[i] = guess
        f = book.features[i]
        f[0] = math.log2(p)
        f[1] = math.log2(max(guess, 1.0))
        f[2] = self._kv_feature
        if -(-(p + 1) // self._bs) > self._total:
            self.state[i] = DROPPED  # its prompt and first decode step can never fit
            return
        self.state[i] = WAITING
        members = self._pool_members[self.pools.pool_of(p + guess)]
        reps = self.replicas
        if self.router.shared:
            reps[members[0]].queue.append(i)
            for r in members:
                self._notify(reps[r], now)
        else:
            q = self._query
            q.request, q.prompt = i, p
            q.slo_class = int(self._slo_class[i]) if self._slo_class is not None else 0
            pool = [reps[r] for r in members]
            q.outstanding = [len(x.queue) + len(x.decoding) + len(x.prefilling) for x in pool]
            bs = self._bs
            q.matched = [x.cache.hit_blocks(i, p) * bs if x.cache is not None else 0 for x in pool] \
                if self.router.uses_prefix else [0] * len(members)
            k = members.index(self.router.pick(members, q))
            if self.admission is not None:
                k = self._admit(i, q, members, k)
                if k < 0:
                    return
            rep = reps[members[k]]
            own = p - (q.matched[k] if self.router.uses_prefix else 0)
            self.qtok[i] = own
            rep.qtok += own
            rep.queue.append(i)
            self._notify(rep, now)

    def _admit(self, i: int, q: RouteQuery, members: list[int], k: int) -> int:
        """Admission control: the chosen replica if its predicted TTFT keeps the target, else the
        first other replica that does, else -1 (rejected, with the reason)."""
        adm = self.admission
        assert adm is not None
        target = adm.slack * adm.target(q.slo_class)
        reps = self.replicas
        best = math.inf
        for pos in range(len(members)):  # k first, then the others in order
            j = k if pos == 0 else (pos - 1 if pos <= k else pos)
            r = reps[members[j]]
            own = q.prompt - q.matched[j]
            t = adm.predicted_ttft_ms(r.qtok + r.pf_left, own, r.pf_rate)
            if t <= target:
                return j
            best = min(best, t)
        self.state[i] = REJECTED
        self.reason[i] = f"predicted TTFT {best:.0f} ms > {target:.0f} ms on every replica"
        return -1

    def _on_sent(self, now: float, token: int) -> None:
        """A KV transfer ended: free it on the prefill replica, queue the request at a decode replica."""
        nrep = len(self.replicas)
        i, src = divmod(token, nrep)
        rep = self.replicas[src]
        rep.sending.remove(i)
        rep.held -= int(self.held[i])
        self.held[i] = 0
        if rep.cache is not None:
            rep.cache.release(i, now)
        self.hit[i] = 0
        if self._audit is not None:
            self._audit.free(rep.idx, i)
        book = self.book
        assert book.ready is not None
        book.ready[i] = book.prefill_len(i) - 1
        self.state[i] = WAITING
        members = self._pool_members[1]
        reps = self.replicas
        dst = reps[members[0]]  # the least loaded (queued plus running); ties: the lowest index
        load = len(dst.queue) + len(dst.decoding) + len(dst.prefilling)
        for r in members[1:]:
            x = reps[r]
            n = len(x.queue) + len(x.decoding) + len(x.prefilling)
            if n < load or (n == load and r < dst.idx):
                dst, load = x, n
        self.qtok[i] = 1
        dst.qtok += 1
        dst.queue.append(i)
        self._notify(dst, now)
        if rep.busy == RUN_IDLE:
            self._schedule(rep, now)  # its freed blocks may admit waiting work
