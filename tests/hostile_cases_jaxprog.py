"""Baseline calls of Chapter 10's module (tpu_notes.jaxprog) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import ODD, Case, ChipArg, Choice, Flag, Int, Num, Opt, Raw, lazy

J = "tpu_notes.jaxprog."


def _ring():
    from tpu_notes import jaxprog

    return jaxprog.ring_mesh(8, axis="devices")  # hypothesis's random names (letters qzjx) never spell it


def _arr(*shape):
    def make():
        import jax.numpy as jnp
        import numpy as np

        return jnp.asarray(np.random.default_rng(0).standard_normal(shape), jnp.float32)

    return make


def _not_array(good_shape_wrong: tuple):
    """Hostile values of an array argument: not arrays, integers, and an array of the wrong shape."""

    def ints():
        import numpy as np

        return np.ones(good_shape_wrong[1], np.int32)

    def wrong_shape():
        import jax.numpy as jnp

        return jnp.ones(good_shape_wrong[0], jnp.float32)

    return [None, "x", 3, ODD, [1.0, 2.0], lazy(ints), lazy(wrong_shape)]


_MESH = Raw(_ring, [None, "ring", 8, ODD, {"x": 8}], lazy=True)
_AXIS = Choice("devices")
_X = Raw(_arr(16, 64), _not_array(((16, 60), (16, 64))), lazy=True)
_W = Raw(_arr(64, 64), _not_array(((64, 60), (64, 64))), lazy=True)

# the MoE layer: T=64 tokens, D=16, E=8 experts, F=32
_MX = Raw(_arr(64, 16), _not_array(((64, 15), (64, 16))), lazy=True)
_MR = Raw(_arr(16, 8), _not_array(((15, 8), (16, 8))), lazy=True)
_MWI = Raw(_arr(8, 16, 32), _not_array(((4, 16, 32), (8, 16, 32))), lazy=True)
_MWO = Raw(_arr(8, 32, 16), _not_array(((8, 32, 15), (8, 32, 16))), lazy=True)


def _check():
    from tpu_notes import exercises

    return exercises.solution("ch10.q2")


def _reference(a, mesh):
    return a


def _inputs(rng, trial):
    import numpy as np

    return np.ones((2, 2)), None


def _inspect(fn, args):
    return None


# the ring collectives: 8 addends [8, 16] stacked, on the 8-device ring
_RX = Raw(_arr(64, 16), _not_array(((60, 16), (64, 16))), lazy=True)

# the Transformer block: T=4, D=16, 8 heads of 2, F=32 on the 8-device ring
_BX = Raw(_arr(4, 16), _not_array(((4, 12), (4, 16))), lazy=True)


def _bw(shape, wrong):
    return Raw(_arr(*shape), _not_array((wrong, shape)), lazy=True)


_BLOCK = dict(
    x=_BX,
    wq=_bw((16, 16), (16, 12)),
    wk=_bw((16, 16), (12, 16)),
    wv=_bw((16, 16), (16, 8)),
    wo=_bw((16, 16), (16, 12)),
    w_in=_bw((16, 32), (12, 32)),
    w_out=_bw((32, 16), (32, 12)),
)

_HLO_TEXT = """HloModule m, is_scheduled=true
ENTRY %e (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %s = (f32[4]{0}, f32[4]{0}, u32[], u32[]) collective-permute-start(%a), source_target_pairs={{0,1},{1,0}}
  ROOT %d = f32[4]{0} collective-permute-done(%s)
}
"""

CASES = {
    J + "ring_mesh": Case(
        n_devices=Opt(Int(8)),
        devices=Raw(None, ["cpu", [], [1, 2], ODD]),
        axis=Raw("x", [None, 3, "", "a b", ODD, ["x"]]),
    ),
    J + "collective_table": Case(mesh=_MESH, axis=_AXIS, rows=Int(64), cols=Int(128)),
    J + "allgather_matmul": Case(x=_X, w=_W, mesh=_MESH, axis=_AXIS),
    J + "collective_matmul": Case(x=_X, w=_W, mesh=_MESH, axis=_AXIS, bidirectional=Flag(True)),
    J + "reducescatter_matmul": Case(x=_X, w=_W, mesh=_MESH, axis=_AXIS, collective=Flag(True)),
    J + "matmul_hlo_collectives": Case(
        program=Choice("collective"), mesh=_MESH, axis=_AXIS, B=Int(8), D=Int(64), F=Int(64)
    ),
    J + "collective_matmul_time": Case(
        B=Int(2048),
        D=Int(8192),
        F=Int(32768),
        n=Int(8),
        chip=ChipArg("v5e"),
        dtype=Choice("bf16"),
        bidirectional=Flag(False),
    ),
    J + "moe_reference": Case(x=_MX, router=_MR, w_in=_MWI, w_out=_MWO, n_groups=Int(8), capacity=Int(2)),
    J + "moe_expert_parallel": Case(
        x=_MX, router=_MR, w_in=_MWI, w_out=_MWO, mesh=_MESH, axis=_AXIS, capacity=Opt(Int(2))
    ),
    J + "moe_hlo_collectives": Case(
        x=_MX, router=_MR, w_in=_MWI, w_out=_MWO, mesh=_MESH, axis=_AXIS, capacity=Opt(Int(2))
    ),
    J + "async_windows": Case(compiled_or_hlo_text=Raw(_HLO_TEXT, [None, 3, ODD, [1.0], b"HloModule"])),
    J + "ring_reduce_scatter": Case(x=_RX, mesh=_MESH, axis=_AXIS, bidirectional=Flag(True)),
    J + "ring_all_reduce": Case(x=_RX, mesh=_MESH, axis=_AXIS, bidirectional=Flag(True)),
    J + "ring_collective_rounds": Case(kind=Choice("reduce-scatter"), n=Int(8), bidirectional=Flag(True)),
    J + "transformer_block_reference": Case(**_BLOCK, n_heads=Int(8)),
    J + "transformer_block": Case(**_BLOCK, mesh=_MESH, axis=_AXIS, n_heads=Int(8)),
    J + "transformer_block_collectives": Case(**_BLOCK, mesh=_MESH, axis=_AXIS, n_heads=Int(8)),
    J + "moe_topk_reference": Case(x=_MX, router=_MR, w_in=_MWI, w_out=_MWO, k=Int(2)),
    J + "moe_topk_ragged": Case(x=_MX, router=_MR, w_in=_MWI, w_out=_MWO, k=Int(2)),
    J + "ProgramCheck": Case(
        reference=Raw(_reference, [None, 3, "ref", ODD]),
        make_inputs=Raw(_inputs, [None, 3, "inputs", ODD]),
        trials=Int(3, top=100),
        rtol=Num(1e-4, zero=True, top=0.1),
        atol=Num(1e-4, zero=True, top=1.0),
        seed=Int(0, zero=True),
        wrong=Raw((), [None, 3, "wrong", ODD, [3], (None,)]),
        inspect=Opt(Raw(_inspect, [3, "inspect", ODD, [1.0]])),
    ),
    J + "ProgramCheck.check_program": Case(
        self_=_check, fn=Raw(lambda a, mesh: a, [None, 3, "shard_mean", ODD, [1.0]], names=("answer",))
    ),
    J + "ProgramCheck.wrong_programs": Case(self_=_check),
}

K = "tpu_notes.kernels."


CASES.update(
    {
        K + "matmul_call": Case(
            M=Int(64, top=2**14),
            N=Int(128, top=2**14),
            K=Int(128, top=2**14),
            bm=Int(64),
            bn=Int(128),
            bk=Int(128),
            platform=Choice("tpu"),
            interpret=Flag(False),
        ),
        K + "matmul": Case(
            x=Raw(_arr(64, 128), _not_array(((64, 30), (64, 128))), lazy=True),
            y=Raw(_arr(128, 128), _not_array(((30, 128), (128, 128))), lazy=True),
            bm=Int(64),
            bn=Int(128),
            bk=Int(128),
        ),
        K + "matmul_error_bound": Case(
            x=Raw(_arr(8, 16), [None, 3, ODD, "x"], lazy=True), y=Raw(_arr(16, 4), [None, 3, ODD, "x"], lazy=True)
        ),
        K + "lowered_text": Case(
            fn=Raw(lambda a: a + 1, [None, 3, ODD, "f"]),
            args=Raw((1.0,), [None, 3, ODD, "x"]),
            platform=Choice("tpu"),
        ),
        K + "KernelRefused": Case(platform=Choice("tpu"), message=Raw("refused", [None, 3, ODD, b"m"])),
        K + "block_refusals": Case(block=Int(100, top=2**14), size=Int(256, top=2**14)),
        K + "vmem_budget": Case(bm=Int(64), bn=Int(128), bk=Int(128), buffers=Int(2)),
    }
)


COVERED = ("jaxprog", "kernels")
RESULT_RECORDS = {"jaxprog.CollectiveRow", "jaxprog.CollectiveMatmulTime", "jaxprog.AsyncWindow"}
