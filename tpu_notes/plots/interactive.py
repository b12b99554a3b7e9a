"""Explorer figures that stay interactive in the static HTML book: a Plotly figure over a small precomputed grid.

An explorer of :mod:`tpu_notes.widgets` needs a live kernel: each change of a control calls the library again.
The HTML book has no kernel, so here the library is called ahead of time, once per combination of a few control
values (the explorer's own choices, subsampled), and the answers are written into the page as a Plotly figure
(plain JSON, `Plotly's figure schema <https://plotly.com/javascript/reference/>`_) with one slider or row of
buttons per control. A short script, no Python, draws the grid cell the controls point at and writes its summary
below the figure.

* :func:`control` declares one control (its label, its values, the starting one, slider or buttons);
* :func:`explorer_spec` evaluates a function on every combination and returns the figure's data as plain dicts
  (floats rounded to 4 significant digits, so the stored output does not depend on the last bits of the CPU's
  arithmetic; traces shared by several cells are stored once);
* :func:`explorer_html` renders that spec as ``<div id=...></div><script>...</script>`` (the id is derived from
  the spec's content, never random). The page must load plotly.js (the book serves its own copy, see
  ``tools/vendor_js.py``); without it the snippet says so instead of drawing. Given a ``fallback`` PNG
  (:func:`figure_png` of the explorer's static figure), the snippet also carries that picture in ``<noscript>``:
  a page rendered without JavaScript shows it in place of the interactive figure, any other page does not.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Control", "control", "explorer_spec", "explorer_html", "figure_png", "round_floats", "MAX_CELLS"]

#: The most grid cells one figure may hold (product of the controls' sizes): keeps a page's snippet small.
MAX_CELLS = 400
#: Significant digits kept for every float written into the figure.
SIGNIFICANT = 4
_KINDS = ("slider", "buttons")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")


@dataclass(frozen=True)
class Control:
    """One control of an interactive figure: a slider (ordered values) or a row of buttons (a few choices)."""

    label: str  # shown beside the control, e.g. "B (tokens)"
    values: tuple  # the values passed to the cell function, in order
    names: tuple  # what the control shows for each value
    start: int  # index of the value the figure starts from
    kind: str  # "slider" or "buttons"


def control(label: str, values: Sequence, start=None, names: Sequence | None = None, kind: str = "slider") -> Control:
    """Declare a control: ``values`` (1 to 24 of them), the starting value ``start`` (one of ``values``; default
    the first), display ``names`` (default ``str`` of each value) and ``kind`` (``"slider"`` or ``"buttons"``)."""
    if not isinstance(label, str) or not label.strip():
        raise TypeError(f"label must be a non-empty string; got {label!r}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"values must be a list or tuple; got {type(values).__name__}")
    values = tuple(values)
    if not 1 <= len(values) <= 24:
        raise ValueError(f"values must hold 1 to 24 choices; got {len(values)}")
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}")
    if names is None:
        names = tuple(str(v) for v in values)
    else:
        if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
            raise TypeError(f"names must be a list or tuple of strings; got {type(names).__name__}")
        names = tuple(names)
        if len(names) != len(values) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"names must be {len(values)} strings, one per value; got {names!r}")
    if start is None:
        index = 0
    else:
        matches = [i for i, v in enumerate(values) if v == start]
        if not matches:
            raise ValueError(f"start must be one of the values {values!r}; got {start!r}")
        index = matches[0]
    return Control(label=label, values=values, names=names, start=index, kind=kind)


def round_floats(obj, digits: int = SIGNIFICANT):
    """``obj`` as plain JSON data: floats rounded to ``digits`` significant digits (NaN and infinities become
    ``None``, which Plotly leaves as a gap), tuples and NumPy arrays as lists, NumPy scalars as Python numbers."""
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 17:
        raise ValueError(f"digits must be an integer from 1 to 17; got {digits!r}")
    return _round(obj, digits)


def _round(obj, digits):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _round(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round(v, digits) for v in obj]
    tolist = getattr(obj, "tolist", None)  # NumPy arrays and scalars
    if callable(tolist):
        return _round(tolist(), digits)
    raise TypeError(f"cannot write {type(obj).__name__} into a figure; use numbers, strings, lists and dicts")


def explorer_spec(name: str, controls: Sequence[Control], cell: Callable, layout: dict | None = None) -> dict:
    """Evaluate ``cell(*values)`` on every combination of the controls' values; return the figure as plain dicts.

    ``cell`` returns a dict with ``"data"`` (a list of Plotly traces), optionally ``"layout"`` (keys merged into
    the base ``layout`` for that cell, e.g. a title) and ``"text"`` (the summary shown under the figure). A
    ``ValueError`` from ``cell`` (a setting the library refuses) becomes an empty cell showing the message.
    ``name`` (lowercase letters, digits, ``-`` and ``_``) prefixes the figure's element id. Three layout keys are
    this module's own: ``plot_height`` (pixels of the axes, default 330; the controls add their own room),
    ``margin_left`` (pixels, default 90), ``margin_top`` (extra pixels above the axes, default 0) and
    ``legend_rows`` (rows of the legend, default 1: a ``legend`` is always laid out horizontally below the axes'
    title, above the sliders, whatever position it asks for).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name must be lowercase letters, digits, '-' or '_' (starting with a letter); got {name!r}")
    if isinstance(controls, Control) or not isinstance(controls, Sequence) or not controls:
        raise TypeError("controls must be a non-empty list of Control (see control())")
    if not all(isinstance(c, Control) for c in controls):
        raise TypeError("controls must be a non-empty list of Control (see control())")
    if not callable(cell):
        raise TypeError(f"cell must be callable; got {type(cell).__name__}")
    if layout is not None and not isinstance(layout, dict):
        raise TypeError(f"layout must be a dict or None; got {type(layout).__name__}")
    n_cells = math.prod(len(c.values) for c in controls)
    if n_cells > MAX_CELLS:
        sizes = " x ".join(str(len(c.values)) for c in controls)
        raise ValueError(f"controls make {sizes} = {n_cells} cells; at most {MAX_CELLS} fit in a page")
    traces, index, cells = [], {}, []
    for combo in itertools.product(*(c.values for c in controls)):
        try:
            out = cell(*combo)
        except ValueError as err:
            cells.append({"t": [], "text": f"not available: {err}"})
            continue
        if not isinstance(out, dict) or not isinstance(out.get("data"), list):
            raise TypeError("cell must return a dict with a 'data' list of traces")
        ids = []
        for trace in out["data"]:
            if not isinstance(trace, dict):
                raise TypeError(f"cell must return traces that are dicts; got a {type(trace).__name__}")
            key = json.dumps(round_floats(trace), sort_keys=True, allow_nan=False)
            if key not in index:
                index[key] = len(traces)
                traces.append(json.loads(key))
            ids.append(index[key])
        entry = {"t": ids}
        if out.get("layout"):
            entry["layout"] = round_floats(out["layout"])
        if out.get("text"):
            entry["text"] = str(out["text"])
        cells.append(entry)
    spec = {
        "controls": [{"label": c.label, "names": list(c.names), "start": c.start, "kind": c.kind} for c in controls],
        "traces": traces,
        "cells": cells,
        "layout": round_floats(layout or {}),
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    spec["id"] = f"tpu-notes-{name}-{digest}"
    return spec


def _control_layout(spec: dict) -> dict:
    """Plotly ``sliders`` and ``updatemenus`` for the spec's controls, and the figure's height and margins."""
    controls = spec["controls"]
    sliders = [c for c in controls if c["kind"] == "slider"]
    rows = [c for c in controls if c["kind"] == "buttons"]
    base = spec["layout"]
    plot_h = int(base.get("plot_height", 330))  # pixels of the plotting area (the axes and their labels)
    top = 40 + 40 * len(rows) + int(base.get("margin_top", 0))
    # A legend goes below the axes' title, in a band of its own above the sliders (never over the data).
    legend_h = 24 * int(base.get("legend_rows", 1)) if base.get("legend") and base.get("showlegend", True) else 0
    bottom = 56 + legend_h + 70 * len(sliders)
    out = {"sliders": [], "updatemenus": [], "annotations": []}
    for k, c in enumerate(rows):
        y = 1 + (top - 34 - 40 * k) / plot_h  # paper coordinates: 1 is the top of the plotting area
        out["updatemenus"].append(
            {
                "type": "buttons",
                "direction": "right",
                "showactive": True,
                "active": c["start"],
                "x": 0.0,
                "xanchor": "left",
                "y": y,
                "yanchor": "top",
                "pad": {"t": 0, "b": 0, "l": 0, "r": 0},
                "font": {"size": 11},
                "buttons": [{"label": n, "method": "skip", "args": [None]} for n in c["names"]],
            }
        )
        out["annotations"].append(
            {
                "text": c["label"],
                "x": 0.0,
                "xref": "paper",
                "xanchor": "right",
                "y": y,
                "yref": "paper",
                "yanchor": "top",
                "showarrow": False,
                "xshift": -6,
                "yshift": -3,
                "font": {"size": 11},
            }
        )
    for k, c in enumerate(sliders):
        out["sliders"].append(
            {
                "active": c["start"],
                "x": 0.0,
                "len": 1.0,
                "xanchor": "left",
                "y": -(58 + legend_h + 70 * k) / plot_h,
                "yanchor": "top",
                "pad": {"t": 4, "b": 4},
                "currentvalue": {"prefix": c["label"] + ": ", "font": {"size": 11}},
                "font": {"size": 10},
                "steps": [{"label": n, "method": "skip", "args": [None]} for n in c["names"]],
            }
        )
    if legend_h:
        legend = dict(base["legend"])
        legend.update(orientation="h", x=0, xanchor="left", y=-54 / plot_h, yanchor="top", yref="paper")
        out["legend"] = legend
    out["height"] = plot_h + top + bottom
    title = dict(base.get("title") or {})
    if title:
        out["title"] = {
            **title,
            "x": 0,
            "xref": "container",
            "xanchor": "left",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 8, "l": 8},
        }
    out["margin"] = {"t": top, "b": bottom, "l": int(base.get("margin_left", 90)), "r": 20}
    return out


