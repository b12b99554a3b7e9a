"""tpu_notes.inference against the scaling book's inference numbers, its own identities, and bad input."""

import math

import pytest

from tpu_notes import inference as I
from tpu_notes.topology import Slice
from tpu_notes.transformer import get_model


# -- the book's worked numbers (scaling book inference.md / applied-inference.md) --------------------------------
def test_llama2_13b_table_matches_the_book():
    # inference.md, 8 x v5e, 8192 context, bf16: step times 4.98 / 12.13 / 20.30 / 36.65 / 69.33 / 249.09 ms
    book = {1: 4.98e-3, 8: 12.13e-3, 16: 20.30e-3, 32: 36.65e-3, 64: 69.33e-3, 240: 249.09e-3}
    for b, t in book.items():
        s = I.decode_step_time("llama2-13b", "v5e", 8, b, 8192)
        assert s.total == pytest.approx(t, rel=0.015), b  # we leave the input embedding out of the reads
    assert I.decode_step_time("llama2-13b", "v5e", 8, 8, 8192).fits
    assert not I.decode_step_time("llama2-13b", "v5e", 8, 16, 8192).fits  # "we OOM beyond batch size 16"


def test_gqa_variant_is_five_times_smaller_and_faster():
    gqa = get_model("llama2-13b").with_(n_kv_heads=8)
    assert gqa.kv_bytes_per_token() * 5 == get_model("llama2-13b").kv_bytes_per_token()
    s = I.decode_step_time(gqa, "v5e", 8, 240, 8192)
    assert s.total == pytest.approx(52.99e-3, rel=0.02)


def test_pop_quiz_step_times():
    # 30B params in int8, 100 kB/token KV, 8192 context, 16 v5e chips: 2.5 ms at B=4, about 21 ms at B=256
    small = I.step_time_from_counts(30e9, 4 * 8192 * 100e3, 2 * 4 * 30e9, "v5e", 16, 4, 8192)
    big = I.step_time_from_counts(30e9, 256 * 8192 * 100e3, 2 * 256 * 30e9, "v5e", 16, 256, 8192)
    assert small.total == pytest.approx(2.5e-3, rel=0.03) and small.bound == "weights"
    assert big.total == pytest.approx(21e-3, rel=0.03)
    # the book's 21 ms adds the FLOPs time to the KV time: the general formula
    assert big.total == pytest.approx(big.kv_load + big.flops_time)


def test_critical_batch_bf16_and_int8():
    assert I.critical_batch("llama3-70b", "v5e") == pytest.approx(240, rel=0.01)
    assert I.critical_batch("llama3-70b", "v5e", weight_dtype="int8") == pytest.approx(120, rel=0.01)
    assert I.critical_batch("llama3-70b", "v5e", weight_dtype="int8", compute_dtype="int8") == pytest.approx(
        240, rel=0.01
    )


def test_step_time_crosses_to_compute_at_the_critical_batch():
    b = I.critical_batch("llama3-8b", "v5e")
    lo = I.decode_step_time("llama3-8b", "v5e", 4, int(b * 0.8), 16)
    hi = I.decode_step_time("llama3-8b", "v5e", 4, int(b * 1.25), 16)
    assert lo.weight_load > lo.flops_time and hi.flops_time > hi.weight_load


def test_smallest_v5e_topologies_for_llama3_70b():
    # applied-inference.md: bf16 on 4x4, int8 on 4x2 (8 chips), int4 on 2x2
    shapes = {
        wd: I.smallest_topology("llama3-70b", "v5e", weight_dtype=wd, kv_dtype=wd).n_chips
        for wd in ("bf16", "int8", "int4")
    }
    assert shapes == {"bf16": 16, "int8": 8, "int4": 4}
    assert I.min_chips("llama3-70b", "v5e", weight_dtype="bf16") == 9


def test_applied_inference_example_memory():
    # batch 32, 8192 tokens, int8 everything: about 112 GB (70 GB weights + 43 GB KV)
    m = I.serving_memory("llama3-70b", 32, 8192, weight_dtype="int8", kv_dtype="int8")
    assert m.total == pytest.approx(112e9, rel=0.03)
    assert I.min_chips("llama3-70b", "v5e", batch=32, seq_len=8192, weight_dtype="int8", kv_dtype="int8") == 8


def test_max_batch_fills_the_memory():
    b = I.max_batch("llama3-70b", "v5e", 16, 8192)
    assert I.decode_step_time("llama3-70b", "v5e", 16, b, 8192).fits
    assert not I.decode_step_time("llama3-70b", "v5e", 16, b + 1, 8192).fits
    # a full HBM takes HBM / W_hbm to read: about 19.5 ms on v5e (applied-inference.md's "19 ms")
    assert I.decode_step_time("llama3-70b", "v5e", 16, b, 8192).total == pytest.approx(16e9 / 8.2e11, rel=0.02)


