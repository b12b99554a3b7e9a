"""Request streams for the serving simulator (Chapter 7): how long prompts and answers are, and when requests come.

A :class:`LengthDistribution` draws token counts: a fixed length, a log-normal clipped to ``[low, high]``, or a
mixture of log-normals (:meth:`LengthDistribution.sharegpt_like`, a stand-in for the ShareGPT conversations that
vLLM's, SGLang's and JetStream's serving benchmarks replay). A :class:`Workload` is ``n_requests`` requests with
their arrivals:

- ``"poisson"``: independent arrivals at ``rate`` requests/s (exponential gaps), what ``--request-rate`` does in
  vLLM's ``benchmark_serving.py``;
- ``"bursty"``: gamma-distributed gaps of the same mean ``1/rate`` and coefficient of variation ``cv`` > 1 (the
  same shape as that script's ``--burstiness`` factor ``k``, whose gaps have ``cv = 1/sqrt(k)``): requests come in
  clumps separated by lulls;
- ``"closed"``: ``concurrency`` clients, each sending its next request the moment its previous one completes (a
  benchmark's "max concurrency"). Arrival times then depend on the server, so :meth:`Workload.draw` gives zeros for
  the first ``concurrency`` requests and leaves the rest to the simulator.

A ``prefix_share`` of the requests (chosen at random) start with the same ``prefix_len`` tokens (a system prompt, a
few-shot preamble), put in front of their drawn prompt: what prefix caching exploits. Same workload, same requests:
everything is drawn from ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from ..units import OneOf, Positive, PositiveFloat, Probability, Range, check_choice, check_fields, checked

#: Most requests one workload holds (the simulator serves each token by token).
MAX_REQUESTS = 100_000
#: Longest prompt or answer, tokens.
MAX_LENGTH = 2**20
#: Most lengths one :meth:`LengthDistribution.sample` call draws (80 MB of int64).
MAX_DRAW = 10_000_000
#: Most log-normal components of one mixture.
MAX_COMPONENTS = 16
#: Arrival processes.
ARRIVALS = ("poisson", "bursty", "closed")
#: Longest a stream of arrivals may last on average, ``n_requests / rate`` seconds (about 32 years). The simulator's
#: clock adds step times of microseconds to arrival times; past ``1e9`` s a float keeps them to a tenth of a
#: microsecond at best, and a rate so low that the span overflows turns every percentile into NaN.
MAX_SPAN = 1e9
#: Highest arrival rate, requests/s: a trillion a second; above it the gaps between arrivals (``1 / rate`` s) head
#: for the subnormal floats, whose sums lose their digits.
MAX_RATE = 1e12

_Requests = Annotated[int, Positive(integer=True, maximum=MAX_REQUESTS)]
_Length = Annotated[int, Positive(integer=True, maximum=MAX_LENGTH)]
_Seed = Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**32 - 1)]
_Sigma = Annotated[float, Range(0.0, 5.0)]
_CV = Annotated[float, Range(1.0, 100.0, low_open=True)]

# ShareGPT-like lengths, tokens. Sources:
# - the means: JetStream's serving benchmark replaying ShareGPT with Llama 3's tokenizer reported 1780 requests,
#   214,914 input tokens and 415,416 generated tokens, i.e. 120.7 prompt and 233.4 output tokens per request
#   (AI-Hypercomputer/JetStream pull request #83, "Update benchmark script to easily test llama-3", 2024-05-17);
# - the bounds: vLLM's benchmarks drop ShareGPT pairs whose prompt or answer is under 4 tokens, whose prompt is over
#   1024 or whose prompt + answer is over 2048 (vllm-project/vllm benchmarks/benchmark_dataset.py,
#   is_valid_sequence, commit 0049e29c41fd383bda519a3f250e3227713081ef). We clip each part to [4, 1024], which keeps
#   every pair under 2048.
# - the shape is ours, not measured: a two-part log-normal mixture (many short chat turns, a tail of pasted
#   documents and long answers) whose medians we tuned until the clipped means match the figures above (121.97 and
#   233.6 tokens by the formula of LengthDistribution.mean). Prompt and answer lengths are drawn independently; in
#   the real data they are weakly correlated.
SHAREGPT_PROMPT = ((0.7, 30.0, 1.0), (0.3, 220.0, 0.8))  # (weight, median tokens, sigma of ln)
SHAREGPT_OUTPUT = ((0.5, 84.0, 0.9), (0.5, 290.0, 0.6))
SHAREGPT_BOUNDS = (4, 1024)
#: Gap coefficient of variation of a ``"bursty"`` workload unless stated: 2. A choice, not a measurement. vLLM's
#: serving benchmark draws gamma gaps of shape ``burstiness`` and mean ``1/rate`` (so ``cv = 1/sqrt(burstiness)``:
#: 2 is its ``--burstiness 0.25``; vllm-project/vllm benchmarks/benchmark_serving.py, ``get_request``, commit
#: 0049e29c41fd383bda519a3f250e3227713081ef); BurstGPT (Wang et al., arXiv:2401.17644) models production arrivals
#: of Azure OpenAI services with gamma-distributed gaps too.
DEFAULT_CV = 2.0
#: Length jitter of a closed loop's requests unless stated: each prompt and answer length times a uniform factor in
#: [0.9, 1.1]. Why: clients in a closed loop send their next request the moment the last one completes. With fixed
#: lengths and simultaneous starts, every client's request is prefilled in the same step, decodes in the same
#: batch, completes at the same step and is replaced at the same instant: the clients move in synchronised waves,
#: each wave's prompts queue behind each other, and the first-token time reads as a wave's prefill rather than
#: the steady state a benchmark client sees (issue 38 measured +58% to +109% against NIM's published TTFT). Real
#: clients are never that regular (tokenisation, network and client-side delays, stop tokens); a tenth either way
#: spreads completions over tens of decode steps and breaks the waves (a test holds it), while keeping each mean
#: length (a symmetric factor, rounded).
CLOSED_JITTER = 0.1


def _check_rate(rate: float, n_requests: int, *, argument: str = "rate") -> float:
    """``rate`` (requests/s) as the arrival rate of ``n_requests`` requests: at most :data:`MAX_RATE`, and high
    enough that the stream's mean span ``n_requests / rate`` is at most :data:`MAX_SPAN` seconds. Refusals name
    ``argument``, the caller's. Returns ``rate``."""
    if rate > MAX_RATE:
        raise ValueError(
            f"{argument} ({rate:.3g} requests/s) must be at most MAX_RATE ({MAX_RATE:.0e} requests/s): the gaps "
            "between arrivals would vanish into the float's rounding"
        )
    span = n_requests / rate
    if not span <= MAX_SPAN:
        raise ValueError(
            f"{argument} ({rate:.3g} requests/s) makes {n_requests:,} requests span {span:.3g} s, more than "
            f"MAX_SPAN ({MAX_SPAN:.0e} s, about 32 years): at least {n_requests / MAX_SPAN:.3g} requests/s"
        )
    return rate


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _clipped_lognormal_mean(median: float, sigma: float, low: float, high: float) -> float:
    """``E[min(max(X, low), high)]`` for ``X = median * exp(sigma * Z)``, ``Z`` standard normal."""
    if sigma == 0.0:
        return min(max(median, low), high)
    mu = math.log(median)
    a, b = (math.log(low) - mu) / sigma, (math.log(high) - mu) / sigma
    inside = math.exp(mu + sigma * sigma / 2.0) * (_phi(b - sigma) - _phi(a - sigma))
    return low * _phi(a) + high * (1.0 - _phi(b)) + inside


