"""Chapter 11's figures and explorer: built from tpu_notes.gpu, page-sized, and honest about what they show."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tpu_notes import gpu, plots, training, widgets  # noqa: E402
from tpu_notes.plots.style import PAGE_WIDTH_IN  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize(
    "make",
    [
        lambda: plots.gpu_tpu_chips_chart(),
        lambda: plots.gpu_collective_chart(gpu.dgx_superpod("h100", 256), 1e9, direct_up_to=64),
        lambda: plots.sharded_all_gather_chart(gpu.dgx_superpod("h100", 256)),
        lambda: plots.gpu_critical_batch_chart(),
        lambda: plots.gpu_strategy_chart(training.strategy_times(gpu.GpuCluster("h100", 64), "llama3-70b", 2**17)),
    ],
)
def test_figures_fit_the_page(make):
    fig = make()
    assert fig.get_figwidth() <= PAGE_WIDTH_IN
    assert fig.axes and any(ax.has_data() for ax in fig.axes)


def test_collective_chart_dots_sit_on_the_lines():
    fig = plots.gpu_collective_chart(gpu.GpuCluster("h100", 64), 1e9, direct_up_to=64)
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "-"]
    dots = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "o"]
    assert len(lines) == len(dots) == 3
    for line, dot in zip(lines, dots):
        n = len(dot.get_ydata())
        assert list(dot.get_ydata()) == pytest.approx(list(line.get_ydata())[:n], rel=1e-9)


def test_explorer_static_is_its_figure_and_text_matches_the_rows():
    fig = widgets.gpu_explorer(static=True)
    assert fig.axes[0].get_title().startswith("llama3-70b on 64 x H100")
    cluster, rows, text = widgets.gpu_strategies("h100", 8, "superpod", "llama3-70b", 2048)
    assert cluster.n_gpus == 64 and [r.strategy for r in rows] == ["dp", "tp", "pp"]
    assert "DP    64-way" in text and rows[0].bound == "comms"  # 2048 < 2472 tokens per GPU
    moe = widgets.gpu_strategies("gb200", 8, "superpod", "deepseek-v3", 4096)[1]
    assert [r.strategy for r in moe] == ["dp", "tp", "ep", "pp"] and moe[2].degree == 64


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: widgets.gpu_cluster("h100", 8, "torus"), "fat_tree"),
        (lambda: widgets.gpu_cluster("h100", 0), "nodes"),
        (lambda: widgets.gpu_strategies(tokens_per_gpu=0), "tokens_per_gpu"),
        (lambda: widgets.gpu_explorer(static="yes"), "static"),
    ],
)
def test_explorer_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
