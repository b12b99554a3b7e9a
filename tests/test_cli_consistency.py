"""The four subcommands of ``python -m tpu_notes`` speak one language: the same count suffixes, the same system
spellings, legal chip counts, no null beside a number, and every error one ``tpu_notes <cmd>: error: ...`` line
with exit status 2 (never a traceback). Each case below is one a practitioner reported.

Published shapes used by hand (meta-llama config.json files; /work/shared/facts/models.md): Llama 3 70B has
d_ff 28672, 64 query heads and 8 KV heads of 128 dims over 80 layers (327,680 bytes of bf16 cache per token) and
70,553,706,496 parameters; Llama 3 8B has d_ff 14336, 32 query heads and 8 KV heads; Llama 2 13B has d_ff 13824 and
40 query and KV heads. H100 SXM: 80 GB
of HBM, 8 GPUs per NVLink node (NVIDIA H100 datasheet).
"""

import json
import math
import subprocess
import sys

import pytest

from tpu_notes.__main__ import SYSTEM_HELP, build_parser, main, parse_count

SHAPES = {  # model: (d_ff, query heads, KV heads), from the published configs
    "llama3-8b": (14336, 32, 8),
    "llama3-70b": (28672, 64, 8),
    "llama2-13b": (13824, 40, 40),
}


def _legal(model, n):
    """The rule written out: n splits d_ff and the query heads evenly, and divides the KV heads or is a multiple
    of them."""
    F, H, K = SHAPES[model]
    return F % n == 0 and H % n == 0 and (K % n == 0 or n % K == 0)


def _err(capsys, argv):
    """Run ``argv``; the exit status and the stderr lines (argparse's SystemExit counts as a return)."""
    try:
        rc = main(argv)
    except SystemExit as stop:  # bench's flags, as its own entry raises
        rc = stop.code
    return rc, capsys.readouterr().err.strip().splitlines()


def _json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


SERVE70 = ["serve", "--model", "llama3-70b", "--batch", "8", "--context", "4096"]


# ----------------------------------------------------------------------------------------------------- counts
@pytest.mark.parametrize(
    "text, value",
    [
        ("8k", 8_000),
        ("8K", 8_000),
        ("8Ki", 8_192),
        ("4M", 4_000_000),
        ("4Mi", 4 * 1024 * 1024),
        ("2G", 2_000_000_000),
        ("1Gi", 1024**3),
        ("3e6", 3_000_000),
        ("1024", 1024),
        ("1.5k", 1_500),
    ],
)
def test_one_count_parser_decimal_and_binary(text, value):
    assert parse_count(text, "--x") == value


@pytest.mark.parametrize("text", ["8x", "0", "1.5", "-5", "", "k", "4 MiB", "1.0001k"])
def test_count_parser_refuses_naming_the_flag(text):
    with pytest.raises(ValueError, match="--x"):
        parse_count(text, "--x")


