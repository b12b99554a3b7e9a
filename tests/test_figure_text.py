"""Every figure the chapters draw reads at the book's width: no text under 10 CSS pixels and no two labels on top
of each other.

The book shows a figure as the PNG the inline backend saves (``bbox_inches="tight"`` at the figure's dpi), scaled
down to the content column (``CONTENT_PX``, about 670 CSS px in a 1280 px window) when it is wider and shown at its
natural size otherwise. A font of ``s`` points then renders at ``s * dpi / 72 * min(1, CONTENT_PX / width_px)``
pixels. Each case below draws one figure with the arguments a chapter gives it (cheap settings where the chapter
measures something); ``test_every_chart_has_a_case`` fails when a figure function of :mod:`tpu_notes.plots` has no
case, so a new figure is checked too.

Overlap: the window extents of every drawn text (tick labels, axis labels, titles, legend entries, annotations)
are compared pairwise; two boxes collide when they share more than ``TOLERANCE_PX`` in both directions (a glyph's
box includes its empty ascender and descender room, so boxes that merely touch are not a collision).
"""

import itertools
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpu_notes import plots  # noqa: E402

#: Width (CSS px) of the book's content column at a 1280 px window.
CONTENT_PX = 670
#: Smallest text (CSS px) a figure may show at that width.
MIN_TEXT_PX = 10.0
#: Overlap (px, in both directions) two text boxes may share before they count as a collision.
TOLERANCE_PX = 2.0


