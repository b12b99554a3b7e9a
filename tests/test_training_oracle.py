"""The oracle of Chapter 5: the collectives XLA puts into a compiled training step of tpu_notes.model, on 8
simulated devices, against training.predicted_collectives, for every layout of parallel.TRAINING_CASES.

Where XLA departs from the model the disagreement is a named finding (parallel.FINDINGS) and is pinned here with
the counts derived by hand from the layer structure; a change means XLA (or the model) changed: look again.
"""

import math
import subprocess
import sys

import pytest

from tpu_notes import parallel
from tpu_notes.training import Parallelism
from tpu_notes.training.collectives import PredictedCollective, collective_totals, predicted_collectives
from tpu_notes.transformer import get_model

CASES = parallel.TRAINING_CASES
EXTRA_FINDINGS = {"propagation-without-constraints", "cpu-bf16-in-f32"}  # pinned by their own tests below


def _key(r):
    return (r.kind, r.axes, r.bytes_per_device)


def expected_disagreements(case):
    """``{(kind, axes, bytes): (model count, XLA count)}`` each finding of ``case`` implies."""
    c, p = case.config, case.parallelism
    pred = predicted_collectives(c, p, case.batch * case.seq_len, case.seq_len, dtype="fp32", remat=case.remat)
    out = {}
    if "tp-backward-per-projection" in case.findings:
        L = c.n_layers // p.pipeline
        act = case.batch * case.seq_len / p.batch_shards * c.d_model * 4
        # forward: wo and w_down outputs (2); backward: dX of wq, wk, wv (3) and of w_gate, w_up (2), unsummed;
        # remat: the recomputed attention output (1), in both
        extra = L if case.remat else 0
        out[("all-reduce", ("tensor",), act)] = (4 * L + extra, (2 + 3 + 2) * L + extra)
    if "tied-embedding-reduced-twice" in case.findings:
        # the table's gradient from the lookup and from the unembedding, reduced apart (data parallelism here)
        key = ("all-reduce", ("data",), c.vocab * c.d_model * 4)
        n = collective_totals(pred)[key]  # the table and any weights of the same size
        out[key] = (n, n + 1)
    if "dp-fsdp-one-reduction" in case.findings:
        for key, n in collective_totals(pred).items():
            kind, axes, nbytes = key
            if kind == "reduce-scatter":
                out[key] = (n, 0)
                out[("reduce-scatter", ("data", "fsdp"), nbytes)] = (0, n)
            elif kind == "all-reduce" and axes == ("data",):
                out[key] = (n, 0)
    return out


def test_cases_cover_the_brief():
    assert len(CASES) >= 8
    shapes = {tuple(c.parallelism.mesh_shape().items()) for c in CASES}
    assert (("data", 8),) in shapes and (("fsdp", 8),) in shapes and (("tensor", 8),) in shapes
    assert (("fsdp", 2), ("tensor", 4)) in shapes and (("fsdp", 4), ("tensor", 2)) in shapes
    assert any(c.parallelism.pipeline == 4 for c in CASES) and any(c.parallelism.pipeline == 2 for c in CASES)
    assert all(c.parallelism.chips_per_slice == 8 for c in CASES)
    used = {f for c in CASES for f in c.findings} | EXTRA_FINDINGS
    assert used == set(parallel.FINDINGS)
    assert all(len(text) > 200 for text in parallel.FINDINGS.values())  # a paragraph each


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_model_matches_xla(case):
    rows = parallel.run_training_case(case)
    differ = {_key(r): (r.predicted, r.xla) for r in rows if not r.agree}
    assert differ == expected_disagreements(case), parallel.format_training_table(rows, case.id)
    # XLA's combiner: some arrays travel together in one op exactly where the case says so
    assert ("combined" in case.findings) == any(r.xla_ops < r.xla for r in rows)


def test_gradient_bytes_are_the_parameters():
    """Data parallelism AllReduces every gradient once: XLA's arrays add up to the parameter bytes (+ the loss)."""
    case = parallel.training_cases(["data=8"])[0]
    rows = parallel.run_training_case(case)
    total = sum(r.xla * r.bytes_per_device for r in rows if r.kind == "all-reduce")
    assert total == 4 * case.config.param_count() + 4
    (op,) = {r.xla_ops for r in rows}
    assert op == 1  # all of it in one combined op