# The figure's script. Reads every control's position, picks the grid cell (row-major over the controls, the first
# control slowest) and draws it with Plotly.react; the base layout is copied for each draw so nothing accumulates.
_SCRIPT = """(function () {
var spec = %s;
var gd = document.getElementById(spec.id), note = document.getElementById(spec.id + "-text");
if (!gd) return;
if (!window.Plotly) { note.textContent = "This figure needs plotly.js, which this page did not load."; return; }
var sliders = [], menus = [];
spec.controls.forEach(function (c, i) { (c.kind === "slider" ? sliders : menus).push(i); });
function positions() {
  var at = spec.controls.map(function (c) { return c.start; }), lay = gd.layout || {};
  sliders.forEach(function (i, k) { if (lay.sliders && lay.sliders[k]) at[i] = lay.sliders[k].active || 0; });
  menus.forEach(function (i, k) { if (lay.updatemenus && lay.updatemenus[k]) at[i] = lay.updatemenus[k].active || 0; });
  return at;
}
function merge(a, b) {
  Object.keys(b).forEach(function (k) {
    var v = b[k];
    if (k === "annotations" && Array.isArray(a[k])) a[k] = a[k].concat(v);
    else if (v && typeof v === "object" && !Array.isArray(v) && a[k] && typeof a[k] === "object") merge(a[k], v);
    else a[k] = v;
  });
  return a;
}
function draw() {
  var at = positions(), flat = 0;
  spec.controls.forEach(function (c, i) { flat = flat * c.names.length + at[i]; });
  var cell = spec.cells[flat], layout = JSON.parse(JSON.stringify(spec.figure));
  sliders.forEach(function (i, k) { layout.sliders[k].active = at[i]; });
  menus.forEach(function (i, k) { layout.updatemenus[k].active = at[i]; });
  if (cell.layout) merge(layout, JSON.parse(JSON.stringify(cell.layout)));
  var data = cell.t.map(function (t) { return JSON.parse(JSON.stringify(spec.traces[t])); });
  note.textContent = cell.text || "";
  gd.setAttribute("data-cell", String(flat));
  gd.style.height = layout.height + "px";
  return window.Plotly.react(gd, data, layout, {displaylogo: false});
}
draw().then(function () {
  gd.on("plotly_sliderchange", draw);
  gd.on("plotly_buttonclicked", function () { setTimeout(draw, 0); });
});
})();"""