def test_max_batch_says_how_many_chips_are_needed():
    with pytest.raises(ValueError, match=r"n_chips=4 .* at least 9 chips"):
        I.max_batch("llama3-70b", "v5e", 4, 8192)


def test_disaggregation_ratio_matches_the_book():
    assert I.disaggregation_ratio(0.91, 0.019, 32, 512) == pytest.approx(3.0, rel=0.01)
    ev = I.eviction_per_step(32, 8192, 4096)
    assert ev == {"sequences": 32 / 4096, "tokens": 96.0}


def test_generation_sharding_limits_match_the_book():
    assert I.max_tp_memory("v5e", 16384, 32) == pytest.approx(16384 / (32 * 8.2e11 / 9e10))
    assert I.latency_bound_tp("v5e", 1, 45_000) == pytest.approx(1.0)  # Y > B·D / 45,000 in int8
    assert I.ws_2d_crossover(4096, 16384) == pytest.approx(72)
    t = I.generation_matmul_times("v5e", 64, 8192, 28672, 32)
    assert t.ici == pytest.approx(2 * 64 * 8192 / 9e10) and t.bound == "hbm"
    assert t.hbm == pytest.approx(2 * 8192 * 28672 / (32 * 8.2e11))


def test_2d_weight_stationary_wins_past_the_crossover():
    n_cross = I.ws_2d_crossover(8192, 32768)
    for n, better in ((int(n_cross / 2), "1d"), (int(n_cross * 2), "2d")):
        one = I.weight_stationary_comms("v5p", 64, 8192, 32768, n, "1d").comms
        two = I.weight_stationary_comms("v5p", 64, 8192, 32768, n, "2d").comms
        assert (one < two) == (better == "1d"), n
    # at the optimum the 2D formula is sqrt(128)·B·D/(sqrt(N)·W) for F = 4D
    w = I.weight_stationary_comms("v5p", 64, 8192, 32768, 512, "2d")
    assert w.comms == pytest.approx(math.sqrt(128) * 64 * 8192 / (math.sqrt(512) * 1.8e11))


def test_kv_sharding_heads_then_batch():
    s = I.kv_sharding("llama3-70b", 32)
    assert (s.heads, s.batch, s.all_to_alls) == (8, 4, 2)
    with pytest.raises(ValueError, match="heads=16 exceeds the model's 8 KV heads"):
        I.kv_sharding("llama3-70b", 32, heads=16)


def test_cost_per_million_tokens():
    s = I.decode_step_time("llama3-70b", "v5e", 16, 32, 8192)
    dollars = I.cost_per_million_tokens(s, chip="v5e")
    assert dollars == pytest.approx(1e6 / s.tokens_per_s_per_chip * 1.2 / 3600)
    assert I.cost_per_million_tokens(s.tokens_per_s_per_chip, 1.2) == pytest.approx(dollars)


def test_prefill_time_matches_the_book():
    # applied-inference.md: 8192-token prefill of Llama 3 70B on 16 v5e at 40% MFU: about 0.91 s
    p = I.prefill_time("llama3-70b", "v5e", 16, 8192, mfu=0.4)
    assert p.total == pytest.approx(0.91, rel=0.08)
    # a prefix cache that holds most of the prompt saves most of the work
    assert I.prefill_time("llama3-70b", "v5e", 16, 8192, mfu=0.4, cached_len=6144).total < 0.35 * p.total


def test_speculative_expectations():
    assert I.expected_tokens_per_round(0.0, 4) == 1.0
    assert I.expected_tokens_per_round(1.0, 4) == 5.0
    assert I.expected_tokens_per_round(0.5, 2) == pytest.approx(1.75)
    assert I.speculative_speedup(0.8, 4, draft_cost=0.05) > 2.5
    assert 1 <= I.best_k(0.8, 0.05) <= 16


def test_local_attention_and_paging_shrink_the_kv_load():
    full = I.decode_step_time("llama3-8b", "v5e", 4, 32, 32768)
    local = I.decode_step_time("llama3-8b", "v5e", 4, 32, 32768, local_window=4096, local_fraction=0.75)
    assert local.kv_bytes == pytest.approx(full.kv_bytes * (0.25 + 0.75 * 4096 / 32768))


def test_latency_throughput_curve_rises_then_flattens():
    pts = I.latency_throughput_curve("llama3-8b", "v5e", 4, 2048)
    lat = [p.total for p in pts]
    thr = [p.tokens_per_s_per_chip for p in pts]
    assert lat == sorted(lat) and thr == sorted(thr)
    assert thr[-1] / thr[-2] < thr[1] / thr[0]


