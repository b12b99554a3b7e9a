"""The planner's table and the ``plan``/``serve`` subcommands give the roofline and the expected figures, labelled."""

import json

import pytest

from tpu_notes import inference as I
from tpu_notes import training as T
from tpu_notes.__main__ import main
from tpu_notes.topology import parse_slice

PLAN_TPU = ["--model", "llama3-8b", "--slice", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"]
PLAN_GPU = ["--model", "llama3-8b", "--slice", "h100:64", "--batch-tokens", "1Mi", "--seq-len", "4096"]
SERVE_TPU = ["--model", "llama3-70b", "--chip", "v5e", "--batch", "64", "--context", "8192", "--weights", "int8"]
SERVE_GPU = ["--model", "llama3-8b", "--chip", "h100", "--batch", "8", "--context", "4096", "--chips", "2"]


def _json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _check_tiers(rows, tie_within: float, key: str) -> None:
    """The tiered ranking: tiers numbered 1, 2... in order, and every step of a tier within ``tie_within`` of that
    tier's fastest, which is slower than the previous tier's fastest by more than ``tie_within``."""
    tiers = [r["tier"] for r in rows]
    assert tiers == sorted(tiers) and tiers[0] == 1 and set(tiers) == set(range(1, tiers[-1] + 1))
    fastest = {}
    for r in rows:
        fastest[r["tier"]] = min(fastest.get(r["tier"], r[key]), r[key])
    for r in rows:
        assert r[key] <= fastest[r["tier"]] * (1 + tie_within) * (1 + 1e-9)
    for t in range(2, tiers[-1] + 1):
        assert fastest[t] > fastest[t - 1] * (1 + tie_within)


def _text(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [PLAN_TPU, PLAN_GPU], ids=["tpu", "gpu"])
def test_plan_json_carries_roofline_and_expected(argv, capsys):
    data = _json(capsys, "plan", *argv, "--top", "6", "--rank-by", "roofline")
    rows = data["ranked"]
    assert data["rank_by"] == "roofline" and len(rows) == 6
    for r in rows:
        assert r["step_s"] == r["step_s_roofline"] > 0  # ranked by the roofline, as asked
        assert "mfu" not in r and "mfu_roofline" not in r  # one meaning of MFU per key
        assert r["step_s_expected"] >= r["step_s_roofline"]
        assert 0 < r["mfu_expected"] <= r["mfu_roofline_bound"] <= 1.0
        assert 0 < r["tokens_per_s_per_chip_expected"] <= r["tokens_per_s_per_chip_roofline"]
        # tokens/s × step × chips is the global batch, for both figures
        chips = 16 if argv is PLAN_TPU else 64
        for kind in ("roofline", "expected"):
            assert r[f"tokens_per_s_per_chip_{kind}"] * r[f"step_s_{kind}"] * chips == pytest.approx(2**20)
        assert r["bound_expected"] and r["efficiency_model"] == "default"
    steps = [float(f"{r['step_s']:.4g}") for r in rows]
    assert steps == sorted(steps)  # ranked by the roofline when asked (ties within 4 digits: simpler layout)


def test_plan_can_rank_by_the_expected_step(capsys):
    data = _json(capsys, "plan", *PLAN_TPU, "--top", "8", "--rank-by", "expected")
    assert data["rank_by"] == "expected" and len(data["ranked"]) == 8
    _check_tiers(data["ranked"], data["tie_within"], "step_s_expected")
    roof = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096, rank_by="roofline")
    exp = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096, rank_by="expected")
    # the expected ranking's first layout is in the fastest tier: within tie_within of the fastest expected step
    assert exp[0].step.expected.total <= min(p.step.expected.total for p in roof) * (1 + exp.tie_within)
    assert len(exp) == len(roof)  # the same layouts survive, only the order (and microbatch choice) may differ


def test_plan_text_labels_both_figures(capsys):
    out = _text(capsys, "plan", *PLAN_TPU, "--top", "3")
    head = next(line for line in out.splitlines() if line.lstrip().startswith("#"))
    for word in ("roof step", "MFU", "exp step", "bound"):
        assert word in head
    assert "roofline" in out and "floor on the step" in out and "expected" in out and "forecast" in out
    best = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096)[0]
    from tpu_notes.units import fmt

    assert f"roofline: step {fmt(best.step.total, 's')}" in out
    assert f"expected: step {fmt(best.step.expected.total, 's')}, MFU {best.step.expected.mfu:.1%}" in out