def test_fsdp_gathers_again_only_under_remat():
    once, again = (
        parallel.run_training_case(c) for c in parallel.training_cases(["fsdp=2 x tensor=4", "fsdp=2 x tensor=4 remat"])
    )
    gathered = lambda rows: sum(r.xla for r in rows if r.kind == "all-gather")  # noqa: E731
    # 9 weights a layer and 2 layers, plus the embedding, final norm and unembedding
    assert gathered(once) == 2 * 9 + 3 and gathered(again) == 2 * (2 * 9) + 3
    # remat moves no gradient: the ReduceScatters are the same
    scatters = lambda rows: [(_key(r), r.xla) for r in rows if r.kind == "reduce-scatter"]  # noqa: E731
    assert scatters(once) == scatters(again)
    assert all(r.xla_ops == r.xla for r in again if r.kind == "all-gather")  # each gather its own op


def test_propagation_without_constraints():
    c, p = parallel.ORACLE_CONFIG.with_(n_layers=1), Parallelism(fsdp=8)  # one layer: a quicker compile
    mesh = parallel.make_mesh(p)
    found = parallel.xla_collectives(parallel.compiled_step(c, p, 16, 16, constrain=False), mesh)
    kinds = {x.kind for x in found}
    assert "all-to-all" in kinds
    acts = 16 * 16 * c.d_model * 4  # the whole batch's residual stream [B, T, D]
    logits = 16 * 16 * c.vocab * 4
    gathered = {x.bytes_per_device for x in found if x.kind == "all-gather"}
    assert acts in gathered and logits in gathered


def test_cpu_moves_bf16_collectives_in_f32():
    c, p = parallel.ORACLE_CONFIG.with_(n_layers=1), Parallelism(data=2, tensor=4)  # one layer: quicker
    rows = parallel.oracle_rows(c, p, 16, 16, dtype="bf16")
    xla = {_key(r): r.xla for r in rows if r.xla}
    fp32 = collective_totals(predicted_collectives(c, p, 16 * 16, 16, dtype="fp32"))
    bf16 = collective_totals(predicted_collectives(c, p, 16 * 16, 16, dtype="bf16"))
    tensor = ("all-reduce", ("tensor",), 16 * 16 / 2 * c.d_model * 4)
    fp32[tensor] += 3  # tp-backward-per-projection: 7 per layer where the model counts 4
    assert xla == fp32 and xla != bf16


def test_collectives_do_not_depend_on_code_optimisation():
    """The oracle compiles with FAST_COMPILE_OPTIONS (no LLVM optimisation): the collectives are the same."""
    c, p = parallel.ORACLE_CONFIG.with_(n_layers=1), Parallelism(fsdp=2, tensor=4)  # one layer: quicker
    mesh = parallel.make_mesh(p)
    sig = lambda xs: sorted((x.kind, x.axes, x.bytes_per_device, x.raw_kind) for x in xs)  # noqa: E731
    fast = parallel.compiled_step(c, p, 16, 16)
    full = parallel.compiled_step(c, p, 16, 16, optimize=True)
    assert fast is not full
    assert sig(parallel.xla_collectives(fast, mesh)) == sig(parallel.xla_collectives(full, mesh))


def test_oracle_table_is_compact():
    rows = parallel.run_training_case(parallel.training_cases(["tensor=8"])[0])
    table = parallel.format_training_table(rows, "tensor=8")
    assert all(len(line) <= 88 for line in table.splitlines())
    assert "NO" in table and "AllReduce" in table and "tensor" in table
    with pytest.raises(ValueError, match="unknown oracle case"):
        parallel.training_cases(["nope"])
    long_case = parallel.training_cases(["fsdp=2 x tensor=4 remat"])[0]  # two findings: wrapped
    summary = parallel.format_oracle_summary([(parallel.training_cases(["tensor=8"])[0], rows), (long_case, rows)])
    assert all(len(line) <= 88 for line in summary.splitlines()) and len(summary.splitlines()) == 4
    assert "0/1" in summary and "tp-backward-per-projection" in summary
    with pytest.raises(TypeError, match="results"):
        parallel.format_oracle_summary(rows)