def test_measured_roofline_is_a_machine():
    class Fit:
        peak_flops = 1e11
        bandwidth = 1e10

    s = I.decode_step_time("tiny-gqa", Fit(), 1, 1, 64, weight_dtype="fp32", kv_dtype="fp32")
    assert s.weight_load == pytest.approx(I.weight_params_read("tiny-gqa") * 4 / 1e10)
    assert s.fits


def test_slice_shapes():
    assert I.slice_shapes("v5e")[:5] == ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8))
    assert (4, 4, 8) in I.slice_shapes("v5p")
    assert isinstance(I.smallest_topology("llama3-8b", "v5p"), Slice)


# -- bad input -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: I.decode_step_time("llama3-8b", "v5e", 4, 0, 1024), "batch"),
        (lambda: I.decode_step_time("llama3-8b", "v5e", 4, 8, -1), "seq_len"),
        (lambda: I.decode_step_time("llama3-8b", "v5e", 4, 8, 1024, weight_dtype="int3"), "weight_dtype"),
        (lambda: I.decode_step_time("llama3-8b", "v5e", 4, 8, 1024, kv_dtype="float64"), "kv_dtype"),
        (lambda: I.decode_step_time("llama3-8b", "v5e", 4, 8, 1024, compute_dtype="int4"), "compute_dtype"),
        (lambda: I.decode_step_time("llama3-8b", "v5e", 0, 8, 1024), "n_chips"),
        (lambda: I.prefill_time("llama3-8b", "v5e", 4, 1024, mfu=1.5), "mfu"),
        (lambda: I.max_batch("llama3-70b", "v5e", 2, 1024), "n_chips"),
        (lambda: I.kv_sharding("llama3-8b", 16, heads=9), "heads"),
        (lambda: I.cost_per_million_tokens(100.0), "dollars_per_chip_hour"),
        (lambda: I.disaggregation_ratio(1.0, 0.01, 0, 100), "batch"),
        (lambda: I.expected_tokens_per_round(1.5, 4), "acceptance"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_analysis_layer_does_not_import_jax():
    import subprocess
    import sys

    code = (
        "import sys, tpu_notes.inference as I; from tpu_notes.inference.engine import deploy; "
        "from tpu_notes.inference.workload import Workload; "
        "I.simulate(deploy('llama3-8b', 'v5e', 4), Workload.poisson(1.0, n_requests=5)); "
        "print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- python -m tpu_notes serve -------------------------------------------------------------------------------------
def test_serve_command_prints_the_step_and_the_smallest_slice(capsys):
    from tpu_notes.__main__ import main

    assert (
        main(
            [
                "serve",
                "--model",
                "llama3-70b",
                "--chip",
                "v5e",
                "--batch",
                "64",
                "--context",
                "8192",
                "--weights",
                "int8",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    s = I.decode_step_time("llama3-70b", "v5e", 16, 64, 8192, weight_dtype="int8", kv_dtype="int8")
    from tpu_notes.units import fmt

    assert fmt(s.total, "s") in out and "v5e 4x4 (16 chips)" in out and "fits" in out


def test_serve_command_json_and_gpu(capsys):
    import json

    from tpu_notes.__main__ import main

    assert main(["serve", "--model", "llama3-8b", "--chip", "h100", "--batch", "8", "--context", "4096", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["smallest_topology"] == "h100:1" and data["smallest_topology_chips"] == 1
    assert data["step_s"] == data["step_s_expected"]
    assert data["step_s_roofline"] == pytest.approx(I.decode_step_time("llama3-8b", "h100", 1, 8, 4096).total)


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--batch", "0"], "--batch"),
        (["--weights", "int3"], "--weights"),
        (["--chip", "v9"], "chip"),
        (["--context", "-5"], "--context"),
        (["--chips", "0"], "--chips"),
    ],
)
def test_serve_command_bad_input_exits_2_with_one_line(argv, word, capsys):
    from tpu_notes.__main__ import main

    base = {"--model": "llama3-8b", "--chip": "v5e", "--batch": "8", "--context": "1024"}
    args = dict(zip(argv[::2], argv[1::2]))
    flat = [x for k, v in {**base, **args}.items() for x in (k, v)]
    assert main(["serve", *flat]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


# -- figures and the explorer ------------------------------------------------------------------------------------
def test_inference_figures_draw_the_library_numbers():
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    fig = plots.decode_step_parts_chart("llama3-8b", "v5e", 4, 8192)
    total = [line for line in fig.axes[0].lines if line.get_linewidth() > 2][0]
    b, t = total.get_data()
    assert t[0] == pytest.approx(I.decode_step_time("llama3-8b", "v5e", 4, int(b[0]), 8192).total)
    fig2 = plots.latency_throughput_chart("llama2-13b", "v5e", 8, 8192, batches=[1, 8, 64])
    assert fig2.axes[0].get_xlabel().startswith("throughput")
    from tpu_notes.inference.engine import deploy
    from tpu_notes.inference.workload import LengthDistribution, Workload

    wl = Workload.poisson(1.0, n_requests=10, output=LengthDistribution.fixed(8))
    runs = {"a": [(1.0, I.simulate(deploy("llama3-8b", "v5e", 4), wl))]}
    for f in (
        plots.speculative_speedup_chart(),
        plots.weight_stationary_chart(),
        plots.kv_share_chart(),
        plots.serving_sweep_chart(runs),
        plots.measured_decode_chart(
            [
                dict(batch=1, seq_len=64, measured_s=2e-3, predicted_s=1e-3),
                dict(batch=4, seq_len=64, measured_s=3e-3, predicted_s=1e-3),
            ]
        ),
    ):
        assert f.axes
    plt.close("all")


def test_serving_explorer_static_and_summary():
    from tpu_notes import widgets

    fig = widgets.serving_explorer("llama3-8b", "v5e", 4, 4096, static=True)
    assert fig.axes
    text = widgets.serving_summary("llama3-8b", "v5e", 4, 4096, 16)
    s = I.decode_step_time("llama3-8b", "v5e", 4, 16, 4096)
    from tpu_notes.units import fmt

    assert fmt(s.total, "s") in text and "fits" in text
    with pytest.raises(ValueError, match="batch"):
        widgets.serving_explorer("llama3-8b", "v5e", 4, 4096, batch=0, static=True)


def test_pareto_frontier_keeps_only_undominated_settings():
    steps = []
    for n in (4, 8, 16):
        steps += I.latency_throughput_curve(
            "llama3-70b", "v5e", n, 8192, [1, 4, 16, 64, 256], weight_dtype="int8", kv_dtype="int8"
        )
    front = I.pareto_frontier(list(steps))
    assert front and all(s.fits for s in front)
    lat = [s.total for s in front]
    thr = [s.tokens_per_s_per_chip for s in front]
    assert lat == sorted(lat) and thr == sorted(thr)
    for s in steps:
        if s.fits and s not in front:  # each left-out setting is beaten on both counts by one on the front
            assert any(f.total <= s.total and f.tokens_per_s_per_chip >= s.tokens_per_s_per_chip for f in front)


# -- one step-time formula; bounded searches; impossible deployments refused ----------------------------------------
def test_the_simulator_clock_is_the_decode_step_formula():
    clock = I.decode_step_model("llama3-8b", "v5e", 4, 64, kv_dtype="int8")
    for b in (1, 7, 64):
        step = I.decode_step_time("llama3-8b", "v5e", 4, b, 3000, kv_dtype="int8")
        assert clock.seconds(b, b * 3000) == step.total
    with pytest.raises(ValueError, match="batch"):
        clock.seconds(65, 100)
    with pytest.raises(ValueError, match="kv_tokens"):
        clock.seconds(1, -1)


def test_candidate_lists_are_capped():
    with pytest.raises(ValueError, match="batches"):
        I.latency_throughput_curve("llama3-8b", "v5e", 4, 1024, list(range(1, 10**6 + 1)))
    with pytest.raises(ValueError, match="candidates"):
        I.best_deployment("llama3-70b", "v5e", 8192, 0.05, chip_counts=(8,) * 64, batches=list(range(1, 129)))


def test_plan_top_0_and_bench_flags_exit_2_with_a_message(capsys):
    from tpu_notes.__main__ import main

    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--slice",
                "v5e:4x4",
                "--batch-tokens",
                "1Mi",
                "--seq-len",
                "4096",
                "--top",
                "0",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--top" in err[0]
    for argv, word in ((["--repeats", "0"], "--repeats"), (["--chip", "nosuch"], "--chip")):
        with pytest.raises(SystemExit) as exc:
            main(["bench", *argv])
        assert exc.value.code == 2 and word in capsys.readouterr().err


def test_parse_slice_lives_in_topology():
    from tpu_notes import __main__, topology, widgets

    assert __main__.parse_slice is topology.parse_slice is widgets.parse_slice
    assert topology.parse_slice("v5p:4x4x4") == Slice("v5p", (4, 4, 4))
    with pytest.raises(ValueError, match="shape"):
        topology.parse_slice("v5p:4x²")
