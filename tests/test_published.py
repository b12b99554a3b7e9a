"""Chapter 6's reconciliation: published, measured training runs against tpu_notes' FLOP counts and step times."""
import statistics

import pytest

from tpu_notes.training import published as P
from tpu_notes.transformer import as_config


@pytest.mark.parametrize("run", [r for r in P.RUNS if r.reported_tokens_per_s is not None], ids=lambda r: r.name)
def test_our_flop_count_reproduces_the_sources_mfu(run):
    """An oracle nobody here wrote: MaxText's MFU, from its measured tokens/s and our FLOPs per token (counted the
    way the source counts attention), comes out as the source states it."""
    c = as_config(run.model)
    per_token = c.flops_per_token(run.seq_len, training=True, causal=run.counting == "causal")
    mfu = run.reported_tokens_per_s * per_token / run.system.chip.peak_flops()
    assert mfu == pytest.approx(run.reported_mfu, rel=0.01)


@pytest.mark.parametrize("run", [r for r in P.RUNS if r.reported_flops_per_s is not None], ids=lambda r: r.name)
def test_stated_flops_and_mfu_agree(run):
    assert run.reported_flops_per_s / run.system.chip.peak_flops() == pytest.approx(run.reported_mfu, rel=0.02)


def test_every_layout_matches_its_hardware_and_batch():
    for run in P.RUNS:
        assert run.parallelism.n_chips == run.system.n_chips * run.parallelism.dcn
        assert run.batch_tokens % run.seq_len == 0


def test_the_roofline_is_an_upper_bound_on_every_measured_run():
    rows = P.reconcile(efficiency=1.0)
    assert all(r.ratio <= 1.0 for r in rows), P.format_table(rows)


def test_the_stated_efficiency_brings_the_typical_run_close():
    rows = P.reconcile(efficiency=P.MATMUL_EFFICIENCY)
    median = statistics.median(r.ratio for r in rows)
    assert 0.7 <= median <= 1.1, P.format_table(rows)
    assert P.fitted_efficiency() < P.MATMUL_EFFICIENCY   # real runs lose more than the matmul kernel alone


def test_bad_input():
    with pytest.raises(ValueError, match="efficiency"):
        P.predict(P.RUNS[0], efficiency=1.5)
    with pytest.raises(TypeError, match="PublishedRun"):
        P.predict("llama3-405b")