def test_planner_table_and_rows():
    result = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096)
    table = result.table(4)
    lines = table.splitlines()
    assert lines[0].count("MFU") == 1 and all(len(line) <= 84 for line in lines)
    assert "exp: expected" in table and len([x for x in lines if x[:2].strip().isdigit()]) == 4
    p = result[0]
    assert f"{p.step.expected.mfu:.1%}" in lines[1] and p.step.bound in lines[1]
    assert p.expected is p.step.expected
    rejected = result.rejected[0].row()
    assert rejected["reason"] and rejected["step_s_expected"] is None and rejected["mfu_roofline"] is None
    with pytest.raises(ValueError, match="rank_by"):
        T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096, rank_by="fastest")


@pytest.mark.parametrize("argv", [SERVE_TPU, SERVE_GPU], ids=["tpu", "gpu"])
def test_serve_json_carries_roofline_and_expected(argv, capsys):
    """Every figure of ``serve`` is the engine's step (``inference.engine``) and its cost sheet
    (``inference.cost``), the roofline and the expected labelled."""
    from tpu_notes.inference.cost import serving_cost
    from tpu_notes.inference.engine import deploy

    data = _json(capsys, "serve", *argv)
    assert data["step_s"] == data["step_s_expected"] > data["step_s_roofline"] > 0
    assert data["step_s_expected"] >= data["step_s_roofline"] >= data["step_s_roofline_no_collectives"]
    assert 0 < data["tokens_per_s_per_chip_expected"] <= data["tokens_per_s_per_chip_roofline"]
    d = deploy(
        data["model"], data["chip"], data["n_chips"], weight_dtype=data["weight_dtype"], kv_dtype=data["kv_dtype"]
    )
    e = d.step(data["batch"], data["batch"] * data["context"])
    assert data["step_s_expected"] == pytest.approx(e.total) and data["bound_expected"] == e.bound
    assert data["step_s_roofline"] == pytest.approx(e.roofline)
    assert sum(data["parts_s_expected"].values()) >= data["step_s_expected"] * (1 - 1e-12)  # max() drops a part
    c = serving_cost(d, data["prompt_len"], data["output_len"], data["batch"])
    assert data["prompt_len"] == data["context"] and data["output_len"] == 512  # the stated defaults
    assert data["dollars_per_million_output"] == pytest.approx(c.dollars_per_million_output)
    assert data["dollars_per_million_input"] == pytest.approx(c.dollars_per_million_input)
    assert data["dollars_per_million_input"] > 0
    assert data["fits"] is True and data["no_price_reason"] is None and data["efficiency_model"] == "default"


def test_serve_text_labels_both_figures(capsys):
    from tpu_notes.inference.engine import deploy
    from tpu_notes.units import fmt

    out = _text(capsys, "serve", *SERVE_TPU)
    e = deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8").step(64, 64 * 8192)
    roof = I.decode_step_time("llama3-70b", "v5e", 16, 64, 8192, weight_dtype="int8", kv_dtype="int8")
    assert f"expected step {fmt(e.total, 's')}" in out and f"roofline step {fmt(e.roofline, 's')}" in out
    assert f"Chapter 7's step {fmt(roof.total, 's')}" in out  # the engine's roofline less its collectives
    assert f"throughput {fmt(e.tokens_per_s_per_chip, 'tokens/s')} per chip expected" in out
    assert out.count("per million") == 2 and "a forecast" in out and "a floor" in out and "upper bound" in out


# ------------------------------------------------------------------------------ the table shows what JSON says
PLAN_PP = ["--model", "llama3-70b", "--system", "v5e:16x16", "--slices", "2", "--batch-tokens", "2Mi", "--seq-len",
           "4Ki", "--max-context", "1"]  # fmt: skip