def _cases():
    from tpu_notes import cheatsheet, inference, systolic, topology, training, validation
    from tpu_notes.exercises import ch08
    from tpu_notes.gpu import dgx_superpod
    from tpu_notes.inference import published as serving_published
    from tpu_notes.parallel import Parallelism
    from tpu_notes.training import published, sweeps

    def timing():
        from tpu_notes import bench, collectives

        sweep = [
            bench.CollectiveMeasurement(kind, v, 8, 1e-5 + v / 1e9)
            for kind in collectives.KINDS
            for v in (1e4, 1e5, 1e6)
        ]
        grid = np.geomspace(1e4, 4e6, 20)
        model = {k: [(v, 1e-5 + v / 1.2e9) for v in grid] for k in collectives.KINDS}
        return plots.collective_timing_chart(sweep, model, title="Collectives on 8 simulated CPU devices vs the model")

    def planner():
        result = training.plan("llama3-70b", topology.Slice("v5p", (16, 16, 16)), 4 * 2**20, 4096)
        return plots.planner_chart(result, top=8)

    def memory_breakdown():
        rows = {
            f"ZeRO-{z}" if z else "data parallel": training.training_memory(
                "llama3-8b", Parallelism(data=256), 2**20, 4096, zero=z
            )
            for z in range(3)
        }
        rows["FSDP (ZeRO-3)"] = training.training_memory("llama3-8b", Parallelism(fsdp=256), 2**20, 4096)
        return plots.memory_breakdown_chart(rows, chip="v5p")

    def loss_curves():
        rng = np.random.default_rng(0)
        base = np.linspace(5.5, 4.0, 8)
        curves = {"1 device": base, **{f"layout {i}": base + rng.normal(0, 1e-6, 8) for i in range(4)}}
        return plots.loss_curves_chart(curves, reference="1 device")

    def moe():
        rng = np.random.default_rng(0)
        top = rng.integers(0, 8, size=(16, 2))
        return plots.moe_routing_figure(top, 8, 5, rng.random((16, 8)))

    def sharded():
        rows = [
            inference.sharded_step_time("llama3-70b", "v5e", n, b, 8192, weight_dtype="int8", kv_dtype="int8")
            for n, b in ((8, 32), (16, 32), (16, 96), (32, 32), (32, 96), (64, 96))
        ]
        return plots.sharded_step_chart(rows)

    def sweep_picked():
        graded = sweeps.evaluate_all()
        seen, picked = set(), []
        for r in graded:
            if r.sweep.kind not in seen:
                seen.add(r.sweep.kind)
                picked.append(r)
        return plots.sweep_chart(picked, ncols=2)

    def gpu_strategy():
        from tpu_notes import widgets

        _cluster, rows, text = widgets.gpu_strategies("h100", 8, "superpod", "llama3-70b", 2048)
        return plots.gpu_strategy_chart(rows, text.splitlines()[0])

    small = systolic.simulate_matmul(np.ones((2, 3)), np.ones((3, 3)), array_size=3, record_cycles=12)
    return {
        # Chapter 1
        "roofline_chart": lambda: plots.roofline_chart(
            ["v5e", "v5p", "v6e", "h100"],
            ops={"dot product": 0.5, "softmax": 2.0, "matmul B=256": 240.0, "matmul B=4096": 2000.0},
            units={"dot product": "VPU", "softmax": "VPU", "matmul B=256": "MXU", "matmul B=4096": "MXU"},
        ),
        "matmul_intensity_chart": lambda: plots.matmul_intensity_chart(8192, 8192, chips=("v5e", "v5p", "v6e", "h100")),
        "matmul_on_roofline": lambda: plots.matmul_on_roofline(256, 8192, 8192, chip="v5e"),
        "matmul_flops_vs_batch": lambda: plots.matmul_flops_vs_batch(
            (4096, 1024), chip="v5e", dtype="bf16", w_dtype="int8", batch_range=(1, 512)
        ),
        # Chapter 2
        "tpu_chip_diagram": lambda: plots.tpu_chip_diagram("v5p"),
        "systolic_steps": lambda: plots.systolic_steps(small, cycles=range(3, 9)),
        "padding_sweep": lambda: plots.padding_sweep(
            [120, 128, 136, 256, 264], [1e-5, 1e-5, 2e-5, 2e-5, 3e-5], mxu_size=128, title="[N, N] @ [N, N] on cpu"
        ),
        "torus_hops": lambda: plots.torus_hops([topology.Slice("v5e", (4, 4)), ((4, 4), (True, True))]),
        "slice_hops_chart": lambda: plots.slice_hops_chart("v5e", (8, 16), nbytes=2**26),
        "bandwidth_ladder_chart": lambda: plots.bandwidth_ladder_chart(("v4p", "v5e", "v5p", "v6e")),
        # Chapter 3
        "ring_all_gather_figure": lambda: plots.ring_all_gather_figure(8, wraparound=True),
        "ring_collective_figure": lambda: plots.ring_collective_figure("reduce-scatter", 8),
        "ring_collective_figure all-to-all": lambda: plots.ring_collective_figure("all-to-all", 8),
        "collective_cost_chart": lambda: plots.collective_cost_chart("v5e", (8, 16), "all_gather", ("x",), 16 * 2**20),
        "collective_timing_chart": timing,
        # Chapter 4
        "transformer_layer_diagram": lambda: plots.transformer_layer_diagram("llama3-8b"),
        "param_breakdown_chart": lambda: plots.param_breakdown_chart(),
        "attention_share_chart": lambda: plots.attention_share_chart(("llama3-8b", "llama3-70b", "llama3-405b")),
        "moe_routing_figure": moe,
        "remat_tradeoff_chart": lambda: plots.remat_tradeoff_chart(("llama3-8b", "llama3-70b"), seq_len=8192),
        "kv_cache_chart": lambda: plots.kv_cache_chart(),
        "memory_vs_context_chart": lambda: plots.memory_vs_context_chart(
            "llama3-8b", batch=16, seq_len=8192, chip="v5p"
        ),
        # Chapter 5
        "memory_breakdown_chart": memory_breakdown,
        "training_roofline_chart": lambda: plots.training_roofline_chart("v5p", d_model=8192, d_ff=28672, n_chips=64),
        "pipeline_schedule_chart": lambda: plots.pipeline_schedule_chart(stages=4, microbatches=8),
        "loss_curves_chart": loss_curves,
        "planner_chart": planner,
        "context_split_chart": lambda: plots.context_split_chart(context=4, seq_len=64),
        "fp8_gain_chart": lambda: plots.fp8_gain_chart(("llama3-8b", "llama3-70b", "llama3-405b"), "h100"),
        # Chapter 6
        "predicted_vs_measured_chart": lambda: plots.predicted_vs_measured_chart(
            validation.reconcile_all(published.RUNS)
        ),
        "sweep_chart": sweep_picked,
        # Chapter 7
        "decode_step_parts_chart": lambda: plots.decode_step_parts_chart("llama3-8b", "v5e", 4, 8192),
        "latency_throughput_chart": lambda: plots.latency_throughput_chart("llama2-13b", "v5e", 8, 8192),
        "kv_share_chart": lambda: plots.kv_share_chart("llama3-70b", "v5e", 16, contexts=(1024, 8192, 32768), batch=32),
        "speculative_speedup_chart": lambda: plots.speculative_speedup_chart(draft_costs=(0.02, 0.1, 0.25)),
        "speculative_batch_chart": lambda: plots.speculative_batch_chart(
            "llama3-70b", "v5e", 32, context=8192, k=4, acceptances=(0.5, 0.7, 0.9), draft="llama3.2-1b"
        ),
        "weight_stationary_chart": lambda: plots.weight_stationary_chart("v5p", 64, 8192, 32768),
        # Chapter 8
        "sharded_step_chart": sharded,
        "pareto_chart": lambda: plots.pareto_chart(
            ch08.pareto_steps(), title="Llama 3 70B int8 on v5e, 8k context, with communication"
        ),
        "serving_reconciliation_chart": lambda: plots.serving_reconciliation_chart(
            serving_published.reconcile(efficiency=1.0),
            serving_published.reconcile(efficiency=0.8),
        ),
        # Chapter 10
        "collective_matmul_chart": lambda: plots.collective_matmul_chart(B=2048, D=8192, n=8, chip="v5e"),
        # Chapter 11
        "gpu_tpu_chips_chart": lambda: plots.gpu_tpu_chips_chart(("v5e", "v5p", "v6e", "a100", "h100", "b200")),
        "gpu_collective_chart": lambda: plots.gpu_collective_chart(dgx_superpod("h100", 256), 1e9),
        "sharded_all_gather_chart": lambda: plots.sharded_all_gather_chart(dgx_superpod("h100", 256), 8192, 32768),
        "gpu_critical_batch_chart": lambda: plots.gpu_critical_batch_chart(),
        "gpu_strategy_chart": gpu_strategy,
        # Chapter 12
        "critical_batches_chart": lambda: plots.critical_batches_chart(cheatsheet.numbers_to_know()),
    }


