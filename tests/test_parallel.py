"""The layouts of tpu_notes.parallel train the same model to the same losses as one device (fp32 rounding), and
refuse impossible layouts with a ValueError that names the argument and what is allowed."""

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from tpu_notes import model, parallel
from tpu_notes.training import Parallelism
from tpu_notes.transformer import TransformerConfig, get_model

C = parallel.ORACLE_CONFIG  # 8 heads, F = 256: every 8-way layout divides it
C4 = C.with_(n_layers=4, name="oracle-tiny-4l")
STEPS, BATCH, SEQ = 3, 16, 16
_REF = {}


def reference(config):
    """The single-device loss curve (computed once per config)."""
    if config not in _REF:
        _REF[config] = parallel.train(config, Parallelism(), STEPS, BATCH, SEQ)
    return _REF[config]


LAYOUTS = [
    (C, Parallelism(data=8), None),
    (C, Parallelism(fsdp=8), None),
    (C, Parallelism(tensor=8), None),
    (C, Parallelism(fsdp=2, tensor=4), None),
    (C, Parallelism(fsdp=4, tensor=2), None),
    (C, Parallelism(data=2, fsdp=4), None),
    (C, Parallelism(data=2, tensor=4), None),
    (C, Parallelism(data=4, pipeline=2, microbatches=2), None),
    (C, Parallelism(pipeline=2, microbatches=4), 2),  # a pure 2-stage pipeline on 2 devices
    (C4, Parallelism(data=2, pipeline=4, microbatches=4), None),
    (get_model("tiny-moe").with_(n_layers=2), Parallelism(data=2, expert=4), None),
]  # 1 dense + 1 MoE layer


@pytest.mark.parametrize("config,layout,n_dev", LAYOUTS, ids=[f"{p.label()}" for _, p, _ in LAYOUTS])
def test_losses_equal_single_device(config, layout, n_dev):
    ref = reference(config)
    devices = jax.devices()[:n_dev] if n_dev else None
    got = parallel.train(config, layout, STEPS, BATCH, SEQ, devices=devices)
    assert got.shape == (STEPS,) and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-5)
    assert ref[-1] < ref[0] - 0.3  # the model learns its batch: the curve is not flat


def test_remat_keeps_the_losses():
    c, p = parallel.ORACLE_CONFIG, Parallelism(fsdp=2, tensor=4)
    a = parallel.train(c, p, 2, 16, 16)
    b = parallel.train(c, p, 2, 16, 16, remat=True)
    assert abs(a - b).max() < 1e-5
    with pytest.raises(ValueError, match="remat=True applies"):
        parallel.compiled_step(c, Parallelism(data=4, pipeline=2, microbatches=2), 16, 16, remat=True)


def test_train_uses_the_seed_and_fresh_batches():
    same = reference(C)
    fresh = parallel.train(C, Parallelism(data=8), 2, BATCH, SEQ, same_batch=False)
    assert fresh[0] == pytest.approx(same[0], rel=1e-6) and abs(fresh[1] - same[1]) > 1e-3
    other = parallel.train(C, Parallelism(data=8), 1, BATCH, SEQ, seed=1)
    assert abs(other[0] - same[0]) > 1e-4


def test_param_specs_follow_the_layout_rules():
    shapes = model.param_shapes(C)
    for p in (Parallelism(data=8), Parallelism(fsdp=2, tensor=4)):
        specs = parallel.param_specs(C, p)
        is_spec = lambda x: isinstance(x, P)  # noqa: E731
        assert jax.tree_util.tree_structure(specs, is_leaf=is_spec) == jax.tree_util.tree_structure(
            jax.tree_util.tree_map(lambda _: P(), shapes), is_leaf=is_spec
        )
    dp = parallel.param_specs(C, Parallelism(data=8))
    assert all(
        s == P() or all(a is None for a in s) for s in jax.tree_util.tree_leaves(dp, is_leaf=lambda x: isinstance(x, P))
    )
    mix = parallel.param_specs(C, Parallelism(fsdp=2, tensor=4))
    layer = mix["layers"][0]
    assert layer["wq"] == P("fsdp", "tensor", None) and layer["wo"] == P("tensor", None, "fsdp")
    assert layer["mlp"]["w_up"] == P("fsdp", "tensor") and layer["mlp"]["w_down"] == P("tensor", "fsdp")
    assert layer["attn_norm"] == P("fsdp") and mix["embed"] == P(None, "fsdp") and mix["unembed"] == P("fsdp", None)
    pp = parallel.param_specs(C, Parallelism(data=4, pipeline=2, microbatches=2))
    assert "layers" not in pp and len(pp["stages"]) == 1 and pp["stages"][0]["wq"] == P("pipeline", None, None, None)
    assert parallel.batch_spec(Parallelism(data=2, fsdp=4)) == P(("data", "fsdp"), None)
    mesh = parallel.make_mesh(Parallelism(fsdp=2, tensor=4))
    assert tuple(mesh.axis_names) == ("fsdp", "tensor") and mesh.devices.shape == (2, 4)


def test_stage_params_round_trip():
    params = model.init_params(C4, 0)
    staged = parallel.stage_params(params, 2)
    assert len(staged["stages"]) == 2 and staged["stages"][0]["wq"].shape == (2,) + params["layers"][0]["wq"].shape
    # stage 1, position 0 is layer 2: stages hold consecutive layers
    np.testing.assert_array_equal(staged["stages"][0]["wq"][1], params["layers"][2]["wq"])
    back = parallel.unstage_params(staged)
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="n_stages"):
        parallel.stage_params(params, 3)


