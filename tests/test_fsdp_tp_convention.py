"""Mixed FSDP + tensor parallelism: the two conventions for its critical batch, against the scaling book's numbers.

The book's current text (jax-ml/scaling-book training.md, "Combining FSDP and Tensor Parallelism", and
applied-training.md, at commit 6f859b440efe108ac36867f252111af8e297f268, 2025-12-09; the change landed in
91e016f6d5a2ad2a80530743da2dad8e37087348 and 1aef27fd0983376bfabf53b050e4b027feac3a25, 2025-08-12) lets the FSDP
and tensor-parallel collectives overlap, ``T_comms = max(T_FSDP, T_TP)``, and finds ``B / N > α² / (M_X M_Y F)``.
Its older text (0819a7d8c55ddc113f5cba0285a5f97380cac1e3, 2025-02-18) adds them and finds ``4α² / (M_X M_Y F)``.
Every expected value below is computed here from α, F, M_X, M_Y (and B, N), then compared with the library and with
the figure the book prints.
"""

import json
import math
from pathlib import Path

import pytest

from tpu_notes import exercises
from tpu_notes import training as T
from tpu_notes.training.rooflines import COMBINES
from tpu_notes.transformer import get_model

ROOT = Path(__file__).resolve().parent.parent
ALPHA = 2550  # the book's v5p α = C / W_ici = 4.59e14 / 1.8e11 (training.md)


def threshold(alpha, d_ff, m_x, m_y, combine):
    """Tokens per chip above which the mixed layout is compute-bound at its best FSDP degree, from the algebra:
    at X_opt each axis's forward time is sqrt(B F / (N M_X M_Y)) · 4D / W; "max" keeps one, "sum" adds both."""
    comms_factor = 1 if combine == "max" else 2
    return (comms_factor * alpha) ** 2 / (m_x * m_y * d_ff)


def crit(d_ff, combine="max", m_x=2, m_y=1):
    return T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=d_ff, fsdp_axes=m_x, tp_axes=m_y, combine=combine)


# -- the book's worked numbers, current convention (default) -------------------------------------------------------
@pytest.mark.parametrize(
    ("d_ff", "book", "rel", "where"),
    [
        (32768, 99, 5e-3, "training.md: F = 32,768, M_X M_Y = 2 gives roughly B/N > 99"),
        (30000, 108, 5e-3, "training.md, across pods: Llama 3 70B with F about 30,000 gives 108"),
        (13824, 235, 5e-3, "training.md question 3.3: Llama 2 13B needs above 235"),
        (28672, 113, 5e-3, "applied-training.md: Llama 3 70B comms-bound below 2550²/2F = 113"),
    ],
)
def test_default_reproduces_the_current_book(d_ff, book, rel, where):
    expected = threshold(ALPHA, d_ff, 2, 1, "max")
    assert crit(d_ff) == pytest.approx(expected, rel=1e-9), where
    assert T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=d_ff, fsdp_axes=2) == crit(d_ff, "max")  # the default
    assert expected == pytest.approx(book, rel=rel), where


def test_llama3_70b_on_v5p_is_about_113_under_the_default():
    F = get_model("llama3-70b").d_ff
    assert F == 28672
    b = T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=F, fsdp_axes=2)
    assert b == pytest.approx(ALPHA**2 / (2 * F), rel=1e-9)
    assert 113 <= b < 114
    assert T.critical_batch_per_chip("fsdp+tensor", "v5p", d_ff=F, fsdp_axes=2) == b  # the alias


