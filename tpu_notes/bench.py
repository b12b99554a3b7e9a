"""Measure the machine the notebook runs on, and hold it against the model (Chapter 1).

One place times JAX code (:func:`time_fn`): the function is compiled first and the compile time is kept apart,
it is run a few times to warm up, every run ends with ``block_until_ready`` (JAX dispatches asynchronously, so a
timer without it measures only the dispatch), and the median of several runs is reported.

On top of it: a sweep of matmuls (:func:`matmul_sweep`), memory-bandwidth probes that stream arrays of growing
size through ``sum(x)`` (reads only) and ``x + 1`` (reads and writes) (:func:`copy_sweep`), a fit of the peak
FLOP/s and the memory bandwidth from those
measurements (:func:`fit_roofline`), and :func:`measure_roofline`, which does all three on JAX's default device.
On a laptop or CI runner that device is the CPU, and the numbers describe the CPU; on a TPU or GPU runtime the same
calls measure the accelerator, and :func:`compare` prints the measurement beside the chip model of
:mod:`tpu_notes.hardware`.

    python -m tpu_notes.bench        # a short suite on whatever devices are present

JAX is imported inside the functions, so ``import tpu_notes`` stays JAX-free.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Annotated, Any

from .table import Column, Table
from .units import OneOf, Positive, canonical_dtype, capped, check_choice, check_positive, checked, dtype_bytes, fmt

#: Dtypes the measurements can run in (JAX dtypes for the tpu_notes names).
BENCH_DTYPES = ("bf16", "fp32")

#: Bytes touched by one call of a bandwidth probe at and above which the data cannot all sit in a cache: twice the
#: 32 MB last-level cache of this book's CI CPU, and above the 50 MB L2 of an H100/H200.
DEFAULT_MIN_COPY_BYTES = 6.4e7

#: The bandwidth probes: "sum" reads an array once (``jnp.sum(x)``); "add" reads it and writes a new one (``x + 1``).
COPY_OPS = ("sum", "add")


# ----------------------------------------------------------------------------------------------------- timing
@dataclass(frozen=True)
class Timing:
    """How long one call of a function takes, in seconds, from several timed runs after a warm-up."""

    compile_s: float  # lowering + compiling (or the first call, for a function that is not jitted)
    median_s: float  # median seconds per call: the number to quote
    min_s: float  # fastest sample, seconds per call
    max_s: float  # slowest sample, seconds per call
    samples: tuple[float, ...]  # every sample, seconds per call (each the mean of `number` back-to-back calls)
    number: int  # calls per sample (more than 1 for calls too short to time alone)
    warmup: int  # untimed calls made before the samples

    @property
    def repeats(self) -> int:
        """How many samples the statistics come from."""
        return len(self.samples)

    def __repr__(self) -> str:
        return (
            f"Timing(median={fmt(self.median_s, 's')}, min={fmt(self.min_s, 's')}, "
            f"max={fmt(self.max_s, 's')}, compile={fmt(self.compile_s, 's')}, "
            f"repeats={self.repeats}, number={self.number})"
        )


#: Upper bounds on the knobs of a measurement: a typo must not run a timing loop for hours. At the caps a
#: microsecond-scale call is timed in seconds.
MAX_REPEATS = 1000
MAX_NUMBER = 100_000
#: Largest matmul dimension and matmul (FLOPs, 2·B·D·F) one measurement times: above the default TPU/GPU sweep's
#: [8192, 8192] x [8192, 8192] (1.1e12 FLOPs, under a second on an accelerator).
MAX_MATMUL_DIM = 2**16
MAX_MATMUL_FLOPS = 2.0e12
#: Largest array one bandwidth probe streams, bytes (the default sweeps stop at 512 MiB).
MAX_COPY_BYTES = 2**32
#: Most devices a collective measurement spans.
MAX_DEVICES = 4096
#: Most entries of one sweep's list of shapes or sizes.
MAX_SWEEP = 64

#: The argument kinds of the measurements.
Repeats = capped(MAX_REPEATS)
Warmup = Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_REPEATS)]
Number = capped(MAX_NUMBER)
MatmulDim = capped(MAX_MATMUL_DIM)
CopyBytes = capped(MAX_COPY_BYTES)
Devices = capped(MAX_DEVICES)


def memory_limit_bytes() -> float:
    """Half the host's physical memory (bytes): the most a single measurement may allocate."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2
    except (ValueError, OSError, AttributeError):
        return 2.0**34


def check_fits(name: str, nbytes: float) -> None:
    """Refuse a measurement that would allocate ``nbytes`` bytes, more than :func:`memory_limit_bytes`, with a
    ``ValueError`` naming ``name`` (the argument that sets the size). Every measurement of the package
    (:mod:`tpu_notes.bench`, :mod:`tpu_notes.transfer`) checks its arrays with it before allocating them."""
    if not isinstance(name, str):
        raise TypeError(f"name must be the argument's name, a string; got {type(name).__name__}")
    nbytes = check_positive("nbytes", nbytes, allow_zero=True)
    limit = memory_limit_bytes()
    if nbytes > limit:
        raise ValueError(
            f"{name} asks for {nbytes:.3g} bytes; a measurement may use at most half the host's "
            f"memory, {limit:.3g} bytes"
        )


def _block(out: Any) -> Any:
    """Wait until every JAX array in ``out`` is computed (leaves that are not arrays pass through)."""
    import jax

    return jax.block_until_ready(out)