# ------------------------------------------------------------------------------- the model alone (no JAX)
def test_predicted_collectives_is_jax_free():
    code = (
        "import sys, tpu_notes.training.collectives as m; assert 'jax' not in sys.modules, 'imported jax'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_predicted_collectives_at_scale():
    m = get_model("llama3-70b")
    T, tokens = 8192, 4 * 2**20
    # pure data parallelism: every gradient AllReduced once, bf16: 2 bytes per parameter in all
    dp = predicted_collectives(m, Parallelism(data=256), tokens, T)
    ar = [r for r in dp if r.axes == ("data",) and r.bytes_per_device > 4]
    assert sum(r.count * r.bytes_per_device for r in ar) == 2 * m.param_count()
    # Megatron over 8: 4 AllReduces of [tokens per replica, D] per layer
    tp = predicted_collectives(m, Parallelism(fsdp=32, tensor=8), tokens, T)
    acts = [r for r in tp if r.axes == ("tensor",)]
    assert sum(r.count for r in acts) == 4 * m.n_layers
    assert {r.bytes_per_device for r in acts} == {tokens / 32 * m.d_model * 2}
    # FSDP: every gathered weight is 1/tensor of the layer weights
    ag = sum(r.count * r.bytes_per_device for r in tp if r.kind == "all-gather")
    layers = m.n_layers * (m.attention_params_per_layer() + m.dense_mlp_params()) / 8
    other = m.n_layers * m.norm_params_per_layer() + m.d_model + 2 * m.vocab * m.d_model
    assert ag == 2 * (layers + other)
    # remat: each layer's weights (norms included) gathered once more, the embedding and unembedding not
    tp_r = predicted_collectives(m, Parallelism(fsdp=32, tensor=8), tokens, T, remat=True)
    ag_r = sum(r.count * r.bytes_per_device for r in tp_r if r.kind == "all-gather")
    assert ag_r - ag == 2 * (layers + m.n_layers * m.norm_params_per_layer())
    assert sum(r.count for r in tp_r if r.axes == ("tensor",)) == 5 * m.n_layers
    # pipeline: M + S - 2 permutes each way
    pp = predicted_collectives(m, Parallelism(data=64, pipeline=4, microbatches=8), tokens, T)
    perm = [r for r in pp if r.kind == "collective-permute"]
    assert sum(r.count for r in perm) == 2 * (8 + 4 - 2)
    assert isinstance(perm[0], PredictedCollective) and "permute" in repr(perm[0]) and perm[0].axes == ("pipeline",)
    # DCN: one more AllReduce of each gradient shard across the slices
    dcn = predicted_collectives(m, Parallelism(fsdp=256, dcn=2), tokens, T)
    over = sum(r.count * r.bytes_per_device for r in dcn if r.axes == ("dcn",))
    assert math.isclose(over, 2 * m.param_count() / 256)


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        (("tiny-moe", Parallelism(data=2), 1024, 64), {}, "dense models"),
        (("tiny-mha", Parallelism(data=2), 1000, 64), {}, "whole number of sequences"),
        (("tiny-mha", Parallelism(data=3), 1024, 64), {}, "divisible by data x fsdp x expert x dcn = 3"),
        (("tiny-mha", Parallelism(tensor=8), 1024, 64), {}, r"tensor \(8\) must divide n_heads \(4\)"),
        (("tiny-mha", Parallelism(pipeline=4, microbatches=4), 1024, 64), {}, r"pipeline \(4\) must divide n_layers"),
        (("tiny-mha", Parallelism(data=2), 1024, 64), {"dtype": "fp16"}, "unknown dtype"),
        (("tiny-mha", Parallelism(data=2), 0, 64), {}, "batch_tokens"),
    ],
)
def test_predicted_collectives_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        predicted_collectives(*args, **kwargs)
    with pytest.raises(TypeError, match="parallelism"):
        predicted_collectives("tiny-mha", {"data": 2}, 1024, 64)
