"""The legality layer (tpu_notes.rules): each rule allows what it should, refuses what it should, and its refusal
names the argument the caller passed and the allowed values. Then the layer's reach: every entry point that takes a
layout refuses the same impossible combination, in the caller's terms."""

from __future__ import annotations

import inspect
import math

import pytest

from tpu_notes import rules
from tpu_notes import training as T
from tpu_notes.topology import Slice
from tpu_notes.transformer import get_model
from tpu_notes.units import PositiveFloat, checked

L8 = get_model("llama3-8b")  # 32 heads, 8 KV heads, d_ff 14,336, 32 layers, dense
MOE = get_model("deepseek-v3")  # 256 routed experts, MLA


def test_whole_heads():
    for t in (1, 2, 4, 8, 16, 32):
        rules.whole_heads(L8, t)
    with pytest.raises(rules.Illegal, match=r"tp \(12\) must divide the 32 query heads .* allowed: one of 1, 2, 4"):
        rules.whole_heads(L8, 12, argument="tp")
    with pytest.raises(ValueError, match="whole heads") as err:
        rules.whole_heads(L8, 64)
    assert err.value.kind == "whole heads"
    # a tensor degree between the KV heads and the query heads replicates each KV head; one that neither divides nor
    # is a multiple of the KV heads cannot
    rules.whole_heads(get_model("llama3-70b"), 16)
    odd = L8.with_(n_heads=24, n_kv_heads=8, d_ff=14_400)
    with pytest.raises(rules.Illegal, match=r"tensor \(12\) must divide the 8 KV heads"):
        rules.whole_heads(odd, 12)
    rules.whole_heads(MOE, 16)  # MLA: one shared latent, no KV-head rule


def test_split_kv_heads_is_stricter():
    rules.split_kv_heads(L8, 8)
    with pytest.raises(rules.Illegal, match=r"tensor \(16\) must divide the 8 KV heads"):
        rules.split_kv_heads(L8, 16)


def test_stages_experts_context():
    rules.pipeline_stages(L8, 32)
    rules.pipeline_stages(L8, 16, 2)
    with pytest.raises(rules.Illegal, match=r"pp \(8\) x circular_repeats \(5\) must be at most the 32 layers"):
        rules.pipeline_stages(L8, 8, 5, argument="pp")
    rules.even_stages(L8, 8)
    with pytest.raises(rules.Illegal, match=r"pipeline \(3\) must divide the 32 layers.*one of 1, 2, 4, 8"):
        rules.even_stages(L8, 3)
    rules.expert_degree(MOE, 64)
    with pytest.raises(rules.Illegal, match="llama3-8b is dense"):
        rules.expert_degree(L8, 2)
    with pytest.raises(rules.Illegal, match=r"expert \(48\) must divide the 256 experts"):
        rules.expert_degree(MOE, 48)
    rules.context_degree(8192, 16)
    with pytest.raises(rules.Illegal, match=r"context \(3\) must divide seq_len \(8,192\)"):
        rules.context_degree(8192, 3)


def test_pipeline_schedules_frameworks_launch():
    L405 = get_model("llama3-405b")  # 126 layers
    maxtext = dict(framework="maxtext", even_layers=True, microbatches_per_stage="always")
    megatron = dict(framework="megatron", even_layers=True, microbatches_per_stage="interleaved")
    rules.pipeline_schedule(L8, 4, 2, 8, **maxtext)  # 4 x 2 x 4 layers = 32; 8 microbatches = 2 per stage
    with pytest.raises(rules.Illegal, match=r"pipeline \(3\) x circular_repeats \(1\) must divide the 32 layers"):
        rules.pipeline_schedule(L8, 3, 1, 3, **maxtext)
    with pytest.raises(rules.Illegal, match=r"microbatches \(6\) must be a multiple of pipeline \(4\)") as err:
        rules.pipeline_schedule(L8, 4, 1, 6, **maxtext)
    assert err.value.kind == "microbatches per stage"
    rules.pipeline_schedule(L8, 4, 1, 6, **megatron)  # plain 1F1B takes any count
    with pytest.raises(rules.Illegal, match="megatron requires it of an interleaved schedule"):
        rules.pipeline_schedule(L8, 4, 2, 6, **megatron)
    # Llama 3 405B's 16 stages: 126 layers split evenly by nobody, launched by Megatron's uneven edge stages
    with pytest.raises(rules.Illegal, match="must divide the 126 layers") as err:
        rules.pipeline_schedule(L405, 16, 2, 16, **megatron)
    assert err.value.kind == "uneven stages"
    rules.pipeline_schedule(L405, 16, 2, 16, uneven_edges=True, **megatron)  # 7 + 14 x 8 + 7
    rules.pipeline_schedule(L405, 5, 1, 5, uneven_edges=True, **megatron)  # 24 + 3 x 26 + 24
    with pytest.raises(rules.Illegal, match="must divide the 126 layers"):
        rules.pipeline_schedule(L405, 60, 1, 60, uneven_edges=True, **megatron)  # 58 x 3 is already over 126
    with pytest.raises(rules.Illegal, match="must divide the 126 layers"):
        rules.pipeline_schedule(L405, 16, 3, 48, uneven_edges=True, **megatron)  # 8 layers in 3 groups
    rules.pipeline_schedule(L405, 16, 1, 16, framework="torchtitan", even_layers=False, microbatches_per_stage="never")
    rules.pipeline_schedule(L8, 1, 1, 3, **maxtext)  # no pipeline: nothing to check


