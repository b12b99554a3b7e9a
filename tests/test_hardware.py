"""The chip table: lookups, errors, derived figures and sources."""

import pytest

from tpu_notes import hardware
from tpu_notes.hardware import CHIPS, get_chip


def test_all_promised_chips_and_aliases():
    for name in [
        "v3",
        "v4p",
        "v4",
        "v5e",
        "v5p",
        "v6e",
        "trillium",
        "tpu7x",
        "ironwood",
        "a100",
        "h100",
        "h200",
        "b200",
        "H100",
        "V5E",
    ]:
        assert get_chip(name).name in CHIPS
    assert get_chip("v4") is get_chip("v4p")
    assert get_chip("Trillium") is get_chip("v6e")
    assert get_chip(get_chip("v5e")) is get_chip("v5e")


def test_unknown_chip_lists_known_ones():
    with pytest.raises(ValueError) as err:
        get_chip("v9x")
    for name in CHIPS:
        assert name in str(err.value)
    with pytest.raises(TypeError, match="chip"):
        get_chip(5)


def test_critical_intensities_match_the_books_worked_numbers():
    # roofline.md: v5e 1.97e14 / 8.2e11 ~ 240; H100 9.89e14 / 3.35e12 ~ 295; training.md: v5p ICI alpha 2550.
    assert round(get_chip("v5e").critical_intensity()) == 240
    assert round(get_chip("h100").critical_intensity()) == 295
    assert get_chip("v5p").critical_intensity(bandwidth="ici") == pytest.approx(4.59e14 / 1.8e11)
    assert round(get_chip("v5p").critical_intensity(bandwidth="dcn")) == 73440


def test_bidirectional_ici_is_twice_one_way():
    for c in CHIPS.values():
        if c.ici_bw_bidi is not None:
            assert c.ici_bw_bidi == 2 * c.ici_bw_oneway


def test_peak_flops_by_dtype_and_missing_figures():
    v5e = get_chip("v5e")
    assert v5e.peak_flops("int8") == 2 * v5e.peak_flops("bf16")
    with pytest.raises(ValueError, match="fp8"):
        v5e.peak_flops("fp8")
    with pytest.raises(ValueError, match="known dtypes"):
        v5e.peak_flops("fp64")
    with pytest.raises(ValueError, match="nvlink"):
        v5e.bandwidth("nvlink")
    with pytest.raises(ValueError, match="kind must be one of"):
        v5e.bandwidth("qpi")


def test_every_chip_has_a_source_for_every_figure():
    for c in CHIPS.values():
        for f in hardware.Chip.__dataclass_fields__:
            if f != "sources" and getattr(c, f) is not None:
                assert hardware.source(c.name, f) != "unknown"
    with pytest.raises(ValueError, match="field_name"):
        hardware.source("v5e", "not_a_field")


def test_mxu_peak_is_consistent_with_v5e_clock():
    # 4 MXUs x (2*8*128*128 FLOPs per 8 cycles) x 1.5 GHz is the chip's bf16 peak to within 1%.
    c = get_chip("v5e")
    per_cycle = 2 * 8 * c.mxu_size * c.mxu_size / 8
    assert c.mxus_per_core * c.cores_per_chip * per_cycle * c.clock_hz == pytest.approx(c.bf16_flops, rel=0.01)


def test_spec_table_rows_and_text():
    rows = hardware.spec_table(["v5e", "h100"])
    assert [r["chip"] for r in rows] == ["v5e", "h100"]
    assert rows[0]["HBM B/s"] == 8.2e11
    table = hardware.format_spec_table()
    text = table.text()
    assert len(text.splitlines()) == 1 + 3 + len(CHIPS) + 1  # caption, header, units and rule, a row per chip, a note
    assert table.column("BW")[table.column("chip").index("v5e")] == 8.2e11
    assert "GB/s" in text and "—" in text and all(len(line) <= 88 for line in text.splitlines())


def test_h800_cards():
    sxm, pcie, h100 = get_chip("h800"), get_chip("H800 PCIe"), get_chip("h100")
    # the SXM card has the H100 SXM's compute (DeepSeek-V3's MFU uses it); the PCIe card the book's 3026/2 fp8
    assert sxm.peak_flops("fp8") == h100.peak_flops("fp8") == 1.979e15
    assert pcie.peak_flops("fp8") == 3026e12 / 2
    assert sxm.nvlink_bw < h100.nvlink_bw
    assert get_chip("h800 sxm") is sxm


def test_v6e_and_v4p_are_complete():
    from tpu_notes import systolic
    from tpu_notes.topology import Slice

    assert Slice("v6e").n_cores == 256 * get_chip("v6e").cores_per_chip
    assert Slice("v6e").shape == (16, 16)
    # v4: 8 sublanes x 128 lanes x 2 ALUs at 1.05 GHz
    assert systolic.vpu_flops("v4p") == pytest.approx(8 * 128 * 2 * 1.05e9)
    for name in ("v4p", "v6e"):
        c = get_chip(name)
        assert None not in (c.cores_per_chip, c.mxus_per_core, c.clock_hz, c.mxu_size)


def test_vector_register_file():
    from tpu_notes import systolic

    assert systolic.vreg_file_bytes("v5p") == 256 * 2**10  # 64 VREGs of 8 x 128 x 4 bytes
    assert systolic.vreg_file_bytes("v4p") == 128 * 2**10
    with pytest.raises(ValueError, match="vregs_per_core"):
        systolic.vreg_file_bytes("v5e")


def test_critical_intensity_against_an_explicit_bandwidth():
    v4p = get_chip("v4p")
    assert v4p.critical_intensity("bf16", 1.23e12) == pytest.approx(2.75e14 / 1.23e12)
    with pytest.raises(ValueError, match="bandwidth"):
        v4p.critical_intensity("bf16", -1.0)


def test_vmem_is_binary_on_every_chip():
    for c in CHIPS.values():
        if c.vmem_bytes is not None:
            assert c.vmem_bytes % 2**20 == 0, c.name


def test_a_chip_built_by_hand_is_validated():
    from tpu_notes.hardware import Chip

    good = dict(
        name="x",
        kind="tpu",
        long_name="X",
        bf16_flops=1e14,
        int8_flops=None,
        fp8_flops=None,
        hbm_bytes=1e10,
        hbm_bw=1e12,
    )
    Chip(**good)
    for field, bad, err in (
        ("kind", "cpu", ValueError),
        ("bf16_flops", -1.0, ValueError),
        ("hbm_bw", float("nan"), ValueError),
        ("name", "", TypeError),
        ("mxu_size", 2.5, ValueError),
    ):
        with pytest.raises(err, match=field):
            Chip(**{**good, field: bad})
    with pytest.raises(ValueError, match="pod_shape"):
        Chip(**good, ici_dims=2, pod_shape=(16, 16, 16))