def test_the_current_books_derived_numbers():
    per_chip_32k = threshold(ALPHA, 32768, 2, 1, "max")
    # "a factor of eight" below pure FSDP over three axes (850)
    fsdp_3 = T.critical_batch_per_chip("fsdp", "v5p", n_axes=3)
    assert fsdp_3 == pytest.approx(ALPHA / 3, rel=1e-9)
    assert 8 <= fsdp_3 / crit(32768) < 9
    # figure caption: a 16x16x16 slice is comms-bound below 4096 · 2550² / (2 · 32768), about 4e5 tokens
    assert 4096 * crit(32768) == pytest.approx(4096 * per_chip_32k, rel=1e-9)
    assert 4096 * crit(32768) == pytest.approx(4e5, rel=0.02)
    # across pods: a 2M-token batch at 108 tokens per chip reaches "roughly 18k chips", beyond one 8960-chip pod
    chips = 2e6 / crit(30000)
    assert chips == pytest.approx(2e6 / threshold(ALPHA, 30000, 2, 1, "max"), rel=1e-9)
    assert 18_000 <= chips < 19_000 and chips > 16 * 20 * 28
    # applied-training.md: 4M tokens on a full pod is 468 per chip, above the 113 the mixed layout needs
    per_chip = 4 * 2**20 / 8960
    assert round(per_chip) == 468 and per_chip > crit(28672)
    # question 3.3: 3M tokens on 4096 chips (768 per chip) clears the 235 of Llama 2 13B
    assert 3 * 2**20 / 4096 > crit(13824)


def test_optimal_degrees_of_the_book():
    # training.md: N = 64, B = 48,000, F = 32,768 (M_X / M_Y = 2) "gives roughly 13.9" (the formula gives 13.7),
    # so X = 16 and Y = 4
    x = T.optimal_fsdp_degree(48_000, 64, 32768, fsdp_axes=2, tp_axes=1)
    assert x == pytest.approx(math.sqrt(48_000 / 32768 * 2 * 64), rel=1e-12)
    assert x == pytest.approx(13.9, rel=0.02)
    assert 2 ** round(math.log2(x)) == 16 and 64 // 16 == 4
    # question 3.3: sqrt(3e6 · 2 · 4096 / 13824) = 1333, so about 1024-way FSDP and 4-way TP
    x = T.optimal_fsdp_degree(3e6, 4096, 13824, fsdp_axes=2, tp_axes=1)
    assert x == pytest.approx(math.sqrt(3e6 * 2 * 4096 / 13824), rel=1e-12)
    assert x == pytest.approx(1333, rel=1e-3)
    assert 2 ** math.floor(math.log2(x)) == 1024 and 4096 // 1024 == 4
    # applied-training.md: sqrt(2 · 4.19e6 · 8960 / 28672) = 1618, so 2048-way FSDP and 4-way TP on the pod
    x = T.optimal_fsdp_degree(4.19e6, 8960, 28672, fsdp_axes=2, tp_axes=1)
    assert x == pytest.approx(math.sqrt(2 * 4.19e6 * 8960 / 28672), rel=1e-12)
    assert x == pytest.approx(1618, rel=1e-3)
    assert 2 ** round(math.log2(x)) == 2048 and round(8960 / 2048) == 4


# -- the older convention, and the ratio -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("d_ff", "book", "rel", "where"),
    [
        (32768, 400, 0.01, "the older training.md: F = 32,768 gives roughly B/N > 400"),
        (28672, 453, 2e-3, "the older applied-training.md: 2 · 2550² / F = 453 for Llama 3 70B"),
    ],
)
def test_sum_reproduces_the_older_text(d_ff, book, rel, where):
    expected = threshold(ALPHA, d_ff, 2, 1, "sum")
    assert expected == pytest.approx(4 * ALPHA**2 / (2 * d_ff), rel=1e-12)
    assert crit(d_ff, "sum") == pytest.approx(expected, rel=1e-9), where
    assert expected == pytest.approx(book, rel=rel), where


@pytest.mark.parametrize("d_ff", [8192, 13824, 28672, 53248])
@pytest.mark.parametrize(("m_x", "m_y"), [(1, 1), (2, 1), (1, 2), (3, 2)])
@pytest.mark.parametrize("chip", ["v5p", "v5e", "v6e"])
def test_sum_is_exactly_four_times_max(d_ff, m_x, m_y, chip):
    kw = dict(d_ff=d_ff, fsdp_axes=m_x, tp_axes=m_y)
    low = T.critical_batch_per_chip("fsdp+tp", chip, combine="max", **kw)
    high = T.critical_batch_per_chip("fsdp+tp", chip, combine="sum", **kw)
    assert high / low == pytest.approx(4, rel=1e-12)
    assert low == pytest.approx(T.ici_intensity(chip) ** 2 / (m_x * m_y * d_ff), rel=1e-12)


