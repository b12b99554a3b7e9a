"""``python -m tpu_notes``: the book's command-line entry, one subcommand per job.

- ``plan``: rank training layouts of a model on a TPU slice (Chapter 5, :func:`tpu_notes.training.plan`);
- ``serve``: one serving step, throughput, the cost of a request and the smallest topology (Chapters 7 and 8,
  :mod:`tpu_notes.inference.engine` and :mod:`tpu_notes.inference.cost`);
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


def _fewest_chips(model, chip, tokens: int, **dtypes):
    """``(system, n)``: the smallest system of ``chip`` (the standard TPU slices, smallest first; 1..8 GPUs, then
    whole nodes) whose engine deployment holds the weights and ``tokens`` tokens of KV cache beside its reserve;
    ``(None, None)`` when no slice of one pod (or no cluster of up to 4096 GPUs) does."""
    from .hardware import get_chip
    from .inference import slice_shapes
    from .inference.engine import deploy, system_for

    c = get_chip(chip)
    if c.kind == "tpu":
        systems = (Slice(c, shape) for shape in slice_shapes(c))
    else:
        node = c.node_size or 8  # GPUs per NVLink node (tpu_notes.hardware); whole nodes past one
        counts = list(range(1, node + 1)) + [node * k for k in range(2, 4096 // node + 1)]
        systems = (system_for(c, n) for n in counts)
    for system in systems:
        d = deploy(model, system, check_memory=False, **dtypes)
        if d.kv_capacity_tokens >= tokens:
            return system, system.n_devices
    return None, None


def _describe_system(system) -> str:
    shape = getattr(system, "shape", None)
    name = system.chip.name
    if shape:
        return f"{name} {'x'.join(map(str, shape))} ({system.n_devices} chips)"
    return f"{system.n_devices} x {name}"


def _serve(args) -> int:
    from .inference.cost import serving_cost
    from .inference.engine import MAX_ROWS, deploy, system_for
    from .inference.speculative import speculative_decoding
    from .inference.step import MAX_CONTEXT
    from .units import canonical_dtype, check_positive, fmt

    check_positive("--batch", args.batch, integer=True, maximum=MAX_ROWS)
    check_positive("--context", args.context, integer=True, maximum=MAX_CONTEXT)
    canonical_dtype(args.weights, "--weights")
    if args.kv is not None:
        canonical_dtype(args.kv, "--kv")
    if args.chips is not None:
        check_positive("--chips", args.chips, integer=True)
    prompt = args.context
    if args.prompt is not None:
        prompt = check_positive("--prompt", args.prompt, integer=True, maximum=MAX_CONTEXT)
    output = check_positive("--output", args.output, integer=True, maximum=MAX_CONTEXT)
    if args.price is not None:
        check_positive("--price", args.price)
    util = check_positive("--utilisation", args.utilisation, maximum=1.0)
    if args.speculate is not None:
        check_positive("--speculate", args.speculate, integer=True, maximum=64)
        if args.acceptance is None:
            raise ValueError("--speculate needs --acceptance (the probability each draft token is kept)")
    if args.acceptance is not None and not 0.0 <= args.acceptance <= 1.0:
        raise ValueError(f"--acceptance must be in [0, 1]; got {args.acceptance}")
    if args.draft_cost is not None:
        check_positive("--draft-cost", args.draft_cost, allow_zero=True)
    if args.draft_cost is not None and args.draft_model is not None:
        raise ValueError("give --draft-model or --draft-cost, not both")
    kv = args.kv or args.weights
    dtypes = dict(weight_dtype=args.weights, kv_dtype=kv)
    peak = max(args.context, prompt + output)  # tokens of cache per sequence at the workload's longest
    fewest_system, fewest = _fewest_chips(args.model, args.chip, args.batch * peak, **dtypes)
    if args.chips is not None:
        try:
            system = system_for(args.chip, args.chips)
        except ValueError as err:
            raise ValueError(f"--chips {args.chips}: {err}") from None
    elif fewest_system is not None:
        system = fewest_system
    else:
        raise ValueError(
            f"--batch {args.batch} sequences of {peak:,} tokens of {args.model} do not fit on any one {args.chip} "
            "system tpu_notes builds; lower --batch or the lengths"
        )
    d = deploy(args.model, system, check_memory=False, **dtypes)
    step = d.step(args.batch, args.batch * args.context)
    fits = step.fits and args.batch * peak <= d.kv_capacity_tokens
    cost = (
        serving_cost(d, prompt, output, args.batch, utilisation=util, dollars_per_chip_hour=args.price)
        if (fits and (args.price is not None or d.chip.dollars_per_hour is not None))
        else None
    )
    no_price = "" if cost is not None or not fits else f"{d.chip.long_name} has no price in tpu_notes.hardware"
    r = step.roofline_parts
    chapter7 = r["kv"] + max(r["weights"], r["matmul"] + r["attention"] + r["elementwise"])
    spec = None
    if args.speculate is not None and fits:
        draft = None
        if args.draft_model is not None:
            draft = deploy(args.draft_model, system, check_memory=False, **dtypes)
        spec = speculative_decoding(
            d, args.batch, args.context, args.speculate, args.acceptance, draft=draft, draft_cost=args.draft_cost
        )

    def per_chip(x: float) -> float:
        return x / d.n_chips

    kv_bytes = step.kv_tokens * d.kv_bytes_per_token
    hbm = d.chip.hbm_bytes
    where = _describe_system(fewest_system) if fewest_system is not None else None
    if args.json:
        data = {
            "model": args.model,
            "chip": args.chip,
            "n_chips": d.n_chips,
            "system": _describe_system(system),
            "batch": args.batch,
            "context": args.context,
            "prompt_len": prompt,
            "output_len": output,
            "weight_dtype": args.weights,
            "kv_dtype": kv,
            "fits": fits,
            "reserve_fraction": d.reserve_fraction,
            "weight_bytes_per_chip": per_chip(d.weight_bytes),
            "kv_bytes_per_chip": per_chip(kv_bytes),
            "hbm_bytes_per_chip": hbm,
            "max_batch": d.max_batch(peak),
            "step_s": step.roofline,  # kept for older readers: the roofline step (collectives included)
            "step_s_roofline": step.roofline,
            "step_s_roofline_no_collectives": chapter7,
            "step_s_expected": step.total,
            "bound_expected": step.bound,
            "parts_s_expected": {
                k: getattr(step, k)
                for k in ("kv", "weights", "matmul", "attention", "elementwise", "collectives", "overhead")
            },
            "parts_s_roofline": dict(r),
            "tokens_per_s_per_chip_expected": step.tokens_per_s_per_chip,
            "tokens_per_s_per_chip_roofline": step.decode / step.roofline / d.n_chips,
            "efficiency_model": d.efficiency.name,
            "dollars_per_million_input": cost.dollars_per_million_input if cost else None,
            "dollars_per_million_output": cost.dollars_per_million_output if cost else None,
            "dollars_per_request": cost.dollars_per_request if cost else None,
            "prefill_share": cost.prefill_share if cost else None,
            "dollars_per_chip_hour": cost.dollars_per_chip_hour if cost else None,
            "price_source": cost.price_source if cost else None,
            "utilisation": util,
            "no_price_reason": None if cost else ("does not fit" if not fits else no_price),
            "smallest_topology": list(fewest_system.shape) if getattr(fewest_system, "shape", None) else None,
            "smallest_topology_chips": fewest,
        }
        if args.speculate is not None:
            data["speculative"] = (
                None
                if spec is None
                else {
                    "k": spec.k,
                    "acceptance": spec.acceptance,
                    "verify_cost": spec.verify_cost,
                    "draft_cost": spec.draft_cost,
                    "tokens_per_round": spec.tokens_per_round,
                    "speedup": spec.speedup,
                }
            )
        json.dump(data, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"{args.model} on {_describe_system(system)}, batch {args.batch}, context {args.context:,}, "
        f"{args.weights} weights, {kv} KV cache"
    )
    print(
        f"  expected step {fmt(step.total, 's')} = KV {fmt(step.kv, 's')} + max(weights {fmt(step.weights, 's')}, "
        f"matmul {fmt(step.matmul, 's')}) + collectives {fmt(step.collectives, 's')} + overhead "
        f"{fmt(step.overhead, 's')}  [{step.bound}-bound; a forecast, efficiency model {d.efficiency.name!r}]"
    )
    print(
        f"  roofline step {fmt(step.roofline, 's')} = Chapter 7's step {fmt(chapter7, 's')} (KV "
        f"{fmt(r['kv'], 's')} + max(weights {fmt(r['weights'], 's')}, FLOPs {fmt(r['matmul'], 's')})) + "
        f"collectives {fmt(r['collectives'], 's')}  [a floor]"
    )
    print(
        f"  memory per chip: weights {fmt(per_chip(d.weight_bytes), 'B')} + KV {fmt(per_chip(kv_bytes), 'B')} of "
        f"{fmt(hbm, 'B')} ({d.reserve_fraction:.0%} kept in reserve): "
        + (
            "fits"
            if fits
            else f"does NOT fit (at most batch {d.max_batch(peak)} at {peak:,} tokens)"
            if d.kv_capacity_tokens
            else "does NOT fit (not even the weights and one token of cache)"
        )
    )
    print(
        f"  throughput {fmt(step.tokens_per_s_per_chip, 'tokens/s')} per chip expected, "
        f"{fmt(step.decode / step.roofline / d.n_chips, 'tokens/s')} at the roofline (upper bound)"
        + ("" if fits else "; as if the memory were there")
    )
    if cost is not None:
        print(
            f"  cost of requests of {prompt:,} tokens in + {output:,} out, at ${cost.dollars_per_chip_hour:.3g} per "
            f"chip-hour ({cost.price_source}), {util:.0%} utilisation:"
        )
        print(
            f"    ${cost.dollars_per_million_input:.3g} per million input tokens, "
            f"${cost.dollars_per_million_output:.3g} per million output tokens, "
            f"${cost.dollars_per_request:.3g} per request ({cost.prefill_share:.0%} of it prefill)"
        )
    elif not fits:
        need = f"it needs at least {where}" if where else f"no {args.chip} system tpu_notes builds holds it"
        print(f"  no price: this setup does not fit; {need}")
    else:
        print(f"  no price: {no_price}; give --price (dollars per chip-hour)")
    if spec is not None:
        print(
            f"  speculative decoding, {spec.k} drafts at acceptance {spec.acceptance:g}: verify step "
            f"{spec.verify_cost:.2f} decode steps at this batch, draft {spec.draft_cost:.3g} of a step, "
            f"{spec.tokens_per_round:.2f} tokens per round: speedup {spec.speedup:.2f}x"
            + ("" if spec.pays else " (slower than plain decoding)")
        )
    elif args.speculate is not None:
        print("  speculative decoding: not priced (the setup does not fit)")
    print(f"  smallest topology for this batch and context: {where or 'none in one pod'}")
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
        help="one serving step, its throughput and the cost of a request (Chapters 7, 8)",
        description="Price one generation step with the serving step model (tpu_notes.inference.engine): expected "
        "(the efficiency model's forecast) and at the roofline (a floor), with its collectives; the throughput per "
        "chip; dollars per million input and output tokens and per request of --prompt/--output tokens "
        "(tpu_notes.inference.cost; none for a setup that does not fit); optionally speculative decoding at the "
        "real verify cost; and the smallest slice that holds the weights and caches.",
    )
    v.add_argument("--model", required=True, help="a preset model name (e.g. llama3-70b, llama3-8b, llama2-13b)")
    v.add_argument("--chip", required=True, help="a TPU generation (e.g. v5e, v5p, v6e)")
    v.add_argument("--batch", required=True, type=int, help="sequences generating together")
    v.add_argument("--context", required=True, type=int, help="tokens of context per sequence")
    v.add_argument("--weights", default="bf16", help="weight dtype: bf16, int8, int4, fp8 (default bf16)")
    v.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    v.add_argument("--chips", type=int, default=None, help="chips to serve on (default: the smallest topology)")
    v.add_argument(
        "--prompt", type=int, default=None, help="prompt tokens per request, for the cost (default: --context)"
    )
    v.add_argument("--output", type=int, default=512, help="output tokens per request, for the cost (default 512)")
    v.add_argument("--price", type=float, default=None, help="dollars per chip-hour (default: the chip's listed price)")
    v.add_argument(
        "--utilisation",
        type=float,
        default=1.0,
        help="share of paid chip-time running steps, (0, 1] (default 1: busy all the time, a price floor)",
    )
    v.add_argument("--speculate", type=int, default=None, metavar="K", help="also price speculative decoding, K drafts")
    v.add_argument(
        "--acceptance", type=float, default=None, help="probability each draft token is kept (with --speculate)"
    )
    v.add_argument("--draft-model", default=None, help="draft model served on the same chips (with --speculate)")
    v.add_argument(
        "--draft-cost", type=float, default=None, help="draft step in target steps (default 0, or --draft-model's)"
    )
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
