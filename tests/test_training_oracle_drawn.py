"""The oracle of Chapter 5 on drawn configs and layouts: for every 8-device layout that tpu_notes.parallel runs,
hypothesis draws small tpu_notes.model configs (and batch, sequence length, remat), XLA compiles the training step,
and every (kind, axes, bytes) row of parallel.oracle_rows must agree with training.predicted_collectives.

The configs cover what tpu_notes.model supports: GQA (n_kv_heads dividing n_heads), gated and plain MLPs, tied
and separate embeddings, one or more layers per stage, vocabularies that are not powers of two. The layouts are the
products of data, fsdp and tensor that make 8, and data x pipeline (the only pipeline mix tpu_notes.parallel runs),
remat on or off where allowed. Each example compiles one step (a second or two on a CPU), so the number of examples
is kept small and the draws are derandomized: the same examples on every run.

Each example also checks that the comparison is not vacuous: the counts of the model before issue 23 (2 Megatron
AllReduces per layer in the backward pass, data x fsdp reduced in two steps, the tied table reduced once) are
rejected wherever they differ from the model, and so is the fused-projection count on a tensor layout.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_notes import parallel
from tpu_notes.training import Parallelism
from tpu_notes.training.collectives import collective_totals, predicted_collectives
from tpu_notes.transformer import TransformerConfig

#: (data, fsdp, tensor, pipeline) of every 8-device layout tpu_notes.parallel compiles for a dense model
#: (pipeline combines with data only; pipeline=8 is left out: its 8 microbatches make the slowest compile).
LAYOUTS = tuple((d, f, t, 1) for d in (1, 2, 4, 8) for f in (1, 2, 4, 8) for t in (1, 2, 4, 8) if d * f * t == 8) + (
    (4, 1, 1, 2),
    (2, 1, 1, 4),
)
#: Examples per layout: sized so that the file runs in under 90 s on a busy 2-core CPU (each compiles one step;
#: 24 examples took 47 s on a quiet machine). Hypothesis tries the simplest config first, then a random one.
EXAMPLES_PER_LAYOUT = 2


@st.composite
def drawn_configs(draw, layout):
    """``(config, parallelism, batch, seq_len, remat)``: a small dense config that fits ``layout``."""
    d, f, t, s = layout
    k = t * draw(st.sampled_from((1, 2)))  # tensor splits the key/value heads too
    c = TransformerConfig(
        d_model=f * draw(st.sampled_from((1, 2, 4, 8))),  # fsdp splits d_model
        d_ff=t * draw(st.sampled_from((1, 4, 8))),
        n_layers=s * draw(st.sampled_from((1, 2))),  # whole layers per stage
        n_heads=k * draw(st.sampled_from((1, 2, 4))),  # n_kv_heads divides n_heads: GQA, MQA-like, MHA
        n_kv_heads=k,
        d_head=draw(st.sampled_from((2, 4, 8))),  # even: rotary embeddings
        vocab=draw(st.sampled_from((8, 17, 64, 100))),
        gated_mlp=draw(st.booleans()),
        tied_embeddings=draw(st.booleans()),
        name="drawn",
    )
    p = Parallelism(data=d, fsdp=f, tensor=t, pipeline=s, microbatches=s)  # as many microbatches as stages
    batch = d * f * s * draw(st.sampled_from((1, 2)))  # whole microbatches on every batch shard
    seq_len = draw(st.sampled_from((2, 4, 8)))
    remat = s == 1 and draw(st.booleans())  # remat runs without pipeline only
    return c, p, batch, seq_len, remat


def _old_model(c, p, batch, seq_len, remat) -> dict:
    """The totals of the model as it counted before issue 23, rebuilt from today's: Megatron's backward pass 2
    AllReduces per layer, data x fsdp as a ReduceScatter over fsdp and an AllReduce over data of the shard, and a
    tied table reduced once."""
    pred = predicted_collectives(c, p, batch * seq_len, seq_len, dtype="fp32", remat=remat)
    old: dict = {}

    def add(key, n):
        old[key] = old.get(key, 0) + n

    for r in pred:
        n = r.count
        if r.what.startswith("gradient of embed (lookup and unembedding"):
            n //= 2
        if r.kind == "reduce-scatter" and r.axes == ("data", "fsdp"):
            add(("reduce-scatter", ("fsdp",), r.bytes_per_device), n)
            add(("all-reduce", ("data",), r.bytes_per_device / p.fsdp), n)
        elif r.what.startswith("bwd: input gradients of "):
            add((r.kind, r.axes, r.bytes_per_device), n // (3 if "wq" in r.what else 2 if c.gated_mlp else 1))
        else:
            add((r.kind, r.axes, r.bytes_per_device), n)
    return old


def _agrees(totals: dict, rows) -> bool:
    """Whether a model's ``{(kind, axes, bytes): count}`` matches XLA's arrays in ``rows`` signature by signature."""
    xla = {(r.kind, r.axes, r.bytes_per_device): r.xla for r in rows if r.xla}
    return {k: n for k, n in totals.items() if n} == xla


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "d{}f{}t{}p{}".format(*x))
@settings(
    max_examples=EXAMPLES_PER_LAYOUT,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_row_agrees_on_drawn_configs(layout, data):
    drawn = data.draw(drawn_configs(layout), label="config, parallelism, batch, seq_len, remat")
    c, p, batch, seq_len, remat = drawn
    rows = parallel.oracle_rows(c, p, batch, seq_len, remat=remat)
    differ = [r for r in rows if not r.agree]
    assert not differ, parallel.format_training_table(rows, f"{p.label()} remat={remat} {c}")
    assert rows and all(r.xla for r in rows)  # every signature the model names, XLA compiled
    pred = predicted_collectives(c, p, batch * seq_len, seq_len, dtype="fp32", remat=remat)
    assert _agrees(collective_totals(pred), rows)
    # not vacuous: the old counts fail wherever they differ from today's
    old = _old_model(c, p, batch, seq_len, remat)
    tied_reduced = c.tied_embeddings and p.pipeline == 1 and p.data * p.fsdp > 1
    changed = p.tensor > 1 or (p.data > 1 and p.fsdp > 1) or tied_reduced
    assert changed == (old != collective_totals(pred))
    assert _agrees(old, rows) == (not changed)


def test_a_wrong_model_is_rejected(monkeypatch):
    """oracle_rows itself flags a model that counts Megatron's backward pass the textbook way (fused projections:
    2 per layer), on a tensor layout of the oracle's config."""
    c, p = parallel.ORACLE_CONFIG.with_(n_layers=1), Parallelism(tensor=8)
    right = parallel.oracle_rows(c, p, 16, 16)
    assert all(r.agree for r in right)

    def fused(*args, **kwargs):
        return predicted_collectives(*args, **kwargs, fused_projections=True)

    monkeypatch.setattr(parallel, "predicted_collectives", fused)
    wrong = parallel.oracle_rows(c, p, 16, 16)
    bad = [(r.kind, r.axes, r.predicted, r.xla) for r in wrong if not r.agree]
    assert bad == [("all-reduce", ("tensor",), 2 + 2, 2 + 3 + 2)]
