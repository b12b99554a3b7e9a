"""The serving step model's collectives against the program XLA compiles for a tensor-parallel decode step.

Chapter 8's engine (:mod:`tpu_notes.inference.engine`) prices a tensor-parallel serving step with two AllReduces
of the ``[rows, D]`` activations per layer (after attention's output projection and after the MLP's down
projection), and nothing else while the KV heads cover the devices. Here the book's small JAX decoder
(:mod:`tpu_notes.model`, :mod:`tpu_notes.generate`) is laid out Megatron-style over 8 devices with the weight
specs of :func:`tpu_notes.parallel.param_specs` (heads and the MLP's hidden dimension split over ``tensor``), its
cache split over the KV heads, and the decode step and a prefill are compiled. XLA's partitioner, which nobody
here wrote, decides which collectives the program needs; ``tpu_notes.hlo`` reads them, and the test holds the
engine's count and bytes to them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpu_notes import generate, hlo, inference, model, parallel
from tpu_notes.training import Parallelism
from tpu_notes.transformer import TransformerConfig

N_DEVICES = 8
CONFIG = TransformerConfig(
    d_model=256, d_ff=1024, n_layers=3, n_heads=8, n_kv_heads=8, d_head=32, vocab=512, name="tp-oracle"
)
BATCH, MAX_LEN, PROMPT = 4, 32, 16

pytestmark = pytest.mark.skipif(
    len(jax.devices()) < N_DEVICES, reason=f"needs {N_DEVICES} devices (JAX_NUM_CPU_DEVICES={N_DEVICES})"
)


def _layout():
    layout = Parallelism(tensor=N_DEVICES)
    mesh = parallel.make_mesh(layout, jax.devices()[:N_DEVICES])
    specs = parallel.param_specs(CONFIG, layout)
    params = model.init_params(CONFIG, jax.random.key(0), jnp.float32)
    params = jax.tree.map(lambda x, s: jax.device_put(x, NamedSharding(mesh, s)), params, specs)
    return mesh, params


def _compiled_collectives(fn, *args):
    return [c for c in hlo.collectives(fn.lower(*args).compile()) if c.kind != "collective-permute"]


@pytest.fixture(scope="module")
def decode_hlo():
    mesh, params = _layout()
    cache = generate.init_cache(CONFIG, BATCH, MAX_LEN, jnp.float32)
    kv = NamedSharding(mesh, P(None, "tensor", None, None))  # [B, K, S, H]: the KV heads over the devices
    cache = jax.tree.map(lambda x: jax.device_put(x, kv), cache)
    token = jnp.zeros((BATCH,), jnp.int32)
    return _compiled_collectives(generate._decode_step, params, cache, token, 5, CONFIG)


@pytest.fixture(scope="module")
def prefill_hlo():
    _, params = _layout()
    tokens = jnp.zeros((1, PROMPT), jnp.int32)
    return _compiled_collectives(generate._prefill, params, tokens, CONFIG, MAX_LEN)


def _engine(chip="v5e"):
    return inference.deploy(CONFIG, chip, N_DEVICES, check_memory=False)


def _reduces(found):
    return [c for c in found if c.kind in ("all-reduce", "reduce-scatter")]


def test_xla_puts_two_allreduces_per_layer_into_a_tensor_parallel_decode_step(decode_hlo):
    reduces = _reduces(decode_hlo)
    # the engine charges 2 per layer (engine.py: "two AllReduces of the [rows, D] activations per layer")
    assert len(reduces) == 2 * CONFIG.n_layers, [(c.kind, c.operand_shapes) for c in decode_hlo]
    # each reduces the [rows, D] activations: rows = the decoded sequences, D = d_model, f32 here
    for c in reduces:
        assert c.operand_bytes == BATCH * CONFIG.d_model * 4, c
    # and nothing else moves: no AllGather or AllToAll while the KV heads cover the devices
    others = [c for c in decode_hlo if c.kind not in ("all-reduce", "reduce-scatter")]
    assert not others, others


def test_a_prefill_chunk_reduces_one_row_per_prompt_token(prefill_hlo):
    reduces = _reduces(prefill_hlo)
    assert len(reduces) == 2 * CONFIG.n_layers
    for c in reduces:
        assert c.operand_bytes == PROMPT * CONFIG.d_model * 4, c


@pytest.mark.parametrize("chip", ["v5e", "h100"])
def test_the_engines_collective_time_is_xlas_collectives_priced_by_the_system(decode_hlo, chip):
    """The engine's roofline collectives part equals the sum, over the AllReduces XLA compiled, of the system's own
    AllReduce bandwidth time for each one's bytes (the engine's activations are bf16: half the f32 bytes here)."""
    dep = _engine(chip)
    step = dep.step(decode=BATCH, kv_tokens=BATCH * MAX_LEN)
    bf16 = [c.operand_bytes / 2 for c in _reduces(decode_hlo)]
    from_xla = sum(dep.system.collective_time("all_reduce", b).bandwidth_time for b in bf16)
    assert step.roofline_parts["collectives"] == pytest.approx(from_xla, rel=1e-9)
    assert step.roofline_parts["collectives"] > 0
