"""``python -m tpu_notes``: the book's command-line entry, one subcommand per job.

- ``plan``: rank training layouts of a model on a TPU slice or GPU cluster under a framework's launch rules, a
  precision recipe and an HBM headroom (Chapters 5 and 6, :func:`tpu_notes.training.plan`);
- ``serve``: one serving step, throughput, the cost of a request and the smallest legal topology (Chapters 7 and 8,
  :mod:`tpu_notes.inference.engine` and :mod:`tpu_notes.inference.cost`);
- ``simulate``: serve a stream of requests on replicas of a deployment (optionally disaggregated) and report the
  latency percentiles, the attainment of an SLO, DistServe's goodput and the cost at the rate served (Chapters 7
  and 8, :func:`tpu_notes.inference.simulate`, :mod:`tpu_notes.inference.goodput`,
  :func:`tpu_notes.inference.cost.cost_at_rate`);
- ``spec``: the chip table, or every figure of a chip with its source (:mod:`tpu_notes.hardware`);
- ``bench``: measure this machine's roofline and compare with the model (Chapter 1, :mod:`tpu_notes.bench`).

The subcommands share one spelling of counts (``parse_count``: ``8k``, ``4Mi``...; each count flag has a documented
maximum, a limit the library prices up to) and one of systems (``_parse_system_arg``: ``v5e:4x4`` for a TPU slice,
``h100:8`` for GPUs, a bare chip name where the size is left to the command); which chip counts may share a model
is judged by :mod:`tpu_notes.rules`, the one legality layer. Bad input, an unsupported model included, prints one
line ``tpu_notes <command>: error: ...`` to stderr and exits with status 2, never a traceback; an unexpected
exception (a bug in tpu_notes) prints one line saying so and exits with status :data:`INTERNAL_ERROR`. ``--help``
explains every flag.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from .inference import cost as _serving_cost
from .system import parse_system
from .topology import Slice, parse_slice  # noqa: F401  (re-exported: tests and readers call tpu_notes.__main__.parse_slice)

_SUFFIX = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}
#: What every count flag of every subcommand accepts (the same words in each flag's --help).
COUNT_HELP = "suffixes k, M, G (powers of 1000: 8k = 8,000) or Ki, Mi, Gi (powers of 1024: 8Ki = 8,192)"
#: Most digits a number on the command line may have, written or implied by its exponent and suffix: more than any
#: real count (10**30 tokens is a billion times what any training run has seen), and small enough that the exact
#: integer it spells costs nothing to build.
MAX_DIGITS = 30
#: The exit status of an unexpected exception: a bug in tpu_notes, not bad input (which exits with 2); the value
#: is ``EX_SOFTWARE`` of BSD's sysexits.h, "an internal software error".
INTERNAL_ERROR = 70
#: Where a bug is reported (the internal-error line says so).
ISSUES = "https://github.com/scale-your-model/scale-your-model/issues"


def parse_count(text: str, name: str = "value") -> int:
    """A positive whole count as the CLI spells it: ``"8k"`` → 8,000 and ``"4M"`` → 4,000,000 (k, M, G, T:
    powers of 1000); ``"8Ki"`` → 8,192 and ``"4Mi"`` → 4,194,304 (Ki, Mi, Gi, Ti: powers of 1024); ``"3e6"`` and
    ``"1024"`` as written. Suffixes are case-insensitive. The value is read exactly (no float rounding) and may
    have at most :data:`MAX_DIGITS` digits (each flag's own maximum is :func:`count_limits`'). Raises
    ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string such as '4M'; got {type(text).__name__}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?)?\s*", text.lower())
    if not m:
        raise ValueError(
            f"{name} must be a positive whole number with an optional suffix k, M, G (powers of 1000) or Ki, Mi, "
            f"Gi (powers of 1024), e.g. 8k or 4Mi; got {text!r}"
        )
    mantissa, exponent = m.group(1).partition("e")[::2]
    if len(mantissa) > MAX_DIGITS + 1 or len(exponent.lstrip("0")) > 2 or int(exponent or 0) > MAX_DIGITS:
        raise ValueError(f"{name} has more than {MAX_DIGITS} digits, more than any real count; got {text!r}")
    value = Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""]
    if value != value.to_integral_value() or value <= 0:
        raise ValueError(f"{name} must be a positive whole number; {text!r} is {value:g}")
    if value.adjusted() >= MAX_DIGITS:
        raise ValueError(f"{name} has more than {MAX_DIGITS} digits, more than any real count; got {text!r}")
    return int(value)


def _count(flag: str):
    """An argparse ``type`` for a count flag: ``parse_count``, its message naming ``flag``."""

    def convert(text: str) -> int:
        try:
            return parse_count(text, flag)
        except (TypeError, ValueError) as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{flag} ")) from None  # argparse names it

    convert.__name__ = "count"  # what argparse calls the type in its messages
    return convert


def _number(flag: str):
    """An argparse ``type`` for a real-valued flag (a price, a probability): a finite number of at most
    :data:`MAX_DIGITS` digits; its range is judged where it is used."""

    def convert(text: str) -> float:
        if sum(ch.isdigit() for ch in text) > MAX_DIGITS:
            raise argparse.ArgumentTypeError(f"has more than {MAX_DIGITS} digits; got {text!r}")
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
        return value

    convert.__name__ = "number"
    return convert


def count_limits() -> dict[str, dict[str, tuple[int, str]]]:
    """Each subcommand's count flags: ``{command: {flag: (maximum, what it is)}}``, the maxima being limits the
    library itself prices up to (each flag's --help gives its maximum; larger values are refused before any
    search starts)."""
    from .inference.engine import MAX_ROWS, MAX_STEP_TOKENS
    from .inference.simulator import MAX_REPLICAS
    from .inference.speculative import MAX_DRAFTS
    from .inference.step import MAX_CHIPS, MAX_CONTEXT
    from .inference.workload import MAX_LENGTH, MAX_REQUESTS
    from .rules import MAX_WORK
    from .training.planner import MAX_MICROBATCHES

    chips = (MAX_CHIPS, "the most chips one step is shared by, tpu_notes.inference.step.MAX_CHIPS")
    context = (MAX_CONTEXT, "the longest context priced, tpu_notes.inference.step.MAX_CONTEXT")
    length = (MAX_LENGTH, "the longest prompt or answer a workload draws, tpu_notes.inference.workload.MAX_LENGTH")
    MAX_BUDGET = _field_maximum("Scheduler", "token_budget")
    return {
        "plan": {
            "--batch-tokens": (
                MAX_STEP_TOKENS,
                "the most tokens the library prices in one step, tpu_notes.inference.engine.MAX_STEP_TOKENS",
            ),
            "--seq-len": context,
            "--slices": chips,
            "--max-context": chips,
            "--max-pipeline": chips,
            "--interleave": (
                MAX_MICROBATCHES,
                "the most interleavings the planner considers, tpu_notes.training.planner.MAX_MICROBATCHES",
            ),
            "--top": (MAX_WORK, "the most candidates one search takes on, tpu_notes.rules.MAX_WORK"),
        },
        "serve": {
            "--batch": (MAX_ROWS, "the most rows one engine step holds, tpu_notes.inference.engine.MAX_ROWS"),
            "--context": context,
            "--chips": chips,
            "--prompt": context,
            "--output": context,
            "--speculate": (MAX_DRAFTS, "the most drafts per round, tpu_notes.inference.speculative.MAX_DRAFTS"),
        },
        "simulate": {
            "--chips": chips,
            "--replicas": (
                MAX_REPLICAS,
                "the most replicas one simulation serves, tpu_notes.inference.simulator.MAX_REPLICAS",
            ),
            "--prompt": length,
            "--output": length,
            "--requests": (
                MAX_REQUESTS,
                "the most requests one workload holds, tpu_notes.inference.workload.MAX_REQUESTS",
            ),
            "--budget": (
                MAX_BUDGET,
                "the largest token budget a scheduler takes, tpu_notes.inference.Scheduler.token_budget",
            ),
        },
    }


def _check_counts(command: str, args) -> None:
    """Refuse a count above its flag's documented maximum (:func:`count_limits`), naming the flag."""
    for flag, (maximum, what) in count_limits().get(command, {}).items():
        value = getattr(args, flag[2:].replace("-", "_"))
        for v in _flat(value) if isinstance(value, list) else (value,):  # a list flag: each of its counts
            if v is not None and v > maximum:
                raise ValueError(f"{flag} must be at most {maximum:,} ({what}); got {v:,}")


#: Dollars per chip-hour ``--price`` may be: the bound :func:`tpu_notes.inference.serving_cost` puts on
#: ``dollars_per_chip_hour``.
MAX_PRICE = _serving_cost.MAX_PRICE

#: How every subcommand names a system (the same words in plan's --system and serve's --system).
SYSTEM_HELP = (
    "a TPU slice as CHIP:AxB or CHIP:AxBxC (e.g. v5e:4x4, v5p:16x16x16), or GPUs as GPU:N (e.g. h100:8; up to "
    "one NVLink node, then whole nodes of a DGX SuperPod, e.g. h100:1024)"
)


def _gpu_system(chip, n: int):
    """``n`` GPUs of ``chip``: one NVLink node (or part of one) up to the node's size, then whole nodes of a DGX
    SuperPod (:func:`tpu_notes.system.parse_system`)."""
    from .inference.engine import system_for

    node = chip.node_size or 8
    if n <= node:
        return system_for(chip, n)
    return parse_system(f"{chip.name}:{n}")


def _parse_system_arg(text: str, flag: str = "--system"):
    """A system as every subcommand spells it: ``"v5e:4x4"`` (a TPU :class:`~tpu_notes.topology.Slice`),
    ``"h100:8"`` (GPUs: a :class:`~tpu_notes.gpu.GpuCluster`), or a bare chip name, returned as its
    :class:`~tpu_notes.hardware.Chip` for the command to size (``plan``: the full pod; ``serve``: the smallest legal
    count). Raises ``ValueError`` naming ``flag``."""
    from .hardware import get_chip

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{flag} must name a system: {SYSTEM_HELP}; got {text!r}")
    name, sep, size = text.strip().partition(":")
    chip = get_chip(name, flag)
    if not sep:
        return chip
    try:
        if chip.kind != "gpu":
            return parse_slice(text.strip())
        return _gpu_system(chip, parse_count(size, f"{flag} {text!r}: the GPU count"))
    except ValueError as err:
        msg = str(err).removeprefix(f"system {text.strip()!r}: ")
        raise ValueError(msg if msg.startswith(flag) else f"{flag} {text.strip()}: {msg}") from None


def _spell_system(system) -> str:
    """The spelling ``_parse_system_arg`` reads back: ``"v5e:4x4"`` for a slice, ``"h100:8"`` for GPUs."""
    shape = getattr(system, "shape", None)
    if shape:
        return f"{system.chip.name}:{'x'.join(map(str, shape))}"
    return f"{system.chip.name}:{system.n_devices}"


def _check_tensor_parallel(model, n: int, argument: str) -> None:
    """Refuse ``n`` chips sharing one replica of ``model`` tensor-parallel unless each holds whole query heads,
    an equal part of the MLP, and its KV heads divide over the chips or are replicated
    (:func:`tpu_notes.rules.whole_heads`, the rule serving engines enforce too: vLLM's ``LlamaAttention``).
    Raises :class:`tpu_notes.rules.Illegal` naming ``argument``."""
    from .rules import whole_heads
    from .transformer import get_model

    whole_heads(get_model(model, "--model"), n, argument=argument)


def _legal_count(model, n: int) -> bool:
    """Whether ``n`` chips may share one replica of ``model`` (:func:`_check_tensor_parallel`)."""
    from .rules import Illegal

    try:
        _check_tensor_parallel(model, n, "chips")
    except Illegal:
        return False
    return True


def _plan_system(text: str):
    """``plan``'s system: a bare TPU chip name is its full pod; a bare GPU name needs its count."""
    from .hardware import Chip

    system = _parse_system_arg(text)
    if isinstance(system, Chip):
        if system.kind == "gpu":
            raise ValueError(f"--system {text!r}: give the GPU count as GPU:N, e.g. {system.name}:64")
        return parse_slice(system.name)
    return system


