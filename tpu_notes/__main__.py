"""``python -m tpu_notes``: the book's command-line entry, one subcommand per job.

- ``plan``: rank training layouts of a model on a TPU slice or GPU cluster (Chapter 5, :func:`tpu_notes.training.plan`);
- ``serve``: one serving step, throughput, the cost of a request and the smallest legal topology (Chapters 7 and 8,
  :mod:`tpu_notes.inference.engine` and :mod:`tpu_notes.inference.cost`);
- ``spec``: the chip table, or every figure of a chip with its source (:mod:`tpu_notes.hardware`);
- ``bench``: measure this machine's roofline and compare with the model (Chapter 1, :mod:`tpu_notes.bench`).

The subcommands share one spelling of counts (``parse_count``: ``8k``, ``4Mi``...) and one of systems
(``_parse_system_arg``: ``v5e:4x4`` for a TPU slice, ``h100:8`` for GPUs, a bare chip name where the size is
left to the command). Bad input, an unsupported model included, prints one line ``tpu_notes <command>: error: ...``
to stderr and exits with status 2, never a traceback; ``--help`` explains every flag.
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


def parse_count(text: str, name: str = "value") -> int:
    """A positive whole count as the CLI spells it: ``"8k"`` → 8,000 and ``"4M"`` → 4,000,000 (k, M, G, T:
    powers of 1000); ``"8Ki"`` → 8,192 and ``"4Mi"`` → 4,194,304 (Ki, Mi, Gi, Ti: powers of 1024); ``"3e6"`` and
    ``"1024"`` as written. Suffixes are case-insensitive. Raises ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string such as '4M'; got {type(text).__name__}")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?)?\s*", text.lower())
    if not m:
        raise ValueError(
            f"{name} must be a whole number with an optional suffix k, M, G (powers of 1000) or Ki, Mi, Gi "
            f"(powers of 1024), e.g. 8k or 4Mi; got {text!r}"
        )
    value = float(m.group(1)) * _SUFFIX[m.group(2) or ""]
    if value != int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive whole number; {text!r} is {value:g}")
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


def _tensor_parallel_problem(model, n: int) -> str | None:
    """Why ``n`` chips cannot share one replica of ``model`` tensor-parallel, or None when they can: the MLP's
    hidden size (``d_ff``, an expert's for a mixture of experts) must split evenly over ``n``, and so must the KV
    heads, or ``n`` be a multiple of them (the rest of the cache then splits over the batch, the engine's
    :func:`~tpu_notes.inference.kv_sharding`). The KV-head rule is the one serving engines enforce (vLLM,
    github.com/vllm-project/vllm, ``vllm/model_executor/models/llama.py``, ``LlamaAttention``: KV heads divisible
    by the tensor-parallel size, or that size by the KV heads, which are then replicated)."""
    from .transformer import get_model

    m = get_model(model, "--model")
    if n == 1:
        return None
    F = (m.d_ff_expert or m.d_ff) if m.is_moe else m.d_ff
    K = m.n_kv_heads
    if F % n == 0 and (K % n == 0 or n % K == 0):
        return None
    return (
        f"tensor parallelism over {n} chips must split {m.name or 'the model'}'s d_ff ({F:,}) evenly and divide "
        f"or be a multiple of its {K} KV heads"
    )


def _plan_system(text: str):
    """``plan``'s system: a bare TPU chip name is its full pod; a bare GPU name needs its count."""
    from .hardware import Chip

    system = _parse_system_arg(text)
    if isinstance(system, Chip):
        if system.kind == "gpu":
            raise ValueError(f"--system {text!r}: give the GPU count as GPU:N, e.g. {system.name}:64")
        return parse_slice(system.name)
    return system