#: Figure functions not rendered here, with the reason (they need a measurement of the machine or a profile).
NOT_RENDERED = {
    "measured_roofline": "needs a roofline measurement (tests/test_widgets_plots_ch01.py draws a fake one)",
    "measured_decode_chart": "needs decode times measured on this machine",
    "percentiles_vs_load_chart": "needs a serving simulation sweep (minutes)",
    "simulation_chart": "needs a serving simulation",
    "serving_sweep_chart": "needs a serving simulation sweep",
    "timeline": "needs a profiler trace",
    "ops_on_roofline": "needs a profiler trace",
    "category_chart": "needs a profiler trace",
    "reconciliation_chart": "Chapter 6 draws labelled_reconciliation_chart; not used by a chapter",
    "labelled_reconciliation_chart": "not drawn by a chapter",
    "step_breakdown_chart": "not drawn by a chapter",
    "pipeline_bubble_chart": "not drawn by a chapter",
    "chunked_prefill_chart": "not drawn by a chapter",
    "batch_scaling_chart": "not drawn by a chapter",
    "ring_collective_chart": "not drawn by a chapter",
}
_HELPERS = {"BOOK_RC", "CHIP_COLORS", "use_book_style", "new_figure", "figure_and_axes"}

CASES = _cases()


def test_every_chart_has_a_case():
    charts = set(plots.__all__) - _HELPERS
    covered = {name.split()[0] for name in CASES} | set(NOT_RENDERED)
    assert charts - covered == set(), "figure functions with no rendering case"
    assert covered - charts == set(), "cases for names that are no longer figure functions"


def _drawn_texts(fig, renderer):
    """Every visible, non-empty text the figure draws (tick labels only for the ticks inside the view)."""
    tick_labels, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.majorTicks + axis.minorTicks:
                tick_labels.update({id(tick.label1), id(tick.label2)})
            if ax.axison and axis.get_visible():  # an axis switched off draws no tick labels
                for tick in axis._update_ticks():
                    drawn.update({id(tick.label1), id(tick.label2)})
    out = []
    for t in fig.findobj(matplotlib.text.Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        if id(t) in tick_labels and id(t) not in drawn:
            continue
        if any(not a.get_visible() for a in _ancestors(t)):
            continue
        out.append(t)
    return out


def _ancestors(t):
    axes = t.axes
    return [axes] if axes is not None else []


def _rendered_scale(fig, renderer):
    """CSS px per point of font: the saved PNG's dpi, scaled to the content column when it is wider."""
    dpi = fig.dpi
    width_px = fig.get_tightbbox(renderer).width * dpi
    return dpi / 72.0 * min(1.0, CONTENT_PX / width_px)


def _overlap(a, b) -> bool:
    dx = min(a.x1, b.x1) - max(a.x0, b.x0)
    dy = min(a.y1, b.y1) - max(a.y0, b.y0)
    return dx > TOLERANCE_PX and dy > TOLERANCE_PX


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_text_is_readable_and_apart(name):
    plots.use_book_style()
    fig = CASES[name]()
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        scale = _rendered_scale(fig, renderer)
        texts = _drawn_texts(fig, renderer)
        assert texts, "the figure draws no text"
        small = sorted(
            {
                (t.get_text()[:40], round(t.get_fontsize() * scale, 1))
                for t in texts
                if t.get_fontsize() * scale < MIN_TEXT_PX
            }
        )
        assert not small, f"text under {MIN_TEXT_PX} px at {CONTENT_PX} px width: {small[:8]}"
        boxes = [(t, t.get_window_extent(renderer)) for t in texts]
        boxes = [(t, b) for t, b in boxes if math.isfinite(b.x0) and b.width > 0 and b.height > 0]
        hits = [
            (s.get_text()[:30], t.get_text()[:30])
            for (s, a), (t, b) in itertools.combinations(boxes, 2)
            if _overlap(a, b)
        ]
        assert not hits, f"overlapping text: {hits[:8]}"
    finally:
        plt.close(fig)
