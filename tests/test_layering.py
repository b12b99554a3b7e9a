"""The package's layers, enforced: every import in ``tpu_notes`` is read from the source and checked against DESIGN.

The rules (``shared/DESIGN.md``, "The package, by layer"):

1. A module imports only from its own layer or a layer below: ground <- systems <- analysis <- measure <- book.
   Function-local imports count as much as top-level ones. Two placements refine DESIGN's sketch: ``collectives``
   (the time of a collective on a ring, a torus or a fat tree) sits with the systems, because a system answers
   "how long does this collective take over these axes" with it; ``transfer`` (host-device copies, measured with
   JAX) sits with the measurements.
2. Nothing outside ``book`` imports ``book`` (exercises, plots, widgets, the CLI).
3. The ground, systems and analysis layers never import JAX; only ``compat`` (the JAX version shim, whose every
   JAX import is inside a function) may, and ``import tpu_notes`` does not load JAX at all.
4. No module imports another module's private name (``from .bench import _helper``).
5. ``training`` and ``inference`` (the analysis of Chapters 5-8) never import ``parallel`` (the JAX training runs).

Each rule is also shown to catch a violation written for the purpose, so that a rule cannot pass vacuously.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tpu_notes"
sys.path.insert(0, str(ROOT / "tools"))

import api_pages  # noqa: E402

#: Layer of each top-level module or subpackage of tpu_notes, lowest first: the API index's layers
#: (``tools/api_pages.py``), so the pages and the rules cannot drift apart.
LAYERS: dict[str, tuple[str, ...]] = {k.lower(): tuple(v) for k, v in api_pages.LAYERS.items()}
RANK = {layer: i for i, layer in enumerate(LAYERS)}
JAX_FREE = ("ground", "systems", "analysis")
assert list(LAYERS) == ["ground", "systems", "analysis", "measurement", "book"]
JAX_ALLOWED = {"compat"}
JAX_ROOTS = ("jax", "jaxlib", "flax", "optax")


def layer_of(top: str) -> str:
    for layer, names in LAYERS.items():
        if top in names:
            return layer
    raise KeyError(top)


@dataclass(frozen=True)
class Import:
    """One import statement found in a module: who imports what (dotted, absolute) and where."""

    module: str  # importing module, dotted (tpu_notes.training.step)
    target: str  # imported module, dotted (tpu_notes.parallel or jax.numpy)
    names: tuple  # names imported from it (from-imports), else ()
    line: int
    local: bool  # inside a function


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if level:
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))
    return name or ""


def imports_of(path: Path, module: str) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node, local: bool):
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, (), child.lineno, local))
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(module, is_package, child.level, child.module)
                names = tuple(a.name for a in child.names)
                found.append(Import(module, target, names, child.lineno, local))
                # ``from . import hardware`` imports the submodule tpu_notes.hardware
                for n in names:
                    if (PACKAGE.parent / (target.replace(".", "/") + f"/{n}.py")).exists() or (
                        PACKAGE.parent / (target.replace(".", "/") + f"/{n}")
                    ).is_dir():
                        found.append(Import(module, f"{target}.{n}", (), child.lineno, local))
            visit(child, inner)

    visit(tree, False)
    return found


def package_imports(root: Path = PACKAGE) -> list[Import]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out += imports_of(path, ".".join(parts))
    return out


def _top(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def violations(imports: list[Import]) -> list[str]:
    """Every import that breaks a rule of the module docstring, as one line each."""
    bad = []
    for imp in imports:
        src_top = _top(imp.module)
        src = layer_of(src_top)
        where = f"{imp.module}:{imp.line}{' (inside a function)' if imp.local else ''}"
        if imp.target.split(".")[0] in JAX_ROOTS:
            if src in JAX_FREE and src_top not in JAX_ALLOWED:
                bad.append(f"{where} imports {imp.target}: the {src} layer never imports JAX")
            continue
        if not imp.target.startswith("tpu_notes.") or imp.target == "tpu_notes":
            continue
        dst_top = _top(imp.target)
        dst = layer_of(dst_top)
        if dst_top == src_top:
            pass
        elif dst == "book" and src != "book":
            bad.append(f"{where} imports {imp.target}: nothing outside the book layer imports the book layer")
        elif RANK[dst] > RANK[src]:
            bad.append(f"{where} imports {imp.target}: {src} may not import {dst} (arrows point down only)")
        if src_top in ("training", "inference") and dst_top == "parallel":
            bad.append(f"{where} imports {imp.target}: the training/inference analysis never imports parallel")
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if private and dst_top != src_top:
            bad.append(f"{where} imports private {private} from {imp.target}")
    return bad


# ------------------------------------------------------------------------------------------------- the package
def test_every_module_has_a_layer():
    tops = {_top(imp.module) for imp in package_imports()}
    unknown = sorted(t for t in tops if not any(t in names for names in LAYERS.values()))
    assert not unknown, f"modules with no layer in tests/test_layering.py LAYERS (and DESIGN): {unknown}"


def test_imports_follow_the_layers():
    bad = violations(package_imports())
    assert not bad, "imports against DESIGN's layers:\n  " + "\n  ".join(bad)


def test_importing_the_package_does_not_load_jax():
    code = "import sys, tpu_notes, tpu_notes.training, tpu_notes.inference; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------------------------------------- the rules bite
def _fake(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    root = tmp_path / "tpu_notes"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return package_imports(root)


@pytest.mark.parametrize(
    "files, fragment",
    [
        ({"units.py": "from .training import step\n", "training/__init__.py": ""}, "ground may not import analysis"),
        (
            {"roofline.py": "def f():\n    from . import parallel\n", "parallel.py": ""},
            "analysis may not import measure",
        ),
        (
            {"bench.py": "from .plots import style\n", "plots/__init__.py": "", "plots/style.py": ""},
            "nothing outside the book layer",
        ),
        ({"topology.py": "import jax.numpy as jnp\n"}, "never imports JAX"),
        ({"training/step.py": "def f():\n    import jax\n"}, "never imports JAX"),
        ({"transfer.py": "from .bench import _probe\n", "bench.py": ""}, "imports private"),
        ({"training/memory.py": "from ..parallel import train\n", "parallel.py": ""}, "never imports parallel"),
    ],
)
def test_each_rule_catches_a_violation(tmp_path, files, fragment):
    found = violations(_fake(tmp_path, files))
    assert any(fragment in line for line in found), found


def test_allowed_imports_pass(tmp_path):
    files = {
        "compat.py": "def f():\n    import jax\n",
        "parallel.py": "from .training import step\nimport jax\n",
        "training/__init__.py": "",
        "training/step.py": "from ..units import fmt\nfrom . import memory\n",
        "training/memory.py": "",
        "plots/x.py": "from ..parallel import train\n",
        "plots/__init__.py": "",
    }
    assert violations(_fake(tmp_path, files)) == []


# ------------------------------------------------------------------------------------------ inference, acyclic
#: The serving modules' layers, bottom first (``tpu_notes.inference``): the counts every step model shares, the one
#: serving step model on them, the teaching views on the engine. A module may import only modules of its own rank or
#: lower; the graph of all intra-package imports, function-level ones included, has no cycle.
INFERENCE_ORDER = ("formulas", "sharding", "engine", "expected", "step", "serving", "long_context", "deployment")

#: Intra-package imports left out of the cycle check, as ``(module, imported module)``: none (a new one needs a
#: reason here, and the check below fails once it is no longer needed).
INFERENCE_EXEMPT: set[tuple[str, str]] = set()


def inference_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of tpu_notes.inference it imports}``, at any level (top-level and inside functions), the
    :data:`INFERENCE_EXEMPT` pairs left out; a package-level import (``from . import x``) counts as ``x``."""
    pkg = "tpu_notes.inference"
    names = {p.stem for p in (root / "inference").glob("*.py")}
    graph: dict[str, set[str]] = {n: set() for n in names}
    for imp in package_imports(root):
        if not imp.module.startswith(pkg + ".") or not imp.target.startswith(pkg + "."):
            continue
        src, dst = imp.module.split(".")[2], imp.target.split(".")[2]
        if src != dst and dst in names and (src, dst) not in INFERENCE_EXEMPT:
            graph[src].add(dst)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_inference_imports_have_no_cycle():
    cycle = find_cycle(inference_graph())
    assert cycle is None, "tpu_notes.inference imports itself in a loop: " + " -> ".join(cycle)