@pytest.mark.parametrize("strategy", ["dp", "data", "fsdp", "dcn"])
def test_single_collective_strategies_do_not_depend_on_combine(strategy):
    kw = {"n_axes": 3} if strategy != "dcn" else {}
    assert T.critical_batch_per_chip(strategy, "v5p", combine="sum", **kw) == T.critical_batch_per_chip(
        strategy, "v5p", combine="max", **kw
    )


def test_optimal_degree_is_the_same_under_both_conventions():
    """Both max and sum of an increasing and a decreasing term are smallest where the two are equal."""
    B, N, F, m_x, m_y = 4 * 2**20, 8960, 28672, 2, 1
    x_opt = T.optimal_fsdp_degree(B, N, F, fsdp_axes=m_x, tp_axes=m_y)
    assert T.optimal_fsdp_degree(B, N, F, fsdp_axes=m_x, tp_axes=m_y, combine="sum") == x_opt

    def fsdp_time(x):  # forward, in units of 4D / W: F X / (N M_X)
        return F * x / (N * m_x)

    def tp_time(x):  # B / (X M_Y)
        return B / (x * m_y)

    grid = [x_opt * 2 ** (k / 64) for k in range(-256, 257)]
    best_max = min(grid, key=lambda x: max(fsdp_time(x), tp_time(x)))
    best_sum = min(grid, key=lambda x: fsdp_time(x) + tp_time(x))
    assert best_max == pytest.approx(x_opt, rel=0.02) and best_sum == pytest.approx(x_opt, rel=0.02)
    assert fsdp_time(x_opt) == pytest.approx(tp_time(x_opt), rel=1e-12)


