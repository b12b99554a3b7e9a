"""Pallas kernels that compile for a TPU (Mosaic TPU) and for a GPU (Mosaic GPU), checked on a CPU.

A Pallas kernel is written once per *backend*: since JAX 0.9 ``pl.pallas_call`` lowers through Mosaic GPU on
NVIDIA GPUs (not Triton), whose matmul is ``plgpu.wgmma`` on swizzled shared-memory tiles, while a TPU kernel
multiplies with ``jnp.dot`` on VMEM blocks. Both share the grid and the ``BlockSpec``s below; a CPU checks both
by *cross-lowering* (``jax.jit(f).trace(...).lower(lowering_platforms=(p,))``, which runs the Pallas compiler's
front end for platform ``p`` without the device) and runs the TPU kernel in Pallas's TPU interpreter.

- :func:`matmul_call`: the tiled matmul ``x[M, K] @ y[K, N]``, bf16 inputs, float32 accumulator, float32 out,
  grid ``(M/bm, N/bn, K/bk)`` with ``k`` sequential, for ``platform`` "tpu" or "cuda".
- :func:`matmul`: runs the TPU kernel (interpreted on a CPU, compiled on a TPU).
- :func:`matmul_error_bound`: the elementwise error bf16 inputs with a float32 accumulator allow.
- :func:`lowered_text`: the lowered module of a function for one platform, or :class:`KernelRefused` carrying
  the compiler's own message.
- :func:`block_refusals`: what each compiler says to a 100 x 100 block.
- :func:`vmem_budget`: the bytes a double-buffered pipeline of these blocks keeps on chip.

Sources (facts only): Pallas TPU docs "Pallas TPU pipelining" and "TPU matmul" (the (8, 128) block rule,
double buffering, ``dimension_semantics``); Pallas Mosaic GPU reference (``wgmma``, ``ACC``, transforms,
``max_concurrent_steps``). Importing this module imports JAX.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .units import Bool, capped, check_choice, checked

#: Platforms a kernel of this module lowers for.
PLATFORMS = ("tpu", "cuda")
#: A TPU block's last two dimensions must be multiples of these (sublanes, lanes) or span the array.
TPU_TILE = (8, 128)
#: Default blocks: fit an H100's 227 KiB of shared memory double-buffered, obey the TPU rule, and are a
#: multiple of Mosaic GPU's 64-row warpgroup matmul.
BLOCK = (64, 128, 128)
#: bf16 keeps 8 significand bits: rounding a value to bf16 moves it by at most 2**-9 of itself.
BF16_UNIT_ROUNDOFF = 2.0**-9
MAX_SIDE = 2**14

Side = capped(MAX_SIDE)


class KernelRefused(ValueError):
    """A compiler refused a kernel; ``platform`` names it and the message is the compiler's own."""

    def __init__(self, platform: str, message: str):
        check_choice("platform", platform, PLATFORMS)
        if not isinstance(message, str):
            raise TypeError(f"message must be a str; got {type(message).__name__}")
        super().__init__(f"{platform}: {message}")
        self.platform = platform
        self.compiler_message = message


def _tile_check(M: int, N: int, K: int, bm: int, bn: int, bk: int) -> None:
    for name, b, size, dim in (("bm", bm, M, "M"), ("bn", bn, N, "N"), ("bk", bk, K, "K")):
        if size % b:
            raise ValueError(f"{name} ({b}) must divide {dim} ({size}); allowed: divisors of {size}")


