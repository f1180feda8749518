"""Block-level prefix caching: KV blocks of shared prefixes reused across requests, LRU-evicted.

NOTE(seedance): the semantics are vLLM's automatic prefix caching (a full KV block is identified
by the hash of its tokens and of every token before it; only full blocks are shared; a hit must be
a chain from the first block; on a hit the request computes only the rest of its prompt, at least
one token) with SGLang's radix-tree eviction order (a cached block is evictable only when no
running request uses it; least recently used first; within a prefix the tail goes first, and a
node goes only after its children). Requests carry their prefix *structure*, not tokens
(:class:`PrefixStructure`): an optional system prompt ``sys_id`` of ``sys_tokens`` tokens, then an
optional append-only conversation ``session`` (turn ``t``'s prompt begins with turn ``t-1``'s prompt
and output). So the radix tree has two levels, a node per system prompt and one per session
under it, and a node's cached state is a block count (a prefix of its token range):

* sys node ``g`` covers blocks ``[0, sys_tokens // B)``; a session node covers blocks from there on
  (the block straddling the boundary holds session tokens, so it belongs to the session).
* ``hit(i)`` = the sys node's cached blocks, plus the session node's if the sys node is complete;
  capped so that at least one prompt token is computed.
* Memory: blocks of nodes with running referrers are *pinned* (counted once, however many
  requests share them); blocks of unreferenced nodes sit in the free pool and are evicted (LRU)
  as soon as the free pool is needed: :meth:`PrefixCache.fit` keeps them within the free blocks.
  A request's own blocks beyond its hit are private; at the end of its prefill its prompt blocks
  are published into the nodes (they become shared), at completion its output blocks too.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class PrefixStructure:
    """Per-request prefix structure (columnar, aligned with a trace).

    Attributes:
        sys_id: System prompt id (-1: none).
        sys_tokens: Tokens of that system prompt (0 when none); the prompt starts with them.
        session: Conversation id (-1: a one-off request).
        turn: Turn number within the session (0 first).
        think_s: Closed-loop sessions: seconds the user takes after turn ``t-1``'s answer before
            sending turn ``t`` (the engine sends turn ``t`` at the later of its trace arrival and
            that answer's completion plus ``think_s``); ``None``: open loop (every request at its
            trace arrival, whether or not the previous answer has ended).
    """

    sys_id: NDArray[np.int64]
    sys_tokens: NDArray[np.int64]
    session: NDArray[np.int64]
    turn: NDArray[np.int64]
    think_s: NDArray[np.float64] | None = None

    def take(self, idx: NDArray[np.int64] | slice) -> PrefixStructure:
        """Rows ``idx``."""
        return PrefixStructure(self.sys_id[idx], self.sys_tokens[idx], self.session[idx], self.turn[idx],
                               self.think_s[idx] if self.think_s is not None else None)

    def previous_turn(self) -> NDArray[np.int64]:
        """Per request, the index of its session's previous turn in these rows (-1: none here)."""
        n = self.session.shape[0]
        parent = np.full(n, -1, np.int64)
        has = np.flatnonzero(self.session >= 0)
        if has.size < 2:
            return parent
        order = has[np.lexsort((self.turn[has], self.session[has]))]
        s, t = self.session[order], self.turn[order]
        link = (s[1:] == s[:-1]) & (t[1:] == t[:-1] + 1)
        parent[order[1:][link]] = order[:-1][link]
        return parent

    @staticmethod
    def none(n: int) -> PrefixStructure:
        """No shared prefixes at all."""
        return PrefixStructure(np.full(n, -1, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64),
                               np.zeros(n, np.int64))


class _Node:
    __slots__ = ("cached", "children", "key", "last", "parent", "refs", "seq")

    def __init__(self, key: int, parent: _Node | None) -> None:
        self.key = key
        self.parent = parent
        self.cached = 0  # blocks cached (a prefix of the node's range)
        self.refs = 0  # running requests that use this node
        self.children = 0  # children with cached > 0
        self.last = 0.0
        self.seq = 0  # invalidates stale LRU heap entries