@checked
def time_fn(
    fn: Callable,
    *args,
    repeats: Repeats = 5,
    warmup: Warmup = 1,
    number: Number | None = None,
    target_s: Annotated[float, Positive(maximum=60.0)] = 2e-3,
    max_number: Number = 1000,
) -> Timing:
    """Time ``fn(*args)`` and return a :class:`Timing` (seconds per call).

    - A jitted function (one with ``.lower``) is lowered and compiled first, and that time is ``compile_s``;
      the compiled executable is what gets timed. Any other callable's first call is timed as ``compile_s``
      (it includes whatever compiling it triggers) and counts as a warm-up.
    - ``warmup`` more calls run untimed; then ``repeats`` samples are taken, each of ``number`` back-to-back calls
      ending in ``block_until_ready``. ``number=None`` picks enough calls for a sample to last about ``target_s``
      seconds (at most ``max_number``), so that microsecond-scale calls are not lost in timer noise.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")

    start = time.perf_counter()
    if hasattr(fn, "lower"):
        call = fn.lower(*args).compile()
        compile_s = time.perf_counter() - start
    else:
        call = fn
        _block(call(*args))
        compile_s = time.perf_counter() - start
    one = None
    for _ in range(warmup):
        t0 = time.perf_counter()
        _block(call(*args))
        one = time.perf_counter() - t0
    if number is None:
        if one is None:  # no warm-up asked for: one extra untimed call to size the samples
            t0 = time.perf_counter()
            _block(call(*args))
            one = time.perf_counter() - t0
        number = int(min(max_number, max(1, math.ceil(target_s / max(one, 1e-9)))))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = None
        for _ in range(number):
            out = call(*args)
        _block(out)
        samples.append((time.perf_counter() - t0) / number)
    return Timing(
        compile_s=compile_s,
        median_s=statistics.median(samples),
        min_s=min(samples),
        max_s=max(samples),
        samples=tuple(samples),
        number=number,
        warmup=warmup,
    )


# ------------------------------------------------------------------------------------------------ measurements
@dataclass(frozen=True)
class Measurement:
    """One timed operation with its FLOP and byte counts (from the formulas of Chapter 1)."""

    kind: str  # "matmul" or "copy" (a bandwidth probe: sum(x) or x + 1)
    label: str  # e.g. "matmul [64, 4096] x [4096, 4096] fp32"
    flops: float  # FLOPs of one call
    nbytes: float  # bytes one call must read and write at least once
    seconds: float  # median seconds per call
    dtype: str  # tpu_notes dtype name of the operands
    timing: Timing | None = None  # the full timing (None for synthetic measurements)
    shape: tuple[int, ...] = ()  # (B, D, F) of a matmul, (elements,) of a copy
    op: str = ""  # the bandwidth probe of a copy, "sum" or "add"; "" for a matmul

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s."""
        return self.flops / self.seconds

    @property
    def bytes_per_s(self) -> float:
        """Achieved bytes/s (counting each operand once)."""
        return self.nbytes / self.seconds

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return self.flops / self.nbytes

    def __repr__(self) -> str:
        return (
            f"Measurement({self.label!r}: {fmt(self.seconds, 's')}, {fmt(self.flops_per_s, 'FLOP/s')}, "
            f"{fmt(self.bytes_per_s, 'B/s')}, intensity {self.intensity:.3g} FLOPs/B)"
        )


def _platform() -> str:
    import jax

    return jax.default_backend()


def default_dtype(platform: str | None = None) -> str:
    """The dtype to measure in: ``"bf16"`` on TPUs and GPUs (what their peaks are quoted for), ``"fp32"`` on CPUs."""
    platform = _platform() if platform is None else _check_platform(platform)
    return "fp32" if platform == "cpu" else "bf16"


#: JAX platform names the defaults know.
PLATFORMS = ("cpu", "gpu", "tpu")


def _check_platform(platform) -> str:
    return check_choice("platform", platform, PLATFORMS)


def _jnp_dtype(dtype: str):
    import jax.numpy as jnp

    dtype = canonical_dtype(dtype)
    if dtype not in BENCH_DTYPES:
        raise ValueError(f"dtype must be one of {list(BENCH_DTYPES)} for a measurement; got {dtype!r}")
    return {"bf16": jnp.bfloat16, "fp32": jnp.float32}[dtype]


def default_matmul_shapes(platform: str | None = None) -> tuple[tuple[int, int, int], ...]:
    """``(B, D, F)`` shapes swept by default: weights larger than the caches, ``B`` from 1 up past the ridge.

    CPU: ``[B, 4096] @ [4096, 4096]`` in fp32 (64 MB of weights, twice a 32 MB L3), ``B`` = 1 ... 512, about a
    second in all on two cores. TPU/GPU: ``[B, 8192] @ [8192, 8192]`` in bf16 (128 MB), ``B`` = 1 ... 8192.
    """
    platform = _platform() if platform is None else _check_platform(platform)
    if platform == "cpu":
        return tuple((b, 4096, 4096) for b in (1, 2, 8, 32, 128, 512))
    return tuple((b, 8192, 8192) for b in (1, 8, 64, 256, 1024, 4096, 8192))


#: On a CPU the bandwidth probes' large arrays are these multiples of the detected last-level cache (LLC): several
#: times the cache, so that at most a small part of each array can come from it and the rest from main memory.
LLC_MULTIPLES = (4, 6, 8)


def last_level_cache_bytes() -> int | None:
    """Size in bytes of this CPU's last-level cache, or None when the operating system does not say.

    Read from Linux's ``/sys/devices/system/cpu/cpu0/cache/index*/`` (the data or unified cache of the highest
    level), else from ``os.sysconf`` (``SC_LEVEL3_CACHE_SIZE``, then ``SC_LEVEL2_CACHE_SIZE``). It is one cache
    instance: one socket's (or one core complex's) L3 on a server, which is what one probe's data streams through.
    """
    import os
    from pathlib import Path

    best = None
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind.lower() == "instruction" or not size:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1)
        try:
            nbytes = int(size.rstrip("KMG")) * scale
        except ValueError:
            continue
        if nbytes > 0 and (best is None or level > best[0]):
            best = (level, nbytes)
    if best is not None:
        return best[1]
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            value = os.sysconf(name)
        except (ValueError, OSError, AttributeError):
            continue
        if value and value > 0:
            return int(value)
    return None