def _layout_name(p) -> str:
    """A plan's layout as the CLI's table names it: the degrees (DCN and microbatches included), then ``vN`` for N
    interleaved layer groups per stage and ``ag1`` for FSDP weights gathered once per step."""
    return (
        p.parallelism.short()
        + (f" v{p.circular_repeats}" if p.circular_repeats > 1 else "")
        + (" ag1" if p.gather_once else "")
    )


def _plan_table(result, top: int) -> str:
    """The CLI's table of ``result`` (a :class:`~tpu_notes.training.PlanResult` with a ranking), a
    :class:`~tpu_notes.table.Table`: the columns of :meth:`~tpu_notes.training.PlanResult.table`, its tier ``t``
    included, but each layout (with its DCN and microbatch counts) and remat policy printed whole, the units in
    the headers; the legend of the ranking, the tiers and the two step figures (the planner's own) under it."""
    from .table import Column, Table
    from .training.parallelism import SHORT_NAMES

    shown = result.ranked[:top]
    columns = [
        Column("#"),
        Column("t"),
        Column("layout"),
        Column("remat"),
        Column("HBM/chip", "B"),
        Column("roof step", "s"),
        Column("bound"),
        Column("exp step", "s"),
        Column("MFU", "%", digits=3),
    ]
    rows = []
    for i, p in enumerate(shown, 1):
        st, ex = p.step, p.expected
        rows.append(
            (
                i,
                p.tier,
                _layout_name(p),
                str(p.remat),
                p.memory.peak,
                st.total,
                st.bound,
                ex.total if ex else None,
                ex.mfu if ex else None,
            )
        )
    notes = list(result.legend(top))
    used = {SHORT_NAMES[a] for p in shown for a in p.parallelism.mesh_shape()}
    notes.append("layout: " + ", ".join(f"{v} {k}" for k, v in SHORT_NAMES.items() if v in used))
    extra = [
        ("dcnN: N slices joined over DCN", any(p.parallelism.dcn > 1 for p in shown)),
        ("mbN: N microbatches", any("mb" in p.parallelism.short() for p in shown)),
        ("vN: N layer groups per pipeline stage", any(p.circular_repeats > 1 for p in shown)),
        ("ag1: FSDP weights gathered once per step", any(p.gather_once for p in shown)),
    ]
    if any(on for _, on in extra):
        notes.append("        " + ", ".join(text for text, on in extra if on))
    return Table(columns, rows, notes=notes).text()


#: The kinds of parallelism ``--disable`` may name (those :func:`tpu_notes.training.plan` can leave out).
DISABLE_KINDS = ("tensor", "pipeline", "expert", "context", "fsdp")
#: The matmul dtypes ``--dtype`` takes: those of the precision recipes (:mod:`tpu_notes.training.precision`).
PLAN_DTYPES = ("bf16", "fp8")


