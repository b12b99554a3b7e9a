"""The sharding notation and matmul plans (tpu_notes.sharding), against hand derivations and invariants.
(The XLA oracle for the plans is tests/test_hlo_oracle.py.)"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import collectives, sharding
from tpu_notes.hardware import get_chip
from tpu_notes.sharding import parse

MESH = {"X": 2, "Y": 4, "Z": 2}


def test_parse_and_print():
    a = parse("A[I_X, J_YZ]")
    assert a.name == "A" and a.dim_names == ("I", "J")
    assert a.dim("J").axes == ("Y", "Z")
    assert str(a) == "A[I_X, J_YZ]"
    u = parse("C[I, K]{U_X}")
    assert u.unreduced == ("X",) and str(u) == "C[I, K]{U_X}"
    assert parse(a) is a


def test_shard_shape_bytes_replication_by_hand():
    a = parse("A[I_X, J_YZ]")
    sizes = {"I": 64, "J": 128}
    assert a.shard_shape(sizes, MESH) == (64 // 2, 128 // 8)
    assert a.bytes_per_device(sizes, MESH, "fp32") == 32 * 16 * 4
    assert a.replication(MESH) == 1
    assert parse("B[I_Y, J]").replication(MESH) == 2 * 2  # X and Z unused
    assert parse("B[I, J]").replication(MESH) == 16
    assert parse("C[I, J]{U_X}").replication(MESH) == 8  # partial sums differ along X
    # one copy's bytes x replication = what the whole mesh stores
    b = parse("B[I_Y, J]")
    assert b.total_bytes(sizes, MESH) == 64 * 128 * 2 * b.replication(MESH)


def test_partition_spec():
    from jax.sharding import PartitionSpec as P

    assert parse("A[I_X, J_YZ, K]").partition_spec() == P("X", ("Y", "Z"), None)
    assert parse("A[I, J]").partition_spec() == P(None, None)


@pytest.mark.parametrize(
    "text,mesh,sizes,match",
    [
        ("A[I_W, J]", MESH, None, "not in the mesh"),
        ("A[I_X, J]{U_X}", MESH, None, "used twice"),
        ("A[I_Y, J]", MESH, {"I": 6, "J": 4}, "not divisible"),
    ],
)
def test_validation_errors(text, mesh, sizes, match):
    with pytest.raises(ValueError, match=match):
        arr = sharding.ShardedArray(
            parse(text.split("{")[0]).name,
            parse(text.split("{")[0]).dims,
            tuple(text.split("U_")[1].rstrip("}")) if "{" in text else (),
        )
        arr.validate(mesh, sizes)


def test_parse_errors():
    with pytest.raises(ValueError, match="used twice"):
        parse("A[I_X, J_X]")
    with pytest.raises(ValueError, match="cannot parse"):
        parse("A(I, J)")
    with pytest.raises(TypeError):
        parse(3)
    with pytest.raises(TypeError, match="mesh"):
        parse("A[I]").replication({})


# ---- the four cases, with bytes derived by hand
SZ = {"I": 64, "J": 128, "K": 256}


def kinds(plan):
    return [(s.kind, "".join(s.axes)) for s in plan.collectives]


def test_case1_no_comms():
    p = sharding.matmul_plan("A[I_X, J]", "B[J, K_Y]", mesh=MESH, sizes=SZ)
    assert p.case == 1 and kinds(p) == []
    assert str(p.out) == "C[I_X, K_Y]"
    assert p.flops_per_device == 2 * 32 * 128 * 64  # local [32,128] x [128,64]


def test_case2_gathers_the_split_operand():
    p = sharding.matmul_plan("A[I, J_X]", "B[J, K]", "C[I, K]", mesh={"X": 8}, sizes=SZ, dtype="fp32")
    assert p.case == 2 and kinds(p) == [("all-gather", "X")]
    ag = p.collectives[0]
    assert (ag.bytes_in, ag.bytes_out) == (64 * 16 * 4, 64 * 128 * 4)
    assert ag.nbytes == 64 * 128 * 4  # V is the gathered array


def test_case2_reduces_when_the_output_is_small():
    sizes = {"I": 256, "J": 256, "K": 64}  # gathering A moves 256x256, reducing C moves 2 x 256x64
    p = sharding.matmul_plan("A[I, J_X]", "B[J, K]", "C[I, K]", mesh={"X": 8}, sizes=sizes)
    assert kinds(p) == [("all-reduce", "X")]
    assert [s.kind for s in p.steps] == ["slice", "matmul", "all-reduce"]


def test_case3_allreduce_or_reducescatter():
    p = sharding.matmul_plan("A[I, J_X]", "B[J_X, K]", mesh={"X": 8}, sizes=SZ, dtype="fp32")
    assert p.case == 3 and kinds(p) == [("all-reduce", "X")]
    assert p.collectives[0].bytes_in == 64 * 256 * 4
    p = sharding.matmul_plan("A[I, J_X]", "B[J_X, K]", "C[I, K_X]", mesh={"X": 8}, sizes=SZ, dtype="fp32")
    (rs,) = p.collectives
    assert rs.kind == "reduce-scatter" and (rs.bytes_in, rs.bytes_out) == (64 * 256 * 4, 64 * 256 * 4 / 8)
    assert p.flops_per_device == 2 * 64 * 16 * 256


def test_case4_gathers_one_operand():
    p = sharding.matmul_plan("A[I_X, J]", "B[J, K_X]", "C[I_X, K]", mesh={"X": 8}, sizes=SZ)
    assert p.case == 4 and kinds(p) == [("all-gather", "X")]
    assert p.collectives[0].array == "B[J, K_X]"
    p = sharding.matmul_plan("A[I_X, J]", "B[J, K_X]", "C[I, K_X]", mesh={"X": 8}, sizes=SZ)
    assert p.collectives[0].array == "A[I_X, J]"


def test_output_resharding():
    p = sharding.matmul_plan("A[I_X, J]", "B[J, K]", "C[I, K_X]", mesh={"X": 8}, sizes=SZ)
    assert kinds(p) == [("all-to-all", "X")]
    p = sharding.matmul_plan("A[I_X, J]", "B[J, K]", "C[I, K]", mesh={"X": 8}, sizes=SZ)
    assert kinds(p) == [("all-gather", "X")]


def test_plan_errors():
    with pytest.raises(ValueError, match="share exactly one"):
        sharding.matmul_plan("A[I, J]", "B[K, L]", mesh=MESH, sizes={"I": 2, "J": 2, "K": 2, "L": 2})
    with pytest.raises(ValueError, match="differently"):
        sharding.matmul_plan("A[I, J_X]", "B[J_Y, K]", mesh=MESH, sizes=SZ)
    with pytest.raises(ValueError, match="out"):
        sharding.matmul_plan("A[I, J]", "B[J, K]", "C[I, J]", mesh=MESH, sizes=SZ)
    with pytest.raises(ValueError, match="dtype"):
        sharding.matmul_plan("A[I, J]", "B[J, K]", mesh=MESH, sizes=SZ, dtype="fp64")


def test_times_use_the_collective_model_and_the_roofline():
    p = sharding.matmul_plan("A[I, J_X]", "B[J_X, K]", mesh={"X": 4}, sizes={"I": 4096, "J": 8192, "K": 8192})
    times = p.times("v5p")
    chip = get_chip("v5p")
    ar = collectives.all_reduce_time(4096 * 8192 * 2, 4, chip.ici_bw_bidi).total
    assert times[-1].time == pytest.approx(ar)
    assert times[0].time == pytest.approx(2 * 4096 * 2048 * 8192 / chip.bf16_flops)  # compute-bound here
    assert p.total_time("v5p") == pytest.approx(sum(t.time for t in times))


def test_times_on_a_slice_agree_with_a_wrapped_chip():
    from tpu_notes.topology import Slice

    p = sharding.matmul_plan("A[I, J_X]", "B[J_X, K]", mesh={"X": 4}, sizes={"I": 512, "J": 512, "K": 512})
    s = Slice("v5p", (4, 4, 4))  # 4-long v5p axes wrap around
    assert [t.time for t in p.times(s)] == pytest.approx([t.time for t in p.times("v5p")])


@settings(max_examples=60, deadline=None)
@given(ax=st.sampled_from(["", "X", "Y", "XY", "YX"]), bx=st.sampled_from(["", "X", "Y", "XY"]), e=st.integers(3, 6))
def test_bytes_conservation(ax, bx, e):
    mesh = {"X": 2, "Y": 4}
    if set(ax) & set(bx):
        return
    a = parse(f"A[I{'_' + ax if ax else ''}, J{'_' + bx if bx else ''}]")
    sizes = {"I": 2**e * 8, "J": 2**e * 8}
    # bytes per device x devices / replication = one full copy
    assert a.bytes_per_device(sizes, mesh) * 8 / a.replication(mesh) == sizes["I"] * sizes["J"] * 2
    assert (
        math.prod(a.shard_shape(sizes, mesh)) * math.prod(math.prod(mesh[x] for x in d.axes) for d in a.dims)
        == sizes["I"] * sizes["J"]
    )
