"""tpu_notes.training against the scaling book's worked training answers, its own identities, and bad input."""

import json
import math
import subprocess
import sys

import pytest
from planner_checks import assert_tiered

from tpu_notes import training as T
from tpu_notes.efficiency import OUT_OF_SAMPLE_ERROR
from tpu_notes.topology import Slice
from tpu_notes.transformer import get_model

FOUR_M = 4 * 2**20  # the book's "4M tokens" (1024 sequences of 4096)
POD = Slice("v5p", (16, 20, 28))
CUBE16 = Slice("v5p", (16, 16, 16))


# -- the book's worked numbers (scaling book training.md / applied-training.md) ------------------------------------
def test_critical_batches_match_the_book():
    assert T.critical_batch_per_chip("fsdp", "v5p") == pytest.approx(2550, rel=1e-3)
    assert T.critical_batch_per_chip("dp", "v5p", n_axes=3) == pytest.approx(850, rel=1e-3)
    assert T.critical_batch_per_chip("dcn", "v5p") == pytest.approx(73_440, rel=1e-3)
    # mixed FSDP + TP at the optimum, M_X M_Y = 2, the two axes' times overlapping (the book's current training.md
    # and applied-training.md): 2550²/(2F), 113 for Llama 3 70B and 235 for Llama 2 13B; adding them (its older
    # text, combine="sum") gives 4x: 453 and 940. tests/test_fsdp_tp_convention.py checks every worked number.
    assert T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=28672, fsdp_axes=2) == pytest.approx(113, rel=4e-3)
    assert T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=13824, fsdp_axes=2) == pytest.approx(235, rel=2e-3)
    assert T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=28672, fsdp_axes=2, combine="sum") == pytest.approx(
        453, rel=2e-3
    )
    assert T.max_tensor_parallelism("v5p", 28672) == pytest.approx(28672 / 2550, rel=1e-3)


def test_optimal_fsdp_degree_matches_the_book():
    assert T.optimal_fsdp_degree(FOUR_M, 8960, 28672, fsdp_axes=2) == pytest.approx(1618, rel=1e-3)


def test_llama3_70b_time_and_flops():
    assert T.training_flops("llama3-70b", 15e12) == pytest.approx(6.3e24, rel=0.01)
    days = T.training_time("llama3-70b", 15e12, "v5p", 8960, 0.4) / 86400
    assert days == pytest.approx(44, rel=0.01)


def test_min_chips_for_llama3_70b_matches_the_book():
    n = T.min_chips_for_memory("llama3-70b", "v5p", 4_000_000, 4000, remat=4, include_grads=False)
    assert n == pytest.approx(225, abs=2)  # 21.6 TB / 96 GB
    assert T.min_chips_for_memory("llama3-70b", "v5p", 4_000_000, 4000, remat=4) > n  # gradients cost chips


def test_llama2_13b_memory_matches_the_book():
    m = T.training_memory("llama2-13b", None, 16_000_000, 4000, remat="mlp_outputs")
    assert m.params + m.optimizer == pytest.approx(10 * 13.0e9, rel=0.01)
    assert m.activations == pytest.approx(2 * 40 * 16e6 * 5120 * (1 + 2 * 2.7), rel=0.01)  # about 42 TB


# -- identities between functions -----------------------------------------------------------------------------------
def test_optimizer_bytes():
    assert T.optimizer_bytes_per_param("adam") == 8
    assert T.optimizer_bytes_per_param("adam", master_weights=True) == 12
    assert T.optimizer_bytes_per_param("sgd") == 0
    one = T.training_memory("llama3-8b", None, 4096, 4096)
    n = get_model("llama3-8b").param_count()
    assert (one.params + one.optimizer) / n == pytest.approx(10)
    mixed = T.training_memory("llama3-8b", None, 4096, 4096, master_weights=True)
    assert (mixed.params + mixed.grads + mixed.optimizer) / n == pytest.approx(16)


def test_sharding_divides_memory_and_zero_stages_save_in_order():
    p = T.Parallelism(fsdp=8, tensor=4)
    one = T.training_memory("llama3-8b", None, 2**20, 4096)
    many = T.training_memory("llama3-8b", p, 2**20, 4096)
    assert many.params == pytest.approx(one.params / 32)
    assert many.activations == pytest.approx(one.activations / 32)
    dp = T.Parallelism(data=8)
    totals = [T.training_memory("llama3-8b", dp, 2**20, 4096, zero=z).total for z in range(4)]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4


