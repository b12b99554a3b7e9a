"""A discrete-event simulator of a generation server, driven by the step-time model (Chapter 7).

Requests arrive as a Poisson process (seeded). Each has a prompt and a number of tokens to generate. The server
holds at most ``max_batch`` sequences (default: what memory allows at the longest context) and runs one of two
engines:

- **interleaved** (``disaggregated=False``): one slice does both. Whenever a slot is free and a request waits, it
  prefills that request (batch 1; every sequence being generated pauses meanwhile), which yields its first token;
  otherwise it runs one generation step for every active sequence (continuous batching: a finished sequence
  leaves at once and its slot is refilled at the next decision).
- **disaggregated** (``disaggregated=True``): ``prefill_servers`` separate slices of ``prefill_chips`` chips
  prefill in arrival order; a finished prefill (first token out) waits for a free generation slot, and the
  generation slice only ever runs generation steps.

A generation step takes :func:`~tpu_notes.inference.step.decode_step_time`'s time for the current batch, with the
KV load of the tokens actually cached (paged attention: sum of the active contexts). A prefill takes
:func:`~tpu_notes.inference.step.prefill_time` at ``prefill_mfu``; with ``prefix_hit_rate`` > 0 that share of
requests finds its first ``prefix_len`` tokens in a prefix cache and computes only the rest.

Reported: time to first token (arrival → first token), time per output token (first → last token, over the
tokens after the first), their percentiles, and tokens generated per second. Same arguments, same result.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ..transformer import as_config
from ..units import check_bool, check_positive, dtype_bytes, fmt
from .serving import max_batch as _max_batch
from .step import _chips, _storage, machine, prefill_time, weight_params_read

#: Largest number of requests one simulation serves (each is simulated token by token).
MAX_REQUESTS = 100_000
#: Largest number of generation steps one simulation runs.
MAX_STEPS = 5_000_000


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` measured. Times in seconds; percentiles are p50, p90, p99."""

    ttft: tuple[float, float, float]      # time to first token, s: p50, p90, p99
    tpot: tuple[float, float, float]      # time per output token after the first, s: p50, p90, p99
    throughput: float                     # generated tokens per second over the run (first arrival → last token)
    throughput_per_chip: float            # throughput / all chips (generation + prefill slices)
    mean_batch: float                     # average sequences per generation step
    duration: float                       # seconds from the first arrival to the last token
    completed: int                        # requests served
    n_chips: int                          # chips in all, prefill slices included
    ttft_all: tuple[float, ...] = field(repr=False, default=())   # every request's TTFT, s
    tpot_all: tuple[float, ...] = field(repr=False, default=())   # every request's TPOT, s

    def row(self) -> dict:
        """The headline numbers as a dict (for tables)."""
        return {"ttft_p50_s": self.ttft[0], "ttft_p99_s": self.ttft[2], "tpot_p50_s": self.tpot[0],
                "tpot_p99_s": self.tpot[2], "tokens_per_s": self.throughput,
                "tokens_per_s_per_chip": self.throughput_per_chip, "mean_batch": self.mean_batch}

    def __repr__(self) -> str:
        t = ", ".join(fmt(v, "s") for v in self.ttft)
        p = ", ".join(fmt(v, "s") for v in self.tpot)
        return (f"SimResult(TTFT p50/p90/p99 = {t}; TPOT p50/p90/p99 = {p}; "
                f"{fmt(self.throughput, 'tokens/s')} ({fmt(self.throughput_per_chip, 'tokens/s')} per chip); "
                f"mean batch {self.mean_batch:.1f}; {self.completed} requests)")


def _lengths(rng, median: int, spread: float, n: int, name: str) -> np.ndarray:
    if spread == 0:
        return np.full(n, median, dtype=np.int64)
    return np.maximum(1, np.round(median * np.exp(spread * rng.standard_normal(n)))).astype(np.int64)