def test_tensor_parallelism_stays_in_the_scale_up_domain():
    for t in (1, 2, 4, 8):
        rules.scale_up_domain(t, 8)
    with pytest.raises(rules.Illegal, match=r"tensor \(16\) must divide the 8 devices of an NVLink node") as err:
        rules.scale_up_domain(16, 8)
    assert err.value.kind == "tensor across nodes" and "tensor_across_nodes=True" in str(err.value)
    rules.scale_up_domain(16, 4096, where="a TPU slice")


def test_batch_rules():
    assert rules.whole_sequences(2**20, 4096) == 256
    with pytest.raises(rules.Illegal, match=r"batch_tokens \(1,000\) must be a whole number of sequences"):
        rules.whole_sequences(1000, 4096)
    assert rules.batch_shards(256, 64, microbatches=4, stages=4) == 4
    with pytest.raises(rules.Illegal, match="16 sequences for 64 batch shards") as err:
        rules.batch_shards(16, 64, argument="parallelism")
    assert err.value.kind == "too few sequences" and str(err.value).startswith("parallelism: ")
    assert err.value.detail == str(err.value).removeprefix("parallelism: ")
    with pytest.raises(rules.Illegal, match=r"96 sequences do not divide over 64 batch shards \(1.5 each\)"):
        rules.batch_shards(96, 64)
    with pytest.raises(rules.Illegal, match="cannot make 3 equal microbatches .* one of 1, 2, 4, 8") as err:
        rules.batch_shards(512, 64, microbatches=3)
    assert err.value.kind == "uneven microbatches"
    with pytest.raises(rules.Illegal, match="for 16 pipeline stages"):
        rules.batch_shards(512, 64, microbatches=16, stages=16)


def test_a_whole_layout():
    p = T.Parallelism(fsdp=16, tensor=4, pipeline=2, microbatches=4)
    rules.model_layout(L8, p, 4096)
    assert rules.training_layout(L8, p, 2**20, 4096) == 16  # 256 sequences over 16 shards
    with pytest.raises(rules.Illegal, match=r"^tensor \(64\)"):
        rules.model_layout(L8, T.Parallelism(tensor=64), 4096)
    with pytest.raises(rules.Illegal, match=r"^context \(3\) must divide seq_len"):
        rules.model_layout(L8, T.Parallelism(context=3), 4096)
    with pytest.raises(rules.Illegal, match=r"^layout: 8 sequences for 16 batch shards"):
        rules.training_layout(L8, p, 8 * 4096, 4096, argument="layout")


def test_meshes():
    rules.mesh_devices({"data": 2, "tensor": 4}, 8)
    with pytest.raises(
        rules.Illegal, match=r"the degrees \(data=2 x tensor=4\) multiply to 8 devices, but there are 4"
    ):
        rules.mesh_devices({"data": 2, "tensor": 4}, 4)
    assert rules.mesh_names(["data", "model"], 2) == ("data", "model")
    with pytest.raises(rules.Illegal, match="must name each of the 2 mesh axes once"):
        rules.mesh_names(("data",), 2)
    with pytest.raises(rules.Illegal, match="must not repeat"):
        rules.mesh_names(("x", "x"), 2)
    with pytest.raises(TypeError, match="names must be a tuple"):
        rules.mesh_names("data", 1)
    with pytest.raises(TypeError, match="identifiers"):
        rules.mesh_names(("data", 3), 2)
    rules.mesh_axes({"data": 2}, ("data", "fsdp"))
    with pytest.raises(rules.Illegal, match="names axis 'model'; allowed: data, fsdp"):
        rules.mesh_axes({"model": 2}, ("data", "fsdp"))
    with pytest.raises(rules.Illegal, match=r"axes\['data'\] must be a whole number >= 1"):
        rules.mesh_axes({"data": 0}, ("data",))