@dataclass(frozen=True)
class LengthDistribution:
    """Token counts: a mixture of log-normals, each draw rounded and clipped to ``[low, high]``.

    Build one with :meth:`fixed`, :meth:`lognormal`, :meth:`mixture` or :meth:`sharegpt_like`."""

    components: tuple  # ((weight, median tokens, sigma of ln(length)), ...); weights add up to 1
    low: int = 1  # shortest length, tokens
    high: int = MAX_LENGTH  # longest length, tokens
    name: str = ""  # a label for tables and charts

    def __post_init__(self):
        comps = self.components
        if isinstance(comps, (str, bytes)) or not isinstance(comps, (tuple, list)):
            raise TypeError(
                f"components must be a tuple of (weight, median, sigma) triples; got {type(comps).__name__} {comps!r}"
            )
        if not 1 <= len(comps) <= MAX_COMPONENTS:
            raise ValueError(f"components must hold 1 to {MAX_COMPONENTS} (weight, median, sigma) triples")
        out = []
        for i, c in enumerate(comps):
            if isinstance(c, (str, bytes)) or not isinstance(c, (tuple, list)) or len(c) != 3:
                raise TypeError(f"components[{i}] must be a (weight, median, sigma) triple; got {c!r}")
            w = Range(0.0, 1.0, low_open=True).check(f"components[{i}] weight", c[0])
            med = Positive(maximum=MAX_LENGTH).check(f"components[{i}] median", c[1])
            sig = Range(0.0, 5.0).check(f"components[{i}] sigma", c[2])
            if med < 1.0:
                raise ValueError(f"components[{i}] median must be at least 1 token; got {med!r}")
            out.append((w, med, sig))
        total = sum(w for w, _, _ in out)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"components' weights must add up to 1; they add up to {total!r}")
        object.__setattr__(self, "components", tuple(out))
        low = Positive(integer=True, maximum=MAX_LENGTH).check("low", self.low)
        high = Positive(integer=True, maximum=MAX_LENGTH).check("high", self.high)
        if low > high:
            raise ValueError(f"low ({low}) must not exceed high ({high})")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}")

    # ------------------------------------------------------------------------------------------ constructors
    @classmethod
    @checked
    def fixed(cls, n: _Length) -> LengthDistribution:
        """Always ``n`` tokens."""
        return cls(((1.0, float(n), 0.0),), n, n, f"{n}")

    @classmethod
    @checked
    def lognormal(
        cls, median: Annotated[float, Positive(maximum=MAX_LENGTH)], sigma: _Sigma, low: _Length = 1,
        high: _Length = MAX_LENGTH,
    ) -> LengthDistribution:  # fmt: skip
        """``median × exp(sigma × Z)`` tokens, rounded, clipped to ``[low, high]``."""
        if median < 1.0:
            raise ValueError(f"median must be at least 1 token; got {median!r}")
        return cls(((1.0, median, sigma),), low, high, f"lognormal({median:g}, {sigma:g})")

    @classmethod
    def mixture(cls, components, low: int = 1, high: int = MAX_LENGTH, name: str = "") -> LengthDistribution:
        """A mixture of log-normals, ``components = ((weight, median, sigma), ...)``, clipped to ``[low, high]``."""
        return cls(components, low, high, name)

    @classmethod
    @checked
    def sharegpt_like(cls, part: Annotated[str, OneOf(("prompt", "output"))] = "prompt") -> LengthDistribution:
        """ShareGPT-like prompt (``part="prompt"``) or answer (``part="output"``) lengths, in Llama 3 tokens: the
        means a ShareGPT replay measured (121 and 233 tokens), vLLM's length filter, a mixture shape of our own
        (the comment above ``SHAREGPT_PROMPT`` in this module gives the sources)."""
        comps = SHAREGPT_PROMPT if part == "prompt" else SHAREGPT_OUTPUT
        return cls(comps, *SHAREGPT_BOUNDS, f"ShareGPT-like {part}")

    # ------------------------------------------------------------------------------------------ use
    @property
    def mean(self) -> float:
        """Mean length, tokens: the clipped mixture's mean in closed form (before rounding to whole tokens, which
        moves it by well under a token for any spread-out component)."""
        return sum(w * _clipped_lognormal_mean(m, s, self.low, self.high) for w, m, s in self.components)

    @property
    def longest(self) -> int:
        """The longest length a draw can have, tokens (``high``, or less when no component spreads)."""
        if all(s == 0.0 for _, _, s in self.components):
            return int(min(max(round(max(m for _, m, _ in self.components)), self.low), self.high))
        return self.high

    def sample(self, rng, n: int) -> np.ndarray:
        """``n`` lengths (an int64 array) drawn with the numpy Generator ``rng``."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)); got {rng!r}")
        n = Positive(integer=True, allow_zero=True, maximum=MAX_DRAW).check("n", n)
        comps = self.components
        if len(comps) == 1:
            _, med, sig = comps[0]
            meds, sigs = np.full(n, med), np.full(n, sig)
        else:
            pick = rng.choice(len(comps), size=n, p=[w for w, _, _ in comps])
            meds = np.array([m for _, m, _ in comps])[pick]
            sigs = np.array([s for _, _, s in comps])[pick]
        x = meds * np.exp(sigs * rng.standard_normal(n))
        return np.clip(np.rint(x), self.low, self.high).astype(np.int64)

    def __repr__(self) -> str:
        label = self.name or "mixture"
        return f"LengthDistribution({label}: mean {self.mean:.1f} tokens in [{self.low}, {self.high}])"


@dataclass(frozen=True, eq=False)
class Requests:
    """One draw of a :class:`Workload`: per-request arrays (numpy, length ``n_requests``)."""

    arrivals: np.ndarray  # arrival times, s (closed loop: 0 for the first `concurrency`, NaN for the rest)
    prompts: np.ndarray  # prompt tokens (int64), the shared prefix included where there is one
    outputs: np.ndarray  # output tokens to generate (int64, >= 1)
    shared_prefix: np.ndarray  # True where the prompt starts with the workload's shared prefix


@dataclass(frozen=True)
class Workload:
    """A stream of requests for :func:`~tpu_notes.inference.simulate` (see the module docstring). Build one
    directly or with :meth:`poisson`, :meth:`bursty` or :meth:`closed`."""

    n_requests: _Requests = 1000  # requests in the stream
    arrival: str = "poisson"  # "poisson", "bursty" or "closed"
    rate: PositiveFloat | None = None  # mean arrival rate, requests/s (needed by "poisson" and "bursty")
    prompt: LengthDistribution = LengthDistribution.sharegpt_like("prompt")  # prompt lengths
    output: LengthDistribution = LengthDistribution.sharegpt_like("output")  # answer lengths (tokens generated)
    cv: _CV = DEFAULT_CV  # coefficient of variation of the gaps ("bursty" only; Poisson gaps have 1)
    concurrency: Annotated[int, Positive(integer=True, maximum=MAX_REQUESTS)] | None = None  # "closed": clients
    prefix_share: Probability = 0.0  # share of requests whose prompt starts with the shared prefix
    prefix_len: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_LENGTH)] = 0  # its tokens (added)
    seed: _Seed = 0  # seed of every draw
    jitter: Annotated[float, Range(0.0, 0.5)] | None = None  # "closed": each prompt and answer length times a
    # uniform factor in [1 - jitter, 1 + jitter] (None: CLOSED_JITTER for a closed loop, 0 otherwise)

    def __post_init__(self):
        check_fields(self)
        if self.jitter is None:
            object.__setattr__(self, "jitter", CLOSED_JITTER if self.arrival == "closed" else 0.0)
        elif self.jitter and self.arrival != "closed":
            raise ValueError(f"jitter applies only to arrival='closed'; got jitter={self.jitter!r} with "
                             f"{self.arrival!r}")  # fmt: skip
        object.__setattr__(self, "arrival", check_choice("arrival", self.arrival, ARRIVALS))
        for f in ("prompt", "output"):
            if not isinstance(getattr(self, f), LengthDistribution):
                raise TypeError(
                    f"{f} must be a LengthDistribution (e.g. LengthDistribution.fixed(512)); got "
                    f"{type(getattr(self, f)).__name__}"
                )
        if self.arrival == "closed":
            if self.concurrency is None:
                raise ValueError("concurrency must be given (clients in the loop) when arrival is 'closed'")
            if self.rate is not None:
                raise ValueError("rate must be None when arrival is 'closed' (the clients set the pace)")
        else:
            if self.rate is None:
                raise ValueError(f"rate must be given (requests/s) when arrival is {self.arrival!r}")
            if self.concurrency is not None:
                raise ValueError("concurrency applies only to arrival='closed'; leave it None")
            _check_rate(self.rate, self.n_requests)
        if self.arrival != "bursty" and self.cv != DEFAULT_CV:
            raise ValueError(f"cv applies only to arrival='bursty'; got cv={self.cv!r} with {self.arrival!r}")
        if self.prefix_share > 0 and self.prefix_len == 0:
            raise ValueError("prefix_len must be positive (the shared tokens) when prefix_share > 0")
        if self.prefix_len and self.prefix_share == 0:
            raise ValueError("prefix_share must be positive when prefix_len is given (or leave prefix_len 0)")

    # ------------------------------------------------------------------------------------------ constructors
    @classmethod
    @checked
    def poisson(
        cls, rate: PositiveFloat, n_requests: _Requests = 1000, prompt: LengthDistribution | None = None,
        output: LengthDistribution | None = None, seed: _Seed = 0,
    ) -> Workload:  # fmt: skip
        """Poisson arrivals at ``rate`` requests/s (lengths ShareGPT-like unless given)."""
        return cls(n_requests, "poisson", rate, *_lengths(prompt, output), seed=seed)

    @classmethod
    @checked
    def bursty(
        cls, rate: PositiveFloat, cv: _CV = DEFAULT_CV, n_requests: _Requests = 1000,
        prompt: LengthDistribution | None = None, output: LengthDistribution | None = None, seed: _Seed = 0,
    ) -> Workload:  # fmt: skip
        """Gamma-gapped arrivals: mean rate ``rate`` requests/s, gap coefficient of variation ``cv`` > 1."""
        return cls(n_requests, "bursty", rate, *_lengths(prompt, output), cv=cv, seed=seed)

    @classmethod
    @checked
    def closed(
        cls, concurrency: Annotated[int, Positive(integer=True, maximum=MAX_REQUESTS)], n_requests: _Requests = 1000,
        prompt: LengthDistribution | None = None, output: LengthDistribution | None = None, seed: _Seed = 0,
        jitter: Annotated[float, Range(0.0, 0.5)] = CLOSED_JITTER,
    ) -> Workload:  # fmt: skip
        """``concurrency`` clients in a closed loop, ``n_requests`` requests in all, lengths jittered by up to
        ``jitter`` either way (see :data:`CLOSED_JITTER` for why)."""
        return cls(n_requests, "closed", None, *_lengths(prompt, output), concurrency=concurrency, seed=seed,
                   jitter=jitter)  # fmt: skip

    # ------------------------------------------------------------------------------------------ use
    @property
    def mean_prompt(self) -> float:
        """Mean prompt length, tokens (:attr:`LengthDistribution.mean`, plus the shared prefix where it is)."""
        return self.prompt.mean + self.prefix_share * self.prefix_len

    @property
    def longest(self) -> int:
        """The longest request a draw can hold, prompt + answer, tokens."""
        return (
            _jittered_max(self.prompt.longest, self.jitter)
            + self.prefix_len
            + _jittered_max(self.output.longest, self.jitter)
        )

    @property
    def mean_output(self) -> float:
        """Mean answer length, tokens."""
        return self.output.mean

    def draw(self) -> Requests:
        """The requests, drawn from ``seed`` in a fixed order (gaps, prompts, answers, prefix flags): the same
        workload always gives the same arrays."""
        rng = np.random.default_rng(self.seed)
        n = self.n_requests
        if self.arrival == "poisson":
            arrivals = np.cumsum(rng.exponential(1.0 / self.rate, n))
        elif self.arrival == "bursty":
            shape = 1.0 / (self.cv * self.cv)  # a gamma's cv is 1/sqrt(shape); its mean shape*scale = 1/rate
            arrivals = np.cumsum(rng.gamma(shape, 1.0 / (self.rate * shape), n))
        else:
            arrivals = np.full(n, np.nan)
            arrivals[: min(self.concurrency, n)] = 0.0
        prompts = self.prompt.sample(rng, n)
        outputs = self.output.sample(rng, n)
        shared = rng.random(n) < self.prefix_share if self.prefix_share > 0 else np.zeros(n, dtype=bool)
        if self.jitter:  # drawn last, so that every other draw is the same with or without it
            j = self.jitter
            prompts = np.clip(np.rint(prompts * rng.uniform(1 - j, 1 + j, n)), 1, MAX_LENGTH).astype(np.int64)
            outputs = np.clip(np.rint(outputs * rng.uniform(1 - j, 1 + j, n)), 1, MAX_LENGTH).astype(np.int64)
        if self.prefix_len:
            prompts = prompts + np.where(shared, self.prefix_len, 0)
        return Requests(arrivals=arrivals, prompts=prompts, outputs=outputs, shared_prefix=shared)

    def __repr__(self) -> str:
        how = {
            "poisson": f"Poisson at {self.rate:g} req/s",
            "bursty": f"bursty at {self.rate:g} req/s (cv {self.cv:g})",
            "closed": f"closed loop of {self.concurrency} clients",
        }[self.arrival]
        pre = f"; {self.prefix_share:.0%} share a {self.prefix_len}-token prefix" if self.prefix_share else ""
        return (
            f"Workload({self.n_requests:,} requests, {how}; prompts {self.prompt.mean:.0f} tokens, answers "
            f"{self.output.mean:.0f} tokens on average{pre}; seed {self.seed})"
        )


def _jittered_max(n: int, jitter: float) -> int:
    return min(int(math.floor(n * (1 + jitter) + 0.5)), MAX_LENGTH) if jitter else n


def _lengths(prompt, output):
    p = LengthDistribution.sharegpt_like("prompt") if prompt is None else prompt
    o = LengthDistribution.sharegpt_like("output") if output is None else output
    return p, o


__all__ = [
    "ARRIVALS",
    "CLOSED_JITTER",
    "DEFAULT_CV",
    "MAX_RATE",
    "MAX_REQUESTS",
    "MAX_SPAN",
    "LengthDistribution",
    "Requests",
    "Workload",
]
