"""The oracle of Chapter 5: the collectives XLA puts into a compiled training step of tpu_notes.model, on 8
simulated devices, against training.predicted_collectives, for every layout of parallel.TRAINING_CASES.

The model counts what XLA compiles, so every (kind, axes, bytes) row agrees. Where XLA departs from the textbook
count the departure is a named finding (parallel.FINDINGS, kept as the history of why) and parallel.FOLDED says how
the model now counts it; the tests below pin XLA's side of each finding with counts derived by hand from the layer
structure, so a change means XLA (or the model) changed: look again. tests/test_training_oracle_drawn.py checks
drawn configs and layouts the same way.
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
NOT_FOLDED = {"combined", "fsdp-gathers-once"} | EXTRA_FINDINGS  # modelled before issue 23, or not modellable


def _key(r):
    return (r.kind, r.axes, r.bytes_per_device)


def _case(case_id):
    return parallel.training_cases([case_id])[0]


def test_cases_cover_the_brief():
    assert len(CASES) >= 8
    shapes = {tuple(c.parallelism.mesh_shape().items()) for c in CASES}
    assert (("data", 8),) in shapes and (("fsdp", 8),) in shapes and (("tensor", 8),) in shapes
    assert (("fsdp", 2), ("tensor", 4)) in shapes and (("fsdp", 4), ("tensor", 2)) in shapes
    assert (("data", 2), ("fsdp", 2), ("tensor", 2)) in shapes
    assert any(c.parallelism.pipeline == 4 for c in CASES) and any(c.parallelism.pipeline == 2 for c in CASES)
    assert all(c.parallelism.chips_per_slice == 8 for c in CASES)
    configs = [c.config for c in CASES]
    assert any(c.n_kv_heads < c.n_heads for c in configs) and any(not c.gated_mlp for c in configs)
    assert any(c.tied_embeddings for c in configs) and any(c.remat for c in CASES)
    used = {f for c in CASES for f in c.findings} | EXTRA_FINDINGS
    assert used == set(parallel.FINDINGS)
    assert all(len(text) > 200 for text in parallel.FINDINGS.values())  # a paragraph each


def test_folded_findings_keep_their_history():
    # the findings the model now counts stay in FINDINGS (the why), with one sentence each on how it counts them
    assert set(parallel.FOLDED) == set(parallel.FINDINGS) - NOT_FOLDED
    assert set(parallel.FOLDED) == {
        "tp-backward-per-projection",
        "dp-fsdp-one-reduction",
        "tied-embedding-reduced-twice",
    }
    for name, how in parallel.FOLDED.items():
        assert how.startswith("modelled since issue 23: ") and how.endswith(".") and len(how) < 400, name
    assert "5 AllReduces per layer in the backward pass instead of 2" in parallel.FINDINGS["tp-backward-per-projection"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_model_matches_xla(case):
    rows = parallel.run_training_case(case)
    differ = {_key(r): (r.predicted, r.xla) for r in rows if not r.agree}
    assert not differ, parallel.format_training_table(rows, case.id)
    assert rows and all(r.xla > 0 for r in rows)
    # XLA's combiner: some arrays travel together in one op exactly where the case says so
    assert ("combined" in case.findings) == any(r.xla_ops < r.xla for r in rows)


def test_tp_backward_per_projection():
    """XLA's side of the finding, by hand: per layer 2 forward, 3 (q, k, v) + 2 (gate, up) or 1 (up) backward, and
    1 more under remat; the fused count (the textbook 2 backward) is what XLA does not compile."""
    for case_id, per_layer in (
        ("tensor=8", 2 + 3 + 2),
        ("fsdp=2 x tensor=4 remat", 2 + 3 + 2 + 1),
        ("data=2 x fsdp=2 x tensor=2 gqa", 2 + 3 + 1),  # GQA: k and v still apart; a plain MLP: one input
    ):
        case = _case(case_id)
        c, p = case.config, case.parallelism
        act = case.batch * case.seq_len / p.batch_shards * c.d_model * 4
        key = ("all-reduce", ("tensor",), act)
        xla = {_key(r): r.xla for r in parallel.run_training_case(case)}
        assert xla[key] == per_layer * c.n_layers, case_id
        args = (c, p, case.batch * case.seq_len, case.seq_len, "fp32")
        fused = collective_totals(predicted_collectives(*args, remat=case.remat, fused_projections=True))
        assert fused[key] == (per_layer - (3 if c.gated_mlp else 2)) * c.n_layers != xla[key]


def test_dp_fsdp_one_reduction():
    """With data x fsdp XLA reduces every gradient once over both axes (the CPU's all-reduce + dynamic-slice over
    all 8 devices, folded to a reduce-scatter); no AllReduce over data but the loss's scalar over both."""
    for case_id, tensor in (("data=2 x fsdp=4", 1), ("data=2 x fsdp=2 x tensor=2 gqa", 2)):
        case = _case(case_id)
        rows = [r for r in parallel.run_training_case(case) if r.xla]
        scatter = [r for r in rows if r.kind == "reduce-scatter"]
        assert scatter and all(r.axes == ("data", "fsdp") for r in scatter)
        assert {r.raw_kind for r in parallel.xla_collectives(*_compiled(case)) if r.kind == "reduce-scatter"} == {
            "all-reduce"
        }
        assert not [r for r in rows if r.axes == ("data",)]
        c = case.config
        table = 2 if c.tied_embeddings else 1  # the tied table's two gradients: tied-embedding-reduced-twice
        grads = c.param_count() + (table - 1) * c.vocab * c.d_model
        # whole gradients (tensor-split), fp32: the layer weights split over tensor, the norms and tables not
        layer = c.n_layers * (c.attention_params_per_layer() + c.dense_mlp_params())
        assert sum(r.xla * r.bytes_per_device for r in scatter) == 4 * (grads - layer + layer / tensor)