def available_memory_bytes() -> float | None:
    """Bytes of memory the host can still give out (Linux's MemAvailable), or None when unknown."""
    import os

    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def default_copy_sizes(platform: str | None = None, cache_bytes: float | None = None) -> tuple[int, ...]:
    """Array sizes in bytes for the bandwidth probes: three cache-sized ones (1, 4, 16 MiB) and large ones.

    On a CPU the large arrays are ``LLC_MULTIPLES`` (4x, 6x and 8x) of the last-level cache (``cache_bytes``, default
    :func:`last_level_cache_bytes`), each at most an eighth of the memory available now; without a known cache,
    64 and 128 MiB. On a TPU or GPU: up to 512 MiB, far beyond any on-chip memory.
    """
    platform = _platform() if platform is None else _check_platform(platform)
    small = [2**20, 2**22, 2**24]
    if platform != "cpu":
        return tuple(small + [2**26, 2**27, 2**28, 2**29])
    llc = last_level_cache_bytes() if cache_bytes is None else check_positive("cache_bytes", cache_bytes)
    if llc is None:
        large = [2**26, 2**27]
    else:
        large = [k * llc for k in LLC_MULTIPLES]
        available = available_memory_bytes()
        if available:
            large = [min(size, available / 8) for size in large]
        large = [max(2**20, int(min(size, MAX_COPY_BYTES)) // 2**20 * 2**20) for size in large]  # whole MiB
    return tuple(sorted(set([s for s in small if s < min(large)] + large)))


def memory_level(platform: str, array_bytes: float, cache_bytes: float | None) -> str:
    """Which level of the memory hierarchy a bandwidth probe over ``array_bytes``-byte arrays measures, given the
    ``platform`` ("cpu", "tpu", "gpu") and the CPU's last-level cache in bytes (None: unknown)."""
    platform = _check_platform(platform)
    array_bytes = check_positive("array_bytes", array_bytes)
    if cache_bytes is not None:
        cache_bytes = check_positive("cache_bytes", cache_bytes)
    if platform != "cpu":
        return f"device memory (HBM on a TPU or a datacenter GPU), {platform}"
    if cache_bytes is None:
        return "main memory (DRAM), presumably: the size of the last-level cache is unknown here"
    times = array_bytes / cache_bytes
    if times >= 2:
        return f"main memory (DRAM): the arrays are {times:.0f}x or more the {fmt(cache_bytes, 'B')} last-level cache"
    return f"partly the last-level cache: arrays of {fmt(array_bytes, 'B')} beside a {fmt(cache_bytes, 'B')} cache"


@checked
def measure_matmul(
    B: MatmulDim,
    D: MatmulDim,
    F: MatmulDim,
    dtype: str = "fp32",
    repeats: Repeats = 3,
    seed: Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**63 - 1)] = 0,
) -> Measurement:
    """Time ``x[B, D] @ w[D, F]`` on JAX's default device (random normal operands from ``seed``)."""
    import jax

    from .roofline import matmul_bytes, matmul_flops

    if 2.0 * B * D * F > MAX_MATMUL_FLOPS:
        raise ValueError(
            f"B, D, F: a [{B}, {D}] x [{D}, {F}] matmul is {2.0 * B * D * F:.3g} FLOPs, more than one "
            f"measurement times (MAX_MATMUL_FLOPS = {MAX_MATMUL_FLOPS:.3g})"
        )
    jdt = _jnp_dtype(dtype)
    dtype = canonical_dtype(dtype)
    check_fits("B, D, F", matmul_bytes(B, D, F, dtype, dtype, dtype))
    kx, kw = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (B, D), jdt)
    w = jax.random.normal(kw, (D, F), jdt)
    timing = time_fn(jax.jit(lambda a, b: a @ b), x, w, repeats=repeats)
    del x, w
    return Measurement(
        kind="matmul",
        label=f"matmul [{B}, {D}] x [{D}, {F}] {dtype}",
        flops=matmul_flops(B, D, F),
        nbytes=matmul_bytes(B, D, F, dtype, dtype, dtype),
        seconds=timing.median_s,
        dtype=dtype,
        timing=timing,
        shape=(B, D, F),
    )


