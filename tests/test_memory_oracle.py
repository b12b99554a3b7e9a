"""The memory oracle of Chapter 5: XLA's memory_analysis() of each compiled training step (8 simulated CPU devices,
set up by conftest.py) beside the modelled training_memory of the same step.

Expectations are derived from shapes by hand (bytes of the weights, the tokens), never read back from the code under
test: the arguments are exactly the modelled state, FSDP's gathered weights appear in XLA's temporaries, a larger
model moves both sides, and every peak either agrees within 10% or carries a note priced from the layout.
"""

import functools
import math

import pytest

from tpu_notes import memory_oracle as mo
from tpu_notes import parallel
from tpu_notes.training import Parallelism

CASES = parallel.TRAINING_CASES


IDS = [c.id for c in CASES]


@functools.cache
def _row(case_id):
    """One layout's row, compiled once per test worker (xdist spreads the parametrized layouts over workers)."""
    return mo.memory_row(parallel.training_cases([case_id])[0])


def _weight_bytes(c):
    """fp32 bytes of every weight of the config, by hand from its shapes (no tied unembedding counted twice)."""
    D, F, L, N, K, H, V = c.d_model, c.d_ff, c.n_layers, c.n_heads, c.n_kv_heads, c.d_head, c.vocab
    per_layer = D * N * H * 2 + D * K * H * 2 + (3 if c.gated_mlp else 2) * D * F + 2 * D
    return 4 * (L * per_layer + V * D * (1 if c.tied_embeddings else 2) + D)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_layout_agrees_within_ten_percent_or_says_why(case):
    r = _row(case.id)
    assert r.id == case.id
    assert r.xla_peak == r.argument + r.output - r.alias + r.temp > 0
    if abs(r.gap) <= mo.TOLERANCE:
        assert r.note == "", case.id
        return
    named = [part.split()[0] for part in r.note.split("; ")]
    assert set(named) <= set(mo.DEPARTURES), (case.id, named)
    assert named[-1] == "cpu-working-buffers" and len(named) >= 2, case.id
    p = case.parallelism
    # the departures a note names must apply to the layout
    if "fsdp-unreduced-gradients" in named:
        assert p.fsdp > 1
    if {"vocab-not-split", "residual-replicated"} & set(named):
        assert p.tensor > 1
    if "replicated-weights" in named:
        assert p.tensor > 1 or p.pipeline > 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_arguments_are_the_modelled_state_plus_the_tokens(case):
    r, p, c = _row(case.id), case.parallelism, case.config
    tokens = 4 * case.batch * case.seq_len / p.batch_shards + 4  # int32 tokens of this device, fp32 lr
    assert r.inputs == tokens
    if p.tensor == 1 and p.pipeline == 1:  # every weight split as the model splits it: exact
        assert r.argument == r.model.params + r.model.optimizer + tokens, case.id
        assert r.model.params == _weight_bytes(c) / (p.fsdp), case.id
    else:  # the embedding, unembedding and norm gains are replicated over tensor and the stages
        assert r.argument > r.model.params + tokens
        assert r.argument == mo.trainer_param_bytes(c, p) + tokens, case.id
    assert r.alias == 0  # the step does not donate its parameters
    # the outputs hold the new parameters (and the loss, and XLA's small table of output pointers)
    assert 0 <= r.output - mo.trainer_param_bytes(c, p) - 4 <= 8 * 64, case.id


def test_fsdp_gathered_weights_show_in_xlas_temporaries():
    dp, fsdp = _row("data=8"), _row("fsdp=8")
    whole = _weight_bytes(parallel.ORACLE_CONFIG)
    assert fsdp.model.gathered == pytest.approx(whole * 7 / 8)  # no remat: every gathered copy kept
    # same tokens per device, so the extra temporaries of fsdp=8 are the gathered weights (whole, one copy)
    extra = fsdp.temp - dp.temp
    assert fsdp.model.gathered <= extra <= 1.1 * whole
    # and XLA's argument holds an eighth of the weights, the data=8 argument all of them
    assert dp.argument - fsdp.argument == pytest.approx(whole * 7 / 8)


def test_a_larger_model_moves_both_sides():
    base = CASES[0]  # data=8
    wide = parallel.TrainingCase("data=8 wide", base.parallelism, config=base.config.with_(d_ff=512, name="wide"))
    a, b = _row(base.id), mo.memory_row(wide)
    grown = _weight_bytes(wide.config) - _weight_bytes(base.config)
    assert grown > 0
    assert b.argument - a.argument == grown  # the weights, replicated over data
    assert b.model.params - a.model.params == grown
    assert b.model.grads - a.model.grads == grown
    # data=8: XLA's temporaries end with every gradient alive, so they grow by at least the new gradients
    assert b.temp - a.temp >= 0.9 * grown
    assert b.model_peak > a.model_peak and b.xla_peak > a.xla_peak


def test_the_modelled_step_is_the_compiled_one():
    fsdp_remat = next(c for c in CASES if c.remat)
    m = mo.step_memory(fsdp_remat)
    assert m.optimizer == 0  # SGD keeps no optimizer state
    p = fsdp_remat.parallelism
    tokens = fsdp_remat.batch * fsdp_remat.seq_len / p.batch_shards
    # full_block remat: one D-vector in fp32 per token and layer, split over tensor as the model assumes
    D, L = fsdp_remat.config.d_model, fsdp_remat.config.n_layers
    assert m.activations == pytest.approx(4 * D * L * tokens / p.tensor)


def test_table_fits_84_columns_and_names_every_layout():
    rows = [_row(i) for i in ("data=8", "fsdp=8", "data=2 x fsdp=2 x tensor=2 gqa")]
    text = mo.format_memory_table(rows)
    assert max(len(line) for line in text.splitlines()) <= 84
    for r in rows:
        assert r.id[:20] in text
    assert "cpu-working-buffers" in text
    assert "Gaps over" not in mo.format_memory_table(rows, notes=False)


def test_bad_input_is_refused_by_name():
    with pytest.raises(TypeError, match="case"):
        mo.memory_row("data=8")
    with pytest.raises(TypeError, match="cases"):
        mo.memory_rows([3])
    with pytest.raises(TypeError, match="rows"):
        mo.format_memory_table("x")
    with pytest.raises(TypeError, match="parallelism"):
        mo.trainer_param_bytes(parallel.ORACLE_CONFIG, "data=8")
    with pytest.raises(ValueError, match="dtype"):
        mo.trainer_param_bytes(parallel.ORACLE_CONFIG, Parallelism(data=8), "fp8")
    assert math.isfinite(mo.trainer_param_bytes(parallel.ORACLE_CONFIG, Parallelism(data=8)))
