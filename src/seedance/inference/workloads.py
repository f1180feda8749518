"""Workloads with prefix structure built on a real trace's sizes and arrivals (documented generators).

The Azure LLM traces carry arrival times and token counts but no text, so which requests share a
prefix is not in the data. Two generators add that structure while keeping every request's
arrival, prompt and output tokens exactly as in the trace:

* :func:`multi_turn` — conversations. LMSYS-Chat-1M (Zheng et al., "LMSYS-Chat-1M: A Large-Scale
  Real-World LLM Conversation Dataset", ICLR 2024, arXiv:2309.11998, Table 1) reports a mean of
  2.0 turns per conversation; that mean is the generator's one statistic (``mean_turns``). In
  arrival order each request is, with probability ``p_follow``, offered as the next turn of an
  open conversation: the oldest one whose last turn arrived between ``min_gap_s`` and
  ``max_gap_s`` earlier (think time; a conversation idle for longer is closed) and whose last
  prompt plus output fits inside this request's prompt (turn ``t``'s prompt begins with turn
  ``t-1``'s prompt and answer: append-only). Otherwise it starts a conversation. ``p_follow`` is
  calibrated (a few passes) so that the achieved mean turns matches ``mean_turns`` as closely as
  the size constraint allows; :func:`structure_stats` reports what was achieved.

  Sessions are *closed loop* by default (``closed_loop=True``): a user sends turn ``t`` only after
  turn ``t-1``'s answer has arrived plus a think time, as real chat clients do and as the
  multi-turn serving benchmarks model it (vLLM's ``benchmarks/multi_turn/benchmark_serving_multi_turn.py``:
  each client awaits a turn's response, then sleeps an exponential interval before the next turn;
  SGLang's ``benchmark/hicache/bench_multiturn.py``: a client's next round is sent after the
  previous round's response). The think time of each follow-up is exponential with mean
  ``think_s`` (the shape of vLLM's ``poisson_sleep``); the engine sends the follow-up at the later
  of its trace arrival and the previous answer's completion plus that think time
  (:class:`~seedance.inference.sim.ServingSimulator`). ``closed_loop=False`` keeps the open-loop
  variant (every request at its trace arrival, even before its previous turn has been answered,
  which a real user cannot do) for comparison.
* :func:`system_prompts` — ``prompts`` shared system prompts with lengths log-uniform in
  ``[min_tokens, max_tokens]`` and Zipf(``zipf``) popularity; a request gets the prompt drawn for it
  when its prompt is longer than that system prompt (else it has none).

:func:`slo_classes` marks a share of requests as the tight class (0), the rest as class 1.
"""

from __future__ import annotations

import numpy as np

from seedance.core.errors import InputError
from seedance.inference.prefix import PrefixStructure
from seedance.inference.trace import RequestTrace

LMSYS_MEAN_TURNS = 2.0  # LMSYS-Chat-1M, Table 1 (arXiv:2309.11998)


