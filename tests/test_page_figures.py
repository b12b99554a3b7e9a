"""Figures stay readable at the page's width: multi-panel figures fit the content column at their natural size
(tpu_notes.plots.style.panel_grid), so no label is shrunk below MIN_FONT_PT; Chapter 1's roofline has VPU roofs."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpu_notes import plots, systolic  # noqa: E402
from tpu_notes.plots import style  # noqa: E402


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]


def _fits_and_reads(fig):
    width = fig.get_size_inches()[0]
    assert width <= style.PAGE_WIDTH_IN + 1e-9, f"{width} in is wider than the page: labels would shrink"
    small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < style.MIN_FONT_PT]
    assert not small, f"labels under {style.MIN_FONT_PT} pt: {small[:5]}"


def test_panel_grid_wraps_rows_within_the_page():
    fig, axes = style.panel_grid(5, ncols=3, panel_width=2.4)
    assert len(axes) == 5 and fig.get_size_inches()[0] <= style.PAGE_WIDTH_IN
    assert len(fig.axes) == 6 and not fig.axes[5].axison  # the spare sixth axis is switched off
    fig, axes = style.panel_grid(4, ncols=10, panel_width=3.0)  # two 3-inch panels fit, not four
    assert fig.get_size_inches()[0] <= style.PAGE_WIDTH_IN and len(fig.axes) == 4
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises((TypeError, ValueError), match="n_panels"):
            style.panel_grid(bad)


@pytest.mark.parametrize(
    "make",
    [
        lambda: plots.ring_all_gather_figure(8),
        lambda: plots.ring_collective_figure("reduce-scatter", 8),
        lambda: plots.ring_collective_figure("all-to-all", 8),
        lambda: plots.systolic_steps(
            systolic.simulate_matmul(np.ones((2, 3)), np.ones((3, 3)), array_size=3, record_cycles=12),
            cycles=range(3, 9),
        ),
    ],
    ids=["ring-all-gather", "ring-reduce-scatter", "ring-all-to-all", "systolic"],
)
def test_multi_panel_figures_are_readable_at_page_width(make):
    _fits_and_reads(make())


def test_roofline_chart_draws_the_vpu_roof_where_it_is_known():
    ops = {"dot product": 0.5, "matmul B=4096": 2000.0}
    fig = plots.roofline_chart(["v5e", "v5p"], ops=ops, units={"dot product": "VPU", "matmul B=4096": "MXU"})
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("v5p VPU") for label in labels)  # v5p's VPU is in the table
    assert not any(label.startswith("v5e VPU") for label in labels)  # v5e's ALUs per lane are not published
    vpu = max(y for line in ax.get_lines() if line.get_label().startswith("v5p VPU") for y in line.get_ydata())
    v5p = 2 * systolic.vpu_flops("v5p")  # two TensorCores
    assert vpu == pytest.approx(v5p)
    assert any("dot product (VPU)" in t.get_text() for t in _texts(fig))
    no_vpu = plots.roofline_chart(["v5p"], ops=ops, vpu=False)
    assert not any(line.get_label().startswith("v5p VPU") for line in no_vpu.axes[0].get_lines())
    with pytest.raises(ValueError, match="units"):
        plots.roofline_chart(["v5p"], ops=ops, units={"dot product": "GPU"})
    with pytest.raises(ValueError, match="units"):
        plots.roofline_chart(["v5p"], ops=ops, units={"softmax": "VPU"})
