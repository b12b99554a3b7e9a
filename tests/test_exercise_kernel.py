"""Exercise 10.11: a reader's Pallas kernel body is checked by the TPU interpreter and by lowering for a TPU."""

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("jax.experimental.pallas.tpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from tpu_notes.exercises import ch10, grade  # noqa: E402


def silu_times_body(x_ref, y_ref, o_ref):
    o_ref[...] = jax.nn.silu(x_ref[...]) * y_ref[...]


def test_worked_solution_passes():
    g = grade("ch10.q11", silu_times_body)
    assert g.correct, g.message


def test_the_checker_runs_the_kernel_on_every_block():
    """The interpreted call equals silu(x) * y computed in float64 numpy (an independent reference) everywhere,
    and the grid covers the array exactly."""
    assert all(s == g * b for s, g, b in zip(ch10.Q11_SHAPE, ch10.Q11_GRID, ch10.Q11_BLOCK))
    assert ch10.Q11_BLOCK[0] % 8 == 0 and ch10.Q11_BLOCK[1] % 128 == 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal(ch10.Q11_SHAPE).astype(np.float32)
    y = rng.standard_normal(ch10.Q11_SHAPE).astype(np.float32)
    got = np.asarray(jax.jit(ch10.q11_call(silu_times_body, interpret=True))(x, y))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got, x64 / (1 + np.exp(-x64)) * y, rtol=ch10.Q11_RTOL, atol=ch10.Q11_ATOL)


def test_product_without_silu_is_rejected():
    def plain(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * y_ref[...]

    g = grade("ch10.q11", plain)
    assert g.attempted and not g.correct and "differ" in g.message


def test_a_body_that_writes_half_the_block_is_rejected():
    def half(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[:8, :] = jax.nn.silu(x_ref[:8, :]) * y_ref[:8, :]

    assert not grade("ch10.q11", half).correct


def test_right_values_that_do_not_lower_for_tpu_are_rejected_with_the_compilers_message():
    def sorted_detour(x_ref, y_ref, o_ref):
        z = jax.nn.silu(x_ref[...]) * y_ref[...]
        o_ref[...] = z + 0.0 * jnp.sort(z, axis=0)  # right values; Mosaic TPU has no sort

    g = grade("ch10.q11", sorted_detour)
    assert g.attempted and not g.correct
    assert "Mosaic TPU refuses" in g.message and "sort" in g.message


def test_a_body_that_raises_is_reported_not_raised():
    def broken(x_ref, y_ref, o_ref):
        raise RuntimeError("oops")

    g = grade("ch10.q11", broken)
    assert not g.correct and "RuntimeError" in g.message


def test_not_a_function_is_a_type_message():
    g = grade("ch10.q11", 3)
    assert g.attempted and not g.correct and "kernel body" in g.message


def test_q11_call_refuses_a_non_callable():
    with pytest.raises(TypeError, match="body"):
        ch10.q11_call("silu", interpret=True)