def test_physical_and_work_limits():
    assert rules.at_most_peak(0.5, argument="tokens_per_s") == 0.5
    assert rules.at_most_peak(1.0 + rules.PEAK_TOLERANCE / 2, argument="x") == 1.0  # rounding, not a claim
    with pytest.raises(rules.Illegal, match="x implies MFU 1"):
        rules.at_most_peak(1.0 + 1e-6, argument="x")
    with pytest.raises(rules.Illegal, match="tokens_per_s implies MFU 2, above the hardware's peak"):
        rules.at_most_peak(2.0, argument="tokens_per_s")
    with pytest.raises(rules.Illegal, match="above the hardware's peak"):
        rules.at_most_peak(math.nan, argument="tokens_per_s")
    assert rules.bounded_work(1000, argument="requests") == 1000
    with pytest.raises(rules.Illegal, match="requests asks for 1e\\+30 events; .* lower requests"):
        rules.bounded_work(1e30, argument="requests", unit="events")
    with pytest.raises(rules.Illegal, match="lower n"):
        rules.bounded_work(math.inf, argument="n")
    assert rules.product_within({"batch": 8, "seq_len": 4096}, 2**16, what="tokens") == 32768
    with pytest.raises(
        rules.Illegal, match=r"batch \(16\) x seq_len \(8,192\) = 1.31e\+05 tokens.*lower batch or seq_len"
    ):
        rules.product_within({"batch": 16, "seq_len": 8192}, 2**16, what="tokens")
    assert rules.finite_result(3.0, argument="x", what="the step") == 3.0
    for bad in (math.inf, math.nan, 0.0):
        with pytest.raises(rules.Illegal, match="x is too large or too small"):
            rules.finite_result(bad, argument="x", what="the step")


def test_every_rule_is_tested_here():
    """A rule added to the module without a test here fails this test."""
    source = inspect.getsource(inspect.getmodule(test_whole_heads))
    public = [n for n, f in vars(rules).items() if inspect.isfunction(f) and f.__module__ == rules.__name__]
    untested = [n for n in public if not n.startswith("_") and f"rules.{n}(" not in source]
    assert not untested, f"rules without a test in tests/test_rules.py: {untested}"


# -- the same impossible layout, refused by every entry point that takes one ------------------------------------
V5P_64 = Slice("v5p", (4, 4, 4))


@pytest.mark.parametrize(
    "parallelism,batch,match",
    [
        (T.Parallelism(fsdp=64), 16 * 4096, "16 sequences for 64 batch shards"),
        (T.Parallelism(fsdp=64), 96 * 4096, "96 sequences do not divide over 64 batch shards"),
        (T.Parallelism(fsdp=8, pipeline=8, microbatches=16), 64 * 4096, "cannot make 16 equal microbatches"),
        (T.Parallelism(fsdp=16, tensor=4), 2**20, None),  # legal: every entry point prices it
    ],
)
def test_entry_points_share_the_batch_rules(parallelism, batch, match):
    calls = [
        lambda: T.step_time("llama3-8b", parallelism, V5P_64, batch, 4096),
        lambda: T.training_memory("llama3-8b", parallelism, batch, 4096),
        lambda: T.predicted_collectives("llama3-8b", parallelism, batch, 4096),
    ]
    for call in calls:
        if match is None:
            call()
        else:
            with pytest.raises(ValueError, match=match):
                call()


def test_entry_points_share_the_model_rules():
    for p in (T.Parallelism(fsdp=8, tensor=8), T.Parallelism(fsdp=16, tensor=4, expert=1)):
        assert T.training_memory("llama3-8b", p, 2**20, 4096).total > 0
    bad = T.Parallelism(fsdp=16, expert=4)
    for call in (
        lambda: T.step_time("llama3-8b", bad, V5P_64, 2**20, 4096),
        lambda: T.training_memory("llama3-8b", bad, 2**20, 4096),
    ):
        with pytest.raises(ValueError, match=r"expert \(4\) needs a mixture-of-experts model"):
            call()
    with pytest.raises(ValueError, match=r"tokens_per_s implies MFU .* above the hardware's peak"):
        T.mfu("llama3-8b", 1e12, "v5p", 1)
    with pytest.raises(ValueError, match=r"tokens_per_s implies HFU"):
        T.hfu("llama3-8b", 1e12, "v5p", 1, seq_len=4096)
    assert 0 < T.mfu("llama3-8b", 3e3, "v5p", 1) < 1


def test_results_that_leave_the_float_range_are_refused_by_the_argument():
    """Two guards stand between an extreme number and a silent inf or nan. units.check_positive refuses any number
    outside 1e-36..1e36 by name; behind it, units.checked reads every checked function's result and refuses NaN
    (or an infinite total), naming the argument furthest from 1 in magnitude."""
    with pytest.raises(ValueError, match=r"^mfu must be 0 or at least 1e-36 in magnitude"):
        T.training_time("llama3-8b", 1e12, "v5p", 256, 1e-306)
    with pytest.raises(ValueError, match=r"^tokens must be at most 1e\+36 in magnitude"):
        T.training_cost("llama3-8b", 1e308, "v5p", 0.5)
    with pytest.raises(ValueError, match=r"^tokens_per_s must be 0 or at least 1e-36"):
        T.mfu("llama3-8b", 5e-324, "v5p", 256)
    assert T.training_time("llama3-8b", 1e12, "v5p", 256, 0.5) > 0

    @checked
    def ratio(top: PositiveFloat, bottom: PositiveFloat, scale: PositiveFloat = 1.0) -> float:
        return top * 1e300 / bottom * scale

    assert ratio(1.0, 2.0) == 5e299
    with pytest.raises(ValueError, match=r"^bottom=1e-30 is outside the range .*ratio can price: the result"):
        ratio(1.0, 1e-30)