# -- mlp_layer_times agrees with the thresholds ----------------------------------------------------------------
def test_layer_times_cross_over_at_each_conventions_threshold():
    """A layout chosen so that X_opt is a whole number: F = 16 α, N = 4096, M_X = 2, M_Y = 1 gives X_opt = N α / F
    = 256 at B / N = α² / (2F). There the forward pass's comms equal its compute under "max"; under "sum" they do at
    4x the batch (X_opt doubles to 512)."""
    alpha = T.ici_intensity("v5p")
    assert alpha == ALPHA
    F, N, D = 16 * ALPHA, 4096, 8192
    for combine, x in (("max", 256), ("sum", 512)):
        B = crit(F, combine) * N
        assert T.optimal_fsdp_degree(B, N, F, fsdp_axes=2, tp_axes=1) == pytest.approx(x, rel=1e-12)
        t = T.mlp_layer_times("fsdp+tensor", "v5p", B, D, F, fsdp=x, tensor=N // x, fsdp_axes=2, combine=combine)
        assert t.forward_comms == pytest.approx(t.forward_compute, rel=1e-9), combine
        # 4x the batch at twice the degree (its new X_opt): comms grow 2x, compute 4x; a quarter: the reverse
        for k, y in ((4, 2 * x), (0.25, x // 2)):
            u = T.mlp_layer_times(
                "fsdp+tensor", "v5p", k * B, D, F, fsdp=y, tensor=N // y, fsdp_axes=2, combine=combine
            )
            assert u.forward_comms / u.forward_compute == pytest.approx(1 / math.sqrt(k), rel=1e-9), (combine, k)


def test_layer_times_combine_the_two_axes():
    kw = dict(fsdp=64, tensor=4, fsdp_axes=2, tp_axes=1)
    B, D, F = 2**20, 8192, 28672
    W = T.collective_bandwidth("v5p")
    t_fsdp = 2 * D * F * 2 / 4 / (W * 2)  # both bf16 weight matrices, this tensor rank's quarter, over 2 axes
    t_tp = 2 * B * D * 2 / 64 / W  # AllGather in + ReduceScatter out of this FSDP shard's [B, D]
    hi = T.mlp_layer_times("fsdp+tensor", "v5p", B, D, F, combine="max", **kw)
    lo = T.mlp_layer_times("fsdp+tensor", "v5p", B, D, F, combine="sum", **kw)
    assert hi.forward_comms == pytest.approx(max(t_fsdp, t_tp), rel=1e-12)
    assert hi.backward_comms == pytest.approx(max(2 * t_fsdp, t_tp), rel=1e-12)
    assert lo.forward_comms == pytest.approx(t_fsdp + t_tp, rel=1e-12)
    assert lo.backward_comms == pytest.approx(2 * t_fsdp + t_tp, rel=1e-12)
    assert T.mlp_layer_times("fsdp+tensor", "v5p", B, D, F, **kw) == hi  # the default
    assert hi.compute == lo.compute
    for s in ("data", "fsdp", "tensor"):
        args = dict(data=64, fsdp=64, tensor=4)
        assert T.mlp_layer_times(s, "v5p", B, D, F, combine="sum", **args) == T.mlp_layer_times(
            s, "v5p", B, D, F, combine="max", **args
        )


# -- bad input ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda c: T.critical_batch_per_chip("fsdp+tp", "v5p", d_ff=28672, combine=c),
        lambda c: T.optimal_fsdp_degree(4e6, 8960, 28672, combine=c),
        lambda c: T.mlp_layer_times("fsdp+tensor", "v5p", 2**20, 8192, 28672, fsdp=64, tensor=4, combine=c),
    ],
)
def test_a_wrong_combine_is_refused_by_name(call):
    for bad in ("add", "mean", "", "overlap"):
        with pytest.raises(ValueError, match=r"combine must be one of \['max', 'sum'\]"):
            call(bad)
    for bad in (None, 4, ["max"], True):
        with pytest.raises(TypeError, match="combine"):
            call(bad)
    assert call("MAX") == call("max")  # spelled in any case, like every other choice


def test_combines_lists_the_two_conventions():
    assert COMBINES == ("max", "sum")


# -- the exercises that rest on the threshold --------------------------------------------------------------------
def test_ch05_q16_accepts_the_current_answer_and_rejects_the_older_4x():
    ref = exercises.solution("ch05.q16")
    assert ref["critical_tokens_per_chip"] == pytest.approx(threshold(ALPHA, 13824, 2, 1, "max"), rel=1e-9)
    assert exercises.grade("ch05.q16", {**ref, "critical_tokens_per_chip": 235}).correct
    old = {**ref, "critical_tokens_per_chip": threshold(ALPHA, 13824, 2, 1, "sum")}  # 940
    g = exercises.grade("ch05.q16", old)
    assert g.attempted and not g.correct and "Hint" in g.message


def test_ch06_q9_accepts_the_current_answer_and_rejects_the_older_4x():
    # Exercise 6.9 asks for Llama 3 405B (d_ff 53,248, the published config) on one full pod
    ref = exercises.solution("ch06.q9")
    assert ref["critical_tokens_per_chip"] == pytest.approx(threshold(ALPHA, 53248, 2, 1, "max"), rel=1e-9)
    fsdp = ref["optimal_fsdp"]
    assert exercises.grade("ch06.q9", {"critical_tokens_per_chip": 61, "optimal_fsdp": fsdp}).correct
    older = threshold(ALPHA, 53248, 2, 1, "sum")  # 4x: about 244
    g = exercises.grade("ch06.q9", {"critical_tokens_per_chip": older, "optimal_fsdp": fsdp})
    assert g.attempted and not g.correct and "Hint" in g.message


# -- the chapters state the current convention -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["05_training_parallelism.ipynb", "06_training_llama3.ipynb"])
def test_chapters_name_the_older_4x_only_as_the_older_text(name):
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]]
    older = [s for s in sources if 'combine="sum"' in s or "combine='sum'" in s]
    assert older, f"{name} never says how to reproduce the older text's 4x (combine='sum')"
    for s in sources:
        if r"4\alpha^2" in s or "= 453" in s or "= 454" in s:
            assert "older" in s, f"{name}: a cell states the 4x threshold without calling it the older text:\n{s}"