def _compiled(case):
    compiled = parallel.compiled_step(case.config, case.parallelism, case.batch, case.seq_len, remat=case.remat)
    return compiled, parallel.make_mesh(case.parallelism)


def test_tied_embedding_reduced_twice():
    """The tied table [V, D]: two arrays of its size in XLA's gradient reductions, one in the pipeline's."""
    tied = parallel.ORACLE_CONFIG.with_(tied_embeddings=True, name="oracle-tiny-tied")
    table = tied.vocab * tied.d_model * 4
    rows = parallel.run_training_case(_case("data=8 tied"))
    # ORACLE_CONFIG: the 2 layers' w_gate, w_up and w_down [64, 256] have the table's size too
    assert {_key(r): r.xla for r in rows}[("all-reduce", ("data",), table)] == 2 * 3 + 2
    pp = parallel.oracle_rows(tied, Parallelism(data=4, pipeline=2, microbatches=2), 16, 16)
    assert all(r.agree for r in pp)
    assert {_key(r): r.xla for r in pp}[("all-reduce", ("data", "pipeline"), table)] == 1


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
    assert xla == fp32 and xla != bf16
    assert {k[:2]: n for k, n in xla.items()} == {k[:2]: n for k, n in bf16.items()}  # only the bytes differ


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
    case = _case("tensor=8")
    rows = parallel.run_training_case(case)
    table = parallel.format_training_table(rows, "tensor=8")
    assert all(len(line) <= 88 for line in table.splitlines())
    assert "NO" not in table and "yes" in table and "AllReduce" in table and "tensor" in table
    wrong = rows + [parallel.TrainingRow("all-reduce", ("tensor",), 1.0, 1, 0)]  # a row the model would get wrong
    assert parallel.format_training_table(wrong).splitlines()[-1].endswith("NO")
    with pytest.raises(ValueError, match="unknown oracle case"):
        parallel.training_cases(["nope"])
    long_case = _case("data=2 x fsdp=2 x tensor=2 gqa")  # four findings and a long id: wrapped
    summary = parallel.format_oracle_summary([(case, rows), (long_case, rows)])
    assert all(len(line) <= 88 for line in summary.splitlines()) and len(summary.splitlines()) >= 4
    assert "1/1" in summary and "tp-backward-per-projection*" in summary and "(* folded)" in summary
    assert "fsdp-gathers-once," in summary  # not folded: no star
    with pytest.raises(TypeError, match="results"):
        parallel.format_oracle_summary(rows)


