"""``python -m tpu_notes simulate`` (issue 38): the CLI's figures are the library's for the same arguments, its
``--json`` is strict JSON with SI-unit keys, ``--goodput``'s rate meets the attainment it states, and bad flags are
refused naming the flag. Every expectation is derived by calling the library here, never copied from a run."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from tpu_notes.__main__ import SIM_REQUESTS, main
from tpu_notes.inference import LengthDistribution, Scheduler, Workload, simulate
from tpu_notes.inference.cost import cost_at_rate
from tpu_notes.inference.engine import deploy, system_for
from tpu_notes.inference.goodput import SLO, max_rate_at_attainment
from tpu_notes.inference.simulator import Disaggregation

#: A quick deployment: Llama 3 8B in int8 on two v5e 2x2 replicas, 400 requests of 512 in / 64 out.
BASE = ["simulate", "--model", "llama3-8b", "--chip", "v5e:2x2", "--replicas", "2", "--weights", "int8"]
LENGTHS = ["--prompt", "512", "--output", "64", "--requests", "400"]
SLO_FLAGS = ["--ttft-slo", "0.5", "--tpot-slo", "0.03"]


def _strict(text: str) -> dict:
    """``json.loads`` that refuses NaN and Infinity (not JSON)."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return _strict(capsys.readouterr().out)


def _library(rate: float, *, replicas: int = 2, n: int = 400, seed: int = 0, **kw):
    """The same run through the library: deployment, workload, SimResult."""
    d = deploy("llama3-8b", system_for("v5e", 4), weight_dtype="int8", kv_dtype="int8", replicas=replicas)
    wl = Workload.poisson(rate, n, LengthDistribution.fixed(512), LengthDistribution.fixed(64), seed=seed)
    return d, wl, simulate(d, wl, **kw)


def test_figures_at_a_rate_are_the_librarys(capsys):
    data = _json(capsys, *BASE, *LENGTHS, "--rate", "20", *SLO_FLAGS)
    d, wl, r = _library(20.0)
    slo = SLO(0.5, 0.03)
    for key, name in (("ttft", "ttft"), ("tpot", "tpot"), ("tbt", "tbt"), ("largest_stall", "tbt_max")):
        got = [data[f"{key}_{p}_s"] for p in ("p50", "p90", "p99")]
        assert got == pytest.approx(list(getattr(r, name)), rel=1e-12), key
    assert data["attainment"] == pytest.approx(r.attainment(slo), rel=1e-12)
    assert data["slo_requests_per_s"] == pytest.approx(r.slo_requests_per_s(slo), rel=1e-12)
    assert data["output_tokens_per_s"] == pytest.approx(r.output_tokens_per_s, rel=1e-12)
    assert data["n_chips"] == 8 == r.n_chips and data["replicas"] == 2 and data["chips_per_replica"] == 4
    c = cost_at_rate(r, "v5e", ttft_slo_s=0.5, tpot_slo_s=0.03)
    for key in ("dollars_per_million_input", "dollars_per_million_output", "dollars_per_slo_request", "utilisation"):
        assert data["cost"][key] == pytest.approx(getattr(c, key), rel=1e-12), key
    assert data["cost"]["floor_dollars_per_million_output"] == pytest.approx(
        c.dollars_per_million_output * c.utilisation, rel=1e-12
    )
    assert data["goodput"] is None and data["rate_per_s"] == 20.0


def test_scheduler_router_disaggregation_and_seed_reach_the_library(capsys):
    argv = [*BASE, *LENGTHS, "--rate", "10", "--scheduler", "prefill-first", "--budget", "1024"]
    argv += ["--router", "round-robin", "--disaggregate", "2:4", "--link", "dcn", "--seed", "7"]
    data = _json(capsys, *argv)
    pre = deploy("llama3-8b", system_for("v5e", 4), weight_dtype="int8", kv_dtype="int8")
    dis = Disaggregation(pre, 2, "dcn")
    sch = Scheduler(policy="prefill_first", token_budget=1024, max_seqs=256)
    _, _, r = _library(10.0, seed=7, scheduler=sch, disaggregation=dis, router="round-robin")
    assert [data[f"ttft_{p}_s"] for p in ("p50", "p90", "p99")] == pytest.approx(list(r.ttft), rel=1e-12)
    assert [data[f"tpot_{p}_s"] for p in ("p50", "p90", "p99")] == pytest.approx(list(r.tpot), rel=1e-12)
    assert data["n_chips"] == 2 * 4 + 2 * 4 == r.n_chips
    assert data["disaggregation"] == {"instances": 2, "chips_per_instance": 4, "link": "dcn"}
    assert "decode + 2 x v5e 2x2 prefill over dcn" in data["deployment"]


