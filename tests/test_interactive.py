"""The explorers' static figures (tpu_notes.plots.interactive and the ``_*_spec`` builders of tpu_notes.widgets).

The grid a figure holds must be the library's own numbers (to 4 significant digits), the same bytes on every run
(nbval compares the stored text/html), small enough for a page, and the builder must refuse bad declarations.
"""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pytest

from tpu_notes import widgets
from tpu_notes.hardware import get_chip
from tpu_notes.plots import interactive as ix
from tpu_notes.roofline import matmul_time
from tpu_notes.topology import Slice
from tpu_notes.transformer import as_config

#: The most bytes one explorer's snippet may add to a page, its <noscript> picture aside.
MAX_HTML_BYTES = 150_000
#: The most base64 characters of that picture (a PNG of one book-sized figure).
MAX_FALLBACK_BYTES = 150_000


def r4(x: float) -> float:
    return float(f"{x:.4g}")


def cell_at(spec: dict, controls_values: list, *values):
    """The cell of ``spec`` for ``values`` (one per control), and its traces: the flat index is row-major over
    the controls, the first control slowest (as the page's script computes it)."""
    flat = 0
    for choices, v in zip(controls_values, values):
        flat = flat * len(choices) + list(choices).index(v)
    cell = spec["cells"][flat]
    return cell, [spec["traces"][t] for t in cell["t"]]


def _payload(html: str) -> dict:
    text = re.search(r"var spec = (\{.*?\});\n", html, re.S).group(1)
    return json.loads(text.replace("<\\/", "</"))


# ---- the library's numbers --------------------------------------------------------------------------------------
def test_roofline_grid_holds_matmul_time():
    point = widgets.matmul_point("v5e", "bf16", 256, 8192, 8192)
    spec = widgets._roofline_spec(point)
    values = [
        widgets._with(widgets.STATIC_ROOFLINE_CHIPS, "v5e"),
        widgets._with(widgets.STATIC_ROOFLINE_DTYPES, "bf16"),
        widgets._with(widgets.STATIC_BATCHES, 256),
        widgets._with(widgets.STATIC_DIMS, 8192),
    ]
    assert 256 in values[2]  # the starting B replaced its nearest choice (the grid keeps 9 batches)
    assert len(values[2]) == len(widgets.STATIC_BATCHES)
    for chip, dtype, B, D in (("v5e", "bf16", 256, 8192), ("h100", "int8", 16, 1024), ("v5p", "bf16", 65536, 65536)):
        cell, traces = cell_at(spec, values, chip, dtype, B, D)
        t = matmul_time(B, D, 8192, get_chip(chip), dtype=dtype)
        roof, _, dot = traces
        assert dot["x"] == [r4(t.intensity)] and dot["y"] == [r4(t.flops / t.lower)]
        assert f"{t.bound}-bound" in dot["name"]
        c = get_chip(chip)
        assert roof["y"] == [r4(0.1 * c.hbm_bw), r4(c.peak_flops(dtype)), r4(c.peak_flops(dtype))]
        assert cell["text"] == widgets.matmul_point(chip, dtype, B, D, 8192).summary()
    # Hand check at one point: 2*256*8192*8192 FLOPs = 3.436e10; v5e bf16 peak 1.97e14 FLOP/s -> T_math 174 us.
    _, traces = cell_at(spec, values, "v5e", "bf16", 256, 8192)
    assert traces[2]["name"].startswith("B=256, D=8192, F=8192")
    assert 2 * 256 * 8192 * 8192 == 34_359_738_368


def test_collective_grid_holds_collective_time():
    point = widgets.collective_point("v5e", (4, 4), "all_gather", ("x",), 64e6)
    spec = widgets._collective_spec(point)
    names = [c["names"] for c in spec["controls"]]
    assert names[1][0] == "v5e 4x4" and names[2] == ["x", "xy", "all"]
    kinds = widgets._with(widgets.COLLECTIVE_CHOICES, "all_gather")
    slices = [tuple(s.split()) for s in names[1]]
    slices = [(c, tuple(int(n) for n in s.split("x"))) for c, s in slices]
    sizes = widgets._with(widgets.STATIC_NBYTES, 64e6)
    values = [kinds, slices, ("x", "xy", "all"), sizes]
    for kind, where, axes, v in (
        ("all_gather", ("v5e", (4, 4)), "x", 64e6),
        ("all_reduce", ("v5p", (8, 8, 8)), "all", sizes[-1]),
        ("all_to_all", ("v5e", (16, 16)), "xy", sizes[0]),
    ):
        ax = tuple("xyz"[: len(where[1])]) if axes == "all" else tuple(axes)
        cell, traces = cell_at(spec, values, kind, where, axes, v)
        want = Slice(*where).collective_time(kind, v, ax)
        assert traces[-1]["y"] == [r4(want.total)]
        total = traces[0]
        assert total["x"][0] == 1000 and total["x"][-1] == 1e10
        assert total["y"][-1] == r4(Slice(*where).collective_time(kind, 1e10, ax).total)
        assert cell["text"] == widgets.collective_point(where[0], where[1], kind, ax, v).summary()