@checked
def matmul_call(
    M: Side,
    N: Side,
    K: Side,
    *,
    bm: Side = BLOCK[0],
    bn: Side = BLOCK[1],
    bk: Side = BLOCK[2],
    platform: str = "tpu",
    interpret: Bool = False,
) -> Callable:
    """The ``pallas_call`` computing ``x[M, K] @ y[K, N]`` (bf16 in, float32 out) for ``platform``.

    Grid ``(M/bm, N/bn, K/bk)``: program ``(i, j, k)`` sees an ``x`` block ``[bm, bk]`` and a ``y`` block
    ``[bk, bn]`` and adds their product into a float32 accumulator tile kept on chip across ``k`` (VMEM scratch
    on a TPU, a warpgroup-matmul accumulator in registers on a GPU), zeroed at ``k = 0`` and written to output
    block ``(i, j)`` at the last ``k``. ``k`` is declared "arbitrary" (TPU) / "sequential" (GPU): it carries the
    accumulator, so it must run in order on one core; ``i, j`` are "parallel", which lets a TPU with two
    TensorCores (megacore) split them between its cores and a GPU map them to thread blocks.
    ``interpret=True`` (TPU only) runs the kernel in Pallas's TPU interpreter on the CPU.
    """
    check_choice("platform", platform, PLATFORMS)
    _tile_check(M, N, K, bm, bn, bk)
    if platform == "tpu":
        return _tpu_matmul_call(M, N, K, bm, bn, bk, interpret)
    if interpret:
        raise ValueError("interpret must be False for platform 'cuda' (Mosaic GPU kernels are not interpreted)")
    return _cuda_matmul_call(M, N, K, bm, bn, bk)


def _tpu_matmul_call(M: int, N: int, K: int, bm: int, bn: int, bk: int, interpret: bool) -> Callable:
    """:func:`matmul_call`'s TPU kernel: ``jnp.dot`` of the blocks into an f32 VMEM scratch tile, zeroed at
    ``k = 0`` and copied to the output at the last ``k``; "arbitrary" on ``k``; a ``pl.CostEstimate``."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    n_k = K // bk

    def tpu_kernel(x_ref, y_ref, o_ref, acc_ref):
        k = pl.program_id(2)

        @pl.when(k == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(k == n_k - 1)
        def _():
            o_ref[...] = acc_ref[...]

    return pl.pallas_call(
        tpu_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        grid=(M // bm, N // bn, n_k),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
            pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        cost_estimate=pl.CostEstimate(
            flops=2 * M * N * K, transcendentals=0, bytes_accessed=2 * (M * K + K * N) + 4 * M * N
        ),
        interpret=pltpu.InterpretParams() if interpret else False,
    )


def _cuda_matmul_call(M: int, N: int, K: int, bm: int, bn: int, bk: int) -> Callable:
    """:func:`matmul_call`'s GPU kernel (Mosaic GPU has no lowering of ``jnp.dot``): a warpgroup matmul
    (``plgpu.wgmma``) from swizzled shared-memory blocks into a register accumulator, copied to the output at the
    last ``k``; "sequential" on ``k``, two pipeline stages in flight."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    n_k = K // bk

    def gpu_kernel(x_ref, y_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, x_ref, y_ref)  # acc += x @ y on the tensor cores, from shared memory
        plgpu.wgmma_wait(0)

        @pl.when(pl.program_id(2) == n_k - 1)
        def _():
            o_ref[...] = acc_ref[...]

    swizzled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))  # 64 bf16 = one 128-byte row
    return pl.pallas_call(
        gpu_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        grid=(M // bm, N // bn, n_k),
        in_specs=[
            plgpu.BlockSpec((bm, bk), lambda i, j, k: (i, k), transforms=swizzled),
            plgpu.BlockSpec((bk, bn), lambda i, j, k: (k, j), transforms=swizzled),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[plgpu.ACC((bm, bn), jnp.float32)],
        compiler_params=plgpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "sequential"), max_concurrent_steps=2
        ),
    )


def _check_matrix(name: str, a) -> None:
    if not hasattr(a, "shape") or not hasattr(a, "dtype") or len(a.shape) != 2:
        raise TypeError(f"{name} must be a 2-D array; got {type(a).__name__}")
    if not jnp.issubdtype(a.dtype, jnp.floating):
        raise TypeError(f"{name} must be a floating array; got dtype {a.dtype}")


@checked
def matmul(x, y, *, bm: Side = BLOCK[0], bn: Side = BLOCK[1], bk: Side = BLOCK[2]):
    """``x @ y`` by the TPU kernel of :func:`matmul_call`: inputs cast to bf16, float32 result. Interpreted by
    Pallas's TPU interpreter on a CPU, compiled on a TPU (raises on other backends)."""
    _check_matrix("x", x)
    _check_matrix("y", y)
    (M, K), (K2, N) = x.shape, y.shape
    if K != K2:
        raise ValueError(f"x [M, K] and y [K, N] must share K; got x {tuple(x.shape)} and y {tuple(y.shape)}")
    backend = jax.default_backend()
    if backend not in ("cpu", "tpu"):
        raise ValueError(f"matmul runs on 'cpu' (interpreted) or 'tpu'; this backend is {backend!r}")
    call = matmul_call(M, N, K, bm=bm, bn=bn, bk=bk, platform="tpu", interpret=backend == "cpu")
    return jax.jit(call)(jnp.asarray(x, jnp.bfloat16), jnp.asarray(y, jnp.bfloat16))