def test_goodput_is_the_librarys_and_meets_its_attainment(capsys):
    data = _json(capsys, *BASE, *LENGTHS, "--goodput", "--attainment", "0.8", *SLO_FLAGS)
    d, wl, _ = _library(1.0)
    g = max_rate_at_attainment(d, wl, SLO(0.5, 0.03), 0.8)
    assert data["goodput"]["rate_per_s"] == pytest.approx(g.rate_per_s, rel=1e-12) and g.rate_per_s > 0
    assert data["goodput"]["per_chip_per_s"] == pytest.approx(g.rate_per_s / 8, rel=1e-12)
    # independently: the run at the reported rate meets the attainment, and the percentiles printed are that run's
    _, _, again = _library(data["goodput"]["rate_per_s"])
    assert again.attainment(SLO(0.5, 0.03)) >= 0.8
    assert data["attainment"] == pytest.approx(again.attainment(SLO(0.5, 0.03)), rel=1e-12)
    assert data["ttft_p99_s"] == pytest.approx(again.ttft[2], rel=1e-12)
    assert data["rate_per_s"] == data["goodput"]["rate_per_s"]
    # and the search's own bracket: some probed rate above it misses
    assert any(rate > g.rate_per_s and att < 0.8 for rate, att in data["goodput"]["probes"])


def test_goodput_with_no_rate_is_reported_not_refused(capsys):
    data = _json(capsys, *BASE, *LENGTHS, "--goodput", "--ttft-slo", "1e-4", "--tpot-slo", "0.03")
    assert data["goodput"]["rate_per_s"] == 0 and data["cost"] is None and data["ttft_p50_s"] is None
    assert "no load meets it" in data["goodput"]["bracket"]
    assert main([*BASE, *LENGTHS, "--goodput", "--ttft-slo", "1e-4", "--tpot-slo", "0.03"]) == 0
    assert "none (no load meets it" in capsys.readouterr().out


def test_json_keys_and_units(capsys):
    data = _json(capsys, *BASE, *LENGTHS, "--rate", "20", *SLO_FLAGS, "--tbt-slo", "0.2")
    for stem in ("ttft", "tpot", "tbt", "largest_stall"):
        for p in ("p50", "p90", "p99"):
            assert isinstance(data[f"{stem}_{p}_s"], float)
    keys = ("model", "chip", "deployment", "weight_dtype", "kv_dtype", "compute_dtype", "rate_per_s",
            "output_tokens_per_s", "duration_s", "attainment", "slo", "goodput", "cost", "no_price_reason")  # fmt: skip
    for key in keys:
        assert key in data, key
    assert data["slo"] == {"ttft_s": 0.5, "tpot_s": 0.03, "tbt_s": 0.2}
    assert set(data["cost"]) >= {
        "dollars_per_chip_hour",
        "request_rate_per_s",
        "dollars_per_million_input",
        "dollars_per_million_output",
        "dollars_per_request",
        "dollars_per_slo_request",
        "floor_dollars_per_million_input",
        "floor_dollars_per_million_output",
        "utilisation",
    }
    assert (data["weight_dtype"], data["kv_dtype"], data["compute_dtype"]) == ("int8", "int8", "int8")
    _, _, r = _library(20.0)
    assert data["attainment"] == pytest.approx(r.attainment(SLO(0.5, 0.03, 0.2)), rel=1e-12)


