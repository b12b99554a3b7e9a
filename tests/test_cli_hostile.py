"""``python -m tpu_notes`` refuses hostile input in one line (issue 35).

A table-driven corpus: every flag that takes a value, of every subcommand, read from the argparse parsers themselves
(``build_parser()``, and ``tpu_notes.bench.build_parser()`` for the flags ``bench`` hands on), so a flag is covered
the day it lands; each gets bad types, NaN and infinities, ``1e400``, zero, negatives, digit strings longer than any
real count, fractions and unknown names. Beside it, a hand-written list of impossible combinations (a tensor degree
that splits heads, chips that form no slice, ``--speculate`` without ``--acceptance``...).

Every case runs ``main(argv)`` in-process under a CPU-time cap (``ITIMER_PROF``: CPU seconds, so a loaded machine
cannot fail it) and must end with exit status 2, nothing on stdout, and exactly one line on stderr,
``tpu_notes <command>: error: ...``, naming the flag the user typed: never a traceback, never an internal error.
"""

from __future__ import annotations

import argparse
import resource
import signal
import subprocess
import sys

import pytest

from tpu_notes import bench
from tpu_notes import inference as I
from tpu_notes.__main__ import INTERNAL_ERROR, ISSUES, MAX_PRICE, _check_counts, build_parser, count_limits, main
from tpu_notes.inference.engine import system_for

#: CPU seconds one case may take (a refusal takes milliseconds; a search or simulation nobody capped takes forever).
CPU_SECONDS = 20.0

