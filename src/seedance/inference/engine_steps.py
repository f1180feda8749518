"""The engine's replica work: prefill iterations, decode spans, completions and preemption.

NOTE(seedance): part of :class:`~seedance.inference.sim.ServingSimulator` (see :mod:`engine_core`).
A *span* is a run of pure decode iterations of an unchanged batch: step times are linear in the
KV tokens attended (:class:`~seedance.inference.perf.StepTimes`), so a span of ``n`` steps costs a
closed form and the engine jumps straight to its end, which is the first of: the next
completion, the step at which the KV pool runs out, a batcher timer, or, for iteration-level
batchers, the first iteration boundary after an arrival to the replica's queue (the span is cut
short when that arrival comes: :meth:`Steps._notify`).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from seedance.inference.batchers.base import Plan
from seedance.inference.engine_core import EV_SENT, RUN_IDLE, RUN_ITER, RUN_SPAN, EngineCore, Replica, remove_all
from seedance.inference.memseries import mark
from seedance.inference.run import DECODE, DONE, DROPPED, PREFILL, SENDING, WAITING


class Steps(EngineCore):
    """Prefill iterations, decode spans, completions, preemption."""

    def _notify(self, rep: Replica, now: float) -> None:
        """A request joined ``rep``'s queue at ``now``: wake an idle replica, or end a decode span
        at its next iteration boundary (iteration-level batchers only)."""
        if rep.busy == RUN_IDLE:
            self._schedule(rep, now)
        elif rep.busy == RUN_SPAN and not self.request_level and now < rep.t_end:
            k = self.step.steps_within(rep.span_b, rep.span_k0, (now - rep.span_t0) * 1000.0)
            if k < rep.span_n:
                self._set_span(rep, k)

    def _start_iteration(self, rep: Replica, now: float, plan: Plan) -> None:
        book = self.book
        bs = self._bs
        tokens = 0
        sq = 0.0
        admitted: list[int] = []
        view = rep.view
        starts: dict[int, tuple[int, int, int]] = {}
        state = self.state
        for i, t in plan.prefill:
            st = state[i]
            if st == WAITING:
                admitted.append(i)
                length, c, blocks = view.admission(i)
                starts[i] = (c, blocks, length)
            elif st != PREFILL or i not in rep.prefilling:
                raise RuntimeError(f"batcher scheduled prefill for request {i} in state {st}")
            else:
                c = int(book.computed[i])
                length = book.prefill_len(i)
            if t < 1 or c + t > length:
                raise RuntimeError(f"bad prefill chunk {t} for request {i} ({c}/{length} done)")
            tokens += t
            sq += t * t + 2.0 * t * c
        if admitted:
            gone = set(admitted)
            queue = rep.queue
            k = len(admitted)
            if len(gone) == k and set(queue[:k]) == gone:
                del queue[:k]  # the usual case: the queue's head (a request is queued once)
            elif len(gone) != k or not gone.issubset(queue):
                raise RuntimeError("batcher admitted requests that are not in its queue")
            else:
                queue[:] = [j for j in queue if j not in gone]
            need = 0
            cache = rep.cache
            ready = book.ready
            for i in admitted:
                state[i] = PREFILL
                c0, blocks, length = starts[i]
                book.computed[i] = c0
                rep.qtok -= int(self.qtok[i])
                rep.prefilling.append(i)
                rep.pf_left += length - c0
                if not self.request_level:
                    h = -(-length // bs)
                    if cache is not None and (ready is None or ready[i] <= 0):
                        first = bool(self.cached_first[i] < 0)
                        hit = cache.acquire(i, length, first=first)
                        if first:
                            self.cached_first[i] = hit * bs
                        self.hit[i] = hit
                        h -= hit
                    self.held[i] = h
                    rep.held += h
                    need += blocks
            if self._audit is not None and not self.request_level:
                self._audit.sync(self, rep)
            if need > rep.view.free_blocks:
                raise RuntimeError(f"batcher admitted {need} blocks with {rep.view.free_blocks} free")
        if self.request_level:
            lens = [book.prefill_len(i) for i, _ in plan.prefill]
            rep.pad_b, rep.pad_len, rep.counter = len(lens), max(lens), 0
            if self._blocks_after(rep, 0) > self._total:
                raise RuntimeError("request-level batch does not fit the KV pool")
            tokens = rep.pad_b * rep.pad_len  # padded to the longest prompt
            sq = float(rep.pad_b * rep.pad_len * rep.pad_len)
        for i, t in plan.prefill:
            book.computed[i] += t
            rep.pf_left -= t
        decode = plan.decode and bool(rep.decoding) and not self.request_level
        b1 = -1  # blocks after this iteration's decode step, where known
        if decode:
            b1 = self._blocks_after(rep, 1)
            if b1 > self._total:
                self._preempt(rep, now, 1)
                decode = bool(rep.decoding)
                b1 = -1
        b = len(rep.decoding) if decode else 0
        kv = b * rep.counter + rep.sumbase if b else 0
        ms = self.step.iteration_ms(tokens, sq, b, kv)
        rep.obs = (tokens, sq, b, float(kv))
        rep.span_n = 1 if decode else 0
        if rep.pad_b:
            if rep.cache is not None:
                rep.cache.fit(self._total - self._blocks_after(rep, rep.span_n))
            rep.kv_start = self._kv_mib(rep, 0)
            rep.kv_end = self._kv_mib(rep, rep.span_n)
        else:  # (the cache's eviction moves no pinned block: the counts hold across fit)
            b0 = self._blocks_after(rep, 0)
            if not decode:
                b1 = b0
            elif b1 < 0:
                b1 = self._blocks_after(rep, 1)
            cache = rep.cache
            if cache is not None and cache.unpinned > self._total - b1:  # (fit() would do nothing)
                cache.fit(self._total - b1)
            rep.kv_start = b0 * self._blk_mib
            rep.kv_end = b1 * self._blk_mib
        self._iterations += 1
        rep.span_t0 = now
        rep.busy = RUN_ITER
        self._schedule(rep, now + ms / 1000.0)
        mark(rep, now)

    def _finish_iteration(self, rep: Replica, now: float) -> None:
        book = self.book
        ms = (now - rep.span_t0) * 1000.0
        rep.batcher.observe_iteration(*rep.obs, ms)
        if self.admission is not None:
            rep.pf_rate = self.admission.update_rate(rep.pf_rate, rep.obs[0], ms)
        if rep.span_n:
            rep.counter += 1
            self._complete_due(rep, now)
        finished = [i for i in rep.prefilling if book.computed[i] >= book.prefill_len(i)]
        if finished:
            remove_all(rep.prefilling, finished)
        for i in finished:
            length = book.prefill_len(i)
            if math.isnan(book.first_token[i]):
                book.first_token[i] = now
            book.out[i] += 1
            book.computed[i] = 0
            rep.held -= int(self.held[i])
            self.held[i] = 0
            if rep.cache is not None:
                self.hit[i] += rep.cache.publish(i, length)
            if book.out[i] >= self._gen[i]:
                self._done(rep, i, now)
                continue
            if self.disagg is not None and rep.pool == 0:  # send the KV to the decode pool
                self.state[i] = SENDING
                self.held[i] = -(-length // self._bs) - int(self.hit[i])
                rep.held += int(self.held[i])
                rep.sending.append(i)
                self.loop.schedule(now + self.disagg.transfer_s(length, self.shape.kv_bytes_per_token), EV_SENT,
                                   i * len(self.replicas) + rep.idx)
                continue
            self.state[i] = DECODE
            if self.request_level:
                rep.decoding.append(i)
            else:
                self._add_decoder(rep, i, length - rep.counter)
            heapq.heappush(rep.heap, (rep.counter + int(self._gen[i] - book.out[i]), i))
        if self.request_level:
            self._start_padded_span(rep, now)

    def _start_span(self, rep: Replica, now: float, b0: int = -1) -> None:
        """A run of pure decode steps; ``b0``: ``_blocks_after(rep, 0)`` where the caller knows it."""
        n = rep.heap[0][0] - rep.counter
        total = self._total
        bn = self._blocks_after(rep, n)  # blocks at the span's end
        if bn > total:
            lo, hi = 0, n  # the largest m < n with blocks_after(m) <= total
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._blocks_after(rep, mid) <= total:
                    lo = mid
                else:
                    hi = mid
            n = lo
            bn = -1
            if n == 0:
                self._preempt(rep, now, 1)
                if rep.decoding:
                    self._start_span(rep, now)
                else:
                    self._next(rep, now)
                return
        b = len(rep.decoding)
        rep.span_b = b
        rep.span_k0 = b * rep.counter + rep.sumbase
        if rep.timer is not None and rep.timer > now:
            m = self.step.steps_within(b, rep.span_k0, (rep.timer - now) * 1000.0)
            if m < n:
                n, bn = m, -1
        rep.span_t0 = now
        rep.kv_start = (b0 if b0 >= 0 else self._blocks_after(rep, 0)) * self._blk_mib
        rep.busy = RUN_SPAN
        self._set_span(rep, n, bn)
        mark(rep, now)

    def _start_padded_span(self, rep: Replica, now: float) -> None:
        """Decode a padded batch to its end; members finish at their own steps (streamed)."""
        b = rep.pad_b
        k0 = b * rep.pad_len
        rep.span_b, rep.span_k0, rep.span_t0 = b, k0, now
        rep.kv_start = self._kv_mib(rep, 0)
        rep.busy = RUN_SPAN
        if rep.heap:
            ids = np.asarray([i for _, i in rep.heap])
            steps = np.asarray([f for f, _ in rep.heap], dtype=np.float64) - rep.counter
            a, c = self.step.decode_base(b), self.step.kv_ms_per_token
            t_ms = steps * a + c * (steps * k0 + b * steps * (steps - 1) / 2.0)
            self.finish[ids] = now + t_ms / 1000.0
            for i in ids.tolist():
                heapq.heappush(self._observe, (float(self.finish[i]), i))
                if self._parked:
                    self._answered(i)
            n = max(f for f, _ in rep.heap) - rep.counter
        else:
            n = 0
        self._set_span(rep, n)
        mark(rep, now)

    def _set_span(self, rep: Replica, n: int, blocks: int = -1) -> None:
        """The span ends after ``n`` steps (``blocks``: ``_blocks_after(rep, n)`` where known)."""
        rep.span_n = n
        rep.kv_end = blocks * self._blk_mib if blocks >= 0 else self._kv_mib(rep, n)
        self._schedule(rep, rep.span_t0 + self.step.decode_span_ms(rep.span_b, rep.span_k0, n) / 1000.0)

    def _finish_span(self, rep: Replica, now: float) -> None:
        n = rep.span_n
        if n > 0 and not self.request_level:
            rep.batcher.observe_iteration(0, 0.0, rep.span_b, rep.span_k0 + rep.span_b * (n - 1) / 2.0,
                                          (now - rep.span_t0) * 1000.0 / n)
        self._iterations += n
        rep.counter += n
        rep.kv_start = rep.kv_end
        if not self.request_level:
            if rep.heap and rep.heap[0][0] <= rep.counter:
                self._complete_due(rep, now)
            return
        done = [i for _, i in rep.heap]  # their finish times were set when the span started
        self.state[done] = DONE
        self.book.out[done] = self._gen[done]
        rep.heap.clear()
        rep.decoding.clear()
        rep.pad_b = rep.pad_len = rep.counter = 0
        rep.kv_start = rep.kv_end = 0.0

    def _complete_due(self, rep: Replica, now: float) -> None:
        heap = rep.heap
        if not heap or heap[0][0] > rep.counter:
            return
        finished = []
        while heap and heap[0][0] <= rep.counter:
            finished.append(heapq.heappop(heap)[1])
        remove_all(rep.decoding, finished)
        for i in finished:
            self._drop_decoder_stats(rep, i)
            self.book.out[i] = self._gen[i]
            self._done(rep, i, now)

    def _done(self, rep: Replica, i: int, now: float) -> None:
        self.state[i] = DONE
        self.finish[i] = now
        if self._parked:
            self._answered(i)
        if rep.cache is not None:
            rep.cache.publish(i, int(self.book.prompt[i] + self._gen[i]) - 1)
            rep.cache.release(i, now)
            self.hit[i] = 0
        heapq.heappush(self._observe, (now, i))
        if self._audit is not None:
            self._audit.free(rep.idx, i)

    def _preempt(self, rep: Replica, now: float, steps: int) -> None:
        """Free blocks until the decoders' next ``steps`` steps fit; victims go back to the queue
        head and are recomputed when readmitted. A decoder that cannot take the steps even alone
        can never finish: it is dropped."""
        total = self._total
        bs = self._bs
        book = self.book
        for i in list(rep.decoding):
            if -(-(rep.counter + int(self.kvbase[i]) + steps) // bs) > total:
                self._evict(rep, i)
                rep.queue.remove(i)
                self.state[i] = DROPPED
        while rep.decoding or rep.prefilling:
            need = self._blocks_after(rep, steps) - total
            if need <= 0:
                return
            if rep.decoding:  # batchers read output counts: bring the decoders' up to date
                idx = np.asarray(rep.decoding)
                book.out[idx] = rep.counter + self.kvbase[idx] - book.prompt[idx] + 1
            rep.view.now = now
            rep.view.free_blocks = total - self._blocks_after(rep, 0)
            victims = rep.batcher.victims(rep.view, need)
            if not victims:
                raise RuntimeError("batcher returned no victim while memory is short")
            for i in victims:
                self._evict(rep, i)

    def _evict(self, rep: Replica, i: int) -> None:
        st = self.state[i]
        book = self.book
        if st == DECODE:
            rep.decoding.remove(i)
            self._drop_decoder_stats(rep, i)
            book.out[i] = rep.counter + self.kvbase[i] - book.prompt[i] + 1
            rep.heap[:] = [(f, j) for f, j in rep.heap if j != i]
            heapq.heapify(rep.heap)
        elif st == PREFILL:
            rep.prefilling.remove(i)
            rep.pf_left -= book.prefill_len(i) - int(book.computed[i])
            rep.held -= int(self.held[i])
            self.held[i] = 0
        else:
            raise RuntimeError(f"cannot preempt request {i} in state {st}")
        book.computed[i] = 0
        if book.ready is not None and not self._perfect:
            book.ready[i] = 0  # recomputed where it is
        if rep.cache is not None:
            rep.cache.release(i, rep.view.now)
            self.hit[i] = 0
        self.state[i] = WAITING
        self.preempt[i] += 1
        rep.queue.insert(0, i)
        self.qtok[i] = book.prefill_len(i)
        rep.qtok += int(self.qtok[i])
        if self._audit is not None:
            self._audit.free(rep.idx, i)