@checked
def measure_copy(
    nbytes: CopyBytes, dtype: str = "fp32", repeats: Repeats = 3, op: Annotated[str, OneOf(COPY_OPS)] = "add"
) -> Measurement:
    """Time a bandwidth probe over an array of about ``nbytes`` bytes.

    - ``op="add"``: ``x = x + 1`` reads the array and writes it back: ``2 * nbytes`` bytes, one FLOP per element.
      The input buffer is donated, so the output reuses it in place (as an optimizer updates weights); without
      donation a CPU spends most of the time obtaining fresh pages from the operating system, not moving data.
    - ``op="sum"``: ``jnp.sum(x)`` reads the array once: ``nbytes`` bytes (plus one element written), one FLOP per
      element. Reads alone are what streaming weights through a matmul costs.
    """
    import jax
    import jax.numpy as jnp

    check_fits("nbytes", 2 * nbytes)
    jdt = _jnp_dtype(dtype)
    dtype = canonical_dtype(dtype)
    n = max(1, int(nbytes // dtype_bytes(dtype)))
    x = jnp.ones((n,), jdt)
    if op == "sum":
        timing = time_fn(jax.jit(lambda a: jnp.sum(a)), x, repeats=repeats)
    else:
        step = jax.jit(lambda a: a + 1, donate_argnums=0)
        state = [x]

        def add_in_place():
            state[0] = step(state[0])
            return state[0]

        timing = time_fn(add_in_place, repeats=repeats)  # first call (compile + run) is reported as compile_s
        del state
    del x
    size = n * dtype_bytes(dtype)
    moved = 2.0 * size if op == "add" else size + dtype_bytes(dtype)
    what = "x + 1" if op == "add" else "sum(x)"
    return Measurement(
        kind="copy",
        label=f"{what} over {fmt(size, 'B')} {dtype}",
        flops=float(n),
        nbytes=moved,
        seconds=timing.median_s,
        dtype=dtype,
        timing=timing,
        shape=(n,),
        op=op,
    )


def _check_sweep(name: str, seq, of: str, empty: str, entries: str) -> None:
    """Check that the sweep ``seq`` is a list (``of`` says of what) of 1 to :data:`MAX_SWEEP` ``entries``; ``empty``
    is the error for an empty one."""
    if isinstance(seq, (str, bytes)) or not isinstance(seq, (list, tuple)):
        raise TypeError(f"{name} must be a list{of}; got {type(seq).__name__} {seq!r}")
    if not seq:
        raise ValueError(f"{name} {empty}")
    if len(seq) > MAX_SWEEP:
        raise ValueError(f"{name} lists {len(seq)} {entries}; a sweep takes at most {MAX_SWEEP}")


def _checked_shapes(name: str, shapes) -> tuple:
    """``shapes`` as a tuple of (B, D, F) tuples, every entry checked (and sized against memory) up front."""
    from .units import check_sizes

    _check_sweep(name, shapes, " of (B, D, F) tuples", "must name at least one (B, D, F) matmul", "matmuls")
    out = []
    for i, shape in enumerate(shapes):
        shape = check_sizes(f"{name}[{i}]", shape)
        if len(shape) != 3:
            raise ValueError(f"each entry of {name} must be (B, D, F); got {name}[{i}]={shape!r}")
        if max(shape) > MAX_MATMUL_DIM or 2.0 * math.prod(shape) > MAX_MATMUL_FLOPS:
            raise ValueError(
                f"{name}[{i}]={shape!r}: dimensions must be <= {MAX_MATMUL_DIM} and 2·B·D·F <= "
                f"{MAX_MATMUL_FLOPS:.3g} FLOPs (MAX_MATMUL_DIM, MAX_MATMUL_FLOPS)"
            )
        check_fits(f"{name}[{i}]", 4 * (shape[0] * shape[1] + shape[1] * shape[2] + shape[0] * shape[2]))
        out.append(shape)
    return tuple(out)


def _checked_sizes(name: str, sizes) -> tuple:
    """``sizes`` (bytes) as a tuple, every entry positive, finite and within memory."""
    _check_sweep(name, sizes, " of sizes in bytes", "must list at least one array size in bytes", "sizes")
    for i, size in enumerate(sizes):
        check_fits(f"{name}[{i}]", 2 * check_positive(f"{name}[{i}]", size, maximum=MAX_COPY_BYTES))
    return tuple(sizes)


def _checked_ops(name: str, ops) -> tuple:
    """The bandwidth probes named by ``ops`` (one name or a list of names from :data:`COPY_OPS`)."""
    ops = (ops,) if isinstance(ops, str) else ops
    if not isinstance(ops, (list, tuple)):
        raise TypeError(f"{name} must be a list of probe names from {list(COPY_OPS)}; got {type(ops).__name__}")
    if not ops:
        raise ValueError(f"{name} must list at least one of {list(COPY_OPS)}")
    return tuple(check_choice(name, op, COPY_OPS) for op in ops)


@checked
def matmul_sweep(
    shapes: Sequence[tuple[int, int, int]] | None = None, dtype: str | None = None, repeats: Repeats = 3
) -> tuple[Measurement, ...]:
    """Time a matmul for each ``(B, D, F)`` of ``shapes`` (default :func:`default_matmul_shapes`)."""
    shapes = default_matmul_shapes() if shapes is None else _checked_shapes("shapes", shapes)
    dtype = default_dtype() if dtype is None else dtype
    _jnp_dtype(dtype)
    return tuple(measure_matmul(*shape, dtype=dtype, repeats=repeats) for shape in shapes)


@checked
def copy_sweep(
    sizes: Sequence[int] | None = None, dtype: str | None = None, repeats: Repeats = 3, ops: Sequence[str] = COPY_OPS
) -> tuple[Measurement, ...]:
    """Run each bandwidth probe of ``ops`` ("sum", "add") over arrays of each size in ``sizes`` bytes
    (default :func:`default_copy_sizes`)."""
    sizes = default_copy_sizes() if sizes is None else _checked_sizes("sizes", sizes)
    ops = _checked_ops("ops", ops)
    dtype = default_dtype() if dtype is None else dtype
    _jnp_dtype(dtype)
    return tuple(measure_copy(s, dtype=dtype, repeats=repeats, op=op) for op in ops for s in sizes)


# ------------------------------------------------------------------------------------------------------- fit
@dataclass(frozen=True)
class FittedRoofline:
    """The roofline of a machine, read off measurements."""

    peak_flops: float  # FLOP/s: the fastest matmul's achieved FLOP/s
    bandwidth: float  # bytes/s: median over the probes too large for a cache (of the faster probe op)
    critical_intensity: float  # peak_flops / bandwidth, FLOPs per byte
    peak_from: str  # label of the measurement that set the peak
    bandwidth_from: str  # label of the measurement that set the bandwidth (the probe at the median)
    min_copy_bytes: float = DEFAULT_MIN_COPY_BYTES  # probes touching fewer bytes per call were left out (cache)
    bandwidth_spread: tuple[float, ...] = ()  # (lowest, highest) bytes/s over every timed sample of those probes
    bandwidth_probes: tuple[str, ...] = ()  # labels of the probes the bandwidth is the median of

    def attainable(self, intensity: float) -> float:
        """FLOP/s this roofline allows at ``intensity`` FLOPs/byte: ``min(peak, intensity * bandwidth)``."""
        return min(self.peak_flops, check_positive("intensity", intensity) * self.bandwidth)

    def __repr__(self) -> str:
        return (
            f"FittedRoofline(peak={fmt(self.peak_flops, 'FLOP/s')}, bandwidth={fmt(self.bandwidth, 'B/s')}, "
            f"critical intensity={self.critical_intensity:.3g} FLOPs/B)"
        )


def fit_roofline(measurements: Sequence[Measurement], min_copy_bytes: float = DEFAULT_MIN_COPY_BYTES) -> FittedRoofline:
    """Fit a roofline to measurements: peak = max achieved FLOP/s over the matmuls; bandwidth = the median
    (upper median) achieved bytes/s over the ``"copy"`` (bandwidth probe) measurements that touch at least
    ``min_copy_bytes``
    bytes per call, taken for each probe op ("sum", "add") and kept for the faster op; ``bandwidth_spread`` gives
    the lowest and highest rate of any timed sample of those probes.

    Why a maximum for the peak: no operation beats the roof, so every achieved rate is a lower bound on it, and
    the best large matmul is the tightest. Why a median for the bandwidth: memory bandwidth on a shared machine
    varies from run to run by more than a factor of two, so one best run says little; the median of the
    probes (each itself the median of its samples) is what a program can expect, and the spread says how much
    to trust it. Small copies are left out because they run from cache, faster than main memory allows.
    """
    if isinstance(measurements, (str, bytes)) or not isinstance(measurements, (list, tuple)):
        raise TypeError(f"measurements must be a list of Measurement objects; got {type(measurements).__name__}")
    measurements = tuple(measurements)
    for m in measurements:
        if not isinstance(m, Measurement):
            raise TypeError(f"measurements must be Measurement objects; got {type(m).__name__}")
    min_copy_bytes = check_positive("min_copy_bytes", min_copy_bytes, allow_zero=True)
    matmuls = [m for m in measurements if m.kind == "matmul"]
    copies = [m for m in measurements if m.kind == "copy" and m.nbytes >= min_copy_bytes]
    if not matmuls:
        raise ValueError("measurements must include at least one kind='matmul' measurement to fit the peak")
    if not copies:
        raise ValueError(
            f"measurements must include a kind='copy' measurement moving >= min_copy_bytes="
            f"{min_copy_bytes:.3g} bytes to fit the bandwidth"
        )
    best_m = max(matmuls, key=lambda m: m.flops_per_s)
    medians = []  # per probe op: (median bytes/s, the probe at the median, the op's probes)
    for op in sorted({m.op for m in copies}):
        probes = sorted((m for m in copies if m.op == op), key=lambda m: m.bytes_per_s)
        middle = probes[len(probes) // 2]  # the upper median: a real probe, whose label names it
        medians.append((middle.bytes_per_s, middle, probes))
    bandwidth, at_median, probes = max(medians, key=lambda t: t[0])
    rates = [m.nbytes / s for m in probes for s in (m.timing.samples if m.timing else (m.seconds,))]
    return FittedRoofline(
        peak_flops=best_m.flops_per_s,
        bandwidth=bandwidth,
        critical_intensity=best_m.flops_per_s / bandwidth,
        peak_from=best_m.label,
        bandwidth_from=at_median.label,
        min_copy_bytes=min_copy_bytes,
        bandwidth_spread=(min(rates), max(rates)),
        bandwidth_probes=tuple(m.label for m in probes),
    )


# ------------------------------------------------------------------------------------------ the whole experiment
@dataclass(frozen=True)
class RooflineMeasurement:
    """Everything :func:`measure_roofline` measured on one device."""

    platform: str  # "cpu", "tpu" or "gpu"
    device_kind: str  # JAX's device_kind, e.g. "cpu" or "TPU v5 lite"
    chip: str | None  # tpu_notes chip name of the device, None for a CPU or an unknown device
    dtype: str  # dtype of the matmuls and the probe
    matmuls: tuple[Measurement, ...]  # the matmul sweep
    copies: tuple[Measurement, ...]  # the bandwidth probes
    fit: FittedRoofline  # roofline fitted to both
    wall_s: float  # seconds the whole measurement took, compiles included
    cache_bytes: float | None = None  # the CPU's last-level cache, bytes (None: unknown, or an accelerator)
    memory_level: str = ""  # which level of the memory hierarchy the bandwidth probes measured

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        """Matmuls then copies."""
        return self.matmuls + self.copies


@checked
def measure_roofline(
    matmul_shapes: Sequence[tuple[int, int, int]] | None = None,
    copy_sizes: Sequence[int] | None = None,
    dtype: str | None = None,
    repeats: Repeats = 5,
    min_copy_bytes: float | str = "cache",
    copy_ops: Sequence[str] = COPY_OPS,
) -> RooflineMeasurement:
    """Measure the default device's roofline: a matmul sweep, the bandwidth probes and their fit.

    ``min_copy_bytes="cache"`` (the default) fits the bandwidth to the probes that touch at least twice the
    CPU's last-level cache (:func:`last_level_cache_bytes`; ``DEFAULT_MIN_COPY_BYTES`` on an accelerator or when
    the cache is unknown), or to the largest probe when none is that large (``memory_level`` then says
    "cache"); a number sets that threshold in bytes, and no probe reaching it is a ``ValueError``. The default
    probe sizes
    (:func:`default_copy_sizes`) reach several times that cache. With the defaults this takes a few seconds on a
    2-core CPU and well under that on an accelerator.
    """
    from .devices import describe

    # every argument is checked before anything is measured
    if matmul_shapes is not None:
        _checked_shapes("matmul_shapes", matmul_shapes)
    if copy_sizes is not None:
        _checked_sizes("copy_sizes", copy_sizes)
    _checked_ops("copy_ops", copy_ops)
    if not (isinstance(min_copy_bytes, str) and min_copy_bytes == "cache"):
        min_copy_bytes = check_positive("min_copy_bytes", min_copy_bytes, allow_zero=True)
    if dtype is not None:
        _jnp_dtype(dtype)
    start = time.perf_counter()
    info = describe()
    cache = last_level_cache_bytes() if info.platform == "cpu" else None
    auto = isinstance(min_copy_bytes, str)
    if auto:
        min_copy_bytes = 2.0 * cache if cache else DEFAULT_MIN_COPY_BYTES
    dtype = canonical_dtype(dtype if dtype is not None else default_dtype(info.platform))
    matmuls = matmul_sweep(
        matmul_shapes if matmul_shapes is not None else default_matmul_shapes(info.platform),
        dtype=dtype,
        repeats=repeats,
    )
    copies = copy_sweep(
        copy_sizes if copy_sizes is not None else default_copy_sizes(info.platform, cache),
        dtype=dtype,
        repeats=repeats,
        ops=copy_ops,
    )
    if auto:  # a CPU whose cache outgrows the probes asked for (300 MB L3s exist): fit the largest probe, and
        # memory_level below says it ran from cache, rather than refusing a call that is valid elsewhere
        min_copy_bytes = min(min_copy_bytes, max(m.nbytes for m in copies))
    fit = fit_roofline(matmuls + copies, min_copy_bytes=min_copy_bytes)
    smallest = min(m.shape[0] * dtype_bytes(m.dtype) for m in copies if m.label in fit.bandwidth_probes)
    return RooflineMeasurement(
        platform=info.platform,
        device_kind=info.device_kind,
        chip=info.chip,
        dtype=dtype,
        matmuls=matmuls,
        copies=copies,
        fit=fit,
        wall_s=time.perf_counter() - start,
        cache_bytes=cache,
        memory_level=memory_level(info.platform, smallest, cache),
    )


@dataclass(frozen=True)
class BenchRow:
    """One line of the suite: a measured quantity beside the chip model's prediction."""

    name: str  # e.g. "matmul peak"
    unit: str  # "FLOP/s" or "B/s"
    measured: float  # what this machine achieved
    predicted: float | None  # the chip model's figure (None when there is no model for the device)
    ratio: float | None  # measured / predicted (None without a prediction)


def _datasheet(result: RooflineMeasurement, chip) -> tuple:
    """The chip model to set beside ``result`` (``chip``, else the detected chip; ``None`` for a CPU) and its matmul
    peak in ``result.dtype`` (``None`` without a model or a published peak), once ``result`` is checked."""
    from .hardware import get_chip

    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a RooflineMeasurement; got {type(result).__name__}")
    name = chip if chip is not None else result.chip
    model = get_chip(name) if name is not None else None
    peak = None
    if model is not None:
        try:
            peak = model.peak_flops(result.dtype)
        except ValueError:  # e.g. fp32: no published matmul peak in the table
            peak = None
    return model, peak


def compare(result: RooflineMeasurement, chip=None) -> tuple[BenchRow, ...]:
    """Rows of measured peak FLOP/s and bandwidth beside ``chip``'s datasheet figures (default: the detected
    chip; none for a CPU). A ratio near 1 means the model describes this machine; well below 1 is the usual
    gap between a datasheet peak and what one un-tuned program reaches."""
    model, peak = _datasheet(result, chip)
    bw = None if model is None else model.hbm_bw
    rows = []
    for label, unit, measured, predicted in (
        ("matmul peak", "FLOP/s", result.fit.peak_flops, peak),
        ("memory bandwidth", "B/s", result.fit.bandwidth, bw),
    ):
        rows.append(
            BenchRow(
                name=label,
                unit=unit,
                measured=measured,
                predicted=predicted,
                ratio=None if predicted is None else measured / predicted,
            )
        )
    return tuple(rows)


def _check_rows(rows, kind) -> None:
    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, (list, tuple))
        or not all(isinstance(r, kind) for r in rows)
    ):
        raise TypeError(f"rows must be a list of {kind.__name__}; got {rows!r}")


def format_rows(rows: Sequence[BenchRow]) -> str:
    """The rows of :func:`compare` as an aligned plain-text table."""
    _check_rows(rows, BenchRow)
    lines = [f"{'quantity':<18}{'measured':>18}{'model':>18}{'ratio':>8}"]
    for r in rows:
        model = "—" if r.predicted is None else fmt(r.predicted, r.unit)
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"{r.name:<18}{fmt(r.measured, r.unit):>18}{model:>18}{ratio:>8}")
    return "\n".join(lines)


