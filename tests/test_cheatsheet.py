"""tpu_notes.cheatsheet: every number comes from the function it names, and the table fits the page."""

import pytest

from tpu_notes import cheatsheet
from tpu_notes.roofline import critical_batch_size
from tpu_notes.training import critical_batch_per_chip


def test_numbers_agree_with_the_functions_they_name():
    rows = {(r.subject, r.name): r for r in cheatsheet.numbers_to_know(("v5e", "v5p"), ("llama3-70b",))}
    assert rows[("v5e", "critical batch (HBM, bf16)")].value == pytest.approx(critical_batch_size("v5e"))
    assert rows[("v5p", "data/FSDP critical batch per chip, one axis")].value == pytest.approx(2550, rel=1e-3)
    assert rows[("v5p", "DCN critical batch per slice")].value == pytest.approx(critical_batch_per_chip("dcn", "v5p"))
    assert rows[("llama3-70b", "KV cache per token (bf16)")].value == 327_680


def test_tables_fit_88_columns_and_gpus_get_their_own_network():
    rows = cheatsheet.numbers_to_know()
    text = cheatsheet.format_numbers(rows)
    table_lines = [line for line in text.splitlines() if not line.startswith("GPU rows")]  # the note may wrap
    assert max(len(line) for line in table_lines) <= 88
    chips = cheatsheet.chips_table(rows)
    assert chips.column("B_crit HBM")[0] == round(critical_batch_size("v5e"))
    assert cheatsheet.models_table(rows).column("KV cache per token")[1] == 327_680
    assert len(cheatsheet.formulas_table().rows) == len(cheatsheet.FORMULAS)
    by = {(r.subject, r.name): r for r in rows}
    # H100: C / W_nvlink = 989e12 / 450e9 = 2198 tokens per GPU in a node; a whole node across nodes needs
    # 8 GPUs x 989e12 / 400e9 = 19,780 tokens; an AllGather of 1 GB over 8 GPUs moves 7/8 GB per GPU at 450 GB/s
    assert by[("h100", "data/FSDP critical batch per GPU, NVLink node")].value == pytest.approx(989e12 / 450e9)
    assert by[("h100", "data critical batch per node, InfiniBand")].value == pytest.approx(8 * 989e12 / 400e9)
    ag = by[("h100", "AllGather of 1 GB over one 8-GPU NVLink node")].value
    assert ag >= 1e9 * 7 / 8 / 450e9 and ag == pytest.approx(1e9 * 7 / 8 / 450e9, rel=0.05)
    h100_line = next(line for line in text.splitlines() if line.startswith("h100"))
    assert "—" not in h100_line and "19,780" in h100_line and "2198" in h100_line
    assert "NVLink" in text  # the footnote says what the GPU columns mean


def test_a_gpu_the_network_model_cannot_price_says_why():
    rows = cheatsheet.numbers_to_know(("v100", "h100"), ())
    assert not [r for r in rows if r.subject == "v100" and r.group in ("training", "collective")]
    text = cheatsheet.format_numbers(rows)
    assert "v100: –, no NVSwitch node" in text


def test_bad_input():
    with pytest.raises(TypeError, match="chips"):
        cheatsheet.numbers_to_know("v5e")
    with pytest.raises(ValueError, match="chip"):
        cheatsheet.numbers_to_know(("nochip",))
    with pytest.raises(TypeError, match="rows"):
        cheatsheet.format_numbers("abc")
    with pytest.raises(TypeError, match="rows"):
        cheatsheet.chips_table([3])
    with pytest.raises(TypeError, match="rows"):
        cheatsheet.models_table("abc")