class PrefixCache:
    """One replica's prefix cache (see the module note).

    Args:
        structure: The requests' prefix structure.
        prompt: Prompt tokens per request.
        block_tokens: Tokens per KV block.
    """

    __slots__ = ("_by_key", "_found", "_heap", "_held", "_refs", "_sb", "_seq", "_sess", "_skey", "_sys",
                 "block_tokens", "hit_tokens", "lookups", "pinned", "prompt", "prompt_tokens", "sessions", "st",
                 "systems", "unpinned")

    def __init__(self, structure: PrefixStructure, prompt: NDArray[np.int64], block_tokens: int) -> None:
        self.st = structure
        self.prompt = prompt
        self.block_tokens = block_tokens
        self.systems: dict[int, _Node] = {}
        self.sessions: dict[tuple[int, int], _Node] = {}  # (system prompt, session) -> node
        self._by_key: dict[int, _Node] = {}  # the same nodes by (system prompt, session) packed in one int
        self.pinned = 0  # blocks of referenced nodes
        self.unpinned = 0  # blocks of unreferenced nodes (evictable, inside the free pool)
        self._heap: list[tuple[float, int, int, _Node]] = []
        self._seq = 0
        self._refs: dict[int, tuple[_Node | None, _Node | None]] = {}  # running request -> nodes it uses
        self._held: dict[int, int] = {}  # running request -> its hit blocks (not charged to it)
        self.lookups = 0
        self.hit_tokens = 0
        self.prompt_tokens = 0
        # per request, as Python ints (read on every lookup): system prompt, session, (both), sys blocks
        self._sys: list[int] = structure.sys_id.tolist()
        self._sess: list[int] = structure.session.tolist()
        span = max(self._sys, default=0) + 2  # sys ids are >= -1: (g + 1) in [0, span)
        self._skey: list[int] = [s * span + g + 1 for g, s in zip(self._sys, self._sess, strict=True)]
        self._sb: list[int] = (structure.sys_tokens // block_tokens).tolist()
        # per request, its nodes once all of them exist (nodes are never deleted, only emptied)
        self._found: list[tuple[_Node | None, _Node | None] | None] = [None] * len(self._sys)

    # ------------------------------------------------------------ lookup
    def _nodes(self, i: int, create: bool) -> tuple[_Node | None, _Node | None]:
        found = self._found[i]
        if found is not None:
            return found
        g = self._sys[i]
        s = self._sess[i]
        sysn = self.systems.get(g) if g >= 0 else None
        if sysn is None and g >= 0 and create:
            sysn = self.systems[g] = _Node(g, None)
        sess = self._by_key.get(self._skey[i]) if s >= 0 else None
        if sess is None and s >= 0 and create:
            sess = self.sessions[(g, s)] = self._by_key[self._skey[i]] = _Node(s, sysn)
        if (g < 0 or sysn is not None) and (s < 0 or sess is not None):
            found = self._found[i] = (sysn, sess)
            return found
        return sysn, sess

    def hit_blocks(self, i: int, prefill_len: int) -> int:
        """Blocks of ``i``'s prefix cached here now (at most ``(prefill_len - 1) // B``)."""
        sysn, sess = self._nodes(i, False)
        sb = self._sb[i]
        h = (sysn.cached if sysn.cached < sb else sb) if sysn is not None else 0
        if h == sb and sess is not None:
            h += sess.cached
        cap = (prefill_len - 1) // self.block_tokens
        return h if h < cap else cap

    def admit_blocks(self, i: int, prefill_len: int) -> int:
        """Free blocks that admitting ``i`` takes: its private blocks plus the hit blocks that are
        not pinned yet (they leave the free pool)."""
        return self.admission(i, prefill_len)[1]

    def admission(self, i: int, prefill_len: int) -> tuple[int, int]:
        """``(hit_blocks(i, n), admit_blocks(i, n))`` in one lookup."""
        sysn, sess = self._nodes(i, False)
        sb = self._sb[i]
        h = (sysn.cached if sysn.cached < sb else sb) if sysn is not None else 0
        if h == sb and sess is not None:
            h += sess.cached
        cap = (prefill_len - 1) // self.block_tokens
        if h > cap:
            h = cap
        extra = 0  # admission references (pins) both nodes, used or not
        if sysn is not None and sysn.refs == 0:
            extra += sysn.cached
        if sess is not None and sess.refs == 0:
            extra += sess.cached
        return h, -(-prefill_len // self.block_tokens) - h + extra

    # -------------------------------------------------------- reference
    def _ref(self, node: _Node | None) -> None:
        if node is None:
            return
        if node.refs == 0:
            self.unpinned -= node.cached
            self.pinned += node.cached
        node.refs += 1

    def _unref(self, node: _Node | None, now: float) -> None:
        if node is None:
            return
        node.refs -= 1
        node.last = now
        if node.refs == 0:
            self.pinned -= node.cached
            self.unpinned += node.cached
            self._push(node)

    def _push(self, node: _Node) -> None:
        self._seq += 1
        node.seq = self._seq
        heapq.heappush(self._heap, (node.last, self._seq, node.key, node))

    def acquire(self, i: int, prefill_len: int, *, first: bool) -> int:
        """``i`` is admitted: reference its nodes; returns its hit blocks (its prefill starts after them)."""
        h = self.hit_blocks(i, prefill_len)
        sysn, sess = self._nodes(i, True)
        self._ref(sysn)
        self._ref(sess)
        self._refs[i] = (sysn, sess)
        self._held[i] = h
        if first:
            self.lookups += 1
            self.hit_tokens += h * self.block_tokens
            self.prompt_tokens += int(self.prompt[i])
        return h

    def _extend(self, node: _Node | None, blocks: int) -> int:
        """Grow ``node`` to ``blocks`` cached blocks; returns how many it gained."""
        if node is None or blocks <= node.cached:
            return 0
        gain = blocks - node.cached
        if node.cached == 0 and node.parent is not None:
            node.parent.children += 1
        node.cached = blocks
        if node.refs:
            self.pinned += gain
        else:
            self.unpinned += gain
            self._push(node)
        return gain

    def publish(self, i: int, tokens: int) -> int:
        """``i`` holds the KV of its first ``tokens`` tokens: make their full blocks shared.
        Returns the blocks that moved from ``i``'s private blocks to the cache (``i``'s hit grows)."""
        sysn, sess = self._refs.get(i, (None, None))
        sb = self._sb[i]
        full = tokens // self.block_tokens
        moved = 0
        if sysn is not None:
            moved += self._extend(sysn, min(sb, full))
        if sess is not None and (sysn is None or sysn.cached >= sb) and full > sb:
            moved += self._extend(sess, full - sb)
        self._held[i] = self._held.get(i, 0) + moved
        return moved

    def release(self, i: int, now: float) -> int:
        """``i`` stops running; returns the hit blocks it was not charged for."""
        sysn, sess = self._refs.pop(i, (None, None))
        self._unref(sess, now)
        self._unref(sysn, now)
        return self._held.pop(i, 0)

    def held_hit(self, i: int) -> int:
        """Blocks of ``i`` that the cache holds (not charged to ``i``)."""
        return self._held.get(i, 0)

    # ------------------------------------------------------------ evict
    def fit(self, free_blocks: int) -> int:
        """Evict unreferenced blocks (LRU; tails first, children before parents) until they fit in
        ``free_blocks``; returns the blocks evicted."""
        evicted = 0
        heap = self._heap
        while self.unpinned > free_blocks and heap:
            _, seq, _, node = heap[0]
            if seq != node.seq or node.refs or node.cached == 0:
                heapq.heappop(heap)
                continue
            if node.children:  # a sys node whose sessions are still cached: they go first
                heapq.heappop(heap)
                continue
            k = min(node.cached, self.unpinned - free_blocks)
            node.cached -= k
            self.unpinned -= k
            evicted += k
            if node.cached == 0:
                heapq.heappop(heap)
                par = node.parent
                if par is not None:
                    par.children -= 1
                    if par.children == 0 and par.refs == 0 and par.cached:
                        self._push(par)
        return evicted

    def stats(self) -> dict[str, float | int]:
        """Hit accounting of first admissions."""
        return {"lookups": self.lookups, "hit_tokens": self.hit_tokens, "prompt_tokens": self.prompt_tokens}
