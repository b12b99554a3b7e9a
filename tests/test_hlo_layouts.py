"""tpu_notes.hlo.layouts / parse_layout against a real TPU HLO module (book/data, from XLA's own tests) and against
padding worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_notes import hlo

DATA = Path(__file__).resolve().parent.parent / "book" / "data" / "tpu_output_fusion_all_reduce.hlo"


@pytest.fixture(scope="module")
def text():
    return DATA.read_text()


def test_the_stored_module_records_its_source(text):
    head = text.split("HloModule", 1)[0]
    assert "github.com/openxla/xla/blob/5e656e167de546b7411fa871457ba4c8fefd0573/" in head
    assert "alias_info_test.cc" in head


def test_every_array_of_the_tpu_module_is_read(text):
    found = hlo.layouts(text)
    # 24 instructions; the two tuples hold two arrays each: 26 arrays, 4 of them scalars
    assert len(found) == 26
    entry = [x for x in found if x.instruction in ("p0", "p1", "p2", "p3")][-4:]
    assert [str(x) for x in entry] == [
        "bf16[4096,9216]{1,0:T(8,128)(2,1)}",
        "s8[9216,6144]{1,0:T(8,128)(4,1)S(1)}",
        "bf16[1024,6144]{1,0:T(8,128)(2,1)S(1)}",
        "bf16[4096,6144]{1,0:T(8,128)(2,1)}",
    ]
    assert [x.memory for x in entry] == ["HBM", "VMEM", "VMEM", "HBM"]
    # every dimension here is a multiple of its tile: nothing is padded
    assert all(x.padding == 1.0 for x in found)
    conv = next(x for x in found if x.instruction == "convolution")
    assert conv.dtype == "bf16" and conv.dims == (1024, 6144) and conv.tiles == ((8, 128), (2, 1))
    assert conv.memory_space == 1 and conv.bytes == 2 * 1024 * 6144


def test_wrapped_instructions_are_joined(text):
    """The file wraps long instructions over lines, as XLA's tests do; the parser reads them whole."""
    m = hlo.parse_module(text)
    assert m.name == "OutputFusionAllReduce" and m.entry == "entry"
    ar = hlo.collectives(text)
    assert [c.kind for c in ar] == ["all-reduce"] and ar[0].group_size == 8
    root = next(i for i in m.instructions if i.name == "fusion")
    assert root.opcode == "fusion" and root.operands == ("p3", "p2", "p0", "p1")


def test_padding_of_a_small_bf16_array():
    # bf16[3,1000] in T(8,128): rows 3 -> 8, columns 1000 -> 8 x 128 = 1024; (2,1) packs row pairs inside a tile
    x = hlo.parse_layout("bf16[3,1000]{1,0:T(8,128)(2,1)}")
    assert x.bytes == 3 * 1000 * 2 == 6000
    assert x.padded_bytes == 8 * 1024 * 2 == 16384
    assert x.padding == pytest.approx(16384 / 6000)
    assert x.memory == "HBM"


def test_the_tile_follows_the_dimension_order():
    # {0,1}: dimension 0 is minor, so the tile's 128 applies to dimension 0 (3 -> 128) and its 8 to dimension 1
    x = hlo.parse_layout("f32[3,1000]{0,1:T(8,128)}")
    assert x.padded_bytes == 1000 * 128 * 4
    # untiled: exactly the logical bytes
    assert hlo.parse_layout("f32[3,1000]{1,0}").padded_bytes == 12000
    assert hlo.parse_layout("f32[3,1000]").padding == 1.0
    # a scalar tiled by 128 takes one tile
    assert hlo.parse_layout("s32[]{:T(128)}").padded_bytes == 512


def test_an_unknown_memory_space_is_named_by_number():
    assert hlo.parse_layout("f32[8,128]{1,0:T(8,128)S(5)}").memory == "S(5)"


def test_cpu_layouts_have_no_tiles():
    text = "HloModule m\n\nENTRY e {\n  ROOT p = f32[3,1000]{1,0} parameter(0)\n}\n"
    (x,) = hlo.layouts(text)
    assert x.tiles == () and x.memory_space == 0 and x.padded_bytes == x.bytes == 12000


def test_bad_layouts_are_refused():
    for bad in ("bf16[3,1000]{1,1}", "bf16[3]{0:T(0)}", "x[3]", ""):
        with pytest.raises(ValueError, match="shape"):
            hlo.parse_layout(bad)
    with pytest.raises(TypeError, match="shape"):
        hlo.parse_layout(3)