def _plan_table(result, top: int) -> str:
    """The CLI's table of ``result`` (a :class:`~tpu_notes.training.PlanResult`): the columns of
    :meth:`~tpu_notes.training.PlanResult.table`, but each layout (with its DCN and microbatch counts) and remat
    policy printed whole, the columns as wide as their longest entry."""
    from .training.parallelism import SHORT_NAMES
    from .units import fmt

    if not result.ranked:
        return result.table(top)
    shown = result.ranked[:top]

    def name(p):
        return p.parallelism.short() + (f" v{p.circular_repeats}" if p.circular_repeats > 1 else "")

    w = max(6, *(len(name(p)) for p in shown))
    r = max(5, *(len(str(p.remat)) for p in shown))
    lines = [
        f"{'#':>2} {'layout':<{w}} {'remat':<{r}} {'HBM/chip':>8} {'roof step':>9} {'bound':<8} {'exp step':>8} "
        f"{'MFU':>6}"
    ]
    models = set()
    for i, p in enumerate(shown, 1):
        st, ex = p.step, p.expected
        exp = f"{fmt(ex.total, 's'):>8} {ex.mfu:>6.1%}" if ex else f"{'-':>8} {'-':>6}"
        if ex:
            models.add(ex.efficiency)
        lines.append(
            f"{i:>2} {name(p):<{w}} {str(p.remat):<{r}} {fmt(p.memory.peak, 'B'):>8} "
            f"{fmt(st.total, 's'):>9} {st.bound:<8} {exp}"
        )
    model = ", ".join(repr(n) for n in sorted(models)) or "none"
    lines.append(f"ranked by the {result.rank_by} step; HBM/chip: the compiled peak (gathered weights included)")
    lines.append("roof: the roofline (matmuls at peak, comms hidden), a floor on the step")
    lines.append(f"exp: expected, at the rates of efficiency model {model}: a forecast (MFU: its MFU)")
    used = {SHORT_NAMES[a] for p in shown for a in p.parallelism.mesh_shape()}
    lines.append("layout: " + ", ".join(f"{v} {k}" for k, v in SHORT_NAMES.items() if v in used))
    extra = [
        ("dcnN: N slices joined over DCN", any(p.parallelism.dcn > 1 for p in shown)),
        ("mbN: N microbatches", any("mb" in name(p).split()[-1] for p in shown)),
        ("vN: N layer groups per pipeline stage", any(p.circular_repeats > 1 for p in shown)),
    ]
    if any(on for _, on in extra):
        lines.append("        " + ", ".join(text for text, on in extra if on))
    return "\n".join(lines)


