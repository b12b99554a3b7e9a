"""Scale-out and card-variant figures of the chip table: v4 DCN, A100 NICs, H100 PCIe/NVL, A100 40GB."""

import pytest

from tpu_notes import hardware
from tpu_notes.hardware import CHIPS, get_chip


def test_new_names_and_aliases_resolve():
    for name, canonical in (
        ("h100-pcie", "h100-pcie"),
        ("H100 PCIe", "h100-pcie"),
        ("h100nvl", "h100-nvl"),
        ("H100 NVL", "h100-nvl"),
        ("a100-40g", "a100-40g"),
        ("A100 40GB", "a100-40g"),
        ("a100-80gb", "a100"),
    ):
        assert get_chip(name) is CHIPS[canonical], name


def test_v4_dcn_is_a_quarter_of_a_hosts_25_gb_per_s():
    v4 = get_chip("v4")
    assert v4.bandwidth("dcn") == 2.5e10 / 4 == get_chip("v5p").dcn_bw
    assert "per host" in hardware.source("v4p", "dcn_bw")


def test_a100_nic_and_node_egress_are_dgx_a100_hdr():
    for name in ("a100", "a100-40g"):
        c = get_chip(name)
        assert c.bandwidth("nic") == 25e9  # one 200 Gb/s HDR port per GPU
        assert c.bandwidth("node_egress") == c.node_size * c.dcn_bw == 2e11
        with pytest.raises(ValueError, match="ambiguous"):
            c.bandwidth("dcn")
        assert "DGX A100" in hardware.source(c, "node_egress_bw")


def test_a100_cluster_prices_a_cross_node_all_reduce():
    from tpu_notes.gpu import GpuCluster

    cluster = GpuCluster("a100", 1024)
    assert cluster.node_egress_bw == get_chip("a100").node_egress_bw
    t = cluster.collective_time("all-reduce", 1e9, 1024, 8)
    # every node whole in the group: 2 x V (M - 1) / M over the node's 200 GB/s of NICs
    assert t.bandwidth_time == pytest.approx(2 * 1e9 * (127 / 128) / 2e11)
    assert t.total >= t.bandwidth_time > 0
    # the same all-reduce on H100 nodes (8 x 400 Gb/s) is twice as fast
    h = GpuCluster("h100", 1024).collective_time("all-reduce", 1e9, 1024, 8)
    assert t.bandwidth_time == pytest.approx(2 * h.bandwidth_time)


def test_pcie_cards_store_dense_figures():
    pcie, nvl, sxm = get_chip("h100-pcie"), get_chip("h100-nvl"), get_chip("h100")
    assert pcie.bf16_flops == pytest.approx(756.5e12)
    assert pcie.peak_flops("fp8") == pytest.approx(1513e12) == get_chip("h800-pcie").fp8_flops
    assert nvl.bf16_flops == pytest.approx(835.5e12)
    assert nvl.peak_flops("int8") == pytest.approx(3341e12 / 2)
    for c in (pcie, nvl):
        assert c.bf16_flops < sxm.bf16_flops and c.nvlink_bw < sxm.nvlink_bw
        assert "sparsity" in hardware.source(c, "bf16_flops")
    assert (pcie.hbm_bytes, pcie.hbm_bw) == (80e9, 2.0e12)
    assert (nvl.hbm_bytes, nvl.hbm_bw) == (94e9, 3.9e12)
    assert pcie.sms == 114 and nvl.sms is None  # only figures a source states


def test_a100_40gb_differs_only_in_hbm():
    big, small = get_chip("a100"), get_chip("a100-40g")
    assert (small.hbm_bytes, small.hbm_bw) == (40e9, 1.555e12)
    for f in ("bf16_flops", "int8_flops", "sms", "clock_hz", "l2_bytes", "nvlink_bw", "dcn_bw", "node_egress_bw"):
        assert getattr(small, f) == getattr(big, f), f
    assert small.critical_intensity() > big.critical_intensity()


def test_pcie_cards_without_nics_are_refused_by_gpu_cluster():
    from tpu_notes.gpu import GpuCluster

    with pytest.raises(ValueError, match="node size|dcn_bw"):
        GpuCluster("h100-pcie", 16)
