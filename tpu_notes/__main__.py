"""``python -m tpu_notes``: the book's command-line entry, one subcommand per job.

- ``plan``: rank training layouts of a model on a TPU slice (Chapter 5, :func:`tpu_notes.training.plan`);
- ``serve``: one generation step, throughput and the smallest topology (Chapter 7, :mod:`tpu_notes.inference`);
- ``spec``: the chip table, or every figure of a chip with its source (:mod:`tpu_notes.hardware`);
- ``bench``: measure this machine's roofline and compare with the model (Chapter 1, :mod:`tpu_notes.bench`).

Bad input prints one line to stderr and exits with status 2; ``--help`` explains every flag.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from collections.abc import Sequence

from .system import parse_system
from .topology import Slice, parse_slice  # noqa: F401  (re-exported: tests and readers call tpu_notes.__main__.parse_slice)

_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30}


def parse_count(text: str, name: str = "value") -> int:
    """``"4M"`` → 4,000,000; ``"4Mi"`` → 4,194,304; ``"3e6"`` and ``"1024"`` as written. Must be a whole number."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string such as '4M'; got {type(text).__name__}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?)?\s*", text.lower())
    if not m:
        raise ValueError(
            f"{name} must be a number with an optional suffix k, M, G, T (powers of 1000) or Ki, Mi, "
            f"Gi (powers of 1024), e.g. 4M or 4Mi; got {text!r}"
        )
    value = float(m.group(1)) * _SUFFIX[m.group(2) or ""]
    if value != int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive whole number; {text!r} is {value:g}")
    return int(value)


def _plan(args) -> int:
    from .training import plan
    from .units import check_positive, fmt

    check_positive("--top", args.top, integer=True)
    check_positive("--slices", args.slices, integer=True)
    check_positive("--seq-len", args.seq_len, integer=True)
    check_positive("--max-context", args.max_context, integer=True)
    slc = parse_system(args.slice)
    if not isinstance(slc, Slice) and args.slices != 1:
        raise ValueError("--slices joins TPU slices over DCN; a GPU cluster includes its whole network (use 1)")
    result = plan(
        args.model,
        slc,
        parse_count(args.batch_tokens, "--batch-tokens"),
        args.seq_len,
        n_slices=args.slices,
        max_context=args.max_context,
        remat=tuple(args.remat) if args.remat else ("none", "save_matmul_outputs", "full_block"),
        rank_by=args.rank_by,
    )
    if args.json:
        json.dump(
            {
                "model": args.model,
                "slice": repr(slc),
                "slices": args.slices,
                "searched": result.searched,
                "rank_by": args.rank_by,
                "ranked": [p.row() for p in result.ranked[: args.top]],
                "rejected_reasons": result.reasons(),
            },
            sys.stdout,
            indent=1,
        )
        print()
    else:
        print(
            f"{args.model} on {args.slices} x {slc!r}, batch {parse_count(args.batch_tokens):,} tokens, "
            f"sequences of {args.seq_len:,}: {len(result)} runnable of {result.searched} candidates"
        )
        print(result.table(args.top))
        if not result.ranked and isinstance(slc, Slice):
            from .training.subslices import format_slices, plan_slices

            print("\nNo legal layout uses every chip; the slices of this pod that can run, fastest first:")
            options = plan_slices(
                args.model,
                slc.chip,
                parse_count(args.batch_tokens, "--batch-tokens"),
                args.seq_len,
                n_slices=args.slices,
                max_context=args.max_context,
                rank_by=args.rank_by,
            )
            print(format_slices([o for o in options if o.ok] or options, top=min(args.top, 8)))
        if result.ranked:
            best = result.ranked[0]
            print(f"best by the {args.rank_by} step: {best.parallelism.label()}, {best.remat}")
            row = best.row()
            print(
                f"  roofline: step {fmt(row['step_s_roofline'], 's')}, MFU {row['mfu_roofline']:.1%}, "
                f"{fmt(row['tokens_per_s_per_chip_roofline'], 'tokens/s')} per chip (upper bounds on speed)"
            )
            if best.expected is not None:
                print(
                    f"  expected: step {fmt(row['step_s_expected'], 's')}, MFU {row['mfu_expected']:.1%}, "
                    f"{fmt(row['tokens_per_s_per_chip_expected'], 'tokens/s')} per chip "
                    f"({row['bound_expected']}-bound; efficiency model {row['efficiency_model']!r}: a forecast)"
                )
            print(f"best placement: {best.layout.describe()}")
    return 0