def test_pipeline_schedules_hold_different_activations():
    p = T.Parallelism(pipeline=4, microbatches=16, data=2)
    g = T.training_memory("llama3-8b", p, 2**20, 4096, schedule="gpipe")
    f = T.training_memory("llama3-8b", p, 2**20, 4096, schedule="1f1b")
    assert g.activations == pytest.approx(4 * f.activations)
    assert T.pipeline_bubble_fraction(4, 16) == pytest.approx(3 / 19)
    assert T.pipeline_bubble_fraction(4, 16, circular_repeats=2) < T.pipeline_bubble_fraction(4, 16)


@pytest.mark.parametrize("strategy", ["data", "fsdp"])
def test_layer_table_crosses_over_at_the_critical_batch(strategy):
    alpha = T.ici_intensity("v5p")
    X = 64
    t = T.mlp_layer_times(strategy, "v5p", alpha * X, 8192, 28672, data=X, fsdp=X)
    assert t.backward_comms == pytest.approx(t.backward_compute)  # 8DF/W == 8BDF/(XC) at B/X = α
    assert T.mlp_layer_times(strategy, "v5p", 2 * alpha * X, 8192, 28672, data=X, fsdp=X).bound == "compute"
    assert T.mlp_layer_times(strategy, "v5p", alpha * X / 2, 8192, 28672, data=X, fsdp=X).bound == "comms"


def test_tensor_parallel_bound_does_not_depend_on_batch():
    Y = 8
    ratios = {
        B: T.mlp_layer_times("tensor", "v5p", B, 8192, 28672, tensor=Y).comms
        / T.mlp_layer_times("tensor", "v5p", B, 8192, 28672, tensor=Y).compute
        for B in (2**14, 2**20)
    }
    assert ratios[2**14] == pytest.approx(ratios[2**20])


def test_mfu_inverts_training_time():
    secs = T.training_time("llama3-8b", 1e12, "v5p", 1024, 0.45)
    assert T.mfu("llama3-8b", 1e12 / secs, "v5p", 1024) == pytest.approx(0.45)
    assert T.hfu("llama3-8b", 1e12 / secs, "v5p", 1024, seq_len=8192) > 0.45


# -- batch bookkeeping ----------------------------------------------------------------------------------------------
def test_batch_split_uneven_and_sequence_split():
    s = T.batch_split(FOUR_M, 4096, T.Parallelism(fsdp=4096))
    assert s.sequences == 1024 and s.sequence_split == 4 and s.tokens_per_shard == 1024 and s.even
    u = T.batch_split(1000 * 2048, 2048, T.Parallelism(data=64))
    assert not u.even and u.sequences_per_shard == pytest.approx(1000 / 64)
    with pytest.raises(ValueError, match="whole number of sequences"):
        T.batch_split(1000, 3, T.Parallelism())


# -- placement, step time, planner -------------------------------------------------------------------------------
def test_map_to_slice_whole_axes_keep_wraparound():
    lay = T.map_to_slice(T.Parallelism(fsdp=256, tensor=16), CUBE16)
    assert lay.sizes("tensor") == (16,) and lay.wraps("tensor") == (True,)
    assert lay.sizes("fsdp") == (16, 16)
    mixed = T.map_to_slice(T.Parallelism(fsdp=1024, tensor=4), CUBE16)
    assert mixed.sizes("tensor") == (4,) and mixed.wraps("tensor") == (False,)
    assert math.prod(mixed.sizes("fsdp")) == 1024


def test_map_to_slice_rejects_wrong_counts():
    with pytest.raises(ValueError, match="multiply to"):
        T.map_to_slice(T.Parallelism(fsdp=512), CUBE16)
    with pytest.raises(ValueError, match="cannot be placed"):
        T.map_to_slice(T.Parallelism(fsdp=256, tensor=35), POD)  # 35 = 5 x 7 lies on no single axis


def test_step_time_fsdp_turns_comms_bound_below_the_critical_batch():
    p = T.Parallelism(fsdp=4096)
    big = T.step_time("llama3-70b", p, CUBE16, 4096 * 4096, 4096, remat="none")
    small = T.step_time("llama3-70b", p, CUBE16, 4096 * 256, 256, remat="none")
    assert big.bound == "compute" and small.bound == "fsdp"
    assert big.mfu > small.mfu
    assert small.total == pytest.approx(small.comms)


