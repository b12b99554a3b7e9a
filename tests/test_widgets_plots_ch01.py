"""Chapter 1 figures (tpu_notes.plots) and the roofline explorer (tpu_notes.widgets)."""

from __future__ import annotations

import sys

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tpu_notes import bench, hardware, plots, widgets  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _line(ax, label_start):
    return next(line for line in ax.get_lines() if str(line.get_label()).startswith(label_start))


def test_roofline_chart_draws_each_chip_from_its_datasheet():
    chips = ("v5e", "v5p", "v6e", "h100")
    fig = plots.roofline_chart(chips, ops={"dot product": 0.5, "big matmul": 4000.0})
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    for name in chips:
        c = hardware.get_chip(name)
        x, y = (np.asarray(v, float) for v in _line(ax, f"{name}:").get_data())
        # Independent restatement of the roofline: min(peak, I * W_hbm) from the chip's own fields.
        np.testing.assert_allclose(y, np.minimum(c.bf16_flops, x * c.hbm_bw), rtol=1e-12)
        assert y.max() == pytest.approx(c.bf16_flops)
    assert len([ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]) == 2  # one vertical line per op


def test_roofline_chart_accepts_pairs_a_single_chip_and_other_bandwidths():
    fig = plots.roofline_chart("v5p", ops=[("x", 10.0)], bandwidth="ici")
    x, y = (np.asarray(v, float) for v in fig.axes[0].get_lines()[0].get_data())
    c = hardware.get_chip("v5p")
    np.testing.assert_allclose(y, np.minimum(c.bf16_flops, x * c.ici_bw_bidi), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"chips": ("v5e", "tpu9000")}, ValueError),
        ({"chips": ()}, ValueError),
        ({"intensity_range": (10, 1)}, ValueError),
        ({"ops": {"bad": 0.0}}, ValueError),
        ({"ops": {3: 1.0}}, TypeError),
        ({"ops": [("a", 1.0, 2.0)]}, ValueError),
        ({"dtype": "int3"}, ValueError),
    ],
)
def test_roofline_chart_rejects_bad_input(kwargs, exc):
    with pytest.raises(exc):
        plots.roofline_chart(**kwargs)


def test_matmul_intensity_chart_crosses_each_ridge_near_the_critical_batch():
    D = F = 65536
    fig = plots.matmul_intensity_chart(D, F, chips=("v5e", "h100"))
    ax = fig.axes[0]
    b, intensity = (np.asarray(v, float) for v in _line(ax, "[B,").get_data())
    for name in ("v5e", "h100"):
        c = hardware.get_chip(name)
        crossing = b[np.argmax(intensity > c.critical_intensity())]
        # With D, F >> B the intensity is ~B, so the crossing is near peak / W_hbm (240 for v5e, 295 for H100).
        assert crossing == pytest.approx(c.bf16_flops / c.hbm_bw, rel=0.1)
    with pytest.raises(ValueError, match="batch_range"):
        plots.matmul_intensity_chart(batch_range=(0, 10))


def test_matmul_on_roofline_places_the_point_at_flops_over_time():
    B, D, F = 64, 8192, 8192
    fig = plots.matmul_on_roofline(B, D, F, chip="v5e")
    x, y = (np.asarray(v, float) for v in _line(fig.axes[0], "B=64").get_data())
    c = hardware.get_chip("v5e")
    flops, nbytes = 2.0 * B * D * F, 2.0 * (B * D + D * F + B * F)  # hand count, bf16
    assert x[0] == pytest.approx(flops / nbytes)
    assert y[0] == pytest.approx(flops / max(flops / c.bf16_flops, nbytes / c.hbm_bw))
    assert "bandwidth-bound" in _line(fig.axes[0], "B=64").get_label()  # 64 < 240