def _short(label: str, repeats: int) -> str:
    """A JSON ``layout`` ("data=2 x pipeline=8 x tensor=16 x dcn=2 x mb=64") in the table's abbreviations, written
    out here from the legend: dp data, fsdp, cp context, pp pipeline, ep expert, tp tensor, dcnN, mbN, vN."""
    abbrev = {"data": "dp", "fsdp": "fsdp", "context": "cp", "pipeline": "pp", "expert": "ep", "tensor": "tp"}
    parts = []
    for part in label.split(" x "):
        key, value = part.split("=")
        parts.append(abbrev.get(key, key) + value)
    return " ".join(parts) + (f" v{repeats}" if repeats > 1 else "")


def test_plan_table_prints_layout_and_remat_whole(capsys):
    """The report: the table cut ``data=2 x pipeline=8 x tensor=16 x dcn=2 x mb=64`` short and ``mlp_outputs`` to
    ``mlp_out``. Each row now carries the JSON row's layout (DCN and microbatches included) and remat in full."""
    argv = ["plan", *PLAN_PP, "--top", "6", "--remat", "mlp_outputs", "--remat", "save_matmul_outputs"]
    rows = _json(capsys, *argv)["ranked"]
    assert any("pipeline=" in r["layout"] and "mb=" in r["layout"] and "dcn=2" in r["layout"] for r in rows)
    lines = _text(capsys, *argv).splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#"))
    rule = next(i for i in range(head + 1, len(lines)) if set(lines[i]) == {"-", " "})  # under header and units
    assert rule <= head + 2
    for i, r in enumerate(rows, 1):
        line = lines[rule + i]
        assert line.split()[0] == str(i)
        assert f" {_short(r['layout'], r['circular_repeats'])} " in line, (line, r["layout"])
        assert f" {r['remat']} " in line, (line, r["remat"])
    legend = "\n".join(lines[rule + len(rows) + 1 :])
    assert "dcnN: N slices joined over DCN" in legend and "mbN: N microbatches" in legend


def test_serve_json_names_the_smallest_system_as_system_accepts_it(capsys):
    """Beside ``smallest_topology_chips`` is the system spelled the way --system takes it (never null beside a
    number), and the count is legal: it splits Llama 3 8B's d_ff (14,336) and divides or is a multiple of its 8 KV
    heads (published config)."""
    for argv in (SERVE_TPU, SERVE_GPU[:-2]):
        data = _json(capsys, "serve", *argv)
        n = data["smallest_topology_chips"]
        assert isinstance(n, int) and isinstance(data["smallest_topology"], str)
        assert data["smallest_topology"].split(":")[0] == data["chip"]
        d_ff, kv = (28672, 8) if data["model"] == "llama3-70b" else (14336, 8)
        assert d_ff % n == 0 and (kv % n == 0 or n % kv == 0)
    tpu = _json(capsys, "serve", *SERVE_TPU)
    assert tpu["smallest_topology"] == "v5e:4x4" and tpu["smallest_topology_chips"] == 16


# ------------------------------------------------------------------------- plan's flags reach the planner
ALL = ["--top", "10000"]  # every ranked layout


def test_plan_flags_reach_the_planner(capsys):
    """Every search flag is the planner's argument of the same meaning: the CLI's JSON counts what
    ``training.plan`` finds when called with the same arguments, and echoes the settings it ran with."""
    from tpu_notes.__main__ import _plan_system  # the system as the CLI builds it from its spelling

    flags = ["--framework", "torchtitan", "--recipe", "bf16_master", "--hbm-fraction", "0.8", "--tie-within", "0.05",
             "--max-pipeline", "4", "--interleave", "2", "--disable", "context,expert", "--uneven-stages"]  # fmt: skip
    data = _json(capsys, "plan", *PLAN_GPU, *flags, *ALL)
    result = T.plan(
        "llama3-8b", _plan_system("h100:64"), 2**20, 4096, framework="torchtitan", recipe="bf16_master",
        hbm_fraction=0.8, tie_within=0.05, max_pipeline=4, interleave=(1, 2), disable=("context", "expert"),
        uneven_stages=True,
    )  # fmt: skip
    assert (data["searched"], data["ranked_count"]) == (result.searched, len(result.ranked))
    assert [r["layout"] for r in data["ranked"]] == [p.parallelism.label() for p in result.ranked]
    assert data["framework"] == "torchtitan" and data["recipe"] == "bf16_master"
    assert data["hbm_fraction"] == 0.8 and data["tie_within"] == 0.05 and data["disabled"] == ["context", "expert"]
    assert all(r["degrees"]["pipeline"] <= 4 and r["circular_repeats"] in (1, 2) for r in data["ranked"])
    _check_tiers(data["ranked"], 0.05, "step_s_expected")