def _serve(args) -> int:
    from .hardware import get_chip
    from .inference import cost_per_million_tokens, decode_step_time, min_chips, smallest_topology
    from .inference.expected import expected_decode_step
    from .units import canonical_dtype, check_positive, fmt

    check_positive("--batch", args.batch, integer=True)
    check_positive("--context", args.context, integer=True)
    canonical_dtype(args.weights, "--weights")
    if args.kv is not None:
        canonical_dtype(args.kv, "--kv")
    if args.chips is not None:
        check_positive("--chips", args.chips, integer=True)
    kv = args.kv or args.weights
    need = dict(batch=args.batch, seq_len=args.context, weight_dtype=args.weights, kv_dtype=kv)
    if get_chip(args.chip, "--chip").kind == "tpu":
        topo = smallest_topology(args.model, args.chip, **need)
        shape, fewest = list(topo.shape), topo.n_chips
    else:  # GPUs: a count of GPUs, no torus shape
        shape, fewest = None, min_chips(args.model, args.chip, **need)
    n = args.chips or fewest
    step = decode_step_time(args.model, args.chip, n, args.batch, args.context, weight_dtype=args.weights, kv_dtype=kv)
    try:
        dollars = cost_per_million_tokens(step, chip=args.chip)
    except ValueError:
        dollars = None
    try:  # the same step at the efficiency model's rates; a chip it has no figure for leaves it out, with the reason
        exp = expected_decode_step(
            args.model, args.chip, n, args.batch, args.context, weight_dtype=args.weights, kv_dtype=kv
        )
        why_not = ""
    except (ValueError, TypeError) as err:
        exp, why_not = None, str(err)
    exp_dollars = None
    if exp is not None and dollars is not None:  # the same price at the expected throughput
        exp_dollars = cost_per_million_tokens(exp.tokens_per_s_per_chip, chip=args.chip)
    if args.json:
        json.dump(
            {
                "model": args.model,
                "chip": args.chip,
                "n_chips": n,
                "batch": args.batch,
                "context": args.context,
                "weight_dtype": args.weights,
                "kv_dtype": kv,
                "step_s": step.total,
                "kv_load_s": step.kv_load,
                "weight_load_s": step.weight_load,
                "flops_s": step.flops_time,
                "bound": step.bound,
                "fits": step.fits,
                "tokens_per_s_per_chip": step.tokens_per_s_per_chip,
                "dollars_per_million_tokens": dollars,
                "smallest_topology": shape,
                "smallest_topology_chips": fewest,
                "step_s_roofline": step.total,
                "bound_roofline": step.bound,
                "tokens_per_s_per_chip_roofline": step.tokens_per_s_per_chip,
                "dollars_per_million_tokens_roofline": dollars,
                "step_s_expected": exp.total if exp else None,
                "bound_expected": exp.bound if exp else None,
                "tokens_per_s_per_chip_expected": exp.tokens_per_s_per_chip if exp else None,
                "dollars_per_million_tokens_expected": exp_dollars,
                "collectives_s_expected": exp.collectives if exp else None,
                "overhead_s_expected": exp.overhead if exp else None,
                "efficiency_model": exp.efficiency if exp else None,
                "expected_unavailable": why_not or None,
            },
            sys.stdout,
            indent=1,
        )
        print()
        return 0
    print(
        f"{args.model} on {n} x {args.chip}, batch {args.batch}, context {args.context:,}, "
        f"{args.weights} weights, {kv} KV cache"
    )
    print(
        f"  roofline step {fmt(step.total, 's')} = KV load {fmt(step.kv_load, 's')} + max(weight load "
        f"{fmt(step.weight_load, 's')}, FLOPs {fmt(step.flops_time, 's')})  [{step.bound}-bound; a floor]"
    )
    if exp is not None:
        print(
            f"  expected step {fmt(exp.total, 's')} = KV load {fmt(exp.kv_load, 's')} + max(weight load "
            f"{fmt(exp.weight_load, 's')}, FLOPs {fmt(exp.flops_time, 's')}) + collectives "
            f"{fmt(exp.collectives, 's')} + overhead {fmt(exp.overhead, 's')}  [{exp.bound}-bound; a forecast]"
        )
    else:
        print(f"  expected step: not available ({why_not})")
    print(
        f"  memory per chip {fmt(step.memory_per_chip, 'B')} of {fmt(step.hbm_per_chip, 'B')}: "
        f"{'fits' if step.fits else 'does NOT fit'}"
    )
    print(
        f"  roofline throughput {fmt(step.tokens_per_s_per_chip, 'tokens/s')} per chip"
        + (f", ${dollars:.3g} per million tokens" if dollars is not None else "")
        + " (upper bound)"
    )
    if exp is not None:
        print(
            f"  expected throughput {fmt(exp.tokens_per_s_per_chip, 'tokens/s')} per chip"
            + (f", ${exp_dollars:.3g} per million tokens" if exp_dollars is not None else "")
            + f" (efficiency model {exp.efficiency!r})"
        )
    where = f"{args.chip} {'x'.join(map(str, shape))} ({fewest} chips)" if shape else f"{fewest} x {args.chip}"
    print(f"  smallest topology for this batch and context: {where}")
    return 0


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