def report(result: RooflineMeasurement, chip=None) -> str:
    """A short text report of ``result``: device, fitted roofline, and the comparison with the chip model."""
    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a RooflineMeasurement; got {type(result).__name__}")
    name = chip if chip is not None else result.chip
    lines = [
        f"device: {result.device_kind} ({result.platform}), dtype {result.dtype}, measured in {fmt(result.wall_s, 's')}"
    ]
    if name is None:
        lines.append("no tpu_notes chip model for this device (a CPU has none): measured numbers only")
    else:
        lines.append(f"chip model: {name}")
    fit = result.fit
    lines.append(f"peak: the best matmul, {fit.peak_from}")
    if fit.bandwidth_spread:
        lines.append(
            f"bandwidth: median of {len(fit.bandwidth_probes)} probe(s) ({fit.bandwidth_from}); "
            f"samples from {fmt(fit.bandwidth_spread[0], 'B/s')} to {fmt(fit.bandwidth_spread[1], 'B/s')}"
        )
    else:
        lines.append(f"bandwidth from {fit.bandwidth_from}")
    if result.memory_level:
        lines.append(f"memory measured: {result.memory_level}")
    lines.append(format_rows(compare(result, chip)))
    lines.append(f"critical intensity (measured): {result.fit.critical_intensity:.3g} FLOPs/byte")
    return "\n".join(lines)