def figure_png(fig) -> bytes:
    """``fig`` as the PNG the book shows for a figure (its own dpi, tight bounding box, no software stamp), then
    closed: the picture an explorer's ``<noscript>`` fallback carries."""
    import io

    import matplotlib.figure
    import matplotlib.pyplot as plt

    if not isinstance(fig, matplotlib.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure; got {type(fig).__name__}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def explorer_html(spec: dict, fallback: bytes | None = None) -> str:
    """The HTML snippet of an :func:`explorer_spec`: a ``div`` for the figure, a ``pre`` for the summary and the
    script that draws the cell the controls point at. ``fallback`` (PNG bytes, e.g. from :func:`figure_png`) is the
    static figure of the starting settings, shown inside ``<noscript>``: only where the page runs no script, so a
    reader sees one drawing either way. Byte-for-byte the same for the same arguments."""
    if not isinstance(spec, dict) or not {"id", "controls", "traces", "cells", "layout"} <= set(spec):
        raise TypeError("spec must be the dict explorer_spec() returns")
    if fallback is not None and (not isinstance(fallback, bytes) or not fallback.startswith(b"\x89PNG")):
        raise TypeError("fallback must be the bytes of a PNG image (see figure_png) or None")
    figure = dict(spec["layout"])
    figure.pop("margin_left", None)
    figure.pop("plot_height", None)
    figure.pop("margin_top", None)
    figure.pop("legend_rows", None)
    figure.update(_control_layout(spec))
    figure["annotations"] = list(spec["layout"].get("annotations", [])) + figure["annotations"]
    payload = {k: spec[k] for k in ("id", "controls", "traces", "cells")}
    payload["figure"] = round_floats(figure)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    text = text.replace("</", "<\\/")  # a summary can never close the script early
    div_id = spec["id"]
    flat = 0
    for c in spec["controls"]:
        flat = flat * len(c["names"]) + c["start"]
    # The starting cell's summary, for a viewer that runs no script (the script rewrites it when it draws).
    first = html.escape(spec["cells"][flat].get("text", ""))
    still = ""
    if fallback is not None:
        import base64

        data = base64.b64encode(fallback).decode("ascii")
        still = (
            f'<noscript><img class="tpu-notes-explorer-fallback" style="max-width: 100%" '
            f'alt="the figure at its starting settings" src="data:image/png;base64,{data}"></noscript>'
        )
    return (
        f'<div class="tpu-notes-explorer">{still}'
        f'<div id="{div_id}" class="tpu-notes-explorer-figure"></div>'
        f'<pre id="{div_id}-text" class="tpu-notes-explorer-text">{first}</pre>'
        f"<script>{_SCRIPT % text}</script></div>"
    )