def test_measure_step_times_a_step():
    # one layer, as test_collectives_do_not_depend_on_code_optimisation compiles it (it reuses this compile)
    c1, layout = C.with_(n_layers=1), Parallelism(fsdp=2, tensor=4)
    t = parallel.measure_step(c1, layout, 16, 16, repeats=2, timing=True)
    assert t.repeats == 2 and 0 < t.min_s <= t.median_s <= t.max_s and t.compile_s > 0
    seconds = parallel.measure_step(c1, layout, 16, 16, repeats=1)
    assert isinstance(seconds, float) and seconds > 0  # the median step, in seconds (no bound: load may slow it)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            dict(parallelism=Parallelism(data=16)),
            r"parallelism: the degrees \(data=16\) multiply to 16 devices, but there are 8.*devices.setup\(16\)",
        ),
        (dict(parallelism=Parallelism(data=8), batch=12), r"batch: 12 sequences do not divide over 8 batch shards"),
        (
            dict(parallelism=Parallelism(data=2, pipeline=4, microbatches=4)),
            r"parallelism.pipeline \(4\) must divide the 2 layers",
        ),
        (dict(parallelism=Parallelism(expert=8)), "needs a mixture-of-experts model"),
        (dict(dtype="fp16"), r"dtype must be one of \['fp32', 'bf16'\]"),
        (
            dict(model=get_model("tiny-mha"), parallelism=Parallelism(tensor=8)),
            r"parallelism.tensor \(8\) must divide the 4 query heads",
        ),
        (dict(model=C.with_(d_ff=260), parallelism=Parallelism(tensor=8)), r"must divide the MLP width \(260\)"),
        (dict(model=C.with_(d_model=36), parallelism=Parallelism(fsdp=8)), r"fsdp \(8\) must divide d_model \(36\)"),
        (
            dict(parallelism=Parallelism(data=4, pipeline=2, microbatches=4), batch=8),
            "batch: 2 sequences per batch shard cannot make 4 equal microbatches",
        ),
        (dict(parallelism=Parallelism(fsdp=4, pipeline=2, microbatches=2)), "pipeline combines only with data"),
        (dict(parallelism=Parallelism(data=8, microbatches=2)), "gradient accumulation is not implemented"),
        (dict(parallelism=Parallelism(data=4, dcn=2)), "dcn must be 1"),
        (dict(seq_len=1), "seq_len must be >= 2"),
    ],
)
def test_bad_layouts_raise(kwargs, match):
    args = dict(model=C, parallelism=Parallelism(data=8), batch=16, seq_len=16, dtype="fp32")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        parallel.compiled_step(**args)


def test_bad_types_and_steps():
    with pytest.raises(TypeError, match="parallelism must be"):
        parallel.make_mesh({"data": 8})
    with pytest.raises(ValueError, match="steps must be finite and > 0"):
        parallel.train(C, Parallelism(data=8), 0, 16, 16)
    with pytest.raises(ValueError, match="batch must be a whole number"):
        parallel.compiled_step(C, Parallelism(data=8), 16.5, 16)
    with pytest.raises(TypeError, match="devices must be None or a sequence"):
        parallel.compiled_step(C, Parallelism(data=8), 16, 16, devices="cpu")
    with pytest.raises(ValueError, match="seed must be finite and >= 0"):
        parallel.train(C, Parallelism(data=8), 1, 16, 16, seed=-1)
    with pytest.raises(ValueError, match="seed must be at most"):
        parallel.train(C, Parallelism(data=8), 1, 16, 16, seed=2**63)
    with pytest.raises(ValueError, match="seed must be < 2"):
        parallel.train(C, Parallelism(data=8), 8, 16, 16, seed=2**62 - 4)
    with pytest.raises(ValueError, match="steps must be at most 256"):  # refused before anything runs
        parallel.train(C, Parallelism(data=8), 10**12, 16, 16)
    with pytest.raises(ValueError, match="batch must be at most"):  # refused before XLA compiles it
        parallel.compiled_step(C, Parallelism(data=8), 8 * 10**11, 16)
    with pytest.raises(ValueError, match="batch x seq_len"):
        parallel.compiled_step(C, Parallelism(data=8), 4096, 4096)
    with pytest.raises(ValueError, match="logits"):
        parallel.compiled_step(C.with_(vocab=2**16), Parallelism(data=8), 1024, 64)
    with pytest.raises(ValueError, match="model llama3-8b: .*MAX_PARAM_BYTES"):  # 32 GB of fp32 parameters
        parallel.train("llama3-8b", Parallelism(), 1, 1, 16)
    with pytest.raises(TypeError, match="same_batch"):
        parallel.train(C, Parallelism(data=8), 1, 16, 16, same_batch="yes")
    moe = TransformerConfig(
        d_model=64, d_ff=256, n_layers=2, n_heads=8, n_kv_heads=8, d_head=8, vocab=256, n_experts=4, experts_per_token=1
    )
    with pytest.raises(ValueError, match=r"parallelism.expert \(8\) must divide the 4 experts"):
        parallel.compiled_step(moe, Parallelism(expert=8), 16, 16)