def test_memory_grid_holds_the_kv_cache_and_activations():
    point = widgets.memory_point("llama3-8b", 16, 8192, "full_block", "v5p")
    spec = widgets._memory_spec(point)
    values = [
        widgets._with(widgets.MEMORY_MODELS, "llama3-8b"),
        widgets._with(widgets.STATIC_SEQUENCE_BATCHES, 16),
        widgets._with(widgets.STATIC_CONTEXTS, 8192),
    ]
    cell, traces = cell_at(spec, values, "llama3-70b", 64, 32768)
    m = as_config("llama3-70b")
    kv = traces[0]
    assert kv["x"] == list(widgets.SEQ_CHOICES)
    assert kv["y"] == [r4(m.kv_cache_bytes(64, s)) for s in widgets.SEQ_CHOICES]
    # By hand: llama3-70b keeps 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token.
    assert kv["y"][0] == r4(327_680 * 64 * 512)
    full = next(t for t in traces if t["name"] == "activations kept, remat 'full_block'")
    assert full["y"] == [r4(m.checkpoint_bytes(64 * s, "full_block")) for s in widgets.SEQ_CHOICES]
    assert traces[-1]["y"] == [r4(m.kv_cache_bytes(64, 32768))]
    assert "llama3-70b, 64 sequences of 32,768 tokens" in cell["text"]


def test_slice_grid_holds_the_hops():
    point = widgets.slice_point("v5e", (8, 16), 2**26)
    spec = widgets._slice_spec(point)
    assert spec["controls"][0]["names"][spec["controls"][0]["start"]] == "v5e 8x16"
    assert spec["controls"][1]["names"][spec["controls"][1]["start"]] == "67.1 MB"
    start = spec["controls"][0]["start"] * len(spec["controls"][1]["names"]) + spec["controls"][1]["start"]
    traces = [spec["traces"][t] for t in spec["cells"][start]["t"]]
    heat = traces[0]
    assert heat["type"] == "heatmap" and heat["z"] == Slice("v5e", (8, 16)).hop_grid().tolist()
    assert max(max(row) for row in heat["z"]) == 7 + 8  # a line of 8 (7 hops) and a ring of 16 (8 hops)
    bw = traces[1]["x"][::-1]  # bars are listed bottom-up
    assert bw[-1] == r4(Slice("v5e", (8, 16)).collective_time("all_gather", 2**26, None).bandwidth_time * 1e3)


