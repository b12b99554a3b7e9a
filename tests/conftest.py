"""Shared test setup: 8 simulated CPU devices before anything imports JAX, and the repository root."""

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# nbval's kernels inherit this environment: MPLBACKEND=Agg there would silently drop every figure (plt.show() draws
# nothing, so the stored images would not match), so it is removed; this process itself draws off-screen.
os.environ.pop("MPLBACKEND", None)
import matplotlib  # noqa: E402

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def built_book():
    """Build the HTML book once per test session (tools/build_book.py, warnings as errors); return its html dir.

    The build log is kept in _build/build.log. A failed build fails every test that needs the book.
    """
    import subprocess

    # --if-stale: no rebuild when the inputs (config, toc, every page, vendored JS) hash as at the last build;
    # a lock inside build_book.py serialises concurrent builds.
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_book.py"), "--if-stale"], cwd=ROOT, capture_output=True, text=True
    )
    html = ROOT / "_build" / "html"
    if result.returncode != 0:
        pytest.fail(f"book build failed:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    return html


# Hypothesis: no per-example deadline. On a shared 2-core machine a slow example is load, not a bug, and a
# deadline would make the suite flaky; correctness is what the property tests check.
from hypothesis import settings  # noqa: E402

settings.register_profile("book", deadline=None, derandomize=False)
settings.load_profile("book")