def test_disable_pipeline_gives_no_pipeline_layout(capsys):
    plain = _json(capsys, "plan", *PLAN_TPU, *ALL)["ranked"]
    assert any(r["degrees"]["pipeline"] > 1 for r in plain)  # so the flag has something to remove
    for argv in (["--disable", "pipeline"], ["--disable", "tensor", "--disable", "pipeline"], ["--max-pipeline", "1"]):
        rows = _json(capsys, "plan", *PLAN_TPU, *argv, *ALL)["ranked"]
        assert rows and all(r["degrees"]["pipeline"] == 1 for r in rows), argv
    assert any(r["degrees"]["tensor"] > 1 for r in plain)
    rows = _json(capsys, "plan", *PLAN_TPU, "--disable", "tensor,pipeline", *ALL)["ranked"]
    assert rows and all(r["degrees"]["tensor"] == 1 == r["degrees"]["pipeline"] for r in rows)


def test_less_hbm_rejects_more_for_memory(capsys):
    """``--hbm-fraction 0.5`` leaves half of each chip's HBM to the layout: more candidates do not fit than at 0.9,
    and every ranked peak is at most that half of v5e's HBM (the chip table's figure)."""
    from tpu_notes.hardware import get_chip

    tight = _json(capsys, "plan", *PLAN_TPU, "--hbm-fraction", "0.5", *ALL)
    loose = _json(capsys, "plan", *PLAN_TPU, "--hbm-fraction", "0.9", *ALL)
    assert tight["rejected_reasons"]["does not fit"] > loose["rejected_reasons"]["does not fit"]
    assert tight["ranked_count"] < loose["ranked_count"] and tight["searched"] == loose["searched"]
    hbm = get_chip("v5e").hbm_bytes
    assert all(r["memory_bytes"]["peak"] <= 0.5 * hbm for r in tight["ranked"])
    assert any(r["memory_bytes"]["peak"] > 0.5 * hbm for r in loose["ranked"])


def test_maxtext_never_ranks_microbatches_that_are_not_a_multiple_of_the_stages(capsys):
    """Nine sequences on 16 v5e chips: a two-stage pipeline can only split them into 3 or 9 microbatches. Megatron's
    plain 1F1B schedule takes 9; MaxText wants a multiple of the stages, so it refuses them for too few sequences."""
    argv = ["--model", "llama3-8b", "--system", "v5e:4x4", "--batch-tokens", str(9 * 4096), "--seq-len", "4096"]
    megatron = _json(capsys, "plan", *argv, "--framework", "megatron", *ALL)
    maxtext = _json(capsys, "plan", *argv, "--framework", "maxtext", *ALL)
    odd = [r for r in megatron["ranked"] if r["microbatches"] % r["degrees"]["pipeline"]]
    assert odd  # the flag has something to refuse
    assert not [r for r in maxtext["ranked"] if r["microbatches"] % r["degrees"]["pipeline"]]
    assert maxtext["rejected_reasons"]["too few sequences"] > megatron["rejected_reasons"]["too few sequences"]