def _plan(args) -> int:
    from .training import plan
    from .units import fmt

    slc = _plan_system(args.slice)
    if not isinstance(slc, Slice) and args.slices != 1:
        raise ValueError("--slices joins TPU slices over DCN; a GPU cluster includes its whole network (use 1)")
    try:
        result = plan(
            args.model,
            slc,
            args.batch_tokens,
            args.seq_len,
            n_slices=args.slices,
            max_context=args.max_context,
            remat=tuple(args.remat) if args.remat else ("none", "save_matmul_outputs", "full_block"),
            rank_by=args.rank_by,
        )
    except NotImplementedError as err:
        raise NotImplementedError(f"--model {args.model} is not supported by plan: {err}") from None
    if args.json:
        json.dump(
            {
                "model": args.model,
                "system": _spell_system(slc),
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
            f"{args.model} on {args.slices} x {slc!r}, batch {args.batch_tokens:,} tokens, "
            f"sequences of {args.seq_len:,}: {len(result)} runnable of {result.searched} candidates"
        )
        print(_plan_table(result, args.top))
        if not result.ranked and isinstance(slc, Slice):
            from .training.subslices import format_slices, plan_slices

            print("\nNo legal layout uses every chip; the slices of this pod that can run, fastest first:")
            options = plan_slices(
                args.model,
                slc.chip,
                args.batch_tokens,
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


def _candidate_systems(chip):
    """The systems of ``chip`` serve tries, smallest first: the standard TPU slices; 1..node GPUs, then whole
    nodes as a DGX SuperPod builds them (up to 4096 GPUs; counts it cannot build are skipped)."""
    from .inference import slice_shapes

    if chip.kind == "tpu":
        for shape in slice_shapes(chip):
            yield Slice(chip, shape)
        return
    node = chip.node_size or 8  # GPUs per NVLink node (tpu_notes.hardware); whole nodes past one
    for n in list(range(1, node + 1)) + [node * k for k in range(2, 4096 // node + 1)]:
        try:
            yield _gpu_system(chip, n)
        except ValueError:  # not whole scalable units of a SuperPod
            continue


def _fewest_chips(model, chip, tokens: int, **dtypes):
    """``(system, n)``: the smallest system of ``chip`` (``_candidate_systems``) whose chip count is legal for
    tensor parallelism (``_tensor_parallel_problem``) and whose engine deployment holds the weights and
    ``tokens`` tokens of KV cache beside its reserve; ``(None, None)`` when none does."""
    from .inference.engine import deploy

    for system in _candidate_systems(chip):
        if _tensor_parallel_problem(model, system.n_devices):
            continue
        d = deploy(model, system, check_memory=False, **dtypes)
        if d.kv_capacity_tokens >= tokens:
            return system, system.n_devices
    return None, None


def _legal_near(model, chip, n: int) -> str:
    """The legal chip counts of ``chip``'s systems just below and just above ``n``."""
    if chip.kind == "tpu":
        counts = [s.n_devices for s in _candidate_systems(chip)]
    else:
        node = chip.node_size or 8
        counts = list(range(1, node + 1)) + [node * k for k in range(2, 4096 // node + 1)]
    legal = [c for c in counts if not _tensor_parallel_problem(model, c)]
    lower = [c for c in legal if c < n][-1:]
    upper = [c for c in legal if c > n][:1]
    return ", ".join(map(str, lower + upper)) or "none"


def _describe_system(system) -> str:
    shape = getattr(system, "shape", None)
    name = system.chip.name
    if shape:
        return f"{name} {'x'.join(map(str, shape))} ({system.n_devices} chips)"
    return f"{system.n_devices} x {name}"


def _serve_system(args, fewest_system):
    """The system ``serve`` prices: the one ``--system`` spells, or ``--chips`` of its chip, or the smallest legal
    one; its chip count must be legal for tensor parallelism."""
    from .hardware import Chip
    from .inference.engine import system_for

    given = _parse_system_arg(args.system)
    chip = given if isinstance(given, Chip) else given.chip
    if not isinstance(given, Chip):
        if args.chips is not None and args.chips != given.n_devices:
            raise ValueError(f"--chips {args.chips} disagrees with --system {args.system} ({given.n_devices} chips)")
        system, flag = given, f"--system {args.system}"
    elif args.chips is not None:
        flag = f"--chips {args.chips}"
        try:
            system = system_for(chip, args.chips) if chip.kind == "tpu" else _gpu_system(chip, args.chips)
        except ValueError as err:
            raise ValueError(f"{flag}: {err}") from None
    elif fewest_system is not None:
        return fewest_system
    else:
        return None
    problem = _tensor_parallel_problem(args.model, system.n_devices)
    if problem:
        near = _legal_near(args.model, chip, system.n_devices)
        raise ValueError(f"{flag}: {problem}; legal counts near it: {near}")
    return system


def _serve(args) -> int:
    from .hardware import Chip
    from .inference.cost import serving_cost
    from .inference.engine import MAX_ROWS, deploy
    from .inference.speculative import speculative_decoding
    from .inference.step import MAX_CONTEXT
    from .units import canonical_dtype, check_positive, fmt

    check_positive("--batch", args.batch, integer=True, maximum=MAX_ROWS)
    check_positive("--context", args.context, integer=True, maximum=MAX_CONTEXT)
    canonical_dtype(args.weights, "--weights")
    if args.kv is not None:
        canonical_dtype(args.kv, "--kv")
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
    given = _parse_system_arg(args.system)
    chip = given if isinstance(given, Chip) else given.chip
    try:
        fewest_system, fewest = _fewest_chips(args.model, chip, args.batch * peak, **dtypes)
    except NotImplementedError as err:
        raise NotImplementedError(f"--model {args.model} is not supported by serve: {err}") from None
    system = _serve_system(args, fewest_system)
    if system is None:
        legal = [s for s in _candidate_systems(chip) if not _tensor_parallel_problem(args.model, s.n_devices)]
        largest = ""
        if legal:
            top = deploy(args.model, legal[-1], check_memory=False, **dtypes)
            most = top.max_batch(peak) if top.kv_capacity_tokens >= peak else 0
            largest = f" (the largest legal one, {_describe_system(legal[-1])}, holds at most batch {most})"
        raise ValueError(
            f"--batch {args.batch} sequences of {peak:,} tokens of {args.model} do not fit on any one {chip.name} "
            f"system of a legal chip count{largest}; lower --batch or the lengths"
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
            "chip": chip.name,
            "n_chips": d.n_chips,
            "system": _describe_system(system),
            "system_spelled": _spell_system(system),  # what --system accepts for this system
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
            # the smallest legal system for this batch and context, as --system spells it, and its chips (both
            # None only when no system of one pod / 4096 GPUs holds it)
            "smallest_topology": _spell_system(fewest_system) if fewest_system is not None else None,
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
        need = f"it needs at least {where}" if where else f"no {chip.name} system tpu_notes builds holds it"
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
    print(
        "  smallest legal topology for this batch and context: "
        + (f"{where} (--system {_spell_system(fewest_system)})" if where else "none in one pod")
    )
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
    # a chip name, or a system as the other subcommands spell it (its chip): fail on a bad name before printing
    names = [get_chip(n.partition(":")[0], "CHIP").name for n in args.chips]
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


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``tpu_notes <command>: error: ...``, exit status 2."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        _fail(self.prog.replace("python -m ", "", 1), message)


def _fail(where: str, message) -> None:
    print(f"{where}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tpu_notes",
        description="The command-line entry of Scale Your Model: one subcommand per job. Counts take "
        + COUNT_HELP
        + " in every subcommand; systems are spelled "
        + SYSTEM_HELP
        + ".",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{plan,serve,spec,bench}")
    p = sub.add_parser(
        "plan",
        help="rank training layouts of a model on a TPU slice or GPU cluster (Chapters 5, 11)",
        description="Rank every data/FSDP/tensor/pipeline layout of one training step by predicted "
        "step time, with memory per chip, the comms/compute ratio, and the step time and MFU twice: the roofline "
        "(an upper bound on speed) and the expected (the efficiency model's forecast). Counts take " + COUNT_HELP + ".",
    )
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
    p.add_argument(
        "--batch-tokens", required=True, type=_count("--batch-tokens"), help="global batch in tokens; " + COUNT_HELP
    )
    p.add_argument(
        "--seq-len",
        required=True,
        type=_count("--seq-len"),
        help="tokens per sequence (the batch holds whole sequences); " + COUNT_HELP,
    )
    p.add_argument(
        "--slices", type=_count("--slices"), default=1, help="copies of the slice joined by data parallelism over DCN"
    )
    p.add_argument(
        "--max-context",
        type=_count("--max-context"),
        default=16,
        help="largest context-parallel degree to try (chips splitting one sequence, ring attention; 1: never)",
    )
    p.add_argument(
        "--remat",
        action="append",
        metavar="POLICY",
        help="remat policy to try (repeatable): none, save_matmul_outputs, full_block, mlp_outputs",
    )
    p.add_argument("--top", type=_count("--top"), default=10, help="how many layouts to print (default 10)")
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
        help="one serving step, its throughput and the cost of a request (Chapters 7, 8, 11)",
        description="Price one generation step with the serving step model (tpu_notes.inference.engine): expected "
        "(the efficiency model's forecast) and at the roofline (a floor), with its collectives; the throughput per "
        "chip; dollars per million input and output tokens and per request of --prompt/--output tokens "
        "(tpu_notes.inference.cost; none for a setup that does not fit); optionally speculative decoding at the "
        "real verify cost; and the smallest legal system that holds the weights and caches. A chip count is legal "
        "when one tensor-parallel replica can span it: it splits d_ff evenly and divides or is a multiple of the "
        "KV heads. Counts take " + COUNT_HELP + ".",
    )
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
    v.add_argument("--batch", required=True, type=_count("--batch"), help="sequences generating together")
    v.add_argument(
        "--context", required=True, type=_count("--context"), help="tokens of context per sequence; " + COUNT_HELP
    )
    v.add_argument("--weights", default="bf16", help="weight dtype: bf16, int8, int4, fp8 (default bf16)")
    v.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    v.add_argument(
        "--chips",
        type=_count("--chips"),
        default=None,
        help="chips to serve on, with a bare chip name (default: the smallest legal system)",
    )
    v.add_argument(
        "--prompt",
        type=_count("--prompt"),
        default=None,
        help="prompt tokens per request, for the cost (default: --context)",
    )
    v.add_argument(
        "--output", type=_count("--output"), default=512, help="output tokens per request, for the cost (default 512)"
    )
    v.add_argument("--price", type=float, default=None, help="dollars per chip-hour (default: the chip's listed price)")
    v.add_argument(
        "--utilisation",
        type=float,
        default=1.0,
        help="share of paid chip-time running steps, (0, 1] (default 1: busy all the time, a price floor)",
    )
    v.add_argument(
        "--speculate",
        type=_count("--speculate"),
        default=None,
        metavar="K",
        help="also price speculative decoding, K drafts",
    )
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
    s.add_argument(
        "chips",
        nargs="*",
        metavar="CHIP",
        help="chip names (e.g. v5e h100), or systems spelled as elsewhere (v5e:4x4, h100:8: their chip); none: "
        "the whole table",
    )
    s.add_argument("--json", action="store_true", help="print JSON (value and source per figure) instead of text")
    s.set_defaults(func=_spec)
    b = sub.add_parser(
        "bench", help="measure this machine's roofline (Chapter 1); flags after it go to the bench", add_help=False
    )
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of python -m tpu_notes.bench")
    b.set_defaults(func=_bench)
    return parser


def _check_bench_args(argv: list[str]) -> None:
    """Refuse bad ``bench`` flags in one line (exit 2) before the bench starts measuring: the bench's own parser
    and the checks its ``main`` makes, with this entry's one-line errors."""
    from .bench import build_parser as bench_parser

    parser = bench_parser()
    parser.prog = "python -m tpu_notes bench"
    parser.error = lambda message: _fail("tpu_notes bench", message)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        _fail("tpu_notes bench", f"--repeats must be a whole number >= 1; got {args.repeats}")
    if args.chip is not None:
        from .hardware import get_chip

        try:
            get_chip(args.chip, "--chip")
        except (ValueError, TypeError) as err:
            _fail("tpu_notes bench", err)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns its exit status. Every error is one line on stderr and status 2 (``bench``'s
    flag errors raise ``SystemExit(2)``, as its own entry does)."""
    if argv is None and hasattr(signal, "SIGPIPE"):  # `python -m tpu_notes spec | head` ends quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # everything after "bench", --help included, belongs to the bench
        from .bench import main as bench_main

        _check_bench_args(argv[1:])
        try:
            return bench_main(argv[1:])
        except (ValueError, TypeError) as err:
            print(f"tpu_notes bench: error: {' '.join(str(err).split())}", file=sys.stderr)
            return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help (0), or a bad flag already reported in one line (2)
        return stop.code if isinstance(stop.code, int) else 2
    try:
        return args.func(args)
    except (ValueError, TypeError, KeyError, NotImplementedError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"tpu_notes {args.command}: error: {' '.join(str(message).split())}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug: still one line, never a traceback (run the library call to see one)
        print(
            f"tpu_notes {args.command}: error: internal error, please report it: {type(err).__name__}: "
            f"{' '.join(str(err).split())}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