def _sessions(trace: RequestTrace, p_follow: float, min_gap_s: float, max_gap_s: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = len(trace)
    session = np.full(n, -1, np.int64)
    turn = np.zeros(n, np.int64)
    cap = max(n, 1)
    last_t = np.zeros(cap)
    need = np.zeros(cap, np.int64)  # the last turn's prompt + output
    sid = np.zeros(cap, np.int64)
    turns = np.zeros(cap, np.int64)
    alive = np.zeros(cap, bool)
    m = 0  # open-session slots used
    follow = rng.random(n) < p_follow
    arr, prompt, out = trace.arrival_s, trace.prompt, trace.output
    nxt = 0
    for j in range(n):
        t = float(arr[j])
        k = -1
        if j % 2048 == 0 and m:  # drop closed conversations
            keep = np.flatnonzero(alive[:m] & (last_t[:m] >= t - max_gap_s))
            for a in (last_t, need, sid, turns, alive):
                a[: keep.size] = a[keep]
            m = keep.size
            alive[m:] = False
        if follow[j] and m:
            ok = alive[:m] & (last_t[:m] <= t - min_gap_s) & (last_t[:m] >= t - max_gap_s) & (need[:m] < prompt[j])
            hits = np.flatnonzero(ok)
            if hits.size:
                k = int(hits[np.argmin(last_t[:m][hits])])
        if k < 0:
            if m == cap:  # compact closed sessions
                keep = np.flatnonzero(alive[:m] & (last_t[:m] >= t - max_gap_s))
                for a in (last_t, need, sid, turns, alive):
                    a[: keep.size] = a[keep]
                m = keep.size
                alive[m:] = False
            k = m
            m += 1
            sid[k] = nxt
            turns[k] = 0
            alive[k] = True
            nxt += 1
        session[j] = sid[k]
        turn[j] = turns[k]
        turns[k] += 1
        last_t[k] = t
        need[k] = int(prompt[j]) + int(out[j])
    return session, turn


def multi_turn(trace: RequestTrace, *, mean_turns: float = LMSYS_MEAN_TURNS, min_gap_s: float = 10.0,
               max_gap_s: float = 600.0, seed: int = 0, passes: int = 4, closed_loop: bool = True,
               think_s: float = 10.0) -> RequestTrace:
    """``trace`` with conversation structure (see the module note)."""
    if not mean_turns >= 1.0:
        raise InputError(f"must be >= 1, got {mean_turns}", source="--mean-turns")
    if not (think_s >= 0 and np.isfinite(think_s)):
        raise InputError(f"must be a finite number >= 0, got {think_s}", source="--think-s")
    if not 0 <= min_gap_s <= max_gap_s:
        raise InputError("need 0 <= min_gap_s <= max_gap_s", source="--min-gap-s")
    target_follow = 1.0 - 1.0 / mean_turns  # share of requests that are follow-up turns
    p = target_follow
    session = turn = np.zeros(0, np.int64)
    for _ in range(max(passes, 1)):
        session, turn = _sessions(trace, min(p, 1.0), min_gap_s, max_gap_s, np.random.default_rng(seed))
        got = float(np.mean(turn > 0)) if len(trace) else 0.0
        if abs(got - target_follow) < 0.005 or p >= 1.0 or got <= 0:
            break
        p = min(1.0, p * target_follow / got)
    n = len(trace)
    think = None
    if closed_loop:
        draw = np.random.default_rng([seed, 1]).exponential(think_s, n) if think_s > 0 else np.zeros(n)
        think = np.where(turn > 0, draw, 0.0)
    st = PrefixStructure(np.full(n, -1, np.int64), np.zeros(n, np.int64), session, turn, think)
    tag = "multi-turn" if closed_loop else "multi-turn-open-loop"
    return RequestTrace(trace.arrival_s, trace.prompt, trace.output, f"{trace.source}+{tag}",
                        st, trace.slo_class)


def system_prompts(trace: RequestTrace, *, prompts: int = 8, min_tokens: int = 256, max_tokens: int = 2048,
                   zipf: float = 1.0, seed: int = 0) -> RequestTrace:
    """``trace`` where requests begin with one of ``prompts`` shared system prompts (see the module note)."""
    if prompts < 1 or not 1 <= min_tokens <= max_tokens:
        raise InputError("need prompts >= 1 and 1 <= min_tokens <= max_tokens", source="--system-prompts")
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(min_tokens), np.log(max_tokens), prompts)).astype(np.int64)
    w = 1.0 / np.arange(1, prompts + 1) ** zipf
    g = rng.choice(prompts, size=len(trace), p=w / w.sum())
    fits = trace.prompt > lengths[g]
    n = len(trace)
    base = trace.prefix if trace.prefix is not None else PrefixStructure.none(n)
    st = PrefixStructure(np.where(fits, g, -1).astype(np.int64), np.where(fits, lengths[g], 0).astype(np.int64),
                         base.session, base.turn, base.think_s)
    return RequestTrace(trace.arrival_s, trace.prompt, trace.output, f"{trace.source}+system-prompts", st,
                        trace.slo_class)


def slo_classes(trace: RequestTrace, *, tight_share: float, seed: int = 0) -> RequestTrace:
    """``trace`` with ``tight_share`` of its requests (at random) in SLO class 0, the rest in class 1."""
    if not 0 <= tight_share <= 1:
        raise InputError(f"must be in [0, 1], got {tight_share}", source="--tight-share")
    cls = (np.random.default_rng(seed).random(len(trace)) >= tight_share).astype(np.int64)
    return RequestTrace(trace.arrival_s, trace.prompt, trace.output, trace.source, trace.prefix, cls)


def reusable_tokens(trace: RequestTrace, block_tokens: int = 16) -> np.ndarray:
    """Per request, the prompt tokens an unbounded cache could serve: the full blocks of its
    conversation history (the previous turn's prompt and answer) or of its system prompt, at most
    ``prompt - 1`` (one token is always computed)."""
    st = trace.prefix
    n = len(trace)
    reuse = np.zeros(n, np.int64)
    if st is None or n == 0:
        return reuse
    parent = st.previous_turn()
    f = np.flatnonzero(parent >= 0)
    if f.size:
        p = parent[f]
        hist = np.minimum(trace.prompt[p] + trace.output[p] - 1, trace.prompt[f] - 1)
        reuse[f] = hist // block_tokens * block_tokens
    sys_r = (st.sys_tokens // block_tokens) * block_tokens
    return np.maximum(reuse, np.minimum(sys_r, trace.prompt - 1))


def structure_stats(trace: RequestTrace, block_tokens: int = 16) -> dict[str, float | int]:
    """What a structured trace holds: conversations, turns, and the prompt tokens an unbounded
    cache could reuse (:func:`reusable_tokens`)."""
    st = trace.prefix
    n = len(trace)
    if st is None or n == 0:
        return {"requests": n, "reusable_token_share": 0.0}
    reuse = reusable_tokens(trace, block_tokens)
    has_s = st.session >= 0
    sessions = int(np.unique(st.session[has_s]).size)
    return {
        "requests": n,
        "conversations": sessions,
        "mean_turns": round(float(has_s.sum()) / sessions, 3) if sessions else 0.0,
        "follow_up_share": round(float(np.mean(st.turn > 0)), 4),
        "system_prompt_share": round(float(np.mean(st.sys_id >= 0)), 4),
        "reusable_token_share": round(float(reuse.sum()) / float(trace.prompt.sum()), 4),
    }