def matmul_error_bound(x, y) -> np.ndarray:
    """Elementwise bound on ``|kernel(x, y) - x @ y|`` (exact product of the unrounded inputs).

    Rounding each input to bf16 moves it by at most ``u = 2**-9`` of itself, so each product term moves by at
    most ``(2u + u**2)|x_ik||y_kj|``; the float32 accumulation adds at most ``K * 2**-24`` of ``sum |x||y|``
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1). The bound is
    ``(2u + u**2 + K 2**-24) (|x| @ |y|)``: about ``2**-8`` of the sum of magnitudes, not of the result, which
    cancellation can make much smaller.
    """
    _check_matrix("x", x)
    _check_matrix("y", y)
    ax, ay = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(y, np.float64))
    if ax.shape[1] != ay.shape[0]:
        raise ValueError(f"x [M, K] and y [K, N] must share K; got x {ax.shape} and y {ay.shape}")
    u = BF16_UNIT_ROUNDOFF
    return (2 * u + u * u + ax.shape[1] * 2.0**-24) * (ax @ ay)


def lowered_text(fn: Callable, args: tuple, *, platform: str) -> str:
    """The module ``jax.jit(fn)`` lowers to for ``platform`` ("tpu" or "cuda"), traced with ``args`` (arrays or
    ``jax.ShapeDtypeStruct``), on whatever machine runs this; raises :class:`KernelRefused` with the
    compiler's message if Pallas refuses the kernel for that platform."""
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    if not isinstance(args, tuple | list):
        raise TypeError(f"args must be a tuple of arrays or jax.ShapeDtypeStruct; got {type(args).__name__}")
    check_choice("platform", platform, PLATFORMS)
    try:
        return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text()
    except (ValueError, NotImplementedError, TypeError) as err:
        raise KernelRefused(platform, str(err).split("\n")[0]) from err


@checked
def block_refusals(block: Side = 100, size: Side = 256) -> dict[str, str]:
    """What each compiler says to a ``block x block`` output block of a ``size x size`` matmul (``K = 128``):
    ``{platform: message}``, ``""`` where the platform accepts it. On a TPU the rule is that a block's last
    two dimensions be multiples of (8, 128) or span the array."""
    from jax.experimental import pallas as pl

    def one_tile(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    n = -(-size // block)
    call = pl.pallas_call(
        one_tile,
        out_shape=jax.ShapeDtypeStruct((size, size), jnp.float32),
        grid=(n, n),
        in_specs=[pl.BlockSpec((block, 128), lambda i, j: (i, 0)), pl.BlockSpec((128, block), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)),
    )
    args = (jax.ShapeDtypeStruct((size, 128), jnp.bfloat16), jax.ShapeDtypeStruct((128, size), jnp.bfloat16))
    out = {}
    for platform in PLATFORMS:
        try:
            lowered_text(call, args, platform=platform)
            out[platform] = ""
        except KernelRefused as err:
            out[platform] = err.compiler_message
    return out


@checked
def vmem_budget(bm: Side = BLOCK[0], bn: Side = BLOCK[1], bk: Side = BLOCK[2], buffers: Side = 2) -> dict[str, int]:
    """Bytes of on-chip memory the matmul pipeline holds: ``buffers`` copies of each input block (bf16, the next
    block is fetched while this one is used), ``buffers`` of the float32 output block, and one float32
    accumulator (TPU scratch; on a GPU it lives in registers)."""
    inputs = buffers * 2 * (bm * bk + bk * bn)
    output = buffers * 4 * bm * bn
    acc = 4 * bm * bn
    return {"inputs": inputs, "output": output, "accumulator": acc, "total": inputs + output + acc}
