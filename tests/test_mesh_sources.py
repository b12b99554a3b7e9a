"""Every mesh comes from the chapter's devices: no hidden ``jax.devices()`` and no mesh built around
``tpu_notes.devices``, in the notebooks or the package (issue: runs anywhere, 1 to 8 devices).

On a 1-chip TPU or a 1-GPU runtime, a mesh of ``jax.devices()`` has one device and an 8-way demo raises; the
setup cell's ``DEVICES`` (``devices.demo_devices``) falls back to 8 simulated CPU devices. So the only places that
may ask JAX for devices or build a mesh directly are ``tpu_notes/devices.py`` (the rule) and
``tpu_notes/compat.py`` (the one call of ``jax.make_mesh``, which requires its devices).
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {"tpu_notes/devices.py", "tpu_notes/compat.py"}

#: What must not appear outside ALLOWED, with why.
FORBIDDEN = {
    r"\bjax\.devices\(": "ask tpu_notes.devices (demo_devices/default_devices/cpu_devices) instead",
    r"\bjax\.local_devices\(": "ask tpu_notes.devices instead",
    r"\bjax\.device_count\(": "use len(DEVICES) (the setup cell's devices)",
    r"\bjax\.make_mesh\(": "build meshes with devices.demo_mesh or compat.make_mesh(shape, names, devices)",
    r"\bMesh\(": "build meshes with devices.demo_mesh or compat.make_mesh(shape, names, devices)",
    r"\bmake_mesh\(\s*\([^)]*\)\s*,\s*\([^)]*\)\s*\)": "compat.make_mesh needs its devices",
}


def code_of(path: Path) -> list[tuple[str, str]]:
    """(where, code) pairs: each code cell of a notebook, or the whole of a module."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        return [
            (f"{path.name} cell {i}", "".join(c["source"]))
            for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code"
        ]
    return [(str(path.relative_to(ROOT)), path.read_text())]


def violations(where: str, code: str) -> list[str]:
    found = []
    for line in code.splitlines():
        stripped = re.sub(r"``[^`]*``", "", line.split("#")[0])  # prose in docstrings names these calls
        for pattern, why in FORBIDDEN.items():
            if re.search(pattern, stripped):
                found.append(f"{where}: {line.strip()!r}: {why}")
    return found


SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    p for p in (ROOT / "tpu_notes").rglob("*.py") if str(p.relative_to(ROOT)) not in ALLOWED
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_meshes_come_from_the_chapter_devices(path):
    found = [v for where, code in code_of(path) for v in violations(where, code)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "mesh = jax.make_mesh((2, 4), ('X', 'Y'))",
        "devs = jax.devices()[:8]",
        "n = jax.device_count()",
        "mesh = compat.make_mesh((2, 4), ('X', 'Y'))",
        "m = jax.sharding.Mesh(np.array(devs).reshape(2, 4), names)",
    ],
)
def test_the_check_catches_each_hidden_device_source(line):
    assert violations("example", line)


@pytest.mark.parametrize(
    "line",
    [
        "mesh = devices.demo_mesh((2, 4), ('X', 'Y'), DEVICES)",
        "mesh = compat.make_mesh((2, 4), ('X', 'Y'), devices=DEVICES)",
        "ring = jaxprog.ring_mesh(devices=DEVICES)",
        "x = 1  # jax.devices() in a comment is fine",
        "    the setup cell's devices, never a bare ``jax.devices()`` (a docstring)",
    ],
)
def test_the_check_allows_the_chapter_devices(line):
    assert not violations("example", line)