PLAN_BASE = ["plan", "--model", "llama3-8b", "--system", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"]
SERVE_BASE = ["serve", "--model", "llama3-8b", "--system", "v5e", "--batch", "8", "--context", "4096"]
SIMULATE_BASE = ["simulate", "--model", "llama3-8b", "--chip", "v5e", "--rate", "1"]
COUNT_FLAGS = [
    (PLAN_BASE, "--batch-tokens", "batch_tokens"),
    (PLAN_BASE, "--seq-len", "seq_len"),
    (PLAN_BASE, "--slices", "slices"),
    (PLAN_BASE, "--max-context", "max_context"),
    (PLAN_BASE, "--top", "top"),
    (PLAN_BASE, "--max-pipeline", "max_pipeline"),
    (SERVE_BASE, "--batch", "batch"),
    (SERVE_BASE, "--context", "context"),
    (SERVE_BASE, "--chips", "chips"),
    (SERVE_BASE, "--prompt", "prompt"),
    (SERVE_BASE, "--output", "output"),
    (SERVE_BASE, "--speculate", "speculate"),
    (SIMULATE_BASE, "--chips", "chips"),
    (SIMULATE_BASE, "--replicas", "replicas"),
    (SIMULATE_BASE, "--prompt", "prompt"),
    (SIMULATE_BASE, "--output", "output"),
    (SIMULATE_BASE, "--requests", "requests"),
    (SIMULATE_BASE, "--budget", "budget"),
]


@pytest.mark.parametrize("base, flag, dest", COUNT_FLAGS, ids=[f for _, f, _ in COUNT_FLAGS])
def test_every_count_flag_takes_the_same_suffixes(base, flag, dest):
    parser = build_parser()
    for text, value in (("2k", 2000), ("2Ki", 2048), ("16", 16), ("1e3", 1000)):
        args = parser.parse_args([*base, flag, text])
        assert getattr(args, dest) == value, (flag, text)


def test_context_8k_is_accepted_like_batch_tokens_4mi(capsys):
    """The report: ``--context 8k`` was refused while ``--batch-tokens 4Mi`` was accepted."""
    data = _json(capsys, *SERVE70[:-2], "--system", "v5e", "--context", "8k")
    assert data["context"] == 8000 and data["fits"] is True
    binary = _json(capsys, *SERVE70[:-2], "--system", "v5e", "--context", "8Ki")
    plain = _json(capsys, *SERVE70[:-2], "--system", "v5e", "--context", "8192")
    assert binary == plain


@pytest.mark.parametrize("command", ["plan", "serve", "simulate"])
def test_help_says_which_suffixes_are_decimal_and_which_binary(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "k, M, G (powers of 1000" in text and "Ki, Mi, Gi (powers of 1024" in text


# ---------------------------------------------------------------------------------------------------- systems
@pytest.mark.parametrize("command", ["plan", "serve", "simulate"])
def test_one_spelling_of_systems_in_every_help(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(SYSTEM_HELP.split()) in text
    assert "CHIP:AxB" in text and "GPU:N" in text


def test_serve_help_no_longer_says_tpu_only(capsys):
    """The report: ``serve --chip h100`` was accepted while --help said a TPU generation."""
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--chip" in text and "h100" in text and "GPU" in text
    assert "a TPU generation (e.g. v5e, v5p, v6e)" not in text


@pytest.mark.parametrize(
    "spelled, bare",
    [
        (["--system", "v5e:4x4"], ["--chip", "v5e", "--chips", "16"]),
        (["--system", "h100:8"], ["--chip", "h100", "--chips", "8"]),
    ],
    ids=["tpu", "gpu"],
)
def test_serve_takes_the_system_as_plan_spells_it(spelled, bare, capsys):
    a = _json(capsys, *SERVE70, *spelled)
    b = _json(capsys, *SERVE70, *bare)
    assert a == b and a["system_spelled"] == spelled[1]


def test_plan_takes_the_same_gpu_spelling(capsys):
    data = _json(capsys, "plan", "--model", "llama3-8b", "--system", "h100:8", "--batch-tokens", "1Mi",
                 "--seq-len", "4Ki", "--top", "2")  # fmt: skip
    assert data["system"] == "h100:8" and len(data["ranked"]) == 2


def test_spec_takes_a_system_spelling_too(capsys):
    assert main(["spec", "v5e:4x4", "--json"]) == 0
    spelled = json.loads(capsys.readouterr().out)
    assert main(["spec", "v5e", "--json"]) == 0
    assert spelled == json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------------------ legal chip counts
def test_serve_on_h100_proposes_a_legal_count_not_3(capsys):
    """The report: serve proposed 3 H100s for Llama 3 70B. Memory alone needs 3: 70.55e9 params × 2 B = 141.1 GB
    of weights plus 8 × (4096 + 512) tokens × 327,680 B = 12.1 GB of cache, over 80 GB × 0.9 (the engine's 10%
    reserve) = 72 GB per GPU: ceil(153.2 / 72) = 3. But 3 divides neither d_ff 28,672 nor the 8 KV heads: 4."""
    weights = 70_553_706_496 * 2
    cache = 8 * (4096 + 512) * 327_680
    need = math.ceil((weights + cache) / (80e9 * 0.9))
    assert need == 3 and not _legal("llama3-70b", 3)
    first_legal = next(n for n in range(need, 9) if _legal("llama3-70b", n))
    assert first_legal == 4
    data = _json(capsys, *SERVE70, "--chip", "h100")
    assert data["n_chips"] == first_legal and data["smallest_topology_chips"] == first_legal
    assert data["fits"] is True


@pytest.mark.parametrize("model", sorted(SHAPES))
@pytest.mark.parametrize("chip", ["h100", "v5e"])
def test_every_proposed_count_is_legal(model, chip, capsys):
    for batch, context in ((1, 2048), (8, 4096)):
        data = _json(capsys, "serve", "--model", model, "--system", chip, "--batch", str(batch), "--context",
                     str(context))  # fmt: skip
        assert _legal(model, data["n_chips"]), (model, chip, batch, data["n_chips"])


@pytest.mark.parametrize(
    "argv, near",
    [
        (["--chip", "h100", "--chips", "3"], "2, 4"),
        (["--system", "h100:3"], "2, 4"),
        (["--chip", "v5e", "--chips", "12"], "8, 16"),
        (["--system", "v5e:4x3"], "8, 16"),
    ],
)
def test_an_illegal_count_is_refused_with_the_legal_neighbours(argv, near, capsys):
    rc, err = _err(capsys, [*SERVE70, *argv])
    assert rc == 2 and len(err) == 1 and err[0].startswith("tpu_notes serve: error: ")
    assert "d_ff (28,672)" in err[0] and "64 query heads" in err[0] and near in err[0]


def test_llama2_13b_has_40_kv_heads_so_16_chips_are_not_legal(capsys):
    """40 query and KV heads: 16 does not divide 40, so 13B stops at 8 chips (or 40 would need 13,824 % 40 == 0,
    which fails)."""
    assert [n for n in (1, 2, 4, 8, 16, 32, 40) if _legal("llama2-13b", n)] == [1, 2, 4, 8]
    rc, err = _err(capsys, ["serve", "--model", "llama2-13b", "--chip", "v5e", "--chips", "16", "--batch", "1",
                            "--context", "1024"])  # fmt: skip
    assert rc == 2 and len(err) == 1 and "40 query heads" in err[0]
    # a batch only 16 chips would hold: the error names the largest legal system and what it holds
    rc, err = _err(capsys, ["serve", "--model", "llama2-13b", "--chip", "v5e", "--batch", "16", "--context",
                            "8192"])  # fmt: skip
    assert rc == 2 and len(err) == 1 and "largest legal one, v5e 2x4 (8 chips)" in err[0]


# ------------------------------------------------------------------------------------- no null beside a number
@pytest.mark.parametrize("chip", ["h100", "v5e"])
def test_smallest_topology_is_spelled_whenever_its_chips_are_given(chip, capsys):
    """The report: ``smallest_topology: null`` beside ``smallest_topology_chips: 3``. Now both or neither, and the
    spelling is one --system accepts, naming the same number of chips."""
    data = _json(capsys, *SERVE70, "--chip", chip)
    assert isinstance(data["smallest_topology"], str) and isinstance(data["smallest_topology_chips"], int)
    again = _json(capsys, *SERVE70, "--system", data["smallest_topology"])
    assert again["n_chips"] == data["smallest_topology_chips"] == data["n_chips"]
    assert again["system_spelled"] == data["smallest_topology"]


def test_nothing_fits_is_an_error_not_a_pair_of_nulls(capsys):
    rc, err = _err(capsys, ["serve", "--model", "llama3-70b", "--chip", "v5e", "--batch", "100000", "--context",
                            "128k"])  # fmt: skip
    assert rc == 2 and len(err) == 1 and "do not fit" in err[0]


# ------------------------------------------------------------------------------------------------------ errors
BAD = [
    (
        ["plan", "--model", "deepseek-v3", "--system", "v5p:8x16x16", "--batch-tokens", "4Mi", "--seq-len", "4Ki"],
        "plan",
        "deepseek-v3",
    ),
    ([*PLAN_BASE, "--top", "0"], "plan", "--top"),
    ([*PLAN_BASE, "--seq-len", "4kb"], "plan", "--seq-len"),
    (
        ["plan", "--model", "llama3-8b", "--system", "h100", "--batch-tokens", "1Mi", "--seq-len", "4096"],
        "plan",
        "h100:",
    ),
    (["plan", "--model", "llama3-8b", "--system", "v5e:4x4"], "plan", "required"),
    (
        ["plan", "--model", "nosuch", "--system", "v5e:4x4", "--batch-tokens", "1Mi", "--seq-len", "4096"],
        "plan",
        "nosuch",
    ),
    ([*PLAN_BASE, "--rank-by", "fastest"], "plan", "--rank-by"),
    ([*SERVE70, "--system", "v9"], "serve", "v9"),
    ([*SERVE70, "--system", "h100:12"], "serve", "h100:12"),
    ([*SERVE70, "--system", "v5e:4x4", "--chips", "8"], "serve", "--chips"),
    ([*SERVE70[:-2], "--system", "v5e", "--context", "8x"], "serve", "--context"),
    ([*SERVE70, "--system", "v5e", "--weights", "int3"], "serve", "--weights"),
    (["spec", "nosuch"], "spec", "nosuch"),
    (["bench", "--repeats", "0"], "bench", "--repeats"),
    (["bench", "--chip", "nosuch"], "bench", "nosuch"),
    (["nosuch"], "", "nosuch"),
    ([], "", "required"),
]


@pytest.mark.parametrize("argv, command, word", BAD, ids=[" ".join(a[:1] + a[-2:]) for a, _, _ in BAD])
def test_every_error_is_one_line_with_status_2(argv, command, word, capsys):
    rc, err = _err(capsys, argv)
    prefix = f"tpu_notes {command}: error: " if command else "tpu_notes: error: "
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith(prefix) and word in err[0], err
    assert "Traceback" not in err[0]


def test_deepseek_v3_says_what_is_unsupported_in_a_subprocess():
    """The report: ``plan --model deepseek-v3`` died with a NotImplementedError traceback."""
    argv = ["plan", "--model", "deepseek-v3", "--system", "v5p:8x16x16", "--batch-tokens", "4Mi", "--seq-len", "4Ki"]
    out = subprocess.run([sys.executable, "-m", "tpu_notes", *argv], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith("tpu_notes plan: error: --model deepseek-v3 is not supported by plan")
    assert "MLA" in lines[0]


PLAN_REFUSALS = [  # (the flags added, the flag the refusal names, words naming what it takes)
    (["--framework", "jax"], "--framework", ["maxtext", "megatron", "torchtitan"]),
    (["--recipe", "int4"], "--recipe", ["bf16", "maxtext", "megatron", "fp8"]),
    (["--dtype", "int3"], "--dtype", ["bf16", "fp8"]),
    (["--dtype", "fp8"], "--dtype", ["bf16"]),  # v5e: no published fp8 peak
    (["--disable", "data"], "--disable", ["tensor", "pipeline", "expert", "context", "fsdp"]),
    (["--hbm-fraction", "1.5"], "--hbm-fraction", ["(0, 1]"]),
    (["--tie-within", "-0.1"], "--tie-within", ["[0, 1]"]),
    (["--max-pipeline", "0"], "--max-pipeline", ["positive whole number"]),
    (["--interleave", "1,x"], "--interleave", ["positive whole number"]),
    (["--uneven-stages"], "--uneven-stages", ["megatron", "torchtitan"]),
    (["--tensor-across-nodes"], "--tensor-across-nodes", ["GPU"]),
]


@pytest.mark.parametrize("extra, flag, words", PLAN_REFUSALS, ids=[" ".join(e) for e, _, _ in PLAN_REFUSALS])
def test_bad_plan_flags_are_refused_naming_the_flag_and_what_it_takes(extra, flag, words, capsys):
    rc, err = _err(capsys, [*PLAN_BASE, *extra])
    assert rc == 2 and len(err) == 1 and err[0].startswith("tpu_notes plan: error: ") and flag in err[0], err
    assert all(w in err[0] for w in words), (err, words)


def test_plan_list_flags_take_repeats_and_comma_lists_alike(capsys):
    parser = build_parser()
    comma = parser.parse_args([*PLAN_BASE, "--disable", "pipeline,context", "--interleave", "2,4"])
    repeated = parser.parse_args([*PLAN_BASE, "--disable", "pipeline", "--disable", "context", "--interleave", "2",
                                  "--interleave", "4"])  # fmt: skip
    from tpu_notes.__main__ import _plan_kwargs

    assert _plan_kwargs(comma) == _plan_kwargs(repeated)
    assert _plan_kwargs(comma)["disable"] == ("pipeline", "context")
    assert _plan_kwargs(comma)["interleave"] == (1, 2, 4)  # the plain schedule is always tried
    assert _json(capsys, *PLAN_BASE, "--disable", "pipeline,context") == _json(
        capsys, *PLAN_BASE, "--disable", "pipeline", "--disable", "context"
    )