def simulate(model, chip, n_chips: int, *, arrival_rate: float, n_requests: int = 200, prompt_len: int = 1024,
             decode_len: int = 256, length_spread: float = 0.0, max_batch: int | None = None,
             weight_dtype: str = "bf16", kv_dtype: str = "bf16", compute_dtype: str = "bf16",
             prefill_mfu: float = 0.5, prefix_hit_rate: float = 0.0, prefix_len: int = 0,
             disaggregated: bool = False, prefill_chips: int | None = None, prefill_servers: int = 1,
             seed: int = 0) -> SimResult:
    """Serve ``n_requests`` Poisson arrivals (``arrival_rate`` requests/s) of ``prompt_len`` prompt tokens and
    ``decode_len`` generated tokens (log-normal around those medians when ``length_spread`` > 0) on ``n_chips``
    chips; see the module docstring for the two engines. Returns a :class:`SimResult`."""
    c = as_config(model)
    m = machine(chip, compute_dtype)
    n = _chips(n_chips)
    rate = check_positive("arrival_rate", arrival_rate)
    N = check_positive("n_requests", n_requests, integer=True, maximum=MAX_REQUESTS)
    P = check_positive("prompt_len", prompt_len, integer=True, maximum=2**20)
    G = check_positive("decode_len", decode_len, integer=True, maximum=2**20)
    spread = check_positive("length_spread", length_spread, allow_zero=True, maximum=3.0)
    wd, kd = _storage(weight_dtype, "weight_dtype"), _storage(kv_dtype, "kv_dtype")
    check_positive("prefill_mfu", prefill_mfu, maximum=1.0)
    hit = check_positive("prefix_hit_rate", prefix_hit_rate, allow_zero=True, maximum=1.0)
    plen = check_positive("prefix_len", prefix_len, integer=True, allow_zero=True, maximum=2**20)
    if hit and not plen:
        raise ValueError("prefix_hit_rate > 0 needs prefix_len (the cached prefix, in tokens)")
    disaggregated = check_bool("disaggregated", disaggregated)
    n_pre = check_positive("prefill_servers", prefill_servers, integer=True, maximum=1024)
    pchips = n if prefill_chips is None else check_positive("prefill_chips", prefill_chips, integer=True,
                                                             maximum=2**20)
    seed = check_positive("seed", seed, integer=True, allow_zero=True, maximum=2**32 - 1)

    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, N))
    prompts = _lengths(rng, P, spread, N, "prompt_len")
    gens = _lengths(rng, G, spread, N, "decode_len")
    hits = rng.random(N) < hit
    longest = int(prompts.max() + gens.max())
    if max_batch is None:
        cap = _max_batch(c, chip, n, longest, weight_dtype=wd, kv_dtype=kd) if math.isfinite(m.hbm_bytes) else 256
    else:
        cap = check_positive("max_batch", max_batch, integer=True, maximum=2**16)
    cap = min(cap, 4096)

    # prefill durations (computed once per distinct (prompt, cached) pair)
    memo: dict = {}

    def prefill_s(i: int, chips: int) -> float:
        T = int(prompts[i])
        cached = min(plen, T - 1) if hits[i] else 0
        key = (T, cached, chips)
        if key not in memo:
            memo[key] = prefill_time(c, chip, chips, T, mfu=prefill_mfu, weight_dtype=wd,
                                     compute_dtype=compute_dtype, cached_len=cached).total
        return memo[key]

    # one generation step: kv_per_token · sum(context) + max(weights(B), flops_per_seq · B)
    kv_t = c.kv_bytes_per_token(kd) / (n * m.hbm_bw)
    flop_t = 2.0 * c.matmul_params_per_token() / (n * m.peak_flops)
    wbytes = dtype_bytes(wd) / (n * m.hbm_bw)
    w_t = [0.0] + [weight_params_read(c, b) * wbytes for b in range(1, cap + 1)]

    first = np.full(N, np.nan)
    last = np.full(N, np.nan)
    t = float(arrivals[0])
    active: list = []          # heap of (finish step index, request)
    ctx_sum = 0                # sum of the active contexts (tokens cached)
    step_idx = 0
    batch_steps = 0
    steps = 0
    ready: list = []           # (time its first token exists, request) waiting for a generation slot
    nxt = 0                    # next request not yet admitted to prefill (interleaved) or to ready (disagg.)
    remaining = {}             # request -> tokens still to generate

    if disaggregated:
        free_at = [float(arrivals[0])] * n_pre
        heapq.heapify(free_at)
        for i in range(N):
            start = max(float(arrivals[i]), heapq.heappop(free_at))
            done = start + prefill_s(i, pchips)
            heapq.heappush(free_at, done)
            first[i] = done
            ready.append((done, i))
        ready.sort()
        ready_pos = 0

    def admit(i: int) -> None:
        nonlocal ctx_sum
        remaining[i] = int(gens[i]) - 1
        if remaining[i] == 0:
            last[i] = first[i]
            return
        ctx_sum += int(prompts[i]) + 1
        heapq.heappush(active, (step_idx + remaining[i], i))

    while True:
        if disaggregated:
            while ready_pos < N and len(active) < cap and ready[ready_pos][0] <= t:
                admit(ready[ready_pos][1])
                ready_pos += 1
            if not active:
                if ready_pos >= N:
                    break
                t = max(t, ready[ready_pos][0])
                continue
        else:
            if nxt < N and len(active) < cap and arrivals[nxt] <= t:
                t += prefill_s(nxt, n)
                first[nxt] = t
                admit(nxt)
                nxt += 1
                continue
            if not active:
                if nxt >= N:
                    break
                t = max(t, float(arrivals[nxt]))
                continue
        B = len(active)
        t += kv_t * ctx_sum + max(w_t[B], flop_t * B)
        ctx_sum += B
        step_idx += 1
        steps += 1
        batch_steps += B
        if steps > MAX_STEPS:
            raise ValueError(f"the simulation passed {MAX_STEPS:,} generation steps; ask for fewer requests or "
                             "shorter decode_len")
        while active and active[0][0] <= step_idx:
            _, i = heapq.heappop(active)
            last[i] = t
            ctx_sum -= int(prompts[i]) + int(gens[i])

    ttft = first - arrivals
    tpot = np.where(gens > 1, (last - first) / np.maximum(gens - 1, 1), 0.0)
    duration = float(np.nanmax(last) - arrivals[0])
    total_chips = n + (n_pre * pchips if disaggregated else 0)
    tokens = float(gens.sum())
    pct = (50, 90, 99)
    return SimResult(ttft=tuple(float(v) for v in np.percentile(ttft, pct)),
                     tpot=tuple(float(v) for v in np.percentile(tpot, pct)),
                     throughput=tokens / duration, throughput_per_chip=tokens / duration / total_chips,
                     mean_batch=batch_steps / steps if steps else 0.0, duration=duration, completed=N,
                     n_chips=total_chips, ttft_all=tuple(float(v) for v in ttft),
                     tpot_all=tuple(float(v) for v in tpot))


__all__ = ["MAX_REQUESTS", "SimResult", "simulate"]