def test_pipeline_bubble_in_step_time():
    p = T.Parallelism(fsdp=512, pipeline=8, microbatches=16)
    st = T.step_time("llama3-8b", p, CUBE16, 32 * 2**20, 4096)  # 16 sequences per batch shard: one a microbatch
    assert st.bubble == pytest.approx(st.compute * 7 / 16)


def test_planner_picks_fsdp_plus_a_sequence_split_for_llama3_70b():
    r = T.plan("llama3-70b", CUBE16, FOUR_M, 4096)
    best = r[0]
    # 1024 sequences over 4096 chips: FSDP alone runs out of sequences, so a few ranks split each one, by tensor
    # or (cheaper for a GQA model on TPU: its keys and values are an eighth of the activations) by context
    split = best.parallelism.tensor * best.parallelism.context
    assert split in (2, 4, 8) and best.parallelism.fsdp >= 256
    # tiers of layouts the expected model cannot tell apart (its out-of-sample error), simplest first in each
    assert_tiered([p.expected.total for p in r], [p.tier for p in r], r.tie_within)
    assert r.tie_within == OUT_OF_SAMPLE_ERROR["tpu"]
    first = [p for p in r if p.tier == 1]
    assert len(r[0].parallelism.mesh_shape()) == min(len(p.parallelism.mesh_shape()) for p in first)
    roof = T.plan("llama3-70b", CUBE16, FOUR_M, 4096, rank_by="roofline")
    steps = [float(f"{p.step.total:.4g}") for p in roof]
    assert roof.tie_within == 0 and steps == sorted(steps)  # the roofline has no error band: a strict order
    assert all(p.memory.peak <= CUBE16.chip.hbm_bytes for p in r)
    assert "too few sequences" in r.reasons()  # pure FSDP over 4096 chips needs context parallelism


def test_planner_empty_ranking_says_why():
    r = T.plan("llama3-405b", Slice("v5e", (2, 2)), 2**20, 8192)
    assert len(r) == 0 and r.rejected and "does not fit" in r.reasons()
    assert "No legal layout fits" in r.table()


def test_planner_refuses_a_full_v5p_pod_cloud_tpu_will_not_schedule():
    # 8960 chips, but Cloud TPU schedules at most 96 cubes (6,144 chips, 16x16x24) in one v5p slice
    with pytest.raises(ValueError, match=r"system: .*6,144 chips \(16x16x24\).*n_slices") as err:
        T.plan("llama3-405b", POD, 16 * 2**20, 8192)
    assert err.value.kind == "not schedulable"


def test_planner_finds_no_legal_layout_on_a_slice_of_35_cubes():
    # 16x20x28 / 4 = 8960 = 2^8 x 35 chips; 8x20x28 = 4480 chips (70 cubes) is schedulable and keeps the 35:
    # 2048 sequences of 8192 and no degree of the model absorbs the 35, so every split is uneven
    r = T.plan("llama3-405b", Slice("v5p", (8, 20, 28)), 16 * 2**20, 8192)
    assert len(r) == 0 and r.searched > 1000
    assert set(r.reasons()) <= {"uneven batch", "too few sequences"}