def build_parser():
    """The ``argparse`` parser of ``python -m tpu_notes.bench`` (also ``python -m tpu_notes bench``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tpu_notes.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default=None, help="compare with this tpu_notes chip instead of the detected one")
    parser.add_argument("--dtype", default=None, choices=BENCH_DTYPES, help="measure in this dtype")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per operation (median reported)")
    parser.add_argument("--json", action="store_true", help="print the measurements and the fit as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m tpu_notes.bench``: measure the default device and print the report."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be a whole number >= 1; got {args.repeats}")
    if args.chip is not None:
        from .hardware import get_chip

        try:
            get_chip(args.chip, "--chip")  # before measuring: a bad name fails at once
        except (ValueError, TypeError) as err:
            parser.error(str(err))
    result = measure_roofline(dtype=args.dtype, repeats=args.repeats)
    if args.json:
        import json

        print(json.dumps(result_json(result, chip=args.chip), indent=1))
    else:
        print(report(result, chip=args.chip))
    return 0


def result_json(result: RooflineMeasurement, chip=None) -> dict:
    """A :class:`RooflineMeasurement` as plain JSON-ready data (SI units; seconds, bytes, FLOP/s), with the
    predictions of :func:`predict` beside each measurement (what ``python -m tpu_notes bench --json`` prints)."""
    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a RooflineMeasurement from measure_roofline(); got {type(result).__name__}")

    def meas(m: Measurement) -> dict:
        return {
            "kind": m.kind,
            "label": m.label,
            "shape": list(m.shape),
            "dtype": m.dtype,
            "flops": m.flops,
            "bytes": m.nbytes,
            "seconds": m.seconds,
            "flops_per_s": m.flops_per_s,
            "bytes_per_s": m.bytes_per_s,
        }

    f = result.fit
    return {
        "platform": result.platform,
        "device_kind": result.device_kind,
        "chip": result.chip,
        "dtype": result.dtype,
        "wall_s": result.wall_s,
        "cache_bytes": result.cache_bytes,
        "memory_level": result.memory_level,
        "fit": {
            "peak_flops_per_s": f.peak_flops,
            "bandwidth_bytes_per_s": f.bandwidth,
            "critical_intensity": f.critical_intensity,
            "peak_from": f.peak_from,
            "bandwidth_from": f.bandwidth_from,
            "bandwidth_spread": list(f.bandwidth_spread),
        },
        "matmuls": [meas(m) for m in result.matmuls],
        "copies": [meas(m) for m in result.copies],
        "predictions": [
            {"label": p.label, "measured_s": p.measured_s, "fitted_s": p.fitted_s, "model_s": p.model_s}
            for p in predict(result, chip)
        ],
    }


# ------------------------------------------------------------------------------------------ collectives (Ch. 3)
@dataclass(frozen=True)
class CollectiveMeasurement:
    """One timed collective on the current devices (Chapter 3)."""

    kind: str  # "all-gather", "reduce-scatter", "all-reduce" or "all-to-all"
    nbytes: float  # V: the whole (gathered / unreduced) array, bytes
    n_devices: int  # devices on the axis
    seconds: float  # median seconds per call
    timing: Timing | None = None

    def __repr__(self) -> str:
        return f"CollectiveMeasurement({self.kind}, V={fmt(self.nbytes, 'B')}, {fmt(self.seconds, 's')})"


def _check_mesh_axis(mesh, axis) -> int:
    """The size of mesh ``axis``, or an error naming ``mesh`` or ``axis``."""
    if not hasattr(mesh, "axis_names") or not hasattr(mesh, "shape"):
        raise TypeError(f"mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    if not isinstance(axis, str) or axis not in mesh.axis_names:
        raise ValueError(f"axis must name a mesh axis, one of {list(mesh.axis_names)}; got {axis!r}")
    return int(mesh.shape[axis])


def _collective_program(kind: str, mesh, axis: str, dim: int, ndim: int):
    """``(jitted program, input spec)``: collective ``kind`` under ``shard_map`` on an ``ndim``-D array split along
    ``dim`` over mesh ``axis`` (what :func:`run_collective` runs and :func:`measure_collective` times)."""
    import jax
    from jax.sharding import PartitionSpec as P

    from .compat import shard_map

    spec_in = P(*[axis if i == dim else None for i in range(ndim)])
    if kind == "all-gather":
        body = lambda b: jax.lax.all_gather(b, axis, axis=dim, tiled=True)  # noqa: E731
        out_spec, vma = P(), False
    elif kind == "all-reduce":
        body = lambda b: jax.lax.psum(b, axis)  # noqa: E731
        out_spec, vma = P(), True
    elif kind == "reduce-scatter":
        body = lambda b: jax.lax.psum_scatter(b, axis, scatter_dimension=dim, tiled=True)  # noqa: E731
        out_spec, vma = spec_in, True
    else:
        body = lambda b: jax.lax.all_to_all(b, axis, split_axis=dim + 1, concat_axis=dim, tiled=True)  # noqa: E731
        out_spec, vma = P(*[axis if i == dim + 1 else None for i in range(ndim)]), True
    return jax.jit(shard_map()(body, mesh=mesh, in_specs=spec_in, out_specs=out_spec, check_vma=vma)), spec_in


def run_collective(kind: str, x, mesh, axis: str, *, dim: int = 0):
    """Run collective ``kind`` for real with ``jax.shard_map`` on ``x`` split along ``dim`` over mesh ``axis``
    (Chapter 3; :mod:`tpu_notes.collectives` prices the same ops).

    Returns the global result as JAX sees it:

    * ``"all-gather"``: every device ends with the whole of ``x`` (the result is ``x`` itself, replicated);
    * ``"reduce-scatter"``: ``x`` holds one addend per device stacked along ``dim`` (shape ``(N·m, ...)``); the
      result is their sum, split over ``axis``;
    * ``"all-reduce"``: same input; the result is the sum, replicated;
    * ``"all-to-all"``: ``x`` split along ``dim`` becomes split along ``dim + 1``: the values are unchanged, only
      which device holds which block moves.
    """
    import jax
    from jax.sharding import NamedSharding

    from . import collectives

    kind = collectives.canonical_kind(kind)
    n = _check_mesh_axis(mesh, axis)
    if not hasattr(x, "ndim") or not hasattr(x, "shape"):
        raise TypeError(f"x must be an array; got {type(x).__name__}")
    nd = x.ndim
    top = nd - 2 if kind == "all-to-all" else nd - 1
    if isinstance(dim, bool) or not isinstance(dim, Integral) or not 0 <= dim <= top:
        raise ValueError(f"dim must be an integer from 0 to {top} for a {kind} of a {nd}-D array; got {dim!r}")
    dim = int(dim)
    if x.shape[dim] % n:
        raise ValueError(f"x.shape[{dim}]={x.shape[dim]} must be divisible by the {n} devices of mesh axis {axis!r}")
    check_fits("x", 2 * n * x.size * x.dtype.itemsize)
    f, spec_in = _collective_program(kind, mesh, axis, dim, nd)
    return f(jax.device_put(x, NamedSharding(mesh, spec_in)))


def ring_all_gather(x, mesh, axis: str):
    """An AllGather written by hand as a bidirectional ring of ``jax.lax.ppermute`` hops (Chapter 3).

    ``x`` (split along dimension 0 over ``axis``) comes back whole on every device, as ``lax.all_gather`` would
    give; each of the ``⌈(N−1)/2⌉`` hops sends one block to each neighbour.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from .compat import shard_map

    n = _check_mesh_axis(mesh, axis)
    if not hasattr(x, "ndim") or x.ndim < 1:
        raise TypeError(f"x must be an array of at least one dimension; got {type(x).__name__}")
    if x.shape[0] % n:
        raise ValueError(f"x.shape[0]={x.shape[0]} must be divisible by the {n} devices of mesh axis {axis!r}")
    check_fits("x", 2 * n * x.size * x.dtype.itemsize)
    x = jax.device_put(x, NamedSharding(mesh, P(axis)))
    to_right = [(i, (i + 1) % n) for i in range(n)]
    to_left = [(i, (i - 1) % n) for i in range(n)]

    def body(block):
        me = jax.lax.axis_index(axis)
        out = jnp.zeros((n,) + block.shape, block.dtype).at[me].set(block)
        r, l_ = block, block
        for hop in range(1, math.ceil((n - 1) / 2) + 1):
            r = jax.lax.ppermute(r, axis, to_right)  # now holds block me - hop
            l_ = jax.lax.ppermute(l_, axis, to_left)  # now holds block me + hop
            out = out.at[(me - hop) % n].set(r).at[(me + hop) % n].set(l_)
        return out.reshape((n * block.shape[0],) + block.shape[1:])

    f = jax.jit(shard_map()(body, mesh=mesh, in_specs=P(axis), out_specs=P(), check_vma=False))
    return f(x)


