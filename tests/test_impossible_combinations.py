"""Impossible combinations: arguments that each pass their own check but cannot be taken together.

Issue 35's first pattern: a step time for more FSDP shards than sequences, a training memory for a tensor degree that
does not divide the heads, an MFU far above 1, a serving layout whose tensor degree cannot hold whole heads. Each row
of :data:`COMBINATIONS` is one such call; it must raise ``ValueError``/``TypeError`` naming one of the arguments the
caller passed (``names``), or return an answer the row's ``sane`` accepts (a plan whose every layout is rejected with
its reason is such an answer), within the hostile suite's CPU and memory caps (``tests/hostile_limits.py``). Never a
silent price, never Python's words, never a hang.

A row whose module belongs to another owner and still prices the impossible is marked ``owner``: an ``xfail(strict)``
that turns into a failure the day the owner's fix lands (remove the mark then). ``benchmarks/hostile_corpus.py``
counts these rows with the rest of the corpus.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hostile_limits import Hang, limits

S = 4096  # tokens per sequence of the training rows
M = "llama3-8b"  # 32 query heads, 8 KV heads, 32 layers, d_ff 14,336: dense


@dataclass(frozen=True)
class Combination:
    """One impossible call: ``call()`` must refuse naming one of ``names`` (or give a result ``sane`` accepts)."""

    id: str
    target: str  # the dotted name of the function called (what --only filters on)
    call: Callable[[], object]
    names: tuple[str, ...]  # the refusal names one of these: the arguments the caller passed
    owner: str | None = None  # the owner of the module whose fix is pending (an xfail until it lands)
    sane: Callable[[object], bool] | None = None  # an answer that is not a finding


# ----------------------------------------------------------------------------------------------- the calls
def _slice():
    from tpu_notes.topology import Slice

    return Slice("v5p", (4, 4, 4))  # 64 chips


def _par(**kw):
    from tpu_notes.training import Parallelism

    return Parallelism(**kw)


#: (label, parallelism degrees, sequences, seq_len, the names a refusal may use): layouts of llama3-8b on 64 chips
#: whose degrees each pass Parallelism's checks and multiply to the slice, but which the model or the batch cannot
#: take.
TRAINING_LAYOUTS = (
    ("more FSDP shards than sequences", {"fsdp": 64}, 32, S, ("parallelism", "fsdp", "batch_tokens")),
    (
        "microbatches that do not divide the sequences per shard",
        {"fsdp": 16, "pipeline": 4, "microbatches": 12},
        256,
        S,
        ("parallelism", "microbatches"),
    ),
    ("tensor degree that does not divide the heads", {"tensor": 64}, 256, S, ("tensor", "parallelism")),
    ("more pipeline stages than layers", {"pipeline": 64, "microbatches": 64}, 256, S, ("pipeline", "parallelism")),
    ("expert degree on a dense model", {"fsdp": 16, "expert": 4}, 256, S, ("expert", "parallelism")),
    ("context degree that does not divide seq_len", {"fsdp": 8, "context": 8}, 64, 4100, ("context", "seq_len")),
)


def _training_rows() -> list[Combination]:
    from tpu_notes import training as T

    rows = []
    for label, degrees, seqs, seq_len, names in TRAINING_LAYOUTS:

        def step(d=degrees, n=seqs, s=seq_len):
            return T.step_time(M, _par(**d), _slice(), n * s, s)

        def memory(d=degrees, n=seqs, s=seq_len):
            return T.training_memory(M, _par(**d), n * s, s)

        def collectives(d=degrees, n=seqs, s=seq_len):
            return T.predicted_collectives(M, _par(**d), n * s, s)

        def split(d=degrees, n=seqs, s=seq_len):
            return T.batch_split(n * s, s, _par(**d))

        rows.append(Combination(f"step_time: {label}", "tpu_notes.training.step_time", step, names))
        rows.append(Combination(f"training_memory: {label}", "tpu_notes.training.training_memory", memory, names))
        rows.append(
            Combination(
                f"predicted_collectives: {label}", "tpu_notes.training.predicted_collectives", collectives, names
            )
        )
        if label.startswith(("more FSDP", "microbatches")):  # the only rules a batch split is about
            rows.append(
                Combination(
                    f"batch_split: {label}",
                    "tpu_notes.training.batch_split",
                    split,
                    names,
                    sane=lambda result: bool(result.legal),  # a report, not a refusal: it says why not
                )
            )
    rows += [
        Combination(
            "step_time: degrees that multiply to 32 chips on a 64-chip slice",
            "tpu_notes.training.step_time",
            lambda: T.step_time(M, _par(fsdp=32), _slice(), 256 * S, S),
            ("parallelism", "slice"),
        ),
        Combination(
            "map_to_slice: degrees that multiply to 32 chips on a 64-chip slice",
            "tpu_notes.training.map_to_slice",
            lambda: T.map_to_slice(_par(fsdp=32), _slice()),
            ("parallelism", "slice"),
        ),
        Combination(
            "step_time: a batch of less than one sequence",
            "tpu_notes.training.step_time",
            lambda: T.step_time(M, _par(fsdp=64), _slice(), 1000, S),
            ("batch_tokens", "seq_len"),
        ),
        Combination(
            "training_memory: a batch of less than one sequence",
            "tpu_notes.training.training_memory",
            lambda: T.training_memory(M, _par(fsdp=64), 1000, S),
            ("batch_tokens", "seq_len"),
        ),
        Combination(
            "plan: a batch of less than one sequence",
            "tpu_notes.training.plan",
            lambda: T.plan(M, _slice(), 1000, S),
            ("batch_tokens", "seq_len"),
        ),
        Combination(
            "plan: more DCN slices than sequences",
            "tpu_notes.training.plan",
            lambda: T.plan(M, _slice(), 64 * S, S, n_slices=128),
            ("n_slices", "batch_tokens"),
            sane=lambda result: not result.ranked and bool(result.reasons()),  # every layout rejected, with reasons
        ),
        Combination(
            "mfu: a throughput that implies MFU ~1e5",
            "tpu_notes.training.mfu",
            lambda: T.mfu(M, 1e9, "v5p", 1),
            ("tokens_per_s", "n_chips"),
        ),
        Combination(
            "hfu: a throughput that implies HFU ~1e5",
            "tpu_notes.training.hfu",
            lambda: T.hfu(M, 1e9, "v5p", 1, seq_len=S),
            ("tokens_per_s", "n_chips"),
        ),
    ]
    return rows


def _serving_rows() -> list[Combination]:
    from tpu_notes import inference as I

    heads = ("n_chips", "tensor", "heads")
    return [
        Combination(
            "deploy: 64 v5e chips for the 32 query heads of llama3-8b",
            "tpu_notes.inference.deploy",
            lambda: I.deploy(M, "v5e", 64),
            heads,
        ),
        Combination(
            "deploy: 3 H100s for 32 heads and d_ff 14,336",
            "tpu_notes.inference.deploy",
            lambda: I.deploy(M, "h100", 3),
            heads,
        ),
        Combination(
            "sharded_step_time: one model-parallel group of 64 chips for 32 heads",
            "tpu_notes.inference.sharded_step_time",
            lambda: I.sharded_step_time(M, "v5e", 64, 8, S),
            heads,
        ),
    ]


def _system_rows() -> list[Combination]:
    import dataclasses

    from tpu_notes.gpu import GpuCluster
    from tpu_notes.transformer import TransformerConfig, get_model

    def model_with(**kw):
        return lambda: dataclasses.replace(get_model(M), **kw)

    def moe_with(**kw):
        return lambda: TransformerConfig(
            d_model=64, d_ff=128, n_layers=2, n_heads=4, n_kv_heads=2, d_head=16, vocab=256, **kw
        )

    return [
        Combination(
            "GpuCluster: 12 GPUs in nodes of 8",
            "tpu_notes.gpu.GpuCluster",
            lambda: GpuCluster("h100", 12),
            ("n_gpus", "node_size"),
        ),
        Combination(
            "TransformerConfig: 5 KV heads for 32 query heads",
            "tpu_notes.transformer.TransformerConfig",
            model_with(n_kv_heads=5),
            ("n_kv_heads", "n_heads"),
        ),
        Combination(
            "TransformerConfig: 3 experts per token of 2",
            "tpu_notes.transformer.TransformerConfig",
            moe_with(n_experts=2, experts_per_token=3),
            ("experts_per_token", "n_experts"),
        ),
        Combination(
            "TransformerConfig: more dense layers than layers",
            "tpu_notes.transformer.TransformerConfig",
            moe_with(n_experts=4, experts_per_token=2, n_dense_layers=3),
            ("n_dense_layers", "n_layers"),
        ),
    ]


def _mesh_rows() -> list[Combination]:
    def mesh_of(degrees, n):
        def call():
            import jax

            from tpu_notes import parallel

            return parallel.make_mesh(_par(**degrees), devices=jax.devices()[:n])

        return call

    return [
        Combination(
            "make_mesh: degrees that multiply to 4 over 8 devices",
            "tpu_notes.parallel.make_mesh",
            mesh_of({"fsdp": 4}, 8),
            ("parallelism", "devices"),
        ),
        Combination(
            "make_mesh: degrees that multiply to 16 over 8 devices",
            "tpu_notes.parallel.make_mesh",
            mesh_of({"fsdp": 4, "tensor": 4}, 8),
            ("parallelism", "devices"),
        ),
    ]


def _cli(argv: list[str]) -> Callable[[], object]:
    """The command line run in-process: exit status 2 with one line naming an option is a refusal; any other
    status, or a traceback, is returned or raised as it comes."""

    def call():
        from tpu_notes.__main__ import main

        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                status = main(argv)
            except SystemExit as exit_:
                status = exit_.code
        if status == 2:
            raise ValueError(err.getvalue().strip())
        return f"exit status {status}: {out.getvalue()[:120]!r}"

    return call


def _cli_rows() -> list[Combination]:
    plan = ["plan", "--model", M, "--system", "v5p:4x4x4", "--seq-len", "4096"]
    serve = ["serve", "--model", M, "--batch", "8", "--context", "4096"]
    return [
        Combination(
            "cli plan: a batch of less than one sequence",
            "tpu_notes.__main__",
            _cli(plan + ["--batch-tokens", "1000"]),
            ("--batch-tokens", "batch_tokens"),
        ),
        Combination(
            "cli serve: 64 v5e chips for 32 heads",
            "tpu_notes.__main__",
            _cli(serve + ["--system", "v5e", "--chips", "64"]),
            ("--chips", "--system", "chips"),
        ),
        Combination(
            "cli serve: a v5e:8x8 slice for 32 heads",
            "tpu_notes.__main__",
            _cli(serve + ["--system", "v5e:8x8"]),
            ("--system", "system"),
        ),
    ]


COMBINATIONS: tuple[Combination, ...] = tuple(
    _training_rows() + _serving_rows() + _system_rows() + _mesh_rows() + _cli_rows()
)


# ----------------------------------------------------------------------------------------------- the test
def _named(names: tuple[str, ...], message: str) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_-]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names)


def classify(row: Combination) -> tuple[str, str | None]:
    """``(outcome, problem)`` of one row, in the outcomes of ``hostile_limits.OUTCOMES``."""
    try:
        with limits():
            result = row.call()
    except Hang:
        return "hang", "still running at the CPU-time cap"
    except MemoryError:
        return "memory", "ran out of the memory budget"
    except (ValueError, TypeError) as err:
        if _named(row.names, str(err)):
            return "refused", None
        return "unnamed", f"{type(err).__name__} names none of {row.names}: {str(err)[:160]}"
    except Exception as err:  # noqa: BLE001 - any other exception is the finding
        return "python", f"raised {type(err).__name__}: {str(err)[:160]}"
    if row.sane is not None and row.sane(result):
        return "sane", None
    return "silent", f"returned {str(result)[:120]} silently"


def _param(row: Combination):
    marks = [pytest.mark.xfail(strict=True, reason=f"owner: {row.owner}")] if row.owner else []
    return pytest.param(row, marks=marks, id=row.id)


@pytest.mark.parametrize("row", [_param(r) for r in COMBINATIONS])
def test_an_impossible_combination_is_refused_by_name(row):
    outcome, problem = classify(row)
    assert outcome in ("refused", "sane"), f"{row.id}: {outcome}: {problem}"


def test_the_table_covers_every_rule_of_the_issue():
    """Each kind of impossible combination the issue names has at least one row, and ids are unique."""
    ids = [r.id for r in COMBINATIONS]
    assert len(ids) == len(set(ids))
    for needle in (
        "more FSDP shards than sequences",
        "microbatches that do not divide",
        "tensor degree that does not divide the heads",
        "more pipeline stages than layers",
        "expert degree on a dense model",
        "context degree that does not divide seq_len",
        "multiply to 32 chips on a 64-chip slice",
        "MFU",
        "deploy",
        "make_mesh",
        "cli",
    ):
        assert any(needle in i for i in ids), needle