def test_inference_layers_point_down():
    """The step models' own order: the counts, the engine, then the views (``step`` is a view of the engine)."""
    graph = inference_graph()
    rank = {n: i for i, n in enumerate(INFERENCE_ORDER)}
    bad = [
        f"{src} imports {dst}"
        for src in INFERENCE_ORDER
        for dst in sorted(graph[src])
        if rank.get(dst, len(rank)) >= rank[src]
    ]
    assert not bad, "imports against the inference order " + repr(INFERENCE_ORDER) + ":\n  " + "\n  ".join(bad)
    assert graph["formulas"] == set(), "formulas imports nothing of tpu_notes.inference"


def test_inference_exemptions_are_still_needed():
    """An exemption whose import has gone must leave :data:`INFERENCE_EXEMPT` (so the list only shrinks)."""
    pkg = "tpu_notes.inference"
    present = {
        (imp.module.split(".")[2], imp.target.split(".")[2])
        for imp in package_imports()
        if imp.module.startswith(pkg + ".") and imp.target.startswith(pkg + ".") and imp.local
    }
    assert INFERENCE_EXEMPT <= present, f"exemptions no longer needed: {sorted(INFERENCE_EXEMPT - present)}"


def test_the_cycle_check_catches_a_function_level_loop(tmp_path):
    files = {
        "inference/__init__.py": "",
        "inference/a.py": "from .b import x\n",
        "inference/b.py": "def f():\n    from .a import y\n",
    }
    for rel, text in files.items():
        p = tmp_path / "tpu_notes" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert find_cycle(inference_graph(tmp_path / "tpu_notes")) == ["a", "b", "a"]
    (tmp_path / "tpu_notes" / "inference" / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(inference_graph(tmp_path / "tpu_notes")) is None


def test_the_step_models_import_each_other_at_the_top_only():
    """No function-level import among the step models and their views (the loop they used to dodge is gone)."""
    pkg = "tpu_notes.inference"
    local = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in package_imports()
        if imp.local
        and imp.module.startswith(pkg + ".")
        and imp.target.startswith(pkg + ".")
        and imp.module.split(".")[2] in INFERENCE_ORDER
    ]
    assert not local, "function-level imports inside tpu_notes.inference's step models:\n  " + "\n  ".join(local)