def _spec(args) -> int:
    from .hardware import CHIPS, format_spec_table, get_chip

    if not args.chips:
        if args.json:
            json.dump({name: chip_spec(name) for name in CHIPS}, sys.stdout, indent=1)
            print()
        else:
            print(format_spec_table())
            print("\n`python -m tpu_notes spec CHIP` lists every figure of one chip with its source.")
        return 0
    names = [get_chip(n, "chip").name for n in args.chips]  # fail on a bad name before printing anything
    if args.json:
        json.dump({n: chip_spec(n) for n in names}, sys.stdout, indent=1)
        print()
        return 0
    for n in names:
        spec = chip_spec(n)
        width = max(len(k) for k in spec)
        print(f"{spec['long_name']['value']} ({n})")
        for key, item in spec.items():
            if key == "long_name":
                continue
            print(f"  {key:<{width}}  {_spec_value(key, item['value']):>14}  {item['source']}")
        print()
    return 0


def _spec_value(field: str, value) -> str:
    from .units import fmt

    if isinstance(value, (list, str, bool)) or value is None:
        return str(value)
    unit = (
        "FLOP/s"
        if field.endswith("_flops") and not field.startswith("int8")
        else "OP/s"
        if field.startswith("int8")
        else "B/s"
        if "_bw" in field
        else "B"
        if field.endswith("_bytes")
        else "Hz"
        if field.endswith("_hz")
        else "$/h"
        if field.startswith("dollars")
        else ""
    )
    return fmt(value, unit) if unit else (f"{value:g}" if isinstance(value, float) else str(value))