@pytest.mark.parametrize("argv", [PLAN_TPU, PLAN_GPU], ids=["tpu", "gpu"])
def test_plan_json_adds_up(argv, capsys):
    """The JSON's counts and parts add up: rejections by reason to ``searched`` less the ranking; memory by
    component to the peak; communication by kind to the roofline's comms; tokens per chip, microbatches and
    sequences to the batch; the expected step's band is its out-of-sample error either side."""
    from tpu_notes.efficiency import OUT_OF_SAMPLE_ERROR

    data = _json(capsys, "plan", *argv, *ALL)
    assert sum(data["rejected_reasons"].values()) == data["rejected_count"] == data["searched"] - data["ranked_count"]
    assert data["ranked_count"] == len(data["ranked"]) > 0 and data["feasible"] is True
    kind = "tpu" if argv is PLAN_TPU else "gpu"
    assert data["expected_error"] == OUT_OF_SAMPLE_ERROR[kind]
    assert data["system_name"] == ("v5e 4x4" if kind == "tpu" else "64 x H100 (8 nodes)")
    sequences = 2**20 // 4096
    for r in data["ranked"]:
        m = r["memory_bytes"]
        assert m["params"] + m["grads"] + m["optimizer"] + m["activations"] == pytest.approx(m["total"])
        assert m["total"] + m["gathered"] + m["transient"] == pytest.approx(m["peak"])
        assert m["peak"] == r["memory_peak_per_chip_bytes"]
        assert sum(r["comms_s_by_kind_roofline"].values()) == pytest.approx(r["comms_s"])
        assert set(r["comms_s_by_kind_expected"]) == set(r["comms_s_by_kind_roofline"])
        d = r["degrees"]
        chips = d["data"] * d["fsdp"] * d["tensor"] * d["pipeline"] * d["expert"] * d["context"] * d["dcn"]
        assert chips == r["n_chips"] and r["tokens_per_chip"] * chips == 2**20
        shards = d["data"] * d["fsdp"] * d["expert"] * d["dcn"]
        assert r["sequences_per_microbatch"] * r["microbatches"] * shards == sequences
        assert r["tokens_per_microbatch_per_chip"] * d["context"] == r["sequences_per_microbatch"] * 4096
        err = data["expected_error"]
        assert r["expected_error"] == err and r["tier"] >= 1 and isinstance(r["gather_once"], bool)
        assert r["step_s_expected_low"] == pytest.approx(r["step_s_expected"] * (1 - err))
        assert r["step_s_expected_high"] == pytest.approx(r["step_s_expected"] * (1 + err))


def test_plan_header_names_the_system_framework_recipe_headroom_and_band(capsys):
    from tpu_notes.efficiency import OUT_OF_SAMPLE_ERROR

    first = _text(capsys, "plan", *PLAN_TPU, "--hbm-fraction", "0.8", "--recipe", "bf16").splitlines()[0]
    assert "v5e 4x4" in first and "maxtext rules" in first and "bf16 recipe" in first
    assert "20% HBM headroom" in first and f"±{OUT_OF_SAMPLE_ERROR['tpu'] * 100:.3g}%" in first
    first = _text(capsys, "plan", *PLAN_GPU).splitlines()[0]
    assert "64 x H100 (8 nodes)" in first and "megatron rules" in first and "megatron recipe" in first
    assert "10% HBM headroom" in first and f"±{OUT_OF_SAMPLE_ERROR['gpu'] * 100:.3g}%" in first


def test_an_infeasible_plan_says_so_first_with_counts_then_the_slices_that_can_run(capsys):
    """Llama 3 70B does not fit 16 v5e chips (16 GB each) at any layout: the first line says no layout can run and
    why, by count; then the larger slices of the pod that can (``training.plan_slices``); the JSON says the same."""
    argv = ["--model", "llama3-70b", "--system", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"]
    lines = _text(capsys, "plan", *argv).splitlines()
    data = _json(capsys, "plan", *argv)
    assert data["feasible"] is False and data["ranked"] == [] and data["ranked_count"] == 0
    assert sum(data["rejected_reasons"].values()) == data["searched"] > 0
    assert lines[0].startswith("No layout can run") and "v5e 4x4" in lines[0]
    for reason, n in data["rejected_reasons"].items():
        assert f"{n:,} {reason}" in lines[0]
    assert "maxtext rules" in lines[1]
    alternatives = data["alternatives"]
    assert alternatives and all(a["chips"] > 16 and a["legal"] > 0 for a in alternatives)
    at = next(i for i, line in enumerate(lines) if "slices of this pod that can run" in line)
    assert any(alternatives[0]["system"].split(":")[1] in line for line in lines[at:])