@checked
def measure_collective(
    kind: str,
    nbytes: Annotated[float, Positive(maximum=MAX_COPY_BYTES)],
    n_devices: Devices = 8,
    dtype: str = "fp32",
    repeats: Repeats = 3,
) -> CollectiveMeasurement:
    """Time one collective over a 1D mesh of ``n_devices`` devices (``tpu_notes.devices.demo_devices``) on an
    array of ``nbytes`` bytes (the whole array ``V`` of the cost model). Uses ``jax.shard_map`` collectives."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    from . import collectives
    from .compat import make_mesh
    from .devices import demo_devices

    kind = collectives.canonical_kind(kind)
    n = n_devices
    available = len(demo_devices(n))
    if n > available:
        raise ValueError(
            f"n_devices={n} but only {available} devices are available "
            "(tpu_notes.devices.setup(n) before JAX starts gives more simulated ones)"
        )
    _jnp_dtype(dtype)
    dtype = canonical_dtype(dtype)
    check_fits("nbytes", 2 * nbytes * n)
    reduction = kind in ("reduce-scatter", "all-reduce")
    target = nbytes * (n if reduction else 1)  # the whole global array to place on the mesh
    step = n * n  # rows divisible by n (split) and n again (scatter)
    rows = max(step, int(round(target / dtype_bytes(dtype) / (8 * n) / step)) * step)
    mesh = make_mesh((n,), ("x",), devices=demo_devices(n))
    f, spec = _collective_program(kind, mesh, "x", 0, 2)
    x = jax.device_put(jnp.ones((rows, 8 * n), _jnp_dtype(dtype)), NamedSharding(mesh, spec))
    t = time_fn(f, x, repeats=repeats)
    whole = rows * 8 * n * dtype_bytes(dtype)
    # the per-device unreduced array of a reduction is the local block (rows/n x 8n); V is the array each device
    # ends with (gather) or starts with (reductions), so use the local block for reductions
    v = whole if kind in ("all-gather", "all-to-all") else whole / n
    return CollectiveMeasurement(kind, v, n, t.median_s, t)


@checked
def collective_sweep(
    kinds: Sequence[str] = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all"),
    sizes: Sequence[float] = (1e4, 1e5, 1e6, 4e6),
    n_devices: Devices = 8,
    repeats: Repeats = 3,
) -> tuple[CollectiveMeasurement, ...]:
    """Time each collective in ``kinds`` at each array size in ``sizes`` (bytes, the model's ``V``)."""
    from . import collectives

    for name, seq in (("kinds", kinds), ("sizes", sizes)):
        _check_sweep(name, seq, "", "must not be empty", "entries")
    for i, k in enumerate(kinds):
        try:
            collectives.canonical_kind(k)
        except (TypeError, ValueError) as err:
            raise type(err)(f"kinds[{i}]: {err}") from None
    for i, v in enumerate(sizes):
        check_fits(f"sizes[{i}]", 2 * n_devices * check_positive(f"sizes[{i}]", v, maximum=MAX_COPY_BYTES))
    return tuple(measure_collective(k, v, n_devices, repeats=repeats) for k in kinds for v in sizes)


def fit_collective_bandwidth(measurements: Sequence[CollectiveMeasurement]) -> tuple[float, float]:
    """``(W, t0)``: the effective bidirectional link bandwidth (bytes/s) and fixed cost (seconds) that best fit
    the AllGather measurements to ``t = t0 + V / W`` (least squares on the AllGathers; the other kinds are then
    predicted from the same W by the cost model's ratios)."""
    import numpy as np

    if (
        isinstance(measurements, (str, bytes))
        or not isinstance(measurements, (list, tuple))
        or not all(isinstance(m, CollectiveMeasurement) for m in measurements)
    ):
        raise TypeError(f"measurements must be a list of CollectiveMeasurement; got {measurements!r}")
    ag = [m for m in measurements if m.kind == "all-gather"]
    if len(ag) < 2:
        raise ValueError("measurements must include at least two all-gather sizes")
    v = np.array([m.nbytes for m in ag])
    t = np.array([m.seconds for m in ag])
    slope, t0 = np.polyfit(v, t, 1)
    if slope <= 0:
        slope = float(np.median(t / v))
    return float(1.0 / slope), float(max(t0, 0.0))


# ------------------------------------------------------------------- each measurement against the models (Ch. 1)
@dataclass(frozen=True)
class Prediction:
    """One measurement beside two roofline predictions of its time: the fitted roofline and the chip model."""

    label: str  # the measurement's label
    measured_s: float  # median seconds per call, measured
    fitted_s: float  # max(FLOPs / fitted peak, bytes / fitted bandwidth), seconds
    model_s: float | None  # the same bound from the chip's datasheet (peak for the dtype, HBM), seconds;
    #                                 None without a chip model (a CPU) or without a datasheet peak for the dtype
    bound: str  # "compute" or "bandwidth": the larger term of the fitted roofline

    @property
    def ratio_fit(self) -> float:
        """measured / fitted prediction (1 = the fitted roofline explains the time; > 1 = slower than it)."""
        return self.measured_s / self.fitted_s

    @property
    def ratio_model(self) -> float | None:
        """measured / chip-model prediction, None without a model."""
        return None if self.model_s is None else self.measured_s / self.model_s


def predict(result: RooflineMeasurement, chip=None) -> tuple[Prediction, ...]:
    """Every measurement of ``result`` beside the time the fitted roofline and ``chip``'s datasheet roofline
    (default: the detected chip; none for a CPU) predict for it, with perfect overlap (the lower bound)."""
    from .roofline import roofline

    model, peak = _datasheet(result, chip)
    rows = []
    for m in result.measurements:
        fitted = roofline(m.flops, m.nbytes, result.fit.peak_flops, result.fit.bandwidth)
        model_s = None if peak is None else roofline(m.flops, m.nbytes, peak, model.hbm_bw).lower
        rows.append(
            Prediction(label=m.label, measured_s=m.seconds, fitted_s=fitted.lower, model_s=model_s, bound=fitted.bound)
        )
    return tuple(rows)


def format_predictions(rows: Sequence[Prediction]) -> str:
    """The rows of :func:`predict` as an aligned plain-text table (a dash where there is no chip model)."""
    _check_rows(rows, Prediction)
    lines = [f"{'measurement':<40}{'measured':>10}{'fit':>10}{'ratio':>7}{'chip model':>12}{'ratio':>7}  bound (fit)"]
    for r in rows:
        model = "—" if r.model_s is None else fmt(r.model_s, "s")
        ratio = "—" if r.ratio_model is None else f"{r.ratio_model:.2f}"
        lines.append(
            f"{r.label:<40}{fmt(r.measured_s, 's'):>10}{fmt(r.fitted_s, 's'):>10}{r.ratio_fit:>7.2f}"
            f"{model:>12}{ratio:>7}  {r.bound}"
        )
    return "\n".join(lines)


def format_measurements(result: RooflineMeasurement, chip=None) -> Table:
    """One table of every measurement of ``result`` (Chapter 1): median time, achieved rate (FLOP/s for a
    matmul, bytes/s for a bandwidth probe), intensity, the fitted roofline's time and measured / fitted, and
    measured / ``chip``'s datasheet roofline (a dash without a chip model), as a collapsed
    :class:`tpu_notes.table.Table`."""
    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a RooflineMeasurement; got {type(result).__name__}")
    rows = predict(result, chip)
    shapes = sorted({m.shape[1:] for m in result.matmuls})
    where = ", ".join(f"[B, {d}] x [{d}, {f}]" for d, f in shapes)
    out = []
    for m, r in zip(result.measurements, rows):
        if m.kind == "matmul" and len(m.shape) == 3:
            name, flops, bw = f"matmul B={m.shape[0]}", m.flops_per_s, None
        else:
            probe = "x + 1" if m.op == "add" else "sum(x)"
            array = m.shape[0] * dtype_bytes(m.dtype) if m.shape else m.nbytes
            name, flops, bw = f"{probe} {fmt(array, 'B')}", None, m.bytes_per_s
        out.append((name, m.seconds, flops, bw, m.intensity, r.fitted_s, r.ratio_fit, r.ratio_model))
    columns = [
        Column("measurement"),
        Column("time", "s"),
        Column("rate", "FLOP/s"),
        Column("memory", "B/s"),
        Column("I", "FLOPs/B"),
        Column("fit", "s"),
        Column("ratio", digits=3),
        Column("model ratio", digits=3),
    ]
    if all(r.ratio_model is None for r in rows):  # no chip model (a CPU): leave the column of dashes out
        columns, out = columns[:-1], [row[:-1] for row in out]
    return Table(
        columns,
        out,
        caption=f"Every measurement: matmuls {where} in {result.dtype}, and the probes",
        notes=["I: intensity; ratio: measured / fitted time; model ratio: measured / datasheet time"],
        collapse=True,
    )


# Keep this guard at the end of the file (append new functions above it), so that
# `python -m tpu_notes.bench` sees every definition.
if __name__ == "__main__":
    raise SystemExit(main())