# ---- determinism and size ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: widgets.roofline_explorer("v5e", "bf16", B=256, D=8192, F=8192),
        lambda: widgets.slice_explorer("v5e", (8, 16)),
        lambda: widgets.collective_explorer(),
        lambda: widgets.memory_explorer(),
        lambda: widgets.serving_explorer(),
        lambda: widgets.pareto_explorer(),
        lambda: widgets.gpu_explorer(),
    ],
    ids=["roofline", "slice", "collective", "memory", "serving", "pareto", "gpu"],
)
def test_explorer_html_is_deterministic_small_and_rounded(make):
    pytest.importorskip("ipywidgets")
    first, second = make(), make()
    bundle = first._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    assert "explorer" in bundle["text/plain"] and len(bundle["text/plain"]) < 110
    html = bundle["text/html"]
    assert html == second.static_html()  # same bytes on every run: nbval compares them
    # One drawing per page: the static figure rides along only inside <noscript> (a page with no script shows it)
    pictures = re.findall(r'<noscript><img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"></noscript>', html)
    assert len(pictures) == 1 and html.count("<noscript>") == 1
    png = base64.b64decode(pictures[0])
    assert png.startswith(b"\x89PNG") and len(pictures[0]) < MAX_FALLBACK_BYTES
    assert len(html.replace(pictures[0], "").encode()) < MAX_HTML_BYTES
    payload = _payload(html)
    assert f'id="{payload["id"]}"' in html and re.fullmatch(r"tpu-notes-[a-z]+-[0-9a-f]{12}", payload["id"])

    def floats(obj):
        if isinstance(obj, float):
            yield obj
        elif isinstance(obj, dict):
            for v in obj.values():
                yield from floats(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from floats(v)

    assert all(x == r4(x) for x in floats(payload))
    n_cells = math.prod(len(c["names"]) for c in payload["controls"])
    assert len(payload["cells"]) == n_cells <= ix.MAX_CELLS


def test_static_and_missing_ipywidgets_still_give_the_figure(monkeypatch):
    from matplotlib.figure import Figure

    assert isinstance(widgets.memory_explorer(static=True), Figure)
    monkeypatch.setitem(__import__("sys").modules, "ipywidgets", None)
    assert isinstance(widgets.collective_explorer(), Figure)


# ---- the builder ------------------------------------------------------------------------------------------------
def test_round_floats_keeps_four_significant_digits():
    assert ix.round_floats(1 / 3) == 0.3333
    assert ix.round_floats([123456.0, 2.0e-7 / 3, 7]) == [123500.0, 6.667e-08, 7]
    assert ix.round_floats({"a": (np.float64(2.0) / 3, np.arange(2))}) == {"a": [0.6667, [0, 1]]}
    assert ix.round_floats([math.nan, math.inf, None, True, "x"]) == [None, None, None, True, "x"]
    # the last bit of a float does not change the output
    assert ix.round_floats(0.1 + 0.2) == ix.round_floats(0.3) == 0.3
    with pytest.raises(ValueError, match="digits"):
        ix.round_floats(1.0, digits=0)
    with pytest.raises(TypeError, match="figure"):
        ix.round_floats(object())


def test_spec_cells_follow_the_controls_and_keep_errors():
    def cell(a, b):
        if b == "bad":
            raise ValueError("b is bad")
        return {"data": [{"type": "scatter", "x": [a], "y": [a / 3]}], "text": f"{a} {b}", "layout": {"k": 1 / 7}}

    controls = [ix.control("a", (1, 2, 3), 2), ix.control("b", ("ok", "bad"), kind="buttons")]
    spec = ix.explorer_spec("demo", controls, cell)
    assert [c["start"] for c in spec["controls"]] == [1, 0]
    assert [c.get("text") for c in spec["cells"]] == [
        "1 ok",
        "not available: b is bad",
        "2 ok",
        "not available: b is bad",
        "3 ok",
        "not available: b is bad",
    ]
    assert spec["traces"][spec["cells"][4]["t"][0]]["y"] == [1.0] and spec["cells"][0]["layout"] == {"k": 0.1429}
    assert spec == ix.explorer_spec("demo", controls, cell)  # deterministic, id included
    html = ix.explorer_html(spec)
    assert html.count(spec["id"]) == 3 and html.startswith('<div class="tpu-notes-explorer">')
    # a summary holding "</script>" cannot end the script early
    tricky = ix.explorer_spec("demo", [ix.control("a", (1,))], lambda a: {"data": [], "text": "</script><b>"})
    assert "</script><b>" not in ix.explorer_html(tricky) and _payload(ix.explorer_html(tricky))["cells"][0]["text"]


def test_shared_traces_are_stored_once():
    controls = [ix.control("a", tuple(range(10)))]
    spec = ix.explorer_spec("demo", controls, lambda a: {"data": [{"x": [1, 2], "y": [3, 4]}, {"x": [a], "y": [a]}]})
    assert len(spec["traces"]) == 1 + 10 and all(c["t"][0] == 0 for c in spec["cells"])


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: ix.control("", (1, 2)), TypeError, "label"),
        (lambda: ix.control("a", "abc"), TypeError, "values"),
        (lambda: ix.control("a", ()), ValueError, "values"),
        (lambda: ix.control("a", tuple(range(25))), ValueError, "values"),
        (lambda: ix.control("a", (1, 2), start=3), ValueError, "start"),
        (lambda: ix.control("a", (1, 2), names=("one",)), ValueError, "names"),
        (lambda: ix.control("a", (1, 2), kind="dial"), ValueError, "kind"),
        (lambda: ix.explorer_spec("Bad Name", [ix.control("a", (1,))], lambda a: {"data": []}), ValueError, "name"),
        (lambda: ix.explorer_spec("ok", [], lambda a: {"data": []}), TypeError, "controls"),
        (lambda: ix.explorer_spec("ok", [ix.control("a", (1,))], 3), TypeError, "cell"),
        (lambda: ix.explorer_spec("ok", [ix.control("a", (1,))], lambda a: 3), TypeError, "cell"),
        (
            lambda: ix.explorer_spec("ok", [ix.control("a", (1,))], lambda a: {"data": []}, layout=[]),
            TypeError,
            "layout",
        ),
        (
            lambda: ix.explorer_spec(
                "ok", [ix.control("a", tuple(range(21))), ix.control("b", tuple(range(20)))], lambda a, b: {"data": []}
            ),
            ValueError,
            "420 cells",
        ),
        (lambda: ix.explorer_html({"id": "x"}), TypeError, "spec"),
    ],
)
def test_builder_rejects_bad_declarations(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_the_training_explorer_asks_the_planner_once_per_setting(monkeypatch):
    """training_run, the explorer's first drawing and its static figure ask for the same settings: the planner runs
    once per setting and the text is the same each time."""
    import tpu_notes.training as training

    calls = []
    real = training.plan

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "plan", counted)
    monkeypatch.setattr(widgets, "_PLANS", {})
    first = widgets.training_run("llama3-8b", "v5e", 1, 2**20, 2048)
    assert widgets.training_run("llama3-8b", "v5e", 1, 2**20, 2048) == first and calls == ["llama3-8b"]
    assert widgets.training_run("llama3-8b", "v5e", 2, 2**20, 2048) != first and len(calls) == 2


