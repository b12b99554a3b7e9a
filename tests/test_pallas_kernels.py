"""tpu_notes.kernels: the Pallas matmul lowers for TPU (Mosaic) and GPU (Mosaic GPU) from a CPU, runs in
Pallas's TPU interpreter within the error bf16 inputs and a float32 accumulator allow, and each compiler's
refusal of a 100 x 100 block is what the compilers say."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpu_notes import kernels

S = jax.ShapeDtypeStruct


def _specs(M, N, K):
    return S((M, K), jnp.bfloat16), S((K, N), jnp.bfloat16)


@pytest.mark.parametrize("shape", [(512, 384, 256), (64, 128, 128)], ids=["chapter", "one-block"])
def test_matmul_lowers_for_tpu_as_a_mosaic_custom_call(shape):
    M, N, K = shape
    text = kernels.lowered_text(kernels.matmul_call(M, N, K, platform="tpu"), _specs(M, N, K), platform="tpu")
    assert "tpu_custom_call" in text


@pytest.mark.parametrize("shape", [(512, 384, 256), (64, 128, 128)], ids=["chapter", "one-block"])
def test_matmul_lowers_for_cuda_through_mosaic_gpu(shape):
    M, N, K = shape
    text = kernels.lowered_text(kernels.matmul_call(M, N, K, platform="cuda"), _specs(M, N, K), platform="cuda")
    assert "mosaic_gpu" in text


def test_default_blocks_fit_an_h100_shared_memory_and_the_tpu_rule():
    """The budget is computed here from the block sizes (2 bytes per bf16, 4 per float32), independently of
    vmem_budget, and compared with the 232,448 bytes Mosaic GPU reports as an H100's shared memory."""
    bm, bn, bk = kernels.BLOCK
    assert bm % 8 == 0 and bn % 128 == 0 and bk % 128 == 0
    budget = kernels.vmem_budget(bm, bn, bk)
    assert budget["inputs"] == 2 * (bm * bk * 2 + bk * bn * 2)
    assert budget["output"] == 2 * bm * bn * 4
    assert budget["inputs"] + budget["output"] < 232_448


def test_too_big_a_block_is_refused_for_cuda_with_the_compilers_shared_memory_message():
    call = kernels.matmul_call(256, 256, 256, bm=128, bn=128, bk=128, platform="cuda")
    with pytest.raises(kernels.KernelRefused, match="shared memory") as err:
        kernels.lowered_text(call, _specs(256, 256, 256), platform="cuda")
    assert err.value.platform == "cuda"


@pytest.mark.parametrize("shape", [(128, 256, 384), (64, 128, 128)])
def test_interpreted_tpu_kernel_is_within_the_bf16_bound(shape):
    """Against the exact (float64) product of the unrounded inputs, the error is inside the derived bound and
    is not negligible (so the kernel did round to bf16); against the product of the bf16-rounded inputs the
    only error left is float32 accumulation."""
    M, N, K = shape
    rng = np.random.default_rng(7)
    x = rng.standard_normal((M, K)).astype(np.float32)
    y = rng.standard_normal((K, N)).astype(np.float32)
    out = np.asarray(kernels.matmul(x, y), np.float64)
    exact = x.astype(np.float64) @ y.astype(np.float64)
    err = np.abs(out - exact)
    bound = kernels.matmul_error_bound(x, y)
    assert (err <= bound).all()
    assert err.max() > 1e-3 * bound.max()
    xr = np.asarray(jnp.asarray(x, jnp.bfloat16), np.float64)
    yr = np.asarray(jnp.asarray(y, jnp.bfloat16), np.float64)
    np.testing.assert_allclose(out, xr @ yr, rtol=0, atol=K * 2.0**-24 * (np.abs(xr) @ np.abs(yr)).max())


def test_block_refusals_quote_each_compilers_rule():
    refusals = kernels.block_refusals(100, 256)
    assert set(refusals) == {"tpu", "cuda"}
    assert "divisible by 8 and 128" in refusals["tpu"]
    assert "divisible by 128" in refusals["cuda"]  # 100 bf16 = 1,600 bits per row of an async copy
    ok = kernels.block_refusals(128, 256)
    assert ok["tpu"] == ""


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="bm"):
        kernels.matmul_call(100, 128, 128, bm=64)
    with pytest.raises(ValueError, match="platform"):
        kernels.matmul_call(64, 128, 128, platform="rocm")
    with pytest.raises(ValueError, match="interpret"):
        kernels.matmul_call(64, 128, 128, platform="cuda", interpret=True)
    with pytest.raises(ValueError, match="share K"):
        kernels.matmul(np.ones((64, 128), np.float32), np.ones((64, 128), np.float32))
    with pytest.raises(TypeError, match="fn"):
        kernels.lowered_text(3, (), platform="tpu")