def _bench(args) -> int:
    from .bench import main as bench_main

    return bench_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tpu_notes", description="The command-line entry of Scale Your Model: one subcommand per job."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{plan,serve,spec,bench}")
    p = sub.add_parser(
        "plan",
        help="rank training layouts of a model on a TPU slice or GPU cluster (Chapters 5, 11)",
        description="Rank every data/FSDP/tensor/pipeline layout of one training step by predicted "
        "step time, with memory per chip, the comms/compute ratio, and the step time and MFU twice: the roofline "
        "(an upper bound on speed) and the expected (the efficiency model's forecast).",
    )
    p.add_argument("--model", required=True, help="a preset model name (e.g. llama3-70b, llama3-405b, llama2-13b)")
    p.add_argument(
        "--system",
        "--slice",
        dest="slice",
        required=True,
        help="the TPU slice as CHIP:AxBxC (e.g. v5p:16x16x16, v5e:16x16), a chip name for a full pod, or "
        "a GPU cluster as GPU:N (e.g. h100:1024, a DGX SuperPod of N GPUs)",
    )
    p.add_argument(
        "--batch-tokens",
        required=True,
        help="global batch in tokens; suffixes k/M/G are powers of 1000, Ki/Mi of 1024 (4M or 4Mi)",
    )
    p.add_argument("--seq-len", required=True, type=int, help="tokens per sequence (the batch holds whole sequences)")
    p.add_argument("--slices", type=int, default=1, help="copies of the slice joined by data parallelism over DCN")
    p.add_argument(
        "--max-context",
        type=int,
        default=16,
        help="largest context-parallel degree to try (chips splitting one sequence, ring attention; 1: never)",
    )
    p.add_argument(
        "--remat",
        action="append",
        metavar="POLICY",
        help="remat policy to try (repeatable): none, save_matmul_outputs, full_block, mlp_outputs",
    )
    p.add_argument("--top", type=int, default=10, help="how many layouts to print (default 10)")
    p.add_argument(
        "--rank-by",
        choices=("roofline", "expected"),
        default="expected",
        help="rank by the expected step (the efficiency model's forecast, default) or the roofline one (a floor)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_plan)
    v = sub.add_parser(
        "serve",
        help="time one generation step of a model on a TPU generation (Chapter 7)",
        description="Time one generation step (KV load + max(weight load, FLOPs)), the throughput "
        "per chip and its cost, both at the roofline (an upper bound) and expected (the efficiency model's "
        "forecast), and the smallest slice that holds the model and caches.",
    )
    v.add_argument("--model", required=True, help="a preset model name (e.g. llama3-70b, llama3-8b, llama2-13b)")
    v.add_argument("--chip", required=True, help="a TPU generation (e.g. v5e, v5p, v6e)")
    v.add_argument("--batch", required=True, type=int, help="sequences generating together")
    v.add_argument("--context", required=True, type=int, help="tokens of context per sequence")
    v.add_argument("--weights", default="bf16", help="weight dtype: bf16, int8, int4, fp8 (default bf16)")
    v.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    v.add_argument("--chips", type=int, default=None, help="chips to serve on (default: the smallest topology)")
    v.add_argument("--json", action="store_true", help="print JSON instead of text")
    v.set_defaults(func=_serve)
    s = sub.add_parser(
        "spec",
        help="a chip's figures with their sources (Chapters 1, 2, 11)",
        description="Print the chip table, or every figure of the chips named, each with its source.",
    )
    s.add_argument("chips", nargs="*", metavar="CHIP", help="chip names (e.g. v5e h100); none: the whole table")
    s.add_argument("--json", action="store_true", help="print JSON (value and source per figure) instead of text")
    s.set_defaults(func=_spec)
    b = sub.add_parser(
        "bench", help="measure this machine's roofline (Chapter 1); flags after it go to the bench", add_help=False
    )
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of python -m tpu_notes.bench")
    b.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and hasattr(signal, "SIGPIPE"):  # `python -m tpu_notes spec | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # everything after "bench", --help included, belongs to the bench
        from .bench import main as bench_main

        try:
            return bench_main(argv[1:])
        except (ValueError, TypeError) as err:
            print(f"python -m tpu_notes bench: error: {err}", file=sys.stderr)
            return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError) as err:
        print(f"python -m tpu_notes {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