def _kinds(flag: str, allowed: tuple[str, ...]):
    """An argparse ``type`` for a list flag of names: ``"pipeline,context"`` → ``("pipeline", "context")``, each
    one of ``allowed`` (the flag may also be repeated; :func:`_flat` joins the repeats)."""

    def convert(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(","))
        bad = [n for n in names if n not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(
                f"must name kinds from {', '.join(allowed)} (repeatable, or a comma list); got {text!r}"
            )
        return names

    convert.__name__ = "kinds"
    return convert


def _counts(flag: str):
    """An argparse ``type`` for a list flag of counts: ``"1,2,4"`` → ``(1, 2, 4)``, each read by ``parse_count``
    (the flag may also be repeated; :func:`_flat` joins the repeats)."""
    one = _count(flag)

    def convert(text: str) -> tuple[int, ...]:
        return tuple(one(part) for part in text.split(","))

    convert.__name__ = "count"
    return convert


def _flat(values) -> tuple:
    """The values of a repeatable list flag, in order, each once: ``[("a", "b"), ("b",)]`` → ``("a", "b")``."""
    out: list = []
    for v in values or ():
        for x in v if isinstance(v, tuple) else (v,):
            if x not in out:
                out.append(x)
    return tuple(out)


def _percent(x: float) -> str:
    """A fraction as a percentage of 3 significant digits: 0.195 → ``"19.5%"``, 0.31 → ``"31%"``."""
    return f"{x * 100:.3g}%"


def _check_plan_args(args):
    """``plan``'s flags judged before the search, each refusal naming its flag and the values it takes: the
    system, the model, the remat policies, a batch of whole sequences (:func:`tpu_notes.rules.whole_sequences`),
    the HBM share and the tie margin, the matmul dtype against the chip's published peaks, and the flags that only
    mean something on some systems or frameworks. Returns the system."""
    from .rules import whole_sequences
    from .training.frameworks import FRAMEWORKS, default_framework
    from .training.memory import REMAT
    from .training.precision import RECIPES
    from .transformer import get_model

    system = _plan_system(args.slice)
    if not system.joins_over_dcn and args.slices != 1:
        raise ValueError("--slices joins TPU slices over DCN; a GPU cluster includes its whole network (use 1)")
    get_model(args.model, "--model")
    for policy in args.remat or ():
        if policy not in REMAT:
            raise ValueError(f"--remat must be one of {', '.join(REMAT)}; got {policy!r}")
    whole_sequences(args.batch_tokens, args.seq_len, argument="--batch-tokens")
    if not 0 < args.hbm_fraction <= 1:
        raise ValueError(
            f"--hbm-fraction must be in (0, 1], the share of each chip's HBM a layout may use (0.9 leaves 10% "
            f"headroom); got {args.hbm_fraction:g}"
        )
    if args.tie_within is not None and not 0 <= args.tie_within <= 1:
        raise ValueError(
            f"--tie-within must be in [0, 1], the fraction of a tier's fastest step within which layouts share its "
            f"tier; got {args.tie_within:g}"
        )
    fw = FRAMEWORKS[args.framework] if args.framework else default_framework(system)
    dtype = args.dtype or RECIPES[args.recipe or fw.recipe].matmul_dtype
    chip = system.chip
    have = [d for d in PLAN_DTYPES if getattr(chip, f"{d}_flops", None)]
    if dtype not in have:
        flag = "--dtype" if args.dtype else f"--recipe {args.recipe or fw.recipe} (its {dtype} matmuls)"
        raise ValueError(
            f"{flag}: {chip.long_name} has no published {dtype} matmul peak; give --dtype from {', '.join(have)}"
        )
    if args.uneven_stages and not fw.uneven_edges:
        allowed = ", ".join(n for n, f in FRAMEWORKS.items() if f.uneven_edges)
        raise ValueError(
            f"--uneven-stages shortens the first and last pipeline stages, which {fw.name} does not allow; give "
            f"--framework from {allowed}"
        )
    if args.tensor_across_nodes and system.joins_over_dcn:
        raise ValueError(
            "--tensor-across-nodes lets tensor parallelism leave an NVLink node of a GPU cluster; a TPU slice's ICI "
            "already joins all its chips (give a GPU system such as h100:64)"
        )
    return system


def _plan_kwargs(args) -> dict:
    """What :func:`tpu_notes.training.plan` (and, when no layout uses every chip, ``plan_slices``) searches with,
    from ``plan``'s flags. ``--interleave`` always includes 1 (the plain schedule)."""
    out = dict(
        n_slices=args.slices,
        max_context=args.max_context,
        max_pipeline=args.max_pipeline,
        rank_by=args.rank_by,
        hbm_fraction=args.hbm_fraction,
        framework=args.framework,
        recipe=args.recipe,
        dtype=args.dtype,
        tensor_across_nodes=args.tensor_across_nodes,
        uneven_stages=args.uneven_stages,
        disable=_flat(args.disable),
        tie_within=args.tie_within,
    )
    if args.interleave:
        out["interleave"] = tuple(sorted({1, *_flat(args.interleave)}))
    return out


def _plan_row(p, args, error: float) -> dict:
    """One ranked plan as ``plan --json`` prints it: :meth:`~tpu_notes.training.Plan.row` (its MFU keys renamed
    so each has one meaning: ``mfu_roofline_bound``, the roofline's ceiling, and ``mfu_expected``, the forecast),
    with its degrees, tier and schedule, the tokens each chip and each microbatch hold, the memory by component
    and the communication by kind (bytes, seconds), and the expected step's band at the model's out-of-sample
    ``error``."""
    from dataclasses import fields

    row = p.row()
    row.pop("mfu")
    row["mfu_roofline_bound"] = row.pop("mfu_roofline")
    par, st, ex, mem = p.parallelism, p.step, p.expected, p.memory
    per_shard = args.batch_tokens // args.seq_len // par.batch_shards  # whole sequences (the planner's rule)
    per_microbatch = per_shard // par.microbatches  # whole too: the planner splits shards into whole microbatches
    row.update(
        degrees={**par.mesh_shape(drop_ones=False), "dcn": par.dcn},
        n_chips=par.n_chips,
        microbatches=par.microbatches,
        tier=p.tier,
        gather_once=p.gather_once,
        tokens_per_chip=args.batch_tokens / par.n_chips,
        sequences_per_batch_shard=per_shard,
        sequences_per_microbatch=per_microbatch,
        tokens_per_microbatch_per_chip=per_microbatch * args.seq_len // par.context,
        memory_bytes={**{f.name: getattr(mem, f.name) for f in fields(mem)}, "peak": mem.peak},
        comms_s_by_kind_roofline=dict(st.collectives),
        comms_s_by_kind_expected=dict(ex.collectives) if ex else None,
        expected_error=error,
        step_s_expected_low=ex.total * (1 - error) if ex else None,
        step_s_expected_high=ex.total * (1 + error) if ex else None,
    )
    return row


def _plan_header(args, system, result, error: float) -> str:
    """``plan``'s first line: the model on the system by its readable name, the batch, and the settings every
    figure below depends on: the framework's rules, the precision recipe, the HBM headroom and the error band of
    the expected step."""
    from .training.practitioners import describe_system

    chips = f" ({system.n_devices * args.slices:,} chips)" if system.joins_over_dcn else ""
    return (
        f"{args.model} on {describe_system(system, args.slices)}{chips}, batch {args.batch_tokens:,} "
        f"tokens, sequences of {args.seq_len:,} | {result.framework} rules, {result.recipe} recipe, "
        f"{_percent(1 - result.hbm_fraction)} HBM headroom, expected step ±{_percent(error)} (out-of-sample error)"
    )


def _alternatives(args, system, kwargs) -> list:
    """When no layout uses every chip of a TPU slice: the slices of its pod that can run, fastest first
    (:func:`tpu_notes.training.plan_slices`, with the same search); none for a GPU cluster."""
    if not system.joins_over_dcn:
        return []
    from .training.subslices import plan_slices

    options = plan_slices(args.model, system.chip, args.batch_tokens, args.seq_len, **kwargs)
    return [o for o in options if o.ok]


def _plan(args) -> int:
    from .efficiency import OUT_OF_SAMPLE_ERROR
    from .training import plan
    from .training.planner import DEFAULT_REMAT

    slc = _check_plan_args(args)
    kwargs = _plan_kwargs(args)
    remat = tuple(args.remat) if args.remat else DEFAULT_REMAT
    if getattr(slc, "why_not_schedulable", "") and not args.json:
        _print_schedulable_slices(args, slc, kwargs)
        return 0
    try:
        result = plan(args.model, slc, args.batch_tokens, args.seq_len, remat=remat, **kwargs)
    except NotImplementedError as err:
        raise NotImplementedError(f"--model {args.model} is not supported by plan: {err}") from None
    error = OUT_OF_SAMPLE_ERROR[slc.chip.kind]
    options = [] if result.ranked else _alternatives(args, slc, kwargs)
    if args.json:
        _print_json(_plan_json(args, slc, result, error, options))
    elif not result.ranked:
        _print_no_layout(args, slc, result, error, options)
    else:
        _print_plan(args, slc, result, error)
    return 0


def _print_schedulable_slices(args, slc, kwargs) -> None:
    """Why the slice asked for cannot be scheduled, and the slices of its pod that can, fastest first."""
    from .training.subslices import plan_slices

    print(f"{args.model}: {slc.why_not_schedulable}")
    print("The slices of this pod Cloud TPU schedules, fastest first:")
    options = plan_slices(args.model, slc.chip, args.batch_tokens, args.seq_len, **kwargs)
    print(_slices_table([o for o in options if o.ok] or options, top=min(args.top, 8)))


def _plan_json(args, slc, result, error: float, options: list) -> dict:
    """``plan --json``'s record: the question, the search, the top ranked layouts and, when none can run, the
    smaller slices that can (``options``)."""
    from .training.practitioners import describe_system

    return {
        "model": args.model,
        "system": _spell_system(slc),
        "system_name": describe_system(slc, args.slices),
        "slice": repr(slc),
        "slices": args.slices,
        "framework": result.framework,
        "recipe": result.recipe,
        "hbm_fraction": result.hbm_fraction,
        "tie_within": result.tie_within,
        "expected_error": error,
        "disabled": list(result.disabled),
        "rank_by": args.rank_by,
        "feasible": bool(result.ranked),
        "searched": result.searched,
        "ranked_count": len(result.ranked),
        "rejected_count": len(result.rejected),
        "rejected_reasons": result.reasons(),
        "ranked": [_plan_row(p, args, error) for p in result.ranked[: args.top]],
        "alternatives": [
            {
                "system": _spell_system(o.slice),
                "system_name": describe_system(o.slice),
                "chips": o.chips,
                "legal": o.legal,
                "best_layout": o.best.parallelism.label(),
                "step_s": o.step_s,
                "tokens_per_s": o.tokens_per_s,
            }
            for o in options
        ],
    }


def _rejected_counts(result) -> str:
    """The plan's rejections counted by reason, in one line ("" when none)."""
    return ", ".join(f"{n:,} {r}" for r, n in result.reasons().items())


def _rejections_table(reasons: dict) -> str:
    """The rejected candidates counted by reason, as a :class:`~tpu_notes.table.Table`."""
    from .table import Column, Table

    rows = [(n, r) for r, n in reasons.items()]
    return Table([Column("candidates"), Column("rejected because")], rows).text()


def _slices_table(options, top: int) -> str:
    """The first ``top`` of :func:`~tpu_notes.training.plan_slices`' options as a :class:`~tpu_notes.table.Table`:
    each slice shape (``2x 16x16``: two slices over DCN), the chips it uses and leaves idle, its legal layouts, the
    best one, its expected step, the run's tokens per second and the price of a million tokens, paying for the
    chips used and for the whole pods."""
    from .table import Column, Table

    rows = []
    for o in list(options)[:top]:
        shape = ("" if o.per_pod == 1 else f"{o.per_pod}x ") + "x".join(map(str, o.slice.shape))
        best = _layout_name(o.best) if o.ok else "(none legal)"
        rows.append(
            (
                shape,
                o.chips,
                o.idle_chips,
                o.legal,
                best,
                o.step_s if o.ok else None,
                o.tokens_per_s / 1e6 if o.ok else None,
                o.dollars_per_mtoken_used if o.ok else None,
                o.dollars_per_mtoken_pod if o.ok else None,
            )
        )
    columns = [
        Column("slice"),
        Column("chips"),
        Column("idle"),
        Column("legal"),
        Column("best layout"),
        Column("exp step", "s"),
        Column("throughput", "Mtokens/s"),
        Column("used", "$/Mtoken"),
        Column("pod", "$/Mtoken"),
    ]
    note = "used: paying for the chips used; pod: paying for the whole pods, idle chips included"
    return Table(columns, rows, notes=[note]).text()


def _print_no_layout(args, slc, result, error: float, options: list) -> None:
    """Text output when no layout can run: the rejections by reason, then the smaller slices that can
    (``options``)."""
    from .training.practitioners import describe_system

    reasons = result.reasons()
    counts = _rejected_counts(result)
    print(
        f"No layout can run: all {result.searched:,} candidates of {args.model} on "
        f"{describe_system(slc, args.slices)} were rejected ({counts or 'none searched'})."
    )
    print(_plan_header(args, slc, result, error))
    print(_rejections_table(reasons))
    if options:
        print("\nThe slices of this pod that can run, fastest first:")
        print(_slices_table(options, top=min(args.top, 8)))
    elif isinstance(slc, Slice):
        print("\nNo smaller slice of this pod can run it either.")


def _print_plan(args, slc, result, error: float) -> None:
    """Text output of a plan with runnable layouts: the header, the counts, the table and the best in words."""
    counts = _rejected_counts(result)
    print(_plan_header(args, slc, result, error))
    tie = f"; tiers: steps within {_percent(result.tie_within)} of the tier's fastest" if result.tie_within else ""
    print(f"{len(result.ranked):,} runnable of {result.searched:,} candidates (rejected: {counts or 'none'}){tie}")
    print(_plan_table(result, args.top))
    _print_best(result.ranked[0], args.rank_by, error)


def _print_best(best, rank_by: str, error: float) -> None:
    """The best layout of a plan in words: its roofline and expected figures (the latter with the model's
    out-of-sample ``error`` band) and its placement."""
    from .units import fmt

    print(f"best by the {rank_by} step: {best.parallelism}, remat {best.remat}")
    row = best.row()
    print(
        f"  roofline: step {fmt(row['step_s_roofline'], 's')}, MFU {row['mfu_roofline']:.1%}, "
        f"{fmt(row['tokens_per_s_per_chip_roofline'], 'tokens/s')} per chip (upper bounds on speed)"
    )
    if best.expected is not None:
        ex = best.expected
        print(
            f"  expected: step {fmt(row['step_s_expected'], 's')}, MFU {row['mfu_expected']:.1%}, "
            f"{fmt(row['tokens_per_s_per_chip_expected'], 'tokens/s')} per chip "
            f"({row['bound_expected']}-bound; efficiency model {row['efficiency_model']!r}: a forecast, step "
            f"{fmt(ex.total * (1 - error), 's')} to {fmt(ex.total * (1 + error), 's')} at ±{_percent(error)})"
        )
    print(f"best placement: {best.layout.describe()}")


def _print_json(data) -> None:
    json.dump(data, sys.stdout, indent=1)
    print()


def _gpu_counts(chip) -> list[int]:
    """The GPU counts serve tries: 1 up to one NVLink node (tpu_notes.hardware), then whole nodes up to 4096."""
    node = chip.node_size or 8
    return list(range(1, node + 1)) + [node * k for k in range(2, 4096 // node + 1)]


def _candidate_systems(chip):
    """The systems of ``chip`` serve tries, smallest first: the standard TPU slices; 1..node GPUs, then whole
    nodes as a DGX SuperPod builds them (up to 4096 GPUs; counts it cannot build are skipped)."""
    from .inference import slice_shapes

    if chip.kind == "tpu":
        for shape in slice_shapes(chip):
            yield Slice(chip, shape)
        return
    for n in _gpu_counts(chip):
        try:
            yield _gpu_system(chip, n)
        except ValueError:  # not whole scalable units of a SuperPod
            continue


def _fewest_chips(model, chip, tokens: int, **dtypes):
    """``(system, n)``: the smallest system of ``chip`` (``_candidate_systems``) whose chip count may share one
    replica (``_legal_count``) and whose engine deployment holds the weights and ``tokens`` tokens of KV cache
    beside its reserve; ``(None, None)`` when none does."""
    from .inference.engine import deploy

    for system in _candidate_systems(chip):
        if not _legal_count(model, system.n_devices):
            continue
        d = deploy(model, system, check_memory=False, **dtypes)
        if d.kv_capacity_tokens >= tokens:
            return system, system.n_devices
    return None, None


def _legal_near(model, chip, n: int) -> str:
    """The legal chip counts of ``chip``'s systems just below and just above ``n``."""
    counts = [s.n_devices for s in _candidate_systems(chip)] if chip.kind == "tpu" else _gpu_counts(chip)
    legal = [c for c in counts if _legal_count(model, c)]
    lower = [c for c in legal if c < n][-1:]
    upper = [c for c in legal if c > n][:1]
    return ", ".join(map(str, lower + upper)) or "none"


def _describe_system(system) -> str:
    """A system by its readable name, as ``plan`` names it too (:func:`tpu_notes.training.practitioners.
    describe_system`): ``"v5e 4x4 (16 chips)"`` for a TPU slice, ``"8 x H100"`` for GPUs."""
    if getattr(system, "shape", None):
        return f"{system} ({system.n_devices} chips)"
    return str(system)


def _serve_system(args, given, fewest_system):
    """The system ``serve`` prices: the one ``--system`` spells, or ``--chips`` of its chip, or the smallest legal
    one (``fewest_system``, None when none holds the batch); its chip count must be legal for tensor parallelism
    (:func:`_check_tensor_parallel`)."""
    from .hardware import Chip
    from .inference.engine import system_for
    from .rules import Illegal

    chip = given if isinstance(given, Chip) else given.chip
    if not isinstance(given, Chip):
        if args.chips is not None and args.chips != given.n_devices:
            raise ValueError(f"--chips {args.chips} disagrees with --system {args.system} ({given.n_devices} chips)")
        system, flag = given, f"--system {args.system}"
    elif args.chips is not None:
        try:
            system = system_for(chip, args.chips) if chip.kind == "tpu" else _gpu_system(chip, args.chips)
        except ValueError as err:
            raise ValueError(f"--chips {args.chips}: {err}") from None
        flag = "--chips"
    else:
        return fewest_system
    try:
        _check_tensor_parallel(args.model, system.n_devices, flag)
    except Illegal as err:
        near = _legal_near(args.model, chip, system.n_devices)
        raise Illegal(err.kind, f"{err}; legal counts near it: {near}") from None
    return system


def _check_serve_args(args) -> None:
    """``serve``'s flags judged before anything is priced: the model, the dtypes, the price and utilisation, and
    speculative decoding's flags (each only with ``--speculate``, ``--speculate`` only with ``--acceptance``)."""
    from .inference.speculative import HEAD_DRAFTS
    from .transformer import get_model
    from .units import canonical_dtype, check_positive

    get_model(args.model, "--model")
    canonical_dtype(args.weights, "--weights")
    if args.kv is not None:
        canonical_dtype(args.kv, "--kv")
    if args.compute is not None:
        from .inference.step import COMPUTE_DTYPES

        if canonical_dtype(args.compute, "--compute") not in COMPUTE_DTYPES:
            raise ValueError(f"--compute must be one of {', '.join(COMPUTE_DTYPES)}; got {args.compute!r}")
    if args.price is not None:
        check_positive("--price", args.price, maximum=MAX_PRICE)
    check_positive("--utilisation", args.utilisation, maximum=1.0)
    partners = {
        "--acceptance": args.acceptance,
        "--accept-len": args.accept_len,
        "--draft-model": args.draft_model,
        "--draft-cost": args.draft_cost,
    }
    if args.speculate is None:
        given = [flag for flag, value in partners.items() if value is not None]
        if given:
            raise ValueError(f"{given[0]} only prices speculative decoding: give --speculate K with it")
        return
    if args.acceptance is not None and args.accept_len is not None:
        raise ValueError("give --acceptance (per draft token) or --accept-len (tokens per round), not both")
    if args.acceptance is None and args.accept_len is None:
        raise ValueError(
            "--speculate needs --acceptance (the probability each draft token is kept) or --accept-len (the mean "
            "acceptance length an engine reports)"
        )
    if args.acceptance is not None and not 0.0 <= args.acceptance <= 1.0:
        raise ValueError(f"--acceptance must be in [0, 1]; got {args.acceptance}")
    if args.accept_len is not None and not 1.0 <= args.accept_len <= args.speculate + 1:
        raise ValueError(
            f"--accept-len must be in [1, K + 1] = [1, {args.speculate + 1}] with --speculate {args.speculate} "
            f"(tokens per round, the bonus token included); got {args.accept_len}"
        )
    if args.draft_cost is not None:
        check_positive("--draft-cost", args.draft_cost, allow_zero=True)
    if args.draft_cost is not None and args.draft_model is not None:
        raise ValueError("give --draft-model or --draft-cost, not both")
    if args.draft_model is not None and args.draft_model.strip().lower() not in HEAD_DRAFTS:
        try:
            get_model(args.draft_model, "--draft-model")
        except ValueError as err:
            raise ValueError(f"{err}; or a draft head, one of {', '.join(HEAD_DRAFTS)}") from None


def _nothing_fits(args, chip, peak: int, dtypes: dict) -> ValueError:
    """The refusal when no legal system of ``chip`` holds the batch, naming the largest legal one and its batch."""
    from .inference.engine import deploy

    legal = [s for s in _candidate_systems(chip) if _legal_count(args.model, s.n_devices)]
    largest = ""
    if legal:
        top = deploy(args.model, legal[-1], check_memory=False, **dtypes)
        most = top.max_batch(peak) if top.kv_capacity_tokens >= peak else 0
        largest = f" (the largest legal one, {_describe_system(legal[-1])}, holds at most batch {most})"
    return ValueError(
        f"--batch {args.batch} sequences of {peak:,} tokens of {args.model} do not fit on any one {chip.name} "
        f"system of a legal chip count{largest}; lower --batch or the lengths"
    )


@dataclass(frozen=True)
class _Served:
    """One ``serve`` command priced: what its text and its JSON report."""

    chip: object  # the Chip served on
    system: object  # the system priced (a Slice or a GpuCluster)
    fewest: object  # the smallest legal system that holds the batch and lengths, or None
    deployment: object  # tpu_notes.inference.engine.Deployment of the model on `system`
    step: object  # its EngineStep at --batch and --context
    fits: bool  # weights and the batch's peak caches fit beside the reserve
    cost: object  # tpu_notes.inference.ServingCost, or None (does not fit, or no price)
    no_price: str  # why there is no price although it fits ("" otherwise)
    spec: object  # tpu_notes.inference.SpeculativeResult, or None
    prompt: int  # prompt tokens per request (tokens)
    output: int  # output tokens per request (tokens)
    peak: int  # tokens of cache per sequence at the workload's longest (tokens)
    kv: str  # the KV-cache dtype

    @property
    def chapter7(self) -> float:
        """Chapter 7's step (s): KV + max(weights, FLOPs), the roofline without collectives."""
        r = self.step.roofline_parts
        return r["kv"] + max(r["weights"], r["matmul"] + r["attention"] + r["elementwise"])

    def per_chip(self, x: float) -> float:
        return x / self.deployment.n_chips


def _price_serve(args) -> _Served:
    """Price one ``serve`` command: the system, its step, whether it fits, the cost and speculative decoding."""
    from .hardware import Chip
    from .inference.cost import serving_cost
    from .inference.engine import deploy
    from .inference.speculative import acceptance_from_mean_length, speculative_decoding
    from .units import canonical_dtype

    _check_serve_args(args)
    prompt = args.prompt if args.prompt is not None else args.context
    kv = args.kv or args.weights
    dtypes = dict(weight_dtype=args.weights, kv_dtype=kv)
    peak = max(args.context, prompt + args.output)  # tokens of cache per sequence at the workload's longest
    given = _parse_system_arg(args.system)
    chip = given if isinstance(given, Chip) else given.chip
    try:
        fewest, _ = _fewest_chips(args.model, chip, args.batch * peak, **dtypes)
    except NotImplementedError as err:
        raise NotImplementedError(f"--model {args.model} is not supported by serve: {err}") from None
    system = _serve_system(args, given, fewest)
    if system is None:
        raise _nothing_fits(args, chip, peak, dtypes)
    compute = None if args.compute is None else canonical_dtype(args.compute, "--compute")
    try:
        d = deploy(args.model, system, check_memory=False, compute_dtype=compute, **dtypes)
    except ValueError as err:
        if "compute_dtype" in str(err):
            raise ValueError(str(err).replace("compute_dtype", "--compute")) from None
        raise
    step = d.step(args.batch, args.batch * args.context)
    fits = step.fits and args.batch * peak <= d.kv_capacity_tokens
    priced = fits and (args.price is not None or d.chip.dollars_per_hour is not None)
    cost = None
    if priced:
        cost = serving_cost(
            d, prompt, args.output, args.batch, utilisation=args.utilisation, dollars_per_chip_hour=args.price
        )
    no_price = "" if cost is not None or not fits else f"{d.chip.long_name} has no price in tpu_notes.hardware"
    spec = None
    if args.speculate is not None and fits:
        k = args.speculate
        a = args.acceptance if args.accept_len is None else acceptance_from_mean_length(args.accept_len, k)
        try:  # the draft model on the target's chips, its weights and caches in the target's pool
            spec = speculative_decoding(
                d, args.batch, args.context, k, a, draft=args.draft_model, draft_cost=args.draft_cost
            )
        except ValueError as err:
            flag = "--draft-model" if args.draft_model is not None and "draft" in str(err) else "--batch"
            raise ValueError(f"{flag}: {err}") from None
    return _Served(chip, system, fewest, d, step, fits, cost, no_price, spec, prompt, args.output, peak, kv)


def _serve(args) -> int:
    served = _price_serve(args)
    if args.json:
        _print_json(_serve_json(args, served))
    else:
        _print_serve(args, served)
    return 0


def _serve_json(args, s: _Served) -> dict:
    """``serve --json``: every figure of the text, in SI units."""
    d, step, cost = s.deployment, s.step, s.cost
    data = {
        "model": args.model,
        "chip": s.chip.name,
        "n_chips": d.n_chips,
        "system": _describe_system(s.system),
        "system_spelled": _spell_system(s.system),  # what --system accepts for this system
        "batch": args.batch,
        "context": args.context,
        "prompt_len": s.prompt,
        "output_len": s.output,
        "weight_dtype": args.weights,
        "kv_dtype": s.kv,
        "compute_dtype": d.compute_dtype,
        "weight_only": d.weight_only,
        "fits": s.fits,
        "reserve_fraction": d.reserve_fraction,
        "weight_bytes_per_chip": s.per_chip(d.weight_bytes),
        "kv_bytes_per_chip": s.per_chip(step.kv_tokens * d.kv_bytes_per_token),
        "hbm_bytes_per_chip": d.chip.hbm_bytes,
        "max_batch": d.max_batch(s.peak),
        "step_s": step.total,  # the expected step (the roofline is step_s_roofline)
        "step_s_roofline": step.roofline,
        "step_s_roofline_no_collectives": s.chapter7,
        "step_s_expected": step.total,
        "bound_expected": step.bound,
        "parts_s_expected": {
            k: getattr(step, k)
            for k in ("kv", "weights", "matmul", "attention", "elementwise", "dequant", "collectives", "overhead")
        },
        "parts_s_roofline": dict(step.roofline_parts),
        "tokens_per_s_per_chip_expected": step.tokens_per_s_per_chip,
        "tokens_per_s_per_chip_roofline": step.decode / step.roofline / d.n_chips,
        "efficiency_model": d.efficiency.name,
    }
    for key in ("dollars_per_million_input", "dollars_per_million_output", "dollars_per_request", "prefill_share"):
        data[key] = getattr(cost, key) if cost else None
    data["dollars_per_chip_hour"] = cost.dollars_per_chip_hour if cost else None
    data["price_source"] = cost.price_source if cost else None
    data["utilisation"] = args.utilisation
    data["no_price_reason"] = None if cost else ("does not fit" if not s.fits else s.no_price)
    # the smallest legal system for this batch and context, as --system spells it, and its chips (both None only
    # when no system of one pod / 4096 GPUs holds it)
    data["smallest_topology"] = _spell_system(s.fewest) if s.fewest is not None else None
    data["smallest_topology_chips"] = s.fewest.n_devices if s.fewest is not None else None
    if args.speculate is not None:
        fields = ("k", "acceptance", "verify_cost", "draft_cost", "tokens_per_round", "speedup", "draft")
        data["speculative"] = None if s.spec is None else {k: getattr(s.spec, k) for k in fields}
    return data


def _print_serve(args, s: _Served) -> None:
    """``serve``'s text: the step's parts (expected and roofline), memory, throughput, cost, speculation and the
    smallest legal system."""
    from .units import fmt

    d, step, r = s.deployment, s.step, s.step.roofline_parts
    print(
        f"{args.model} on {_describe_system(s.system)}, batch {args.batch}, context {args.context:,}, "
        f"{args.weights} weights, {s.kv} KV cache, {d.compute_dtype} matmuls"
        + (" (weight-only: the weights are widened every step)" if d.weight_only else "")
    )
    print(
        f"  expected step {fmt(step.total, 's')} = KV {fmt(step.kv, 's')} + max(weights {fmt(step.weights, 's')}, "
        f"matmul {fmt(step.matmul, 's')})"
        + (f" + dequant {fmt(step.dequant, 's')}" if step.dequant else "")
        + f" + collectives {fmt(step.collectives, 's')} + overhead "
        f"{fmt(step.overhead, 's')}  [{step.bound}-bound; a forecast, efficiency model {d.efficiency.name!r}]"
    )
    print(
        f"  roofline step {fmt(step.roofline, 's')} = Chapter 7's step {fmt(s.chapter7, 's')} (KV "
        f"{fmt(r['kv'], 's')} + max(weights {fmt(r['weights'], 's')}, FLOPs {fmt(r['matmul'], 's')})) + "
        f"collectives {fmt(r['collectives'], 's')}  [a floor]"
    )
    kv_bytes = step.kv_tokens * d.kv_bytes_per_token
    room = (
        "fits"
        if s.fits
        else f"does NOT fit (at most batch {d.max_batch(s.peak)} at {s.peak:,} tokens)"
        if d.kv_capacity_tokens
        else "does NOT fit (not even the weights and one token of cache)"
    )
    print(
        f"  memory per chip: weights {fmt(s.per_chip(d.weight_bytes), 'B')} + KV {fmt(s.per_chip(kv_bytes), 'B')} "
        f"of {fmt(d.chip.hbm_bytes, 'B')} ({d.reserve_fraction:.0%} kept in reserve): {room}"
    )
    print(
        f"  throughput {fmt(step.tokens_per_s_per_chip, 'tokens/s')} per chip expected, "
        f"{fmt(step.decode / step.roofline / d.n_chips, 'tokens/s')} at the roofline (upper bound)"
        + ("" if s.fits else "; as if the memory were there")
    )
    _print_serve_cost(args, s)
    if s.spec is not None:
        spec = s.spec
        print(
            f"  speculative decoding, {spec.k} drafts at acceptance {spec.acceptance:.3g}: verify step "
            f"{spec.verify_cost:.2f} decode steps at this batch, draft "
            f"{(spec.draft + ' on the same chips, ') if spec.draft else ''}{spec.draft_cost:.3g} of a step"
            f"{'' if spec.draft or args.draft_cost is None else ' (assumed)'}, "
            f"{spec.tokens_per_round:.2f} tokens per round: speedup {spec.speedup:.2f}x"
            + ("" if spec.pays else " (slower than plain decoding)")
        )
    elif args.speculate is not None:
        print("  speculative decoding: not priced (the setup does not fit)")
    where = _describe_system(s.fewest) if s.fewest is not None else None
    print(
        "  smallest legal topology for this batch and context: "
        + (f"{where} (--system {_spell_system(s.fewest)})" if where else "none in one pod")
    )


def _print_serve_cost(args, s: _Served) -> None:
    """The cost lines of ``serve``'s text, or why there is no price."""
    cost = s.cost
    if cost is not None:
        print(
            f"  cost of requests of {s.prompt:,} tokens in + {s.output:,} out, at ${cost.dollars_per_chip_hour:.3g} "
            f"per chip-hour ({cost.price_source}), {args.utilisation:.0%} utilisation"
            + (" (a floor: `simulate` bills a rate that meets an SLO):" if args.utilisation >= 1.0 else ":")
        )
        print(
            f"    ${cost.dollars_per_million_input:.3g} per million input tokens, "
            f"${cost.dollars_per_million_output:.3g} per million output tokens, "
            f"${cost.dollars_per_request:.3g} per request ({cost.prefill_share:.0%} of it prefill)"
        )
    elif not s.fits:
        where = _describe_system(s.fewest) if s.fewest is not None else None
        need = f"it needs at least {where}" if where else f"no {s.chip.name} system tpu_notes builds holds it"
        print(f"  no price: this setup does not fit; {need}")
    else:
        print(f"  no price: {s.no_price}; give --price (dollars per chip-hour)")


# ---------------------------------------------------------------------------------------------- simulate
#: The scheduler policies ``simulate --scheduler`` names, as the CLI spells them, and the library's names.
SIM_SCHEDULERS = {"chunked": "chunked", "prefill-first": "prefill_first"}
#: Requests ``simulate`` serves unless told: enough for stable p99s over the trimmed window (1,600 requests), few
#: enough that a ``--goodput`` search of a 70B deployment (up to 16 simulations) takes seconds on two cores.
SIM_REQUESTS = 2000
#: The first rate ``simulate --goodput`` probes without ``--rate``, requests/s (the search doubles or halves from it).
SIM_START_RATE = 1.0


def _field_maximum(cls: str, name: str) -> int:
    """The largest value field ``name`` of :mod:`tpu_notes.inference.simulator`'s class ``cls`` takes (its
    annotation's bound), so that a flag's limit is the library's."""
    import typing

    from .inference import simulator

    hint = typing.get_type_hints(getattr(simulator, cls), include_extras=True)[name]
    (bound,) = getattr(hint, "__metadata__", ())
    return int(bound.maximum)


def _disaggregate(text: str) -> tuple[int, int]:
    """``--disaggregate M:CHIPS``: M prefill instances of CHIPS chips each."""
    m = re.fullmatch(r"\s*([^:]+):([^:]+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"must be M:CHIPS, M prefill instances of CHIPS chips each (e.g. 1:8); got {text!r}"
        )
    try:
        instances = parse_count(m.group(1), "M (prefill instances)")
        chips = parse_count(m.group(2), "CHIPS (chips per prefill instance)")
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    most = _field_maximum("Disaggregation", "instances")
    if instances > most:
        raise argparse.ArgumentTypeError(f"{text!r}: M (prefill instances) must be at most {most:,}")
    return instances, chips


_disaggregate.__name__ = "M:CHIPS"


def _seed(text: str) -> int:
    """``--seed``: a whole number in [0, 2**32 - 1] (the workload's seed)."""
    if not re.fullmatch(r"\s*[0-9]{1,10}\s*", text) or int(text) > 2**32 - 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {2**32 - 1:,}; got {text!r}")
    return int(text)


_seed.__name__ = "seed"


def _check_simulate_args(args) -> None:
    """``simulate``'s flags judged before anything is simulated, each refusal naming its flag."""
    from .inference.goodput import MAX_SLO_S
    from .inference.workload import MAX_RATE, MAX_SPAN
    from .transformer import get_model
    from .units import canonical_dtype, check_positive

    get_model(args.model, "--model")
    canonical_dtype(args.weights, "--weights")
    if args.kv is not None:
        canonical_dtype(args.kv, "--kv")
    if args.compute is not None:
        from .inference.step import COMPUTE_DTYPES

        if canonical_dtype(args.compute, "--compute") not in COMPUTE_DTYPES:
            raise ValueError(f"--compute must be one of {', '.join(COMPUTE_DTYPES)}; got {args.compute!r}")
    if args.sharegpt and (args.prompt is not None or args.output is not None):
        flag = "--prompt" if args.prompt is not None else "--output"
        raise ValueError(f"{flag} sets a fixed length; --sharegpt draws ShareGPT-like lengths: give one or the other")
    if not args.sharegpt and (args.prompt is None or args.output is None):
        missing = "--prompt" if args.prompt is None else "--output"
        raise ValueError(f"{missing} is missing: give --prompt and --output (fixed lengths, tokens) or --sharegpt")
    if args.rate is not None:
        check_positive("--rate", args.rate, maximum=MAX_RATE)
        if args.requests / args.rate > MAX_SPAN:
            raise ValueError(
                f"--rate {args.rate:g} makes {args.requests:,} requests span {args.requests / args.rate:.3g} s, more "
                f"than tpu_notes.inference.workload.MAX_SPAN ({MAX_SPAN:.0e} s): at least "
                f"{args.requests / MAX_SPAN:.3g} requests/s"
            )
    elif not args.goodput:
        raise ValueError("give --rate R (Poisson arrivals, requests/s) or --goodput (search the highest rate)")
    slo = {"--ttft-slo": args.ttft_slo, "--tpot-slo": args.tpot_slo, "--tbt-slo": args.tbt_slo}
    for flag, value in slo.items():
        if value is not None:
            check_positive(flag, value, maximum=MAX_SLO_S)
    if (args.ttft_slo is None) != (args.tpot_slo is None) or (args.tbt_slo is not None and args.ttft_slo is None):
        given = next(flag for flag, value in slo.items() if value is not None)
        missing = " and ".join(flag for flag in ("--ttft-slo", "--tpot-slo") if slo[flag] is None)
        raise ValueError(f"{given} needs {missing} too (an SLO bounds both TTFT and TPOT; --tbt-slo is optional)")
    if args.goodput and args.ttft_slo is None:
        raise ValueError("--goodput needs an SLO: give --ttft-slo and --tpot-slo (seconds)")
    if args.attainment is not None:
        if not args.goodput:
            raise ValueError("--attainment is the share --goodput searches for: give --goodput with it")
        if not 0.0 < args.attainment <= 1.0:
            raise ValueError(f"--attainment must be in (0, 1]; got {args.attainment}")
    if args.price is not None:
        check_positive("--price", args.price, maximum=MAX_PRICE)
    if args.link is not None and args.disaggregate is None:
        raise ValueError("--link is the link KV crosses to the decode replicas: give --disaggregate M:CHIPS with it")


@dataclass(frozen=True)
class _Simulated:
    """One ``simulate`` command run: what its text and its JSON report."""

    deployment: object  # tpu_notes.inference.engine.Deployment (its replicas)
    system: object  # one replica's system (a Slice or a GpuCluster)
    workload: object  # tpu_notes.inference.Workload (at the rate reported)
    scheduler: object  # tpu_notes.inference.Scheduler
    disaggregation: object  # tpu_notes.inference.Disaggregation or None
    slo: object  # tpu_notes.inference.goodput.SLO or None
    result: object  # tpu_notes.inference.SimResult at the rate reported (None: --goodput found no rate)
    goodput: object  # tpu_notes.inference.goodput.GoodputResult, or None without --goodput
    cost: object  # tpu_notes.inference.cost.CostAtRate, or None (no result, or no price)
    no_price: str  # why there is no cost ("" when there is one)

    @property
    def n_chips(self) -> int:
        """Chips provisioned: every replica and every prefill instance."""
        d, dis = self.deployment, self.disaggregation
        return d.total_chips + (dis.instances * dis.prefill.n_chips if dis is not None else 0)


def _sim_workload(args, rate: float):
    """The workload ``simulate`` serves: Poisson arrivals at ``rate``, fixed or ShareGPT-like lengths."""
    from .inference.workload import LengthDistribution, Workload

    if args.sharegpt:
        return Workload.poisson(rate, args.requests, seed=args.seed)
    prompt, output = LengthDistribution.fixed(args.prompt), LengthDistribution.fixed(args.output)
    return Workload.poisson(rate, args.requests, prompt, output, seed=args.seed)


def _sim_deploy(args, system, flag: str, replicas: int = 1):
    """Deploy ``--model`` on ``system`` with the dtype flags, a refusal naming ``flag`` (or ``--compute``)."""
    from .inference.engine import deploy
    from .units import canonical_dtype

    compute = None if args.compute is None else canonical_dtype(args.compute, "--compute")
    try:
        return deploy(
            args.model,
            system,
            weight_dtype=args.weights,
            kv_dtype=args.kv or args.weights,
            compute_dtype=compute,
            replicas=replicas,
            prefill_sharding=args.prefill_sharding,
        )
    except ValueError as err:
        if "compute_dtype" in str(err):
            raise ValueError(str(err).replace("compute_dtype", "--compute")) from None
        raise ValueError(f"{flag}: {err}") from None


def _sim_disaggregation(args, chip):
    """The prefill instances of ``--disaggregate M:CHIPS`` over ``--link``, or None."""
    from .inference.engine import system_for
    from .inference.simulator import Disaggregation
    from .rules import Illegal

    if args.disaggregate is None:
        return None
    instances, n = args.disaggregate
    flag = f"--disaggregate {instances}:{n}"
    try:
        _check_tensor_parallel(args.model, n, flag)
    except Illegal as err:
        raise Illegal(err.kind, f"{err}; legal counts near it: {_legal_near(args.model, chip, n)}") from None
    try:
        system = system_for(chip, n) if chip.kind == "tpu" else _gpu_system(chip, n)
    except ValueError as err:
        raise ValueError(f"{flag}: {err}") from None
    prefill = _sim_deploy(args, system, flag)
    try:
        return Disaggregation(prefill, instances, args.link)
    except ValueError as err:
        raise ValueError(f"{'--link' if 'link' in str(err) else flag}: {err}") from None


def _run_simulate(args) -> _Simulated:
    """Run one ``simulate`` command: the deployment, the simulation (or the goodput search) and the cost."""
    from .hardware import Chip
    from .inference.cost import cost_at_rate
    from .inference.goodput import SLO, max_rate_at_attainment
    from .inference.simulator import Scheduler, simulate

    _check_simulate_args(args)
    given = _parse_system_arg(args.system, "--chip")
    chip = given if isinstance(given, Chip) else given.chip
    if not isinstance(given, Chip) and args.chips is not None and args.chips != given.n_devices:
        raise ValueError(f"--chips {args.chips} disagrees with --chip {args.system} ({given.n_devices} chips)")
    workload = _sim_workload(args, args.rate if args.rate is not None else SIM_START_RATE)
    fewest = None
    if isinstance(given, Chip) and args.chips is None:
        try:
            fewest, _ = _fewest_chips(
                args.model, chip, workload.longest, weight_dtype=args.weights, kv_dtype=args.kv or args.weights
            )
        except NotImplementedError as err:
            raise NotImplementedError(f"--model {args.model} is not supported by simulate: {err}") from None
        if fewest is None:
            raise ValueError(
                f"no legal {chip.name} system holds {args.model} and one request of {workload.longest:,} tokens; "
                "lower --prompt/--output or choose another --chip"
            )
    system = _serve_system(args, given, fewest)
    flag = f"--chips {args.chips}" if args.chips is not None else f"--chip {args.system}"
    d = _sim_deploy(args, system, flag, replicas=args.replicas)
    policy = SIM_SCHEDULERS[args.scheduler]
    budget = args.budget if args.budget is not None else Scheduler().token_budget
    scheduler = Scheduler(policy=policy, token_budget=budget, max_seqs=min(Scheduler().max_seqs, budget))
    dis = _sim_disaggregation(args, chip)
    slo = None if args.ttft_slo is None else SLO(args.ttft_slo, args.tpot_slo, args.tbt_slo)
    kw = dict(scheduler=scheduler, disaggregation=dis, router=args.router)
    gp = None
    try:
        if args.goodput:
            target = args.attainment if args.attainment is not None else 0.9
            gp = max_rate_at_attainment(d, workload, slo, target, **kw)
            result = gp.result
            if result is not None:
                workload = _sim_workload(args, gp.rate_per_s)
        else:
            result = simulate(d, workload, **kw)
    except ValueError as err:
        lengths = "--sharegpt's longest" if args.sharegpt else f"--prompt {args.prompt:,} + --output {args.output:,}"
        if "longest request" in str(err):
            raise ValueError(f"{lengths} on {flag}: {err}") from None
        if "workload." in str(err) or "MAX_STEPS" in str(err):  # too much work for one call: name the flags
            msg = str(err).replace("workload.n_requests", "--requests").replace("its output lengths", "--output")
            rate = "" if args.rate is None else f" at --rate {args.rate:g}"
            raise ValueError(f"--requests {args.requests:,} of {lengths}{rate}: {msg}") from None
        raise
    cost, no_price = None, ""
    if result is None:
        no_price = "no rate meets the SLO"
    elif args.price is None and chip.dollars_per_hour is None:
        no_price = f"{chip.long_name} has no price in tpu_notes.hardware; give --price (dollars per chip-hour)"
    else:
        cost = cost_at_rate(result, chip, dollars_per_chip_hour=args.price, slo=slo)
    return _Simulated(d, system, workload, scheduler, dis, slo, result, gp, cost, no_price)


def _simulate(args) -> int:
    run = _run_simulate(args)
    if args.json:
        _print_json(_simulate_json(args, run))
    else:
        _print_simulate(args, run)
    return 0


def _replica_name(system) -> str:
    """One replica as a practitioner writes it: ``"v5e 4x4"`` for a TPU slice, ``"8 x H100"`` for GPUs (in
    parentheses after a replica count: ``"2 x (8 x H100)"``)."""
    return str(system) if getattr(system, "shape", None) else f"({system})"


def _simulate_header(args, s: _Simulated) -> str:
    """``"llama3-70b on 2 x v5e 4x4 (32 chips), int8 weights, int8 KV, int8 matmuls"`` (and the prefill
    instances under disaggregation)."""
    d, dis = s.deployment, s.disaggregation
    where = f"{d.replicas} x {_replica_name(s.system)}"
    if dis is not None:
        where += f" decode + {dis.instances} x {_replica_name(dis.prefill.system)} prefill over {dis.link}"
    return (
        f"{args.model} on {where} ({s.n_chips} chips), {d.weight_dtype} weights, {d.kv_dtype} KV, "
        f"{d.compute_dtype} matmuls" + (" (weight-only)" if d.weight_only else "")
    )


#: simulate's percentile rows: (label, SimResult field, JSON key stem).
_SIM_ROWS = (
    ("TTFT", "ttft", "ttft"),
    ("TPOT", "tpot", "tpot"),
    ("TBT", "tbt", "tbt"),
    ("largest stall", "tbt_max", "largest_stall"),
)


def _simulate_json(args, s: _Simulated) -> dict:
    """``simulate --json``: every figure of the text, in SI units (seconds, requests/s, tokens/s, dollars)."""
    d, dis, r, w = s.deployment, s.disaggregation, s.result, s.workload
    data = {
        "model": args.model,
        "chip": d.chip.name,
        "deployment": _simulate_header(args, s),
        "replica_system": _spell_system(s.system),
        "chips_per_replica": d.n_chips,
        "replicas": d.replicas,
        "n_chips": s.n_chips,
        "weight_dtype": d.weight_dtype,
        "kv_dtype": d.kv_dtype,
        "compute_dtype": d.compute_dtype,
        "prefill_sharding": d.prefill_sharding,
        "scheduler": args.scheduler,
        "token_budget": s.scheduler.token_budget,
        "router": args.router,
        "disaggregation": None
        if dis is None
        else {"instances": dis.instances, "chips_per_instance": dis.prefill.n_chips, "link": dis.link},
        "requests": w.n_requests,
        "lengths": "sharegpt-like" if args.sharegpt else "fixed",
        "prompt_tokens": args.prompt,
        "output_tokens": args.output,
        "seed": args.seed,
        "rate_per_s": w.rate if r is not None else None,
        "slo": None if s.slo is None else {"ttft_s": s.slo.ttft_s, "tpot_s": s.slo.tpot_s, "tbt_s": s.slo.tbt_s},
    }
    for _, name, key in _SIM_ROWS:
        values = getattr(r, name) if r is not None else (None, None, None)
        for p, v in zip(("p50", "p90", "p99"), values):
            data[f"{key}_{p}_s"] = v
    for key in ("output_tokens_per_s", "input_tokens_per_s", "tokens_per_s_per_chip", "mean_batch", "duration"):
        data[key + ("_s" if key == "duration" else "")] = getattr(r, key) if r is not None else None
    for key in ("kv_utilisation", "peak_seqs", "preemptions", "completed"):
        data[key] = getattr(r, key) if r is not None else None
    has_slo = s.slo is not None and r is not None
    data["attainment"] = r.attainment(s.slo) if has_slo else None
    data["slo_requests_per_s"] = r.slo_requests_per_s(s.slo) if has_slo else None
    g = s.goodput
    data["goodput"] = (
        None
        if g is None
        else {
            "rate_per_s": g.rate_per_s,
            "per_chip_per_s": g.per_chip,
            "n_chips": g.n_chips,
            "attainment": g.attainment,
            "target": g.target,
            "probes": [list(p) for p in g.probes],
            "bracket": g.bracket,
        }
    )
    c = s.cost
    fields = (
        "dollars_per_chip_hour",
        "price_source",
        "request_rate",
        "dollars_per_million_input",
        "dollars_per_million_output",
        "dollars_per_request",
        "dollars_per_slo_request",
        "floor_dollars_per_million_input",
        "floor_dollars_per_million_output",
        "utilisation",
        "prefill_share",
    )
    data["cost"] = None if c is None else {k + ("_per_s" if k == "request_rate" else ""): getattr(c, k) for k in fields}
    if c is not None and c.dollars_per_slo_request == float("inf"):
        data["cost"]["dollars_per_slo_request"] = None  # JSON has no infinity: no request met the SLO
    data["no_price_reason"] = s.no_price or None
    return data


def _percentile_table(result) -> str:
    """simulate's latency percentiles (:data:`_SIM_ROWS`) as a :class:`~tpu_notes.table.Table`, one unit per
    column."""
    from .table import Column, Table

    rows = [(label, *getattr(result, name)) for label, name, _ in _SIM_ROWS]
    return Table([Column("latency"), Column("p50", "s"), Column("p90", "s"), Column("p99", "s")], rows).text()


def _print_simulate(args, s: _Simulated) -> None:
    """``simulate``'s text: the deployment, the workload, the percentiles, the SLO's attainment, the goodput and
    the cost at the rate served beside its 100%-busy floor."""
    from .units import fmt

    r, w, g = s.result, s.workload, s.goodput
    print(_simulate_header(args, s))
    lengths = (
        "ShareGPT-like lengths"
        if args.sharegpt
        else f"prompts of {args.prompt:,} tokens, answers of {args.output:,} tokens"
    )
    print(
        f"  {s.scheduler.label()} scheduler, token budget {s.scheduler.token_budget:,}, {args.router} router; "
        f"{w.n_requests:,} requests, {lengths}, seed {args.seed}"
    )
    if g is not None:
        target = f"{g.target:.0%} of requests meeting {s.slo!r}"
        if r is None:
            print(f"  goodput at {target}: none ({g.bracket})")
            return
        print(
            f"  goodput at {target}: {g.rate_per_s:.3g} requests/s, {g.per_chip:.3g} per chip on {g.n_chips} "
            f"chips ({g.attainment:.1%} met; {len(g.probes)} probes, {g.bracket})"
        )
    print(
        f"  at {w.rate:.3g} requests/s (Poisson), percentiles over the middle {1 - r.warmup - r.drain:.0%} of arrivals:"
    )
    print(textwrap.indent(_percentile_table(r), "    "))
    print(
        f"  {fmt(r.output_tokens_per_s, 'tokens/s')} out ({fmt(r.tokens_per_s_per_chip, 'tokens/s')} per chip), "
        f"mean batch {r.mean_batch:.1f}, peak {r.peak_seqs} sequences, KV {r.kv_utilisation:.0%} used, "
        f"{r.preemptions} preemptions; {r.completed:,} requests in {fmt(r.duration, 's')}"
    )
    if s.slo is not None:
        print(
            f"  {s.slo!r}: {r.attainment(s.slo):.1%} of requests meet it; "
            f"{r.slo_requests_per_s(s.slo):.3g} SLO-meeting requests/s at this load"
        )
    c = s.cost
    if c is None:
        print(f"  no price: {s.no_price}")
        return
    per_slo = ""
    if c.dollars_per_slo_request is not None:
        per_slo = f", ${c.dollars_per_slo_request:.3g} per SLO-meeting request"
    print(
        f"  cost at {c.request_rate:.3g} requests/s, ${c.dollars_per_chip_hour:.3g} per chip-hour ({c.price_source}):"
    )
    print(
        f"    ${c.dollars_per_million_input:.3g} per million input tokens, ${c.dollars_per_million_output:.3g} per "
        f"million output tokens, ${c.dollars_per_request:.3g} per request{per_slo}"
    )
    print(
        f"    utilisation {c.utilisation:.0%} of {c.n_chips} chips; were they busy 100% of the time (a floor): "
        f"${c.floor_dollars_per_million_input:.3g} per million input, ${c.floor_dollars_per_million_output:.3g} per "
        "million output"
    )


def chip_spec(chip) -> dict:
    """Every published figure of one chip with its source: ``{field: {"value": ..., "source": ...}}`` (SI units)."""
    from dataclasses import fields

    from .hardware import Chip, get_chip, source

    c = get_chip(chip, "chip")
    out = {}
    for f in fields(Chip):
        value = getattr(c, f.name)
        if f.name in ("sources", "name") or value is None:
            continue
        out[f.name] = {"value": list(value) if isinstance(value, tuple) else value, "source": source(c, f.name)}
    return out


def _spec_overview() -> str:
    """``spec``'s table of every chip's headline figures (:func:`tpu_notes.hardware.spec_table`), a
    :class:`~tpu_notes.table.Table` with the units in the headers."""
    from .hardware import get_chip, spec_table
    from .table import Column, Table

    columns = [
        Column("chip"),
        Column("bf16", "FLOP/s", scale="TFLOP/s"),
        Column("int8", "TOP/s"),
        Column("HBM", "B", scale="GB"),
        Column("HBM bandwidth", "B/s", scale="TB/s"),
        Column("ICI per link, one way", "B/s", scale="GB/s"),
        Column("critical intensity, bf16", "FLOPs/B"),
    ]
    rows = [
        (
            str(get_chip(r["chip"])),
            r["bf16 FLOP/s"],
            None if r["int8 OP/s"] is None else r["int8 OP/s"] / 1e12,
            r["HBM bytes"],
            r["HBM B/s"],
            r["ICI B/s/link (one way)"],
            r["critical intensity (bf16, HBM)"],
        )
        for r in spec_table()
    ]
    return Table(columns, rows, caption="Headline figures per chip (GPU: per GPU); — where none is published").text()


def _spec(args) -> int:
    from .hardware import CHIPS, Chip

    if not args.chips:
        if args.json:
            _print_json({name: chip_spec(name) for name in CHIPS})
        else:
            print(_spec_overview())
            print("\n`python -m tpu_notes spec CHIP` lists every figure of one chip with its source.")
        return 0
    # a chip name, or a system as the other subcommands spell it (its chip): fail on a bad one before printing
    systems = [_parse_system_arg(text, "CHIP") for text in args.chips]
    names = [s.name if isinstance(s, Chip) else s.chip.name for s in systems]
    if args.json:
        _print_json({n: chip_spec(n) for n in names})
        return 0
    for n in names:
        print(_format_chip_spec(n))
        print()
    return 0


def _format_chip_spec(chip) -> str:
    """``spec CHIP``'s text: every published figure of one chip in words, with its unit and its source (a
    :class:`~tpu_notes.table.Table`)."""
    from .hardware import get_chip
    from .table import Column, Table

    c = get_chip(chip, "chip")
    spec = chip_spec(c)
    rows = [(SPEC_FIELDS[k][0], _spec_value(k, item["value"]), item["source"]) for k, item in spec.items()]
    rows = [r for r in rows if r[0] != "name"]
    columns = [Column("figure"), Column("value"), Column("source")]
    return Table(columns, rows, caption=f"{c.long_name} ({c.name})").text()


def _hz(value: float) -> str:
    """A clock in GHz or MHz: ``1.5 GHz``, ``940 MHz``."""
    from .units import fmt

    return fmt(value / 1e9, "GHz") if value >= 1e9 else fmt(value / 1e6, "MHz")


def _shape(value) -> str:
    """A shape as a practitioner writes it: ``16x16``."""
    return "x".join(str(n) for n in value)


def _counted(noun: str):
    """A formatter of a count with its noun: ``_counted("GPUs")(8) == "8 GPUs"`` (singular for 1)."""
    one = noun.removesuffix("es") if noun.endswith("ches") else noun.removesuffix("s")
    return lambda n: f"{n:,} {one if n == 1 else noun}"


def _unit(unit: str):
    from .units import fmt

    return lambda v: fmt(v, unit)


#: How ``spec CHIP`` prints each figure of a :class:`~tpu_notes.hardware.Chip`: the field, the words a reader
#: reads, and a formatter that puts the unit on the value (``--json`` keeps the field names and SI values).
SPEC_FIELDS = {
    "long_name": ("name", str),
    "kind": ("kind", str.upper),
    "bf16_flops": ("bf16 matmul peak", _unit("FLOP/s")),
    "int8_flops": ("int8 matmul peak", _unit("OP/s")),
    "fp8_flops": ("fp8 matmul peak", _unit("FLOP/s")),
    "hbm_bytes": ("HBM capacity", _unit("B")),
    "hbm_bw": ("HBM bandwidth", _unit("B/s")),
    "vmem_bytes": ("VMEM capacity", _unit("B")),
    "vmem_bw": ("VMEM bandwidth", _unit("B/s")),
    "ici_bw_oneway": ("ICI per link, one way", _unit("B/s")),
    "ici_bw_bidi": ("ICI per link, both ways", _unit("B/s")),
    "ici_dims": ("ICI torus", lambda n: f"{n}D"),
    "pod_shape": ("pod", lambda v: f"{_shape(v)} chips"),
    "host_shape": ("chips per host", lambda v: f"{_shape(v)} chips"),
    "max_slice_chips": ("largest slice", _counted("chips")),
    "slice_topologies": ("slice shapes", lambda v: ", ".join(_shape(t) for t in v)),
    "pcie_bw": ("host link (PCIe), one way", _unit("B/s")),
    "dcn_bw": ("DCN per chip", _unit("B/s")),
    "mxu_size": ("MXU", lambda n: f"{n}x{n}"),
    "cores_per_chip": ("TensorCores per chip", _counted("cores")),
    "mxus_per_core": ("MXUs per TensorCore", _counted("MXUs")),
    "clock_hz": ("clock", _hz),
    "vpu_alus_per_lane": ("VPU ALUs per lane", _counted("ALUs")),
    "vregs_per_core": ("vector registers per core", lambda n: f"{n:,} x 4 KiB"),
    "nvlink_bw": ("NVLink per GPU, one way", _unit("B/s")),
    "node_size": ("NVLink node", _counted("GPUs")),
    "dollars_per_hour": ("price per chip-hour", lambda v: f"${v:,.2f}"),
    "base_clock_hz": ("base clock", _hz),
    "tensor_clock_hz": ("tensor-core clock", _hz),
    "sms": ("streaming multiprocessors", _counted("SMs")),
    "subpartitions_per_sm": ("subpartitions per SM", _counted("subpartitions")),
    "fp32_cores_per_subpartition": ("fp32 cores per subpartition", _counted("cores")),
    "tensor_cores_per_sm": ("tensor cores per SM", _counted("tensor cores")),
    "tc_flops_per_cycle": ("one tensor core", lambda n: f"{n:,} FLOPs/cycle"),
    "fp32_flops": ("fp32 vector peak (no FMA)", _unit("FLOP/s")),
    "fp32_fma_flops": ("fp32 vector peak (FMA as 2)", _unit("FLOP/s")),
    "register_bytes_per_sm": ("registers per SM", _unit("B")),
    "smem_bytes_per_sm": ("shared memory / L1 per SM", _unit("B")),
    "l2_bytes": ("L2 cache", _unit("B")),
    "l2_bw": ("L2 bandwidth", _unit("B/s")),
    "nvlink_links": ("NVLink links per GPU", _counted("links")),
    "nvlink_link_bw": ("NVLink per link, one way", _unit("B/s")),
    "nvswitches_per_node": ("NVSwitches per node", _counted("switches")),
    "nvswitch_ports": ("ports per NVSwitch", _counted("ports")),
    "node_egress_bw": ("scale-out per node", _unit("B/s")),
    "hop_latency": ("hop latency", _unit("s")),
}


def _spec_value(field: str, value) -> str:
    """One figure of ``spec CHIP`` with its unit (:data:`SPEC_FIELDS`)."""
    label, show = SPEC_FIELDS[field]
    return show(tuple(value) if isinstance(value, list) else value)


def _bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(args.rest)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``tpu_notes <command>: error: ...``, exit status 2."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        _fail(self.prog.replace("python -m ", "", 1), message)

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102  (argparse's hook)
        namespace, extras = super().parse_known_args(args, namespace)
        _one_value_each(self, namespace)
        return namespace, extras


def _one_value_each(parser: argparse.ArgumentParser, namespace) -> None:
    """Refuse a flag left without its value: argparse reads ``--top=--`` as an empty list, not as text."""
    for action in parser._actions:
        if action.nargs is not None or not action.option_strings:
            continue
        value = getattr(namespace, action.dest, None)
        values = value if isinstance(action, argparse._AppendAction) else [value]
        if any(isinstance(v, list) for v in values or ()):
            parser.error(f"argument {'/'.join(action.option_strings)}: expected one value, got none")


def _fail(where: str, message) -> None:
    print(f"{where}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def _add_count(parser, command: str, flag: str, help: str, **kwargs) -> None:
    """Add count flag ``flag`` of ``command``: parsed by ``parse_count``; its help ends with its maximum."""
    maximum, what = count_limits()[command][flag]
    kind = kwargs.pop("type", _count(flag))
    parser.add_argument(flag, type=kind, help=f"{help}; at most {maximum:,} ({what})", **kwargs)


def _add_number(parser, flag: str, help: str, default: float | None = None) -> None:
    """Add real-valued flag ``flag`` (a price, a share, a probability), parsed by ``_number``."""
    parser.add_argument(flag, type=_number(flag), default=default, help=help)


def _json_and_run(parser, help: str, func) -> None:
    """The last flag of every subcommand, ``--json`` (what it prints described by ``help``), and its function."""
    parser.add_argument("--json", action="store_true", help=help)
    parser.set_defaults(func=func)


#: What each subcommand's --help says it does.
_PLAN = (
    "Rank every data/FSDP/tensor/pipeline/context/expert layout of one training step that the framework will launch "
    "and that fits in HBM, by predicted step time in tiers (layouts within --tie-within of a tier's fastest, which "
    "the efficiency model cannot tell apart, simplest first), with memory per chip and the step time and MFU "
    "twice: the roofline (an upper bound on speed) and the expected (the efficiency model's forecast, with its "
    "out-of-sample error). The first line names the system, the framework, the precision recipe, the HBM headroom "
    "and the error band; when no layout can run it says so first, with the rejections by reason, and on a TPU "
    "lists the slices of the pod that can. Counts take " + COUNT_HELP + "."
)
_SERVE = (
    "Price one generation step with the serving step model (tpu_notes.inference.engine): expected "
    "(the efficiency model's forecast) and at the roofline (a floor), with its collectives; the throughput per "
    "chip; dollars per million input and output tokens and per request of --prompt/--output tokens "
    "(tpu_notes.inference.cost; none for a setup that does not fit); optionally speculative decoding at the "
    "real verify cost; and the smallest legal system that holds the weights and caches. A chip count is legal "
    "when one tensor-parallel replica can span it: each chip holds whole query heads and an equal part of d_ff, "
    "and the count divides or is a multiple of the KV heads (tpu_notes.rules.whole_heads). Counts take "
    + COUNT_HELP
    + "."
)
_SIMULATE = (
    "Serve a stream of requests (Poisson arrivals at --rate, fixed --prompt/--output lengths or --sharegpt) on "
    "--replicas replicas of a deployment behind --router, each filling its steps with --scheduler "
    "(tpu_notes.inference.simulate), optionally with prefill on --disaggregate M:CHIPS instances; print the latency "
    "percentiles over the run's middle 80% (TTFT, TPOT, time between tokens, each request's largest stall), the "
    "share of requests meeting the SLO (--ttft-slo, --tpot-slo, --tbt-slo), with --goodput DistServe's goodput (the "
    "highest rate at which --attainment of requests meet it, per chip; tpu_notes.inference.goodput), and the cost "
    "at the rate served: every provisioned chip paid for the run's wall-clock, per million input and output "
    "tokens and per SLO-meeting request, beside the floor of the same chips busy 100% of the time "
    "(tpu_notes.inference.cost.cost_at_rate). Counts take " + COUNT_HELP + "."
)
_SPEC = "Print the chip table, or every figure of the chips named, each with its source."


def _plan_flags(p) -> None:
    """``plan``'s flags."""
    _plan_question_flags(p)
    _plan_search_flags(p)
    _plan_framework_flags(p)
    _plan_headroom_flags(p)
    _plan_placement_flags(p)
    _json_and_run(p, "print JSON instead of a table", _plan)


def _plan_question_flags(p) -> None:
    """``plan``'s question: the model, the system, the batch and the copies of the slice."""
    p.add_argument(
        "--model",
        required=True,
        help="a preset model name (e.g. llama3-70b, llama3-405b, llama2-13b; models with multi-head latent "
        "attention, such as deepseek-v3, are refused: their activations are not modelled)",
    )
    p.add_argument(
        "--system",
        "--slice",
        dest="slice",
        required=True,
        metavar="SYSTEM",
        help=SYSTEM_HELP + "; a bare TPU chip name (e.g. v5e) is its full pod",
    )
    _add_count(p, "plan", "--batch-tokens", "global batch in tokens; " + COUNT_HELP, required=True)
    _add_count(
        p, "plan", "--seq-len", "tokens per sequence (the batch holds whole sequences); " + COUNT_HELP, required=True
    )
    _add_count(p, "plan", "--slices", "copies of the slice joined by data parallelism over DCN", default=1)


def _plan_search_flags(p) -> None:
    """``plan``'s search: the degrees, remat policies and schedules tried, and how the answer is ranked."""
    _add_count(
        p,
        "plan",
        "--max-context",
        "largest context-parallel degree to try (chips splitting one sequence, ring attention; 1: never)",
        default=16,
    )
    p.add_argument(
        "--remat",
        action="append",
        metavar="POLICY",
        help="remat policy to try (repeatable): none, save_matmul_outputs, save_dot_except_mlp, save_qkv_proj, "
        "full_block, offload_layer_input, mlp_outputs (default: all but mlp_outputs)",
    )
    _add_count(p, "plan", "--top", "how many layouts to print (default 10)", default=10)
    p.add_argument(
        "--rank-by",
        choices=("roofline", "expected"),
        default="expected",
        help="rank by the expected step (the efficiency model's forecast, default) or the roofline one (a floor)",
    )
    _add_count(
        p,
        "plan",
        "--max-pipeline",
        "most pipeline stages to try (1: never pipeline; default 16)",
        default=16,
    )
    _add_count(
        p,
        "plan",
        "--interleave",
        "layer groups per pipeline stage to try besides 1, the plain schedule (repeatable, or a comma list such as "
        "2,4; default 1,2,4)",
        type=_counts("--interleave"),
        action="append",
        metavar="N[,N...]",
    )
    p.add_argument(
        "--disable",
        type=_kinds("--disable", DISABLE_KINDS),
        action="append",
        metavar="KIND[,KIND...]",
        help=f"kinds of parallelism never tried (repeatable, or a comma list): {', '.join(DISABLE_KINDS)}",
    )


def _plan_framework_flags(p) -> None:
    """``plan``'s framework, precision recipe and matmul dtype."""
    from .training.frameworks import FRAMEWORKS
    from .training.precision import RECIPES

    p.add_argument(
        "--framework",
        choices=tuple(FRAMEWORKS),
        default=None,
        help="the training framework whose launch rules apply (pipeline schedules, fused projections, "
        "resharding, context parallelism; tpu_notes.training.frameworks); default maxtext on a TPU slice, megatron "
        "on a GPU cluster",
    )
    p.add_argument(
        "--recipe",
        choices=tuple(RECIPES),
        default=None,
        help="the precision recipe: bytes per parameter of weights, gradients, master copy and moments, and the "
        "matmul dtype (tpu_notes.training.precision); default the framework's",
    )
    p.add_argument(
        "--dtype",
        choices=PLAN_DTYPES,
        default=None,
        help="the matmuls' dtype (fp8: on chips with a published fp8 peak, e.g. h100); default the recipe's",
    )


def _plan_headroom_flags(p) -> None:
    """``plan``'s share of HBM a layout may use, and the width of its tiers."""
    from .training.planner import DEFAULT_HBM_FRACTION

    _add_number(
        p,
        "--hbm-fraction",
        "the share of each chip's HBM a layout may use, in (0, 1]; the rest is headroom for what the memory model "
        f"does not count (compiler scratch, fragmentation) (default {DEFAULT_HBM_FRACTION:g})",
        default=DEFAULT_HBM_FRACTION,
    )
    _add_number(
        p,
        "--tie-within",
        "layouts whose steps lie within this fraction of a tier's fastest share its tier, in [0, 1] (default: the "
        "expected model's out-of-sample error on the chip's kind, tpu_notes.efficiency.OUT_OF_SAMPLE_ERROR; 0 "
        "with --rank-by roofline)",
    )


def _plan_placement_flags(p) -> None:
    """``plan``'s permissions beyond the framework's defaults: where tensor parallelism may span, uneven stages."""
    p.add_argument(
        "--tensor-across-nodes",
        action="store_true",
        help="let tensor parallelism span NVLink nodes of a GPU cluster (default: inside one node)",
    )
    p.add_argument(
        "--uneven-stages",
        action="store_true",
        help="let the first and last pipeline stages hold fewer layers (megatron, torchtitan)",
    )


def _serve_flags(v) -> None:
    """``serve``'s flags."""
    v.add_argument("--model", required=True, help="a preset model name (e.g. llama3-70b, llama3-8b, llama2-13b)")
    v.add_argument(
        "--system",
        "--chip",
        dest="system",
        required=True,
        metavar="SYSTEM",
        help=SYSTEM_HELP + "; or a bare chip name, a TPU (v5e, v5p, v6e...) or a GPU (h100, h200, b200...), to "
        "serve on --chips of it or, without --chips, on its smallest legal system that holds the batch",
    )
    _add_count(v, "serve", "--batch", "sequences generating together", required=True)
    _add_count(v, "serve", "--context", "tokens of context per sequence; " + COUNT_HELP, required=True)
    v.add_argument("--weights", default="bf16", help="weight dtype: bf16, int8, int4, fp8 (default bf16)")
    v.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    v.add_argument(
        "--compute",
        default=None,
        help="dtype the matmuls run in: bf16, fp8, int8 (default: the weight dtype where the chip has a peak for "
        "it, else bf16; a dtype the chip lacks is refused)",
    )
    _add_count(v, "serve", "--chips", "chips to serve on, with a bare chip name (default: the smallest legal system)")
    _add_count(v, "serve", "--prompt", "prompt tokens per request, for the cost (default: --context)")
    _add_count(v, "serve", "--output", "output tokens per request, for the cost (default 512)", default=512)
    _add_number(v, "--price", f"dollars per chip-hour, at most {MAX_PRICE:,.0f} (default: the chip's listed price)")
    _add_number(
        v,
        "--utilisation",
        "share of paid chip-time running steps, (0, 1] (default 1: busy all the time, a price floor)",
        default=1.0,
    )
    _add_count(v, "serve", "--speculate", "also price speculative decoding, K drafts", metavar="K")
    _add_number(v, "--acceptance", "probability each draft token is kept, in [0, 1] (with --speculate)")
    _add_number(
        v,
        "--accept-len",
        "mean acceptance length as vLLM/SGLang report it: tokens per round, the bonus token included, in [1, K + 1] "
        "(with --speculate, instead of --acceptance)",
    )
    v.add_argument(
        "--draft-model",
        default=None,
        help="draft model served on the same chips (e.g. llama3.2-1b), or eagle / mtp for a one-layer draft head on "
        "the target's hidden state (with --speculate)",
    )
    _add_number(
        v,
        "--draft-cost",
        "draft step in target steps, >= 0: an assumption, not a price (with --speculate; default 0, a free draft "
        "such as prompt lookup, or --draft-model's priced step)",
    )
    _json_and_run(v, "print JSON instead of text", _serve)


def _spec_flags(s) -> None:
    """``spec``'s arguments."""
    s.add_argument(
        "chips",
        nargs="*",
        metavar="CHIP",
        help="chip names (e.g. v5e h100), or systems spelled as elsewhere (v5e:4x4, h100:8: their chip); none: "
        "the whole table",
    )
    _json_and_run(s, "print JSON (value and source per figure) instead of text", _spec)


def _simulate_flags(v) -> None:
    """``simulate``'s flags."""
    from .inference.simulator import LINKS, ROUTERS

    v.add_argument("--model", required=True, help="a preset model name (e.g. llama3-70b, llama3-8b, llama2-13b)")
    v.add_argument(
        "--chip",
        "--system",
        dest="system",
        required=True,
        metavar="SYSTEM",
        help="one replica: " + SYSTEM_HELP + "; or a bare chip name with --chips (without --chips: its smallest "
        "legal system that holds the longest request)",
    )
    _add_count(v, "simulate", "--chips", "chips per replica, with a bare chip name")
    _add_count(v, "simulate", "--replicas", "identical replicas behind the router (default 1)", default=1)
    v.add_argument("--weights", default="bf16", help="weight dtype: bf16, int8, int4, fp8 (default bf16)")
    v.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    v.add_argument(
        "--compute",
        default=None,
        help="dtype the matmuls run in: bf16, fp8, int8 (default: the weight dtype where the chip has a peak for "
        "it, else bf16; a dtype the chip lacks is refused)",
    )
    v.add_argument(
        "--prefill-sharding",
        choices=("tensor", "sequence"),
        default="tensor",
        help="how a step's prompt tokens are laid over a replica (tpu_notes.inference.engine.deploy; default tensor)",
    )
    _add_count(v, "simulate", "--prompt", "prompt tokens of every request (fixed; with --output)")
    _add_count(v, "simulate", "--output", "output tokens of every request (fixed; with --prompt)")
    v.add_argument(
        "--sharegpt",
        action="store_true",
        help="ShareGPT-like prompt and answer lengths (tpu_notes.inference.LengthDistribution.sharegpt_like) instead "
        "of --prompt/--output",
    )
    _add_count(v, "simulate", "--requests", f"requests in the stream (default {SIM_REQUESTS:,})", default=SIM_REQUESTS)
    _add_number(v, "--rate", "Poisson arrival rate, requests/s (with --goodput: the first rate probed, default 1)")
    v.add_argument(
        "--goodput",
        action="store_true",
        help="search the highest rate at which --attainment of requests meet the SLO (needs --ttft-slo, --tpot-slo)",
    )
    _add_number(v, "--attainment", "share of requests that must meet the SLO, in (0, 1] (with --goodput; default 0.9)")
    v.add_argument(
        "--scheduler",
        choices=tuple(SIM_SCHEDULERS),
        default="chunked",
        help="chunked prefill (vLLM V1, default) or prefill-first (vLLM V0: decoding pauses for prompts)",
    )
    _add_count(v, "simulate", "--budget", "most tokens (decoded + prompt) per engine step (default 2048, vLLM's)")
    v.add_argument("--router", choices=ROUTERS, default="least-loaded", help="how requests reach the replicas")
    v.add_argument(
        "--disaggregate",
        type=_disaggregate,
        default=None,
        metavar="M:CHIPS",
        help="prefill on M separate instances of CHIPS chips each (same chip and dtypes); the replicas only decode",
    )
    v.add_argument(
        "--link",
        choices=tuple(LINKS),
        default=None,
        help="the link KV crosses from prefill to decode: ici, dcn (TPU), nvlink, ib (GPU) (default ici or nvlink)",
    )
    _add_number(v, "--ttft-slo", "SLO: time to first token at most this, seconds")
    _add_number(v, "--tpot-slo", "SLO: time per output token at most this, seconds")
    _add_number(v, "--tbt-slo", "SLO: each request's largest gap between tokens at most this, seconds (optional)")
    v.add_argument("--seed", type=_seed, default=0, help="seed of the workload's draws (default 0)")
    _add_number(v, "--price", f"dollars per chip-hour, at most {MAX_PRICE:,.0f} (default: the chip's listed price)")
    _json_and_run(v, "print JSON instead of text (seconds, requests/s, tokens/s, dollars)", _simulate)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tpu_notes",
        description="The command-line entry of Scale Your Model: one subcommand per job. Counts take "
        + COUNT_HELP
        + " in every subcommand; systems are spelled "
        + SYSTEM_HELP
        + ".",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{plan,serve,simulate,spec,bench}")
    for name, help, description, add_flags in (
        ("plan", "rank training layouts of a model on a TPU slice or GPU cluster (Chapters 5, 11)", _PLAN, _plan_flags),
        (
            "serve",
            "one serving step, its throughput and the cost of a request (Chapters 7, 8, 11)",
            _SERVE,
            _serve_flags,
        ),
        (
            "simulate",
            "serve a request stream: latency percentiles, SLO attainment, goodput and cost at the rate (Chapters 7, 8)",
            _SIMULATE,
            _simulate_flags,
        ),
        ("spec", "a chip's figures with their sources (Chapters 1, 2, 11)", _SPEC, _spec_flags),
    ):
        add_flags(sub.add_parser(name, help=help, description=description))
    b = sub.add_parser(
        "bench", help="measure this machine's roofline (Chapter 1); flags after it go to the bench", add_help=False
    )
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of python -m tpu_notes.bench")
    b.set_defaults(func=_bench)
    return parser


def _check_bench_args(argv: list[str]) -> None:
    """Refuse bad ``bench`` flags in one line (exit 2) before the bench starts measuring: the bench's own parser
    and the checks its ``main`` makes, with this entry's one-line errors, and its repeats at most
    :data:`tpu_notes.bench.MAX_REPEATS`."""
    from .bench import MAX_REPEATS
    from .bench import build_parser as bench_parser

    parser = bench_parser()
    parser.prog = "python -m tpu_notes bench"
    parser.error = lambda message: _fail("tpu_notes bench", message)
    args = parser.parse_args(argv)
    _one_value_each(parser, args)
    if not 1 <= args.repeats <= MAX_REPEATS:
        _fail("tpu_notes bench", f"--repeats must be a whole number from 1 to {MAX_REPEATS:,}; got {args.repeats}")
    if args.chip is not None:
        from .hardware import get_chip

        try:
            get_chip(args.chip, "--chip")
        except (ValueError, TypeError) as err:
            _fail("tpu_notes bench", err)


def _run(argv: list[str]) -> int:
    """Parse ``argv`` and run its subcommand (``bench``: its own flags, checked first)."""
    if argv[:1] == ["bench"]:  # everything after "bench", --help included, belongs to the bench
        from .bench import main as bench_main

        _check_bench_args(argv[1:])
        return bench_main(argv[1:])
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            _fail(f"tpu_notes {args.command}", f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as stop:  # --help (0), or a bad flag already reported in one line (2)
        return stop.code if isinstance(stop.code, int) else 2
    _check_counts(args.command, args)
    return args.func(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns its exit status. Bad input (a ``ValueError``, ``TypeError`` or
    ``NotImplementedError`` from the checks or the library) is one line on stderr and status 2 (``bench``'s flag
    errors raise ``SystemExit(2)``, as its own entry does); any other exception is a bug in tpu_notes: one line
    saying so, and status :data:`INTERNAL_ERROR`; Ctrl-C is one line and status 130."""
    if argv is None and hasattr(signal, "SIGPIPE"):  # `python -m tpu_notes spec | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv[:1] and argv[0] in ("plan", "serve", "simulate", "spec", "bench") else None
    where = f"tpu_notes {command}" if command else "tpu_notes"
    try:
        return _run(argv)
    except (ValueError, TypeError, NotImplementedError) as err:
        print(f"{where}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C during a long search: the shell's status for SIGINT, no traceback
        print(f"{where}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as err:  # a bug: one line, never a traceback (run the library call to see one)
        print(
            f"{where}: internal error (a bug in tpu_notes, not in your input): {type(err).__name__}: "
            f"{' '.join(str(err).split())}; please report it with this command line at {ISSUES}",
            file=sys.stderr,
        )
        return INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
