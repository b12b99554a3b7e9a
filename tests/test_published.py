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


def test_one_stated_factor_leaves_the_typical_run_short_and_the_expected_model_closes_the_gap():
    rows = P.reconcile(efficiency=P.MATMUL_EFFICIENCY)
    median = statistics.median(r.ratio for r in rows)
    assert median < 1.0, P.format_table(rows)  # measured below even the 80% roofline
    assert P.fitted_efficiency() < P.MATMUL_EFFICIENCY  # real runs lose more than the matmul kernel alone
    # the expected step (the efficiency model) is closer to the measurement than the 80% factor, run by run median
    factor = statistics.median(abs(1 / r.ratio - 1) for r in rows)
    expected = statistics.median(abs(r.expected_error) for r in rows)
    assert expected < factor / 2


def test_bad_input():
    with pytest.raises(ValueError, match="efficiency"):
        P.predict(P.RUNS[0], efficiency=1.5)
    with pytest.raises(TypeError, match="PublishedRun"):
        P.predict("llama3-405b")


# -- one framework for Chapters 6 and 8 (tpu_notes.runs), and the roofline as a physical bound -----------------------
def test_training_runs_use_the_shared_framework_and_the_presets():
    from tpu_notes import runs
    from tpu_notes.transformer import get_model

    assert issubclass(P.PublishedRun, runs.PublishedRecord) and issubclass(P.Reconciliation, runs.Reconciliation)
    assert P.LLAMA2_70B is get_model("llama2-70b")
    row = P.reconcile()[0]
    assert row.predicted_tokens_per_s == row.predicted and row.reported_tokens_per_s == row.reported


def test_a_run_faster_than_the_roofline_is_refused():
    import dataclasses

    from tpu_notes.runs import ROOFLINE_TOLERANCE

    run = next(r for r in P.RUNS if r.reported_tokens_per_s is not None)
    roof = P.predict(run, 1.0).predicted
    with pytest.raises(ValueError, match="reported_tokens_per_s"):
        dataclasses.replace(run, reported_tokens_per_s=run.reported_tokens_per_s * 1e5)
    with pytest.raises(ValueError, match="reported_tokens_per_s"):
        dataclasses.replace(run, reported_tokens_per_s=roof * ROOFLINE_TOLERANCE * 1.01)
    dataclasses.replace(run, reported_tokens_per_s=roof * ROOFLINE_TOLERANCE * 0.99)  # within the tolerance
    flops_run = next(r for r in P.RUNS if r.reported_flops_per_s is not None)
    with pytest.raises(ValueError, match="reported_flops_per_s"):
        dataclasses.replace(flops_run, reported_flops_per_s=flops_run.reported_flops_per_s * 1e5)
    # every recorded run is at or under the roofline
    assert all(r.ratio <= 1.0 for r in P.reconcile(efficiency=1.0))


def test_measured_layouts_fit_or_their_gap_is_named():
    """A layout that ran is not refused for memory unless MEMORY_GAPS says what the model lacks; the list is exact:
    every run named there is over the planner's share of HBM, every other run fits under it."""
    from tpu_notes.training.planner import DEFAULT_HBM_FRACTION

    over = {r.name for r in P.RUNS if P.stated_memory(r).peak > DEFAULT_HBM_FRACTION * r.system.chip.hbm_bytes}
    assert over == set(P.MEMORY_GAPS)
    assert all(len(why) > 40 for why in P.MEMORY_GAPS.values())
    meta = [r for r in P.RUNS if r.name.startswith("Llama 3 405B") and r.group == "megatron"]
    assert len(meta) == 2 and not any(r.name in P.MEMORY_GAPS for r in meta)  # Meta's own layouts fit


def test_an_assumed_remat_is_the_least_recompute_that_fits():
    """Where the source does not publish its remat policy and no recomputation does not fit, the record takes the
    first policy of the planner's list (least recomputation first) whose modelled peak fits the planner's share."""
    import dataclasses

    from tpu_notes.training.planner import DEFAULT_HBM_FRACTION, DEFAULT_REMAT

    assumed = [r for r in P.RUNS if r.remat_assumed]
    assert len(assumed) >= 3
    for run in assumed:
        budget = DEFAULT_HBM_FRACTION * run.system.chip.hbm_bytes
        fits = [
            rm
            for rm in DEFAULT_REMAT
            if rm != "offload_layer_input" or run.system.chip.pcie_bw is not None
            if P.stated_memory(dataclasses.replace(run, remat=rm)).peak <= budget
        ]
        assert fits and run.remat == fits[0], (run.name, fits)
        assert P.stated_memory(dataclasses.replace(run, remat="none")).peak > budget  # none was not an option