def test_the_training_explorer_draws_a_pod_cloud_tpu_does_not_schedule_whole():
    """A full v5p pod is not one slice Cloud TPU schedules: the explorer's text and its static figure both fall back
    to the pod's fastest schedulable slices (the static page once printed 'static figure not available' here)."""
    text = widgets.training_run("llama3-8b", "v5p", 1, 2**20, 2048)
    assert "does not schedule the whole pod" in text and "16x20x28" not in text
    html = widgets._html(widgets._training_spec, "llama3-8b", "v5p", 1, 2**20, 2048)()
    assert "not available" not in html
    payload = _payload(html)
    assert len(payload["cells"]) == len(widgets.STATIC_TRAINING_MODELS)
    models = widgets.STATIC_TRAINING_MODELS
    assert all(cell["text"].startswith(m) for cell, m in zip(payload["cells"], models))


# ---- figures for the page (issue 40) -------------------------------------------------------------------------------
def test_the_noscript_picture_is_the_static_figure_of_the_starting_settings():
    """The picture a page without JavaScript shows is the PNG of the explorer's own static figure (static=True)."""
    pytest.importorskip("ipywidgets")
    html = widgets.roofline_explorer("v5e", "bf16", B=512, D=4096, F=8192).static_html()
    static = ix.figure_png(widgets.roofline_explorer("v5e", "bf16", B=512, D=4096, F=8192, static=True))
    assert base64.b64encode(static).decode() in html
    assert html.index("<noscript>") < html.index("<script>")  # the picture is not written by a script
    spec = ix.explorer_spec("x", [ix.control("a", [1, 2])], lambda a: {"data": []})
    assert "<noscript>" not in ix.explorer_html(spec)  # no fallback given: no picture
    for bad in ("a.png", b"GIF89a", 3):
        with pytest.raises(TypeError, match="fallback"):
            ix.explorer_html(spec, fallback=bad)
    with pytest.raises(TypeError, match="fig"):
        ix.figure_png("figure")


def test_plotly_log_axes_label_decades_only_and_legends_sit_below_the_data():
    spec = widgets._roofline_spec(widgets.matmul_point("v5e", "bf16", 256, 8192, 8192))
    layout = _payload(ix.explorer_html(spec))["figure"]
    for name in ("xaxis", "yaxis"):
        axis = layout[name]
        assert axis["type"] == "log" and axis["dtick"] == 1  # one label per power of ten
        assert axis["minor"]["showgrid"] and axis["minor"]["dtick"] == "D1"  # the minor grid, unlabelled
    legend = layout["legend"]
    assert legend["orientation"] == "h" and legend["y"] < 0 and legend["yanchor"] == "top"  # below the axes
    slider_top = max(sl["y"] for sl in layout["sliders"])
    assert slider_top < legend["y"]  # ... and above the sliders
    assert layout["height"] == 330 + layout["margin"]["t"] + layout["margin"]["b"]


def test_the_planner_explorer_draws_the_tables_peak_and_the_hbm_line():
    """Chapters 5 and 6: the memory bars show the number the planner's table prints (Plan.memory.peak), against a
    line at the chip's HBM capacity."""
    from tpu_notes.training import plan

    result = plan("llama3-8b", Slice("v5p", (4, 4, 4)), 2**20, 4096)
    cell = widgets._plan_cell(result.ranked, 4)
    memory = next(t for t in cell["data"] if t.get("xaxis") == "x2")
    assert memory["x"] == [p.memory.peak / 1e9 for p in result.ranked[:4]]
    assert any(p.memory.peak != p.memory.total for p in result.ranked[:4])  # the two differ: the test can tell
    (line,) = cell["layout"]["shapes"]
    assert line["xref"] == "x2" and line["x0"] == line["x1"] == get_chip("v5p").hbm_bytes / 1e9
    fig = __import__("tpu_notes.plots", fromlist=["x"]).planner_chart(result, top=4)
    bars = [p.get_width() for p in fig.axes[1].patches]
    assert bars == pytest.approx([p.memory.peak / 1e9 for p in result.ranked[:4]])
    assert any(line.get_xdata()[0] == get_chip("v5p").hbm_bytes / 1e9 for line in fig.axes[1].lines)
