"""Chapters 3 and 4: ring collectives hop by hop and per link, their figures, and the two explorers."""

from __future__ import annotations

import math

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tpu_notes import collectives as c  # noqa: E402
from tpu_notes import plots, widgets
from tpu_notes.topology import Slice  # noqa: E402
from tpu_notes.transformer import get_model  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---- per-link loads: the book's Question 10, and agreement with the time model ---------------------------------
@pytest.mark.parametrize("n", range(2, 13))
def test_link_loads_match_the_time_model_on_a_bidirectional_ring(n):
    w = 2.0  # one-way bandwidth 1 byte/s: a bandwidth term in seconds equals the link load in bytes
    for kind, fn in (
        ("all-gather", c.all_gather_time),
        ("reduce-scatter", c.reduce_scatter_time),
        ("all-to-all", c.all_to_all_time),
    ):
        assert math.isclose(c.ring_link_bytes(kind, n, 1.0), fn(1.0, n, w).bandwidth_time)


@pytest.mark.parametrize("n", [4, 8, 16, 64])
def test_alltoall_is_half_an_allgather_one_way_and_a_quarter_two_ways(n):
    v = 1e6
    one = c.ring_link_bytes("all-to-all", n, v, bidirectional=False) / c.ring_link_bytes(
        "all-gather", n, v, bidirectional=False
    )
    two = c.ring_link_bytes("all-to-all", n, v) / c.ring_link_bytes("all-gather", n, v)
    assert math.isclose(one, 0.5) and math.isclose(two, 0.25)
    # the closed forms of the book's answer: (N−1)/N·V and (N−1)/(2N)·V one way
    assert math.isclose(c.ring_link_bytes("all-gather", n, v, bidirectional=False), (n - 1) / n * v)
    assert math.isclose(c.ring_link_bytes("all-to-all", n, v, bidirectional=False), (n - 1) / (2 * n) * v)


def test_link_bytes_rejects_an_allreduce_and_bad_flags():
    with pytest.raises(ValueError, match="kind"):
        c.ring_link_bytes("all-reduce", 8, 1.0)
    with pytest.raises(TypeError, match="bidirectional"):
        c.ring_link_bytes("all-gather", 8, 1.0, bidirectional="yes")


# ---- hop-by-hop schedules ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(1, 14))
def test_reduce_scatter_schedule_is_an_allgather_backwards(n):
    states = c.ring_reduce_scatter_schedule(n)
    assert len(states) - 1 == c.gather_hops(n)
    assert all(set(s) == {d} and s[d] == frozenset(range(n)) for d, s in enumerate(states[-1]))
    for before, after in zip(states, states[1:]):
        for d in range(n):
            assert len(before[d]) - len(after[d]) <= 2  # at most one shard leaves per direction
        # no addend is lost or counted twice: every shard's contributors stay a partition of the devices
        for s in range(n):
            held = [h[s] for h in after if s in h]
            assert sum(len(x) for x in held) == n and frozenset().union(*held) == frozenset(range(n))


@pytest.mark.parametrize("n", range(1, 14))
def test_all_to_all_schedule_delivers_in_half_a_ring(n):
    states = c.ring_all_to_all_schedule(n)
    assert len(states) - 1 == n // 2
    assert [s for s in states[-1]] == [{d: n} for d in range(n)]
    assert all(sum(sum(s.values()) for s in state) == n * n for state in states)


def test_schedules_refuse_huge_axes():
    for fn in (c.ring_reduce_scatter_schedule, c.ring_all_to_all_schedule):
        with pytest.raises(ValueError, match="axis_size"):
            fn(10**6)