#: A valid, quick command line per subcommand; each case replaces (or adds) one flag's value.
BASE = {
    "plan": ["--model", "llama3-8b", "--system", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"],
    "serve": ["--model", "llama3-8b", "--system", "v5e", "--batch", "8", "--context", "4096"],
    "simulate": [
        "--model",
        "llama3-8b",
        "--chip",
        "v5e:2x2",
        "--prompt",
        "512",
        "--output",
        "64",
        "--rate",
        "1",
        "--requests",
        "200",
    ],  # fmt: skip
    "spec": [],
    "bench": [],
}
#: Flags that only mean something beside others: the case adds these too, so the bad value itself is judged.
COMPANIONS = {
    ("serve", "--acceptance"): ["--speculate", "4"],
    ("serve", "--speculate"): ["--acceptance", "0.8"],
    ("serve", "--draft-model"): ["--speculate", "4", "--acceptance", "0.8"],
    ("serve", "--draft-cost"): ["--speculate", "4", "--acceptance", "0.8"],
    ("serve", "--accept-len"): ["--speculate", "4"],
    ("simulate", "--attainment"): ["--goodput", "--ttft-slo", "1", "--tpot-slo", "0.1"],
    ("simulate", "--ttft-slo"): ["--tpot-slo", "0.1"],
    ("simulate", "--tpot-slo"): ["--ttft-slo", "1"],
    ("simulate", "--tbt-slo"): ["--ttft-slo", "1", "--tpot-slo", "0.1"],
    ("simulate", "--link"): ["--disaggregate", "1:4"],
}
#: Values no flag takes: bad types, non-finite numbers, out-of-range counts, over-long digit strings, unknown names.
HOSTILE = [
    "abc",
    "",
    " ",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "1e30",
    "0",
    "-1",
    "-4k",
    "1" * 40,
    "9" * 31,
    "1.5",
    "1e-3",
    "4kb",
    "0x10",
    "nosuch",
    "v5e:0x4",
    "--",
]
#: The hostile values a flag legitimately takes (a price of $1.50, a draft costing 0 or 1.5 target steps...).
VALID_FOR = {
    ("serve", "--price"): {"1.5", "1e-3"},
    ("serve", "--acceptance"): {"0", "1e-3"},
    ("serve", "--accept-len"): {"1.5"},  # 1.5 tokens per round of 4 drafts
    ("serve", "--draft-cost"): {"0", "1.5", "1e-3", "1e30"},
    ("spec", None): {"--"},  # the end of the flags: spec with no chip prints the table
    ("serve", "--utilisation"): {"1e-3"},
    ("plan", "--tie-within"): {"0", "1e-3"},  # no ties, or ties within 0.1%
    ("plan", "--hbm-fraction"): {"1e-3"},  # a share of HBM nothing fits in: an answer, "no layout can run"
    ("simulate", "--rate"): {"1.5", "1e-3"},
    ("simulate", "--price"): {"1.5", "1e-3"},
    ("simulate", "--attainment"): {"1e-3"},
    ("simulate", "--ttft-slo"): {"1.5", "1e-3"},  # a bound nothing meets is an answer (attainment 0)
    ("simulate", "--tpot-slo"): {"1.5", "1e-3"},
    ("simulate", "--tbt-slo"): {"1.5", "1e-3"},
    ("simulate", "--seed"): {"0"},
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser; ``bench`` is the bench's own (its flags follow ``bench`` on the command line)."""
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = dict(sub.choices)
    found["bench"] = bench.build_parser()
    return found


def _value_flags(parser: argparse.ArgumentParser):
    """``(spelling, names, positional)`` for every argument of ``parser`` that takes a value: the spelling used on
    the command line, and every name an error may give it (its aliases, or its metavar)."""
    for action in parser._actions:
        if action.nargs == 0 or isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            yield action.option_strings[0], tuple(action.option_strings), False
        else:
            yield None, (action.metavar or action.dest,), True  # (its refusal may quote the value instead)


def _argv(command: str, flag: str | None, value: str) -> list[str]:
    base = list(BASE[command])
    if flag is None:  # a positional (spec's CHIP)
        return [command, *base, value]
    if flag in base:
        base[base.index(flag) + 1] = value
        return [command, *base, *COMPANIONS.get((command, flag), [])]
    return [command, *base, *COMPANIONS.get((command, flag), []), f"{flag}={value}"]


def flag_cases() -> list[tuple[list[str], tuple[str, ...]]]:
    """The generated corpus: ``(argv, names the error may give the flag)`` per flag and hostile value."""
    cases = []
    for command, parser in _subparsers().items():
        for flag, names, positional in _value_flags(parser):
            for value in HOSTILE:
                if value in VALID_FOR.get((command, flag), ()):
                    continue
                cases.append((_argv(command, flag, value), names + ((value,) if positional and value else ())))
    return cases


_PLAN = ["plan", "--model", "llama3-8b", "--system", "v5e:4x4"]
BASE_PLAN = ["plan", *BASE["plan"]]
_SERVE70 = ["serve", "--model", "llama3-70b", "--batch", "8", "--context", "4096"]
_SERVE8 = ["serve", *BASE["serve"]]
_SPEC4 = ["--speculate", "4", "--acceptance", "0.8"]
_SIM = [
    "simulate",
    "--model",
    "llama3-8b",
    "--chip",
    "v5e:2x2",
    "--prompt",
    "512",
    "--output",
    "64",
    "--requests",
    "200",
]
#: Impossible combinations, each with the flags its refusal may name.
COMBINATIONS: list[tuple[list[str], tuple[str, ...]]] = [
    # tensor degree against the heads (Llama 3 70B: 64 query heads, 8 KV heads, d_ff 28,672)
    ([*_SERVE70, "--system", "v5e", "--chips", "128"], ("--chips",)),
    ([*_SERVE70, "--system", "v5e:8x16"], ("--system",)),
    ([*_SERVE70, "--system", "v5e:16x16"], ("--system",)),
    ([*_SERVE70, "--system", "h100", "--chips", "3"], ("--chips",)),
    ([*_SERVE70, "--system", "h100:3"], ("--system",)),
    (
        ["serve", "--model", "llama2-13b", "--system", "v5e", "--chips", "16", "--batch", "1", "--context", "1k"],
        ("--chips",),
    ),
    # chips that form no legal slice or cluster
    ([*_SERVE70, "--system", "v5e", "--chips", "12"], ("--chips",)),
    ([*_SERVE70, "--system", "v5e:3x5"], ("--system",)),
    ([*_SERVE70, "--system", "v5e:4x4x4"], ("--system",)),
    ([*_SERVE70, "--system", "h100:12"], ("--system",)),
    ([*_SERVE70, "--system", "h100", "--chips", "100000"], ("--chips",)),
    ([*_SERVE70, "--system", "v5e:4x4", "--chips", "8"], ("--chips",)),
    ([*_PLAN[:-1], "v5p:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"], ("--system",)),
    ([*_PLAN[:-1], "h100", "--batch-tokens", "1Mi", "--seq-len", "4096"], ("--system",)),
    ([*_PLAN[:-1], "h100:8", "--batch-tokens", "1Mi", "--seq-len", "4096", "--slices", "2"], ("--slices",)),
    # plan's search flags that mean nothing on this chip or framework, or name what is not there
    ([*BASE_PLAN, "--dtype", "fp8"], ("--dtype",)),  # v5e publishes no fp8 peak
    ([*BASE_PLAN, "--recipe", "fp8"], ("--recipe",)),  # the fp8 recipe's matmuls, ditto
    ([*BASE_PLAN, "--uneven-stages"], ("--uneven-stages",)),  # MaxText, the TPU default, splits layers evenly
    ([*BASE_PLAN, "--framework", "maxtext", "--uneven-stages"], ("--uneven-stages",)),
    ([*BASE_PLAN, "--tensor-across-nodes"], ("--tensor-across-nodes",)),  # a TPU slice has no nodes
    ([*BASE_PLAN, "--disable", "pipeline,nosuch"], ("--disable",)),
    ([*BASE_PLAN, "--disable", "pipeline", "--disable", "data"], ("--disable",)),
    ([*BASE_PLAN, "--interleave", "2,0"], ("--interleave",)),
    ([*BASE_PLAN, "--interleave", "2", "--interleave", "5000"], ("--interleave",)),
    # speculative decoding's flags without their partners, or both sources of the draft's cost
    ([*_SERVE8, "--speculate", "4"], ("--speculate", "--acceptance")),
    ([*_SERVE8, "--acceptance", "0.8"], ("--acceptance", "--speculate")),
    ([*_SERVE8, "--draft-cost", "0.1"], ("--draft-cost", "--speculate")),
    ([*_SERVE8, "--draft-model", "llama3-8b"], ("--draft-model", "--speculate")),
    ([*_SERVE8, *_SPEC4, "--draft-model", "llama3-8b", "--draft-cost", "0.1"], ("--draft-model", "--draft-cost")),
    ([*_SERVE8, *_SPEC4, "--draft-model", "nosuch"], ("--draft-model",)),
    ([*_SERVE8, "--accept-len", "2"], ("--accept-len", "--speculate")),
    ([*_SERVE8, *_SPEC4, "--accept-len", "2"], ("--acceptance", "--accept-len")),
    ([*_SERVE8, "--speculate", "4", "--accept-len", "6"], ("--accept-len",)),
    ([*_SERVE8, *_SPEC4, "--draft-model", "llama2-7b"], ("--draft-model",)),
    # batches and lengths nothing can hold or price
    ([*_PLAN, "--batch-tokens", "1000", "--seq-len", "4096"], ("--batch-tokens", "--seq-len")),
    ([*_PLAN, "--batch-tokens", "1e30", "--seq-len", "4096"], ("--batch-tokens",)),
    ([*_PLAN, "--batch-tokens", "1e30", "--seq-len", "1"], ("--batch-tokens",)),
    ([*_PLAN, "--batch-tokens", "1Mi", "--seq-len", "1e12"], ("--seq-len",)),
    (
        ["serve", "--model", "llama3-70b", "--system", "v5e", "--batch", "100000", "--context", "128k"],
        ("--batch", "--context"),
    ),
    (["serve", "--model", "llama3-8b", "--system", "v5e", "--batch", "4Mi", "--context", "4096"], ("--batch",)),
    ([*_SERVE8, "--prompt", "64Mi", "--output", "64Mi"], ("--prompt", "--output", "--batch", "--context")),
    # models the subcommand cannot price
    (
        ["plan", "--model", "deepseek-v3", "--system", "v5p:8x16x16", "--batch-tokens", "4Mi", "--seq-len", "4Ki"],
        ("--model",),
    ),
    (
        ["plan", "--model", "nosuch", "--system", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"],
        ("--model",),
    ),
    ([*_SERVE8, "--weights", "int4", "--kv", "int3"], ("--kv",)),
    # simulate's flags without their partners, or that contradict each other
    ([*_SIM, "--rate", "1", "--link", "ici"], ("--link",)),
    ([*_SIM, "--rate", "1", "--disaggregate", "1:4", "--link", "ib"], ("--link",)),
    ([*_SIM, "--rate", "1", "--disaggregate", "1:3"], ("--disaggregate",)),
    ([*_SIM, "--rate", "1", "--disaggregate", "1:12"], ("--disaggregate",)),
    ([*_SIM, "--rate", "1", "--tbt-slo", "1"], ("--tbt-slo",)),
    ([*_SIM, "--rate", "1", "--ttft-slo", "1"], ("--ttft-slo", "--tpot-slo")),
    ([*_SIM, "--goodput"], ("--goodput",)),
    ([*_SIM], ("--rate", "--goodput")),
    ([*_SIM, "--rate", "1", "--attainment", "0.9"], ("--attainment",)),
    ([*_SIM, "--rate", "1", "--sharegpt"], ("--prompt", "--sharegpt")),
    (["simulate", "--model", "llama3-8b", "--chip", "v5e:2x2", "--rate", "1"], ("--prompt", "--output")),
    ([*_SIM, "--rate", "1", "--chips", "8"], ("--chips",)),
    ([*_SIM, "--rate", "1", "--compute", "fp8"], ("--compute",)),
    ([*_SIM, "--rate", "1", "--prompt", "1Mi"], ("--prompt",)),
    ([*_SIM, "--rate", "1", "--kv", "int3"], ("--kv",)),
    (
        [
            "simulate",
            "--model",
            "llama3-70b",
            "--chip",
            "v5e",
            "--chips",
            "12",
            "--prompt",
            "1",
            "--output",
            "1",
            "--rate",
            "1",
        ],
        ("--chips",),
    ),  # fmt: skip
    (["spec", "v5e", "nosuch:4x4"], ("CHIP",)),
    (["bench", "--repeats", "1000000000"], ("--repeats",)),
]
CASES = flag_cases() + COMBINATIONS


class CpuTimeLimit(BaseException):
    """Raised by the CPU-time alarm: a BaseException, so the CLI's handler of unexpected errors cannot swallow it."""


def _on_alarm(signum, frame):
    raise CpuTimeLimit


def _no_measurement(*args, **kwargs):
    raise RuntimeError("a refused bench command reached a measurement")


def run_case(argv, names, capsys, cpu_seconds: float = CPU_SECONDS) -> tuple[str, str]:
    """Run ``main(argv)`` under the CPU cap; ``(outcome, detail)``: ``"refused"`` (status 2, one line naming one of
    ``names``), ``"unclear"`` (status 2, but not one line or the flag unnamed), ``"accepted"``, ``"internal"``
    (reported as an internal error), ``"escaped"`` (an exception reached the caller) or ``"cpu"`` (over the cap)."""
    previous = signal.signal(signal.SIGPROF, _on_alarm)
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    try:
        try:
            rc = main(list(argv))
        except SystemExit as stop:
            rc = stop.code
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except CpuTimeLimit:
        return "cpu", f"over {cpu_seconds:g} CPU seconds"
    except Exception as err:  # noqa: BLE001  (the corpus counts what escapes)
        return "escaped", f"{type(err).__name__}: {err}"
    finally:
        signal.signal(signal.SIGPROF, previous)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    if "internal error" in err or rc not in (0, 2):
        return "internal", f"status {rc}: {err.strip()}"
    if rc == 0:
        return "accepted", out[:200]
    command = argv[0] if argv else ""
    one = (
        len(lines) == 1
        and lines[0].startswith(f"tpu_notes {command}: error: ")
        and any(name in lines[0] for name in names)
        and "Traceback" not in err
        and out == ""
    )
    return ("refused" if one else "unclear"), err.strip()


@pytest.fixture
def no_measuring(monkeypatch):
    """A bench command the CLI accepts would measure this machine for minutes: here it stops with an error."""
    monkeypatch.setattr(bench, "measure_roofline", _no_measurement)


def test_the_corpus_covers_every_value_flag_of_every_subcommand():
    covered = {(argv[0], names[0]) for argv, names in flag_cases()}
    wanted = {(command, names[0]) for command, parser in _subparsers().items() for _, names, _ in _value_flags(parser)}
    assert wanted <= covered and len(wanted) >= 20, wanted - covered
    assert len(CASES) > 400


@pytest.mark.parametrize("argv, names", CASES, ids=[" ".join(a)[:90] for a, _ in CASES])
def test_hostile_input_is_refused_in_one_line(argv, names, capsys, no_measuring):
    outcome, detail = run_case(argv, names, capsys)
    assert outcome == "refused", (outcome, detail)


def test_the_cpu_cap_stops_a_runaway_case(capsys, monkeypatch):
    """The cap itself: a subcommand that never returns is reported as over the cap, not waited for."""
    import tpu_notes.__main__ as cli

    def spin(args):
        while True:
            pass

    monkeypatch.setattr(cli, "_spec", spin)
    assert run_case(["spec"], ("CHIP",), capsys, cpu_seconds=0.2)[0] == "cpu"


def test_an_unexpected_exception_is_one_line_saying_it_is_a_bug(capsys, monkeypatch):
    """Not bad input but a bug: one line that says so and where to report it, and a status other than 2."""
    import tpu_notes.__main__ as cli

    def broken(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "_spec", broken)
    assert main(["spec"]) == INTERNAL_ERROR != 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("tpu_notes spec: internal error") and "ZeroDivisionError" in err and ISSUES in err


def test_ctrl_c_is_one_line_too(capsys, monkeypatch):
    import tpu_notes.__main__ as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_spec", interrupted)
    assert main(["spec"]) == 130
    assert capsys.readouterr().err == "tpu_notes spec: interrupted\n"


@pytest.mark.parametrize(
    "command, flag", [(c, f) for c, flags in count_limits().items() for f in flags], ids=lambda x: str(x)
)
def test_every_count_flag_documents_its_maximum_and_keeps_to_it(command, flag, capsys):
    maximum, _ = count_limits()[command][flag]
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"at most {maximum:,}" in text
    _check_counts(command, build_parser().parse_args(_argv(command, flag, str(maximum))))  # the maximum itself
    assert main(_argv(command, flag, str(maximum + 1))) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{flag} must be at most {maximum:,}" in line


def test_the_price_bound_is_the_librarys():
    """``--price`` is refused above MAX_PRICE, the bound ``serving_cost`` itself puts on dollars per chip-hour."""
    d = I.deploy("llama3-8b", system_for("v5e", 4))
    assert I.serving_cost(d, 1024, 128, 8, dollars_per_chip_hour=MAX_PRICE).dollars_per_chip_hour == MAX_PRICE
    with pytest.raises(ValueError, match="dollars_per_chip_hour"):
        I.serving_cost(d, 1024, 128, 8, dollars_per_chip_hour=MAX_PRICE * 1.001)


@pytest.mark.parametrize(
    "command, flag", [(c, f) for c, flags in count_limits().items() for f in flags], ids=lambda x: str(x)
)
def test_every_count_flag_at_its_maximum_ends_cleanly(command, flag, capsys):
    """The largest value each count flag takes is priced or refused in one line, within the CPU cap: the maxima
    are limits the library can work at, not just numbers that parse."""
    names = tuple(count_limits()[command]) + ("--system", "--model")
    outcome, detail = run_case(_argv(command, flag, str(count_limits()[command][flag][0])), names, capsys)
    assert outcome in ("accepted", "refused"), (outcome, detail)


@pytest.mark.parametrize(
    "argv, flag",
    [
        ([*_PLAN, "--batch-tokens", "1e400", "--seq-len", "4096"], "--batch-tokens"),  # was an OverflowError traceback
        ([*_PLAN, "--batch-tokens", "1e30", "--seq-len", "4096"], "--batch-tokens"),  # was a search that never ended
        ([*_SERVE70, "--system", "v5e", "--chips", "128"], "--chips"),  # was priced: 128 chips split 64 query heads
    ],
    ids=["1e400", "1e30", "heads"],
)
def test_the_reported_commands_end_in_one_line_at_the_real_entry(argv, flag):
    """The reported command lines, run as a user runs them (``python -m tpu_notes``), under a CPU-time limit."""

    def limit_cpu():
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    out = subprocess.run(
        [sys.executable, "-m", "tpu_notes", *argv], capture_output=True, text=True, preexec_fn=limit_cpu
    )
    lines = out.stderr.splitlines()
    assert out.returncode == 2 and out.stdout == "" and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"tpu_notes {argv[0]}: error: ") and flag in lines[0] and "Traceback" not in out.stderr