def test_context_parallelism_is_refused():
    """Context parallelism is priced by the analytical step time only: the JAX layouts and this model refuse it."""
    p = Parallelism(data=4, context=2)
    c = parallel.ORACLE_CONFIG
    with pytest.raises(ValueError, match=r"parallelism\.context"):
        predicted_collectives(c, p, 16 * 16, 16)
    for call in (
        lambda: parallel.make_mesh(p),
        lambda: parallel.batch_spec(p),
        lambda: parallel.param_specs(c, p),
        lambda: parallel.compiled_step(c, p, 16, 16),
        lambda: parallel.oracle_rows(c, p, 16, 16),
        lambda: parallel.train(c, p, 1, 16, 16),
    ):
        with pytest.raises(ValueError, match=r"parallelism\.context must be 1"):
            call()


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
    # Megatron over 8: 2 AllReduces of [tokens per replica, D] per layer forward, 3 + 2 backward (one per input
    # projection of the gated MLP and of attention); fused QKV and gate-up weights: 2 backward
    tp = predicted_collectives(m, Parallelism(fsdp=32, tensor=8), tokens, T)
    acts = [r for r in tp if r.axes == ("tensor",)]
    assert sum(r.count for r in acts) == 7 * m.n_layers
    fused = predicted_collectives(m, Parallelism(fsdp=32, tensor=8), tokens, T, fused_projections=True)
    assert sum(r.count for r in fused if r.axes == ("tensor",)) == 4 * m.n_layers
    # fused weights: fewer, larger gathers of the same bytes
    gathers = lambda rows: [r for r in rows if r.kind == "all-gather"]  # noqa: E731
    assert sum(r.count for r in gathers(fused)) == sum(r.count for r in gathers(tp)) - 3 * m.n_layers
    assert sum(r.count * r.bytes_per_device for r in gathers(fused)) == sum(
        r.count * r.bytes_per_device for r in gathers(tp)
    )
    # a plain MLP has one input projection: 6 per layer
    plain = predicted_collectives(m.with_(gated_mlp=False), Parallelism(fsdp=32, tensor=8), tokens, T)
    assert sum(r.count for r in plain if r.axes == ("tensor",)) == 6 * m.n_layers
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
    assert sum(r.count for r in tp_r if r.axes == ("tensor",)) == 8 * m.n_layers
    # data x fsdp: every gradient reduced once over both axes, whole (as XLA does it), nothing over data alone
    hsdp = predicted_collectives(m, Parallelism(data=8, fsdp=32), tokens, T)
    rs = [r for r in hsdp if r.kind == "reduce-scatter"]
    assert {r.axes for r in rs} == {("data", "fsdp")}
    assert sum(r.count * r.bytes_per_device for r in rs) == 2 * m.param_count()
    assert [r.bytes_per_device for r in hsdp if r.axes == ("data",)] == []
    # a tied table: its gradient reduced twice, except in the pipeline
    tied = m.with_(tied_embeddings=True)
    table = m.vocab * m.d_model * 2
    for p, n in ((Parallelism(data=256), 2), (Parallelism(data=64, pipeline=4, microbatches=8), 1)):
        grads = [r for r in predicted_collectives(tied, p, tokens, T) if "gradient of embed" in r.what]
        assert [(r.count, r.bytes_per_device) for r in grads] == [(n, table)]
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
        (("tiny-mha", Parallelism(data=3), 1024, 64), {}, "16 sequences do not divide over 3 batch shards"),
        (("tiny-mha", Parallelism(tensor=8), 1024, 64), {}, r"tensor \(8\) must divide the 4 query heads"),
        (
            ("tiny-mha", Parallelism(pipeline=4, microbatches=4), 1024, 64),
            {},
            r"pipeline \(4\) must divide the 2 layers",
        ),
        (("tiny-mha", Parallelism(data=2), 1024, 64), {"dtype": "fp16"}, "unknown dtype"),
        (("tiny-mha", Parallelism(data=2), 0, 64), {}, "batch_tokens"),
        (("tiny-mha", Parallelism(data=2, context=2), 1024, 64), {}, r"parallelism\.context must be 1"),
    ],
)
def test_predicted_collectives_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        predicted_collectives(*args, **kwargs)
    with pytest.raises(TypeError, match="parallelism"):
        predicted_collectives("tiny-mha", {"data": 2}, 1024, 64)
