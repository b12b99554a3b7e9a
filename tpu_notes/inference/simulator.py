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
KV load of the tokens actually cached (paged attention: sum of the active contexts), through the same formula
(:meth:`~tpu_notes.inference.step.DecodeStepModel.seconds`). The weights and the largest batch's KV caches must fit
in the chips' memory: a deployment that cannot hold them is refused (naming ``n_chips`` and the chip). A prefill takes
:func:`~tpu_notes.inference.step.prefill_time` at ``prefill_mfu``; with ``prefix_hit_rate`` > 0 that share of
requests finds its first ``prefix_len`` tokens in a prefix cache and computes only the rest.

Reported: time to first token (arrival → first token), time per output token (first → last token, over the
tokens after the first), their percentiles, and tokens generated per second. Same arguments, same result.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np

from ..transformer import Model
from ..units import Bool, Fraction, Positive, PositiveFloat, Range, checked, fmt
from .serving import max_batch as _max_batch
from .step import MAX_MODEL_BATCH, Chips, ComputeDType, StorageDType, decode_step_model, machine, prefill_time

#: Largest number of requests one simulation serves (each is simulated token by token).
MAX_REQUESTS = 100_000
#: Largest number of generation steps one simulation runs.
MAX_STEPS = 5_000_000


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` measured. Times in seconds; percentiles are p50, p90, p99."""

    ttft: tuple[float, float, float]  # time to first token, s: p50, p90, p99
    tpot: tuple[float, float, float]  # time per output token after the first, s: p50, p90, p99
    throughput: float  # generated tokens per second over the run (first arrival → last token)
    throughput_per_chip: float  # throughput / all chips (generation + prefill slices)
    mean_batch: float  # average sequences per generation step
    duration: float  # seconds from the first arrival to the last token
    completed: int  # requests served
    n_chips: int  # chips in all, prefill slices included
    ttft_all: tuple[float, ...] = field(repr=False, default=())  # every request's TTFT, s
    tpot_all: tuple[float, ...] = field(repr=False, default=())  # every request's TPOT, s

    def row(self) -> dict:
        """The headline numbers as a dict (for tables)."""
        return {
            "ttft_p50_s": self.ttft[0],
            "ttft_p99_s": self.ttft[2],
            "tpot_p50_s": self.tpot[0],
            "tpot_p99_s": self.tpot[2],
            "tokens_per_s": self.throughput,
            "tokens_per_s_per_chip": self.throughput_per_chip,
            "mean_batch": self.mean_batch,
        }

    def __repr__(self) -> str:
        t = ", ".join(fmt(v, "s") for v in self.ttft)
        p = ", ".join(fmt(v, "s") for v in self.tpot)
        return (
            f"SimResult(TTFT p50/p90/p99 = {t}; TPOT p50/p90/p99 = {p}; "
            f"{fmt(self.throughput, 'tokens/s')} ({fmt(self.throughput_per_chip, 'tokens/s')} per chip); "
            f"mean batch {self.mean_batch:.1f}; {self.completed} requests)"
        )


def _lengths(rng, median: int, spread: float, n: int, name: str) -> np.ndarray:
    if spread == 0:
        return np.full(n, median, dtype=np.int64)
    return np.maximum(1, np.round(median * np.exp(spread * rng.standard_normal(n)))).astype(np.int64)


#: Longest prompt or generation (median, tokens) one simulated request may have.
MAX_REQUEST_LEN = 2**20
_Len = Annotated[int, Positive(integer=True, maximum=MAX_REQUEST_LEN)]
_Share = Annotated[float, Range(0.0, 1.0)]


@checked
def simulate(
    model: Model,
    chip,
    n_chips: Chips,
    *,
    arrival_rate: PositiveFloat,
    n_requests: Annotated[int, Positive(integer=True, maximum=MAX_REQUESTS)] = 200,
    prompt_len: _Len = 1024,
    decode_len: _Len = 256,
    length_spread: Annotated[float, Range(0.0, 3.0)] = 0.0,
    max_batch: Annotated[int, Positive(integer=True, maximum=MAX_MODEL_BATCH)] | None = None,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    prefill_mfu: Fraction = 0.5,
    prefix_hit_rate: _Share = 0.0,
    prefix_len: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_REQUEST_LEN)] = 0,
    disaggregated: Bool = False,
    prefill_chips: Chips | None = None,
    prefill_servers: Annotated[int, Positive(integer=True, maximum=1024)] = 1,
    seed: Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**32 - 1)] = 0,
) -> SimResult:
    """Serve ``n_requests`` Poisson arrivals (``arrival_rate`` requests/s) of ``prompt_len`` prompt tokens and
    ``decode_len`` generated tokens (log-normal around those medians when ``length_spread`` > 0) on ``n_chips``
    chips; see the module docstring for the two engines. Returns a :class:`SimResult`."""
    c = model
    m = machine(chip, compute_dtype)
    n, rate, N, P, G, spread = n_chips, arrival_rate, n_requests, prompt_len, decode_len, length_spread
    wd, kd, hit, plen, n_pre = weight_dtype, kv_dtype, prefix_hit_rate, prefix_len, prefill_servers
    if hit and not plen:
        raise ValueError("prefix_hit_rate > 0 needs prefix_len (the cached prefix, in tokens)")
    pchips = n if prefill_chips is None else prefill_chips

    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, N))
    prompts = _lengths(rng, P, spread, N, "prompt_len")
    gens = _lengths(rng, G, spread, N, "decode_len")
    hits = rng.random(N) < hit
    longest = int(prompts.max() + gens.max())
    # what memory holds (refuses a deployment whose weights and one longest sequence do not fit, naming n_chips)
    fits = _max_batch(c, chip, n, longest, weight_dtype=wd, kv_dtype=kd) if math.isfinite(m.hbm_bytes) else 256
    if max_batch is not None and max_batch > fits:
        raise ValueError(
            f"max_batch={max_batch} sequences of up to {longest:,} tokens do not fit in the memory of "
            f"n_chips={n} {m.name} chips beside the weights; at most {fits}"
        )
    cap = min(fits if max_batch is None else max_batch, MAX_MODEL_BATCH)
    if disaggregated and math.isfinite(m.hbm_bytes):
        _max_batch(c, chip, pchips, longest, weight_dtype=wd, kv_dtype=kd)  # a prefill slice must hold the model

    # prefill durations (computed once per distinct (prompt, cached) pair)
    memo: dict = {}

    def prefill_s(i: int, chips: int) -> float:
        T = int(prompts[i])
        cached = min(plen, T - 1) if hits[i] else 0
        key = (T, cached, chips)
        if key not in memo:
            memo[key] = prefill_time(
                c, chip, chips, T, mfu=prefill_mfu, weight_dtype=wd, compute_dtype=compute_dtype, cached_len=cached
            ).total
        return memo[key]

    # one generation step: Chapter 7's step-time formula at the current batch and the sum of its contexts
    step_s = decode_step_model(c, chip, n, cap, weight_dtype=wd, kv_dtype=kd, compute_dtype=compute_dtype).seconds

    first = np.full(N, np.nan)
    last = np.full(N, np.nan)
    t = float(arrivals[0])
    active: list = []  # heap of (finish step index, request)
    ctx_sum = 0  # sum of the active contexts (tokens cached)
    step_idx = 0
    batch_steps = 0
    steps = 0
    ready: list = []  # (time its first token exists, request) waiting for a generation slot
    nxt = 0  # next request not yet admitted to prefill (interleaved) or to ready (disagg.)
    remaining = {}  # request -> tokens still to generate

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
        t += step_s(B, ctx_sum)
        ctx_sum += B
        step_idx += 1
        steps += 1
        batch_steps += B
        if steps > MAX_STEPS:
            raise ValueError(
                f"the simulation passed {MAX_STEPS:,} generation steps; ask for fewer requests or shorter decode_len"
            )
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
    return SimResult(
        ttft=tuple(float(v) for v in np.percentile(ttft, pct)),
        tpot=tuple(float(v) for v in np.percentile(tpot, pct)),
        throughput=tokens / duration,
        throughput_per_chip=tokens / duration / total_chips,
        mean_batch=batch_steps / steps if steps else 0.0,
        duration=duration,
        completed=N,
        n_chips=total_chips,
        ttft_all=tuple(float(v) for v in ttft),
        tpot_all=tuple(float(v) for v in tpot),
    )


__all__ = ["MAX_REQUESTS", "SimResult", "simulate"]