# ---- figures -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["reduce-scatter", "all-to-all", "all_gather"])
def test_ring_collective_figure_draws_one_panel_per_hop(kind):
    def panels(fig):  # titled axes: a layout may add blank spare axes
        return [ax for ax in fig.axes if ax.get_title()]

    fig = plots.ring_collective_figure(kind, 8)
    assert isinstance(fig, Figure) and len(panels(fig)) == 5  # hops 0..4 on a ring of 8
    last = panels(plots.ring_collective_figure(kind, 16, max_panels=4))
    assert len(last) == 4
    if kind != "all_gather":  # these keep the final state as their last panel
        assert last[-1].get_title().startswith("after 8 hops")
    with pytest.raises(ValueError):
        plots.ring_collective_figure("all-reduce", 8)


def test_collective_cost_chart_marks_the_slice_model():
    fig = plots.collective_cost_chart("v5p", (4, 4, 4), "all_to_all", ("x", "y"), 1e8)
    ax = fig.axes[0]
    total = ax.get_lines()[0]
    expected = [Slice("v5p", (4, 4, 4)).collective_time("all_to_all", v, ("x", "y")).total for v in total.get_xdata()]
    assert list(total.get_ydata()) == pytest.approx(expected)
    assert "xy" in ax.get_title() and "ring" in ax.get_title()


def test_layer_diagram_prints_the_model_sizes_and_rejects_moe():
    fig = plots.transformer_layer_diagram("llama3-8b")
    text = " ".join(t.get_text() for t in fig.axes[0].texts) + fig.axes[0].get_title()
    assert "D=4096" in text and "K=8 (G=4)" in text and "W_gate [D, F]" in text
    with pytest.raises(ValueError, match="model"):
        plots.transformer_layer_diagram("tiny-moe")


def test_moe_routing_figure_drops_in_token_order():
    fig = plots.moe_routing_figure([[0, 1], [0, 1], [0, 1]], n_experts=2, capacity=2)
    assert "2 of 6 assignments dropped" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="top_experts"):
        plots.moe_routing_figure([[0, 5]], n_experts=2, capacity=2)
    with pytest.raises(ValueError, match="capacity"):
        plots.moe_routing_figure([[0, 1]], n_experts=2, capacity=0)


def test_memory_chart_lines_are_the_transformer_counts():
    m = get_model("llama3-8b")
    fig = plots.memory_vs_context_chart(m, batch=4, seq_len=4096, chip="v5p", seq_lens=[1024, 4096])
    lines = {str(line.get_label()): line for line in fig.axes[0].get_lines()}
    kv = lines["KV cache, 4 sequences (bf16)"]
    assert list(kv.get_ydata()) == [m.kv_cache_bytes(4, 1024), m.kv_cache_bytes(4, 4096)]
    full = lines["activations kept, remat 'full_block'"]
    assert list(full.get_ydata()) == [m.checkpoint_bytes(4 * 1024), m.checkpoint_bytes(4 * 4096)]


# ---- explorers ---------------------------------------------------------------------------------------------------
def test_collective_point_and_its_explorer():
    p = widgets.collective_point("v5e", (8, 16), "all_gather", ("x", "y"), 1e6)
    assert p.time == Slice("v5e", (8, 16)).collective_time("all_gather", 1e6, ("x", "y"))
    assert p.wraparound == (False, True) and p.hops == 7 + 8
    assert "line of 8" in p.summary() and "ring of 16" in p.summary()
    assert isinstance(widgets.collective_explorer(static=True), Figure)
    with pytest.raises(ValueError):
        widgets.collective_point("v5e", (4, 4), "all_gather", ("z",), 1e6)


def test_memory_point_and_its_explorer():
    p = widgets.memory_point("llama3-70b", 8, 32768, "save_matmul_outputs", "v5p")
    m = get_model("llama3-70b")
    assert p.kv_bytes == m.kv_cache_bytes(8, 32768)
    assert p.activation_bytes == m.checkpoint_bytes(8 * 32768, "save_matmul_outputs")
    assert p.weight_bytes == 2 * m.param_count()
    assert isinstance(widgets.memory_explorer(static=True), Figure)
    with pytest.raises(ValueError, match="model"):
        widgets.memory_point("deepseek-v3")
    with pytest.raises(ValueError, match="policy"):
        widgets.memory_point(policy="everything")