def _fake_result():
    rng = np.random.default_rng(0)
    ms = []
    for B in (1, 64, 1024):
        flops, nbytes = 2.0 * B * 4096 * 4096, 4.0 * (2 * B * 4096 + 4096 * 4096)
        ms.append(
            bench.Measurement(
                "matmul",
                f"mm{B}",
                flops,
                nbytes,
                max(flops / 4e11, nbytes / 8e9) * (1 + 0.05 * rng.random()),
                "fp32",
                shape=(B, 4096, 4096),
            )
        )
    for size in (2**20, 2**27):
        ms.append(
            bench.Measurement("copy", f"cp{size}", size / 4, 2.0 * size, 2.0 * size / 8e9, "fp32", shape=(size // 4,))
        )
    mm = tuple(m for m in ms if m.kind == "matmul")
    cp = tuple(m for m in ms if m.kind == "copy")
    return bench.RooflineMeasurement(
        platform="cpu",
        device_kind="cpu",
        chip=None,
        dtype="fp32",
        matmuls=mm,
        copies=cp,
        fit=bench.fit_roofline(ms),
        wall_s=1.0,
    )


def test_measured_roofline_figure():
    result = _fake_result()
    fig = plots.measured_roofline(result)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left = fig.axes[0]
    pts = _line(left, "matmuls")
    np.testing.assert_allclose(pts.get_xdata(), [m.intensity for m in result.matmuls])
    roof = _line(left, "fitted")
    x, y = (np.asarray(v, float) for v in roof.get_data())
    np.testing.assert_allclose(y, np.minimum(result.fit.peak_flops, x * result.fit.bandwidth), rtol=1e-12)
    # With a chip model the datasheet roof is drawn too (fp32 has no published peak: skipped quietly).
    plots.measured_roofline(result, chip="h100")
    with pytest.raises(TypeError, match="RooflineMeasurement"):
        plots.measured_roofline(result.fit)


# ------------------------------------------------------------------------------------------------ widgets
def test_explorer_static_fallback_is_a_figure():
    fig = widgets.roofline_explorer("v5e", "bf16", 256, 8192, 8192, static=True)
    assert isinstance(fig, Figure)


def test_explorer_degrades_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # makes `import ipywidgets` raise ImportError
    fig = widgets.roofline_explorer(chip="h100", B=512)
    assert isinstance(fig, Figure)


def test_explorer_builds_widgets_and_redraws():
    ipywidgets = pytest.importorskip("ipywidgets")
    box = widgets.roofline_explorer("v5e", "bf16", 300, 8000, 8192)
    assert isinstance(box, ipywidgets.VBox)
    controls = [w for row in box.children[:2] for w in row.children]
    chip_w, dtype_w, b_w, d_w, f_w = controls
    assert (chip_w.value, dtype_w.value, b_w.value, d_w.value, f_w.value) == ("v5e", "bf16", 256, 8192, 8192)
    image, text = box.children[2], box.children[3]
    assert isinstance(image, ipywidgets.Image) and isinstance(text, ipywidgets.HTML)
    assert bytes(image.value).startswith(b"\x89PNG") and "compute-bound" in text.value  # 256 x 8192^2 clears 240
    first = bytes(image.value)
    b_w.value = 16  # redraws: a bandwidth-bound point
    assert bytes(image.value) != first and "bandwidth-bound" in text.value and "[16, 8192]" in text.value
    chip_w.value = "v3"
    dtype_w.value = "fp8"  # v3 has no fp8 peak: the explorer shows the error instead of raising
    assert "fp8" in text.value and "v3" in text.value.lower()


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"chip": "nope"}, ValueError),
        ({"B": 0}, ValueError),
        ({"dtype": "int3"}, ValueError),
        ({"static": "yes"}, TypeError),
        ({"D": 2.5}, ValueError),
    ],
)
def test_explorer_rejects_bad_settings(kwargs, exc):
    with pytest.raises(exc):
        widgets.roofline_explorer(**kwargs)


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 2**16),
    D=st.integers(1, 2**16),
    F=st.integers(1, 2**16),
    chip=st.sampled_from(sorted(hardware.CHIPS)),
)
def test_matmul_point_bound_agrees_with_critical_intensity(B, D, F, chip):
    p = widgets.matmul_point(chip, "bf16", B, D, F)
    # Compute-bound exactly when the intensity reaches the chip's critical intensity.
    assert (p.time.bound == "compute") == (p.time.intensity >= p.critical_intensity * (1 - 1e-12)) or abs(
        p.time.intensity / p.critical_intensity - 1
    ) < 1e-9
    assert p.time.lower <= p.time.upper <= 2 * p.time.lower
    assert f"[{B}, {D}]" in p.summary()


def test_matmul_flops_vs_batch_reaches_the_roof_at_the_exact_critical_batch():
    # The book's problem: int8 weights, bf16 activations and FLOPs, D = F in {4096, 1024}, exact bytes.
    c = hardware.get_chip("v5e")
    fig = plots.matmul_flops_vs_batch((4096, 1024), chip="v5e", w_dtype="int8", batch_range=(1, 512))
    ax = fig.axes[0]
    crit = c.bf16_flops / c.hbm_bw
    for D in (4096, 1024):
        b, y = (np.asarray(v, float) for v in _line(ax, f"D = F = {D}").get_data())
        # Independent restatement: FLOPs 2BD^2 over max(FLOPs / C, (2BD + D^2 + 2BD) / W).
        flops, nbytes = 2.0 * b * D * D, 2.0 * b * D + D * D + 2.0 * b * D
        np.testing.assert_allclose(y, flops / np.maximum(flops / c.bf16_flops, nbytes / c.hbm_bw), rtol=1e-12)
        # Hand solution of 2BD / (4B + D) >= C/W: B >= (C/W) D / (2D - 4 C/W).
        b_star = int(np.ceil(crit * D / (2 * D - 4 * crit)))
        assert f"from B = {b_star}" in _line(ax, f"D = F = {D}").get_label()
        assert y.max() == pytest.approx(c.bf16_flops)
    # A model dimension too small to ever reach the roof (2D <= 4 C/W) says so.
    fig = plots.matmul_flops_vs_batch(256, chip="v5e", w_dtype="int8", batch_range=(1, 64))
    assert "bandwidth-bound throughout" in _line(fig.axes[0], "D = F = 256").get_label()


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"dims": ()}, ValueError),
        ({"batch_range": (0, 8)}, ValueError),
        ({"chip": "v99"}, ValueError),
        ({"w_dtype": "int3"}, ValueError),
        ({"dims": (0,)}, ValueError),
    ],
)
def test_matmul_flops_vs_batch_rejects_bad_input(kwargs, exc):
    with pytest.raises(exc):
        plots.matmul_flops_vs_batch(**{"batch_range": (1, 8), **kwargs})
