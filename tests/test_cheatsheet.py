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


def test_table_fits_88_columns_and_gpus_have_no_ici_rows():
    rows = cheatsheet.numbers_to_know()
    text = cheatsheet.format_numbers(rows)
    assert max(len(line) for line in text.splitlines()) <= 88
    assert not [r for r in rows if r.subject == "h100" and r.group in ("training", "collective")]


def test_bad_input():
    with pytest.raises(TypeError, match="chips"):
        cheatsheet.numbers_to_know("v5e")
    with pytest.raises(ValueError, match="chip"):
        cheatsheet.numbers_to_know(("nochip",))
    with pytest.raises(TypeError, match="rows"):
        cheatsheet.format_numbers("abc")