def test_text_prints_the_librarys_figures(capsys):
    assert main([*BASE, *LENGTHS, "--rate", "20", *SLO_FLAGS]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "llama3-8b on 2 x v5e 2x2 (8 chips), int8 weights, int8 KV, int8 matmuls"
    _, _, r = _library(20.0)
    table = [line.split("  ") for line in lines if line.startswith("    ")]
    header = [c.strip() for c in table[0] if c.strip()]
    assert header == ["latency", "p50", "p90", "p99"]
    units = [c.strip() for c in table[1] if c.strip()]  # each column's unit, on the line under its name
    seconds = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
    scale = [seconds[u.strip("()")] for u in units]
    rows = {}
    for cells in table[3:]:
        cells = [c.strip() for c in cells if c.strip()]
        rows[cells[0]] = list(zip(cells[1:], scale))
    for label, values in (("TTFT", r.ttft), ("TBT", r.tbt)):
        for (cell, unit), v in zip(rows[label], values, strict=True):
            decimals = len(cell.partition(".")[2])  # the column's decimals: the printed value is v rounded to them
            assert float(cell) * unit == pytest.approx(v, abs=0.5 * 10**-decimals * unit * (1 + 1e-9)), (label, cell)
    c = cost_at_rate(r, "v5e", ttft_slo_s=0.5, tpot_slo_s=0.03)
    assert f"${c.dollars_per_million_input:.3g} per million input tokens" in out
    assert f"${c.dollars_per_slo_request:.3g} per SLO-meeting request" in out
    assert f"${c.floor_dollars_per_million_output:.3g} per million output" in out
    assert f"{r.attainment(SLO(0.5, 0.03)):.1%} of requests meet it" in out


def test_price_override_scales_every_dollar(capsys):
    listed = _json(capsys, *BASE, *LENGTHS, "--rate", "20")["cost"]
    doubled = _json(capsys, *BASE, *LENGTHS, "--rate", "20", "--price", str(2 * listed["dollars_per_chip_hour"]))
    for key in ("dollars_per_million_input", "dollars_per_million_output", "dollars_per_request"):
        assert doubled["cost"][key] == pytest.approx(2 * listed[key], rel=1e-12)
    assert doubled["cost"]["price_source"] == "given"


def test_a_chip_without_a_price_says_so(capsys):
    argv = ["simulate", "--model", "llama3-8b", "--chip", "v6e:2x2", *LENGTHS, "--rate", "5"]
    data = _json(capsys, *argv)
    assert data["cost"] is None and "--price" in data["no_price_reason"]
    assert _json(capsys, *argv, "--price", "2")["cost"]["dollars_per_chip_hour"] == 2.0


def test_a_bare_chip_gets_its_smallest_legal_system_that_holds_a_request(capsys):
    """Llama 3 70B in int8 (about 70 GB of weights) cannot sit on 4 v5e chips (64 GB of HBM): the smallest legal
    slice holding it and one 8k request is what the library's own deployment says, found here by trying each."""
    from tpu_notes.inference import slice_shapes
    from tpu_notes.rules import Illegal, whole_heads
    from tpu_notes.topology import Slice
    from tpu_notes.transformer import get_model

    argv = ["simulate", "--model", "llama3-70b", "--chip", "v5e", "--weights", "int8"]
    data = _json(capsys, *argv, "--prompt", "8k", "--output", "512", "--requests", "200", "--rate", "0.5")
    expected = None
    for shape in slice_shapes("v5e"):
        s = Slice("v5e", shape)
        try:
            whole_heads(get_model("llama3-70b"), s.n_devices)
        except Illegal:
            continue
        d = deploy("llama3-70b", s, weight_dtype="int8", kv_dtype="int8", check_memory=False)
        if d.kv_capacity_tokens >= 8512:
            expected = s
            break
    assert expected is not None and data["chips_per_replica"] == expected.n_devices > 4


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--rate", "0"], "--rate"),
        (["--rate", "1e13"], "--rate"),
        (["--rate", "1e-9"], "--rate"),
        ([], "--rate"),  # neither --rate nor --goodput
        (["--goodput"], "--goodput"),  # no SLO
        (["--rate", "1", "--ttft-slo", "1"], "--tpot-slo"),
        (["--rate", "1", "--tbt-slo", "1"], "--tbt-slo"),
        (["--rate", "1", "--attainment", "0.5"], "--attainment"),
        (["--goodput", *SLO_FLAGS, "--attainment", "1.5"], "--attainment"),
        (["--rate", "1", "--link", "ici"], "--link"),
        (["--rate", "1", "--disaggregate", "1:3"], "--disaggregate"),
        (["--rate", "1", "--disaggregate", "1:4", "--link", "nvlink"], "--link"),
        (["--rate", "1", "--disaggregate", "four"], "--disaggregate"),
        (["--rate", "1", "--chips", "8"], "--chips"),
        (["--rate", "1", "--compute", "fp8"], "--compute"),
        (["--rate", "1", "--budget", "0"], "--budget"),
        (["--rate", "1", "--replicas", "257"], "--replicas"),
        (["--rate", "1", "--requests", "200k"], "--requests"),
        (["--rate", "1", "--seed", "-1"], "--seed"),
        (["--rate", "1", "--price", "0"], "--price"),
        (["--rate", "1", "--sharegpt"], "--prompt"),
        (["--rate", "1", "--prompt", "1Mi"], "--prompt"),  # longer than the KV pool holds
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else x,
)
def test_bad_flags_are_refused_naming_the_flag(extra, flag, capsys):
    argv = [*BASE, *LENGTHS, *extra]
    try:
        rc = main(argv)
    except SystemExit as stop:
        rc = stop.code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2 and captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("tpu_notes simulate: error: ") and flag in lines[0], lines[0]


def test_lengths_need_both_fixed_flags_or_sharegpt(capsys):
    argv = ["simulate", "--model", "llama3-8b", "--chip", "v5e:2x2", "--rate", "1", "--requests", "100"]
    assert main([*argv, "--prompt", "512"]) == 2
    assert "--output is missing" in capsys.readouterr().err
    data = _json(capsys, *argv, "--sharegpt")
    assert data["lengths"] == "sharegpt-like" and data["completed"] == 100


def test_a_default_goodput_run_is_quick(capsys):
    """The default request count keeps a 70B goodput search to seconds (issue 38: the CLI stays interactive):
    measured in CPU seconds of this process, bounded loosely."""
    argv = ["simulate", "--model", "llama3-70b", "--chip", "v5e:4x4", "--replicas", "2", "--weights", "int8"]
    start = time.process_time()
    data = _json(capsys, *argv, "--prompt", "8k", "--output", "512", "--goodput", "--ttft-slo", "2", "--tpot-slo",
                 "0.05")  # fmt: skip
    assert time.process_time() - start < 15.0
    assert data["requests"] == SIM_REQUESTS and data["goodput"]["rate_per_s"] > 0
    assert np.isfinite(data["cost"]["dollars_per_slo_request"])
