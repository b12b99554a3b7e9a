"""The predicted-against-measured figure of Chapters 6 and 8 (tpu_notes.plots.validation)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpu_notes import plots, validation  # noqa: E402
from tpu_notes.inference import published as serving  # noqa: E402
from tpu_notes.plots.validation import BAND  # noqa: E402
from tpu_notes.training import published as training  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return validation.reconcile_all()


def _collection(ax, gid):
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, f"expected one {gid!r} collection, found {len(found)}"
    return found[0]


def test_both_marker_sets_hold_every_row_and_the_band_is_drawn(rows):
    fig = plots.predicted_vs_measured_chart(rows)
    ax = fig.axes[0]
    roof, exp = _collection(ax, "roofline"), _collection(ax, "expected")
    assert len(roof.get_offsets()) == len(rows) == len(exp.get_offsets())
    # roofline markers are hollow, expected ones filled
    assert np.all(roof.get_facecolors()[:, 3] == 0)
    assert np.all(exp.get_facecolors()[:, 3] > 0)
    # the band spans (1 - BAND) x to (1 + BAND) x around the diagonal
    band = _collection(ax, "band")
    ys_over_xs = [y / x for x, y in band.get_paths()[0].vertices if x > 0]
    assert min(ys_over_xs) == pytest.approx(1 - BAND) and max(ys_over_xs) == pytest.approx(1 + BAND)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "latency rows" in ax.get_xlabel()  # the serving latency rows are drawn as 1 / seconds
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"TPU v5e", "H100"} <= set(labels)
    plt.close(fig)


def test_points_are_speeds_measured_on_x_predicted_on_y(rows):
    latency = next(r for r in rows if getattr(r.run, "metric", "") == "s/token")
    train = next(r for r in rows if isinstance(r.run, training.PublishedRun))
    fig = plots.predicted_vs_measured_chart([train, latency])
    ax = fig.axes[0]
    roof = _collection(ax, "roofline").get_offsets()
    exp = _collection(ax, "expected").get_offsets()
    assert list(roof[0]) == pytest.approx([train.reported, train.predicted])
    assert list(exp[0]) == pytest.approx([train.reported, train.expected])
    assert list(roof[1]) == pytest.approx([1 / latency.reported, 1 / latency.predicted])
    plt.close(fig)


def test_which_draws_one_set_and_training_only_has_no_latency_label():
    rows = validation.reconcile_all(training.RUNS)
    fig = plots.predicted_vs_measured_chart(rows, which="expected")
    ax = fig.axes[0]
    assert [c.get_gid() for c in ax.collections if c.get_gid() in ("roofline", "expected")] == ["expected"]
    assert "latency" not in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    assert plots.predicted_vs_measured_chart(validation.reconcile_all(serving.RUNS), ax=ax, which="roofline") is fig
    assert len(_collection(ax, "roofline").get_offsets()) == len(serving.RUNS)
    plt.close(fig)


def test_bad_input_is_refused(rows):
    with pytest.raises(ValueError, match="which"):
        plots.predicted_vs_measured_chart(rows, which="calibrated")
    with pytest.raises(ValueError, match="rows"):
        plots.predicted_vs_measured_chart([])
    with pytest.raises(TypeError, match="rows"):
        plots.predicted_vs_measured_chart([1.0, 2.0])


def test_sweep_chart_draws_a_panel_per_sweep_normalised_to_its_best():
    from tpu_notes import plots
    from tpu_notes.training import sweeps

    results = sweeps.evaluate_all()
    fig = plots.sweep_chart(results)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(results)
    for ax, r in zip(visible, results):
        measured = ax.lines[0].get_ydata()
        assert max(measured) == pytest.approx(1.0) and len(measured) == len(r.measured)
        assert r.sweep.name.split()[0] in ax.get_title()
    with pytest.raises(ValueError, match="results"):
        plots.sweep_chart([])
    with pytest.raises(ValueError, match="ncols"):
        plots.sweep_chart(results, ncols=0)