# -- bad input -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: T.Parallelism(fsdp=0), "fsdp"),
        (lambda: T.Parallelism(tensor=1.5), "tensor"),
        (lambda: T.Parallelism(pipeline=4, microbatches=2), "microbatches"),
        (lambda: T.training_memory("llama3-8b", None, 4096, 4096, optimizer="adagrad"), "optimizer"),
        (lambda: T.training_memory("llama3-8b", None, 4096, 4096, remat="sometimes"), "remat"),
        (lambda: T.training_memory("llama3-8b", T.Parallelism(expert=2), 4096, 4096), "expert"),
        (lambda: T.training_memory("llama3-8b", T.Parallelism(pipeline=33, microbatches=33), 4096, 4096), "pipeline"),
        (lambda: T.training_memory("llama3-8b", None, 4096, 4096, zero=4), "zero"),
        (lambda: T.training_time("llama3-8b", 1e12, "v5p", 8, 1.5), "mfu"),
        (lambda: T.critical_batch_per_chip("fsdp+tp", "v5p"), "d_ff"),
        (lambda: T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=28672, combine="add"), "combine"),
        (lambda: T.critical_batch_per_chip("magic", "v5p"), "strategy"),
        (lambda: T.plan("llama3-8b", "v5p:4x4x4", 2**20, 4096), "system"),
        (lambda: T.plan("llama3-8b", CUBE16, 1000, 3), "whole number"),
        (lambda: T.plan("llama3-8b", CUBE16, 2**20, 4096, remat=()), "remat"),
        (lambda: T.step_time("llama3-8b", T.Parallelism(fsdp=8), CUBE16, 2**20, 4096), "multiply to"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# -- the command line -----------------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tpu_notes", *args], capture_output=True, text=True, timeout=120)


def test_cli_plan_prints_ranked_json():
    out = _cli(
        "plan",
        "--model",
        "llama3-70b",
        "--slice",
        "v5p:16x16x16",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "4096",
        "--json",
        "--top",
        "3",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rows = data["ranked"]
    assert len(rows) == 3 and rows[0]["step_s_expected"] <= rows[1]["step_s_expected"] * (1 + data["tie_within"])


def test_cli_plan_takes_a_gpu_cluster():
    out = _cli(
        "plan",
        "--model",
        "llama3-8b",
        "--slice",
        "h100:256",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "4096",
        "--json",
        "--top",
        "2",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["slice"].startswith("GpuCluster('h100', 256 GPUs") and len(data["ranked"]) == 2
    assert all("node" in row["placement"] or "net" in row["placement"] for row in data["ranked"])


@pytest.mark.parametrize(
    "args, words",
    [
        (("--model", "llama9", "--slice", "v5p:16x16x16"), "unknown --model"),
        (("--model", "llama3-8b", "--slice", "h100:100"), "multiple of"),
        (("--model", "llama3-8b", "--slice", "h100:256", "--slices", "2"), "GPU cluster"),
        (("--model", "llama3-70b", "--slice", "v5p:16x16x17"), "cannot be built"),
        (("--model", "llama3-70b", "--slice", "v5p:16x16x16", "--batch-tokens", "lots"), "batch-tokens"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, words):
    base = {"--batch-tokens": "4M", "--seq-len": "8000"}
    argv = list(args)
    for k, v in base.items():
        if k not in argv:
            argv += [k, v]
    out = _cli("plan", *argv)
    assert out.returncode == 2 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_cli_help_explains_every_flag():
    out = _cli("plan", "--help")
    for flag in (
        "--model",
        "--slice",
        "--batch-tokens",
        "--seq-len",
        "--slices",
        "--max-context",
        "--system",
        "--json",
    ):
        assert flag in out.stdout


def test_cli_bench_help_reaches_the_bench():
    out = _cli("bench", "--help")
    assert out.returncode == 0 and "--repeats" in out.stdout


def test_cli_spec_table_one_chip_and_json():
    table = _cli("spec")
    assert table.returncode == 0 and "v5e" in table.stdout and "H100" in table.stdout
    one = _cli("spec", "v5e")
    assert (
        one.returncode == 0 and "HBM bandwidth" in one.stdout and "820 GB/s" in one.stdout and "tpus.md" in one.stdout
    )
    data = json.loads(_cli("spec", "h100", "--json").stdout)
    assert data["h100"]["bf16_flops"]["value"] == 9.89e14 and data["h100"]["bf16_flops"]["source"]
    bad = _cli("spec", "nochip")
    assert bad.returncode == 2 and "unknown chip" in bad.stderr.lower() and len(bad.stderr.strip().splitlines()) == 1


def test_bench_result_json_round_trips():
    from tpu_notes import bench

    fake = bench.Measurement(
        kind="matmul", label="m", flops=2e9, nbytes=1e7, seconds=0.01, dtype="fp32", shape=(8, 8, 8)
    )
    copy = bench.Measurement(
        kind="copy", label="c", flops=1e6, nbytes=1e9, seconds=0.02, dtype="fp32", shape=(250_000_000,), op="add"
    )
    fit = bench.fit_roofline([fake, copy], min_copy_bytes=1)
    res = bench.RooflineMeasurement(
        platform="cpu", device_kind="cpu", chip=None, dtype="fp32", matmuls=(fake,), copies=(copy,), fit=fit, wall_s=1.0
    )
    data = json.loads(json.dumps(bench.result_json(res)))
    assert data["fit"]["peak_flops_per_s"] == pytest.approx(2e11)
    assert data["matmuls"][0]["seconds"] == 0.01 and data["predictions"][0]["measured_s"] == 0.01
    with pytest.raises(TypeError, match="result"):
        bench.result_json("nope")
