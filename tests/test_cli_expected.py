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


def _text(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", [PLAN_TPU, PLAN_GPU], ids=["tpu", "gpu"])
def test_plan_json_carries_roofline_and_expected(argv, capsys):
    data = _json(capsys, "plan", *argv, "--top", "6", "--rank-by", "roofline")
    rows = data["ranked"]
    assert data["rank_by"] == "roofline" and len(rows) == 6
    for r in rows:
        assert r["step_s"] == r["step_s_roofline"] > 0 and r["mfu"] == r["mfu_roofline"]
        assert r["step_s_expected"] >= r["step_s_roofline"]
        assert 0 < r["mfu_expected"] <= r["mfu_roofline"] <= 1.0
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
    steps = [float(f"{r['step_s_expected']:.4g}") for r in data["ranked"]]
    assert data["rank_by"] == "expected" and steps == sorted(steps) and len(steps) == 8
    roof = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096, rank_by="roofline")
    exp = T.plan("llama3-8b", parse_slice("v5e:4x4"), 2**20, 4096, rank_by="expected")
    assert exp[0].step.expected.total <= min(p.step.expected.total for p in roof)
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
    assert data["step_s"] == data["step_s_roofline"] > 0
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
    for i, r in enumerate(rows, 1):
        line = lines[head + i]
        assert line.split()[0] == str(i)
        assert f" {_short(r['layout'], r['circular_repeats'])} " in line, (line, r["layout"])
        assert f" {r['remat']} " in line, (line, r["remat"])
    legend = "\n".join(lines[head + len(rows) + 1 :])
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
