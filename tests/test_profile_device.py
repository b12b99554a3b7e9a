"""The device-plane reader of tpu_notes.profile on XSpace traces written by hand to XProf's schema: TPU planes
("XLA Ops" named by the op, the module from an enclosing "XLA Modules" event) and GPU planes (one line per
stream, kernels with hlo_op / hlo_module stats). Expected values are written out from the hand-built traces."""

import pytest

jax = pytest.importorskip("jax")

from tpu_notes import profile  # noqa: E402

P = jax.profiler.ProfileData


def _plane(pid, name, lines, events, stats=("hlo_op", "hlo_module")):
    """``lines``: {line name: [(event metadata id, offset ps, duration ps, {stat id: str})]}."""
    body = []
    for k, (ln, evs) in enumerate(lines.items()):
        es = []
        for mid, off, dur, st in evs:
            s = " ".join(f'stats {{ metadata_id: {i} str_value: "{v}" }}' for i, v in st.items())
            es.append(f"events {{ metadata_id: {mid} offset_ps: {off} duration_ps: {dur} {s} }}")
        body.append(f'lines {{ id: {k + 1} name: "{ln}" timestamp_ns: 0 {" ".join(es)} }}')
    md = [f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for i, n in events.items()]
    md += [f'stat_metadata {{ key: {i + 1} value {{ id: {i + 1} name: "{n}" }} }}' for i, n in enumerate(stats)]
    return f'planes {{ id: {pid} name: "{name}" {" ".join(body + md)} }}'


US = 1_000_000  # ps per µs


def _tpu_space():
    # per device: module "jit_f(77)" spans 0-100 µs holding fusion.0 (10 µs) and dot.1 (30 µs); module "jit_g"
    # spans 200-300 µs holding fusion.0 (5 µs); device 1 runs dot.1 twice as long
    ev = {1: "fusion.0", 2: "dot.1", 3: "jit_f(77)", 4: "jit_g"}
    planes = []
    for d in (0, 1):
        ops = [(1, 1 * US, 10 * US, {}), (2, 20 * US, 30 * (d + 1) * US, {}), (1, 210 * US, 5 * US, {})]
        mods = [(3, 0, 100 * US, {}), (4, 200 * US, 100 * US, {})]
        planes.append(_plane(d + 1, f"/device:TPU:{d}", {"XLA Modules": mods, "XLA Ops": ops, "Steps": mods}, ev))
    planes.append(_plane(9, "/host:CPU", {"python": [(1, 0, 5 * US, {})]}, ev))
    return P.text_proto_to_serialized_xspace(" ".join(planes))


def _gpu_space(derived=False):
    # per GPU: stream 7 runs the kernel of fusion.0 (10 µs) and a memcpy without stats; stream 9 runs dot.1 as two
    # kernels (20 µs + 4 µs); ``derived`` adds XProf's "XLA Ops" line holding the same ops once each
    ev = {1: "loop_add_fusion", 2: "sm90_gemm", 3: "splitk_reduce", 4: "MemcpyD2D", 5: "fusion.0", 6: "dot.1"}
    planes = []
    for d in (0, 1):
        st0 = {1: "fusion.0", 2: "jit_f"}
        st1 = {1: "dot.1", 2: "jit_f"}
        lines = {
            "Stream #7(compute)": [(1, 0, 10 * US, st0), (4, 50 * US, 2 * US, {})],
            "Stream #9(compute)": [(2, 12 * US, 20 * US, st1), (3, 33 * US, 4 * US, st1)],
        }
        if derived:
            lines["XLA Ops"] = [(5, 0, 10 * US, st0), (6, 12 * US, 25 * US, st1)]
        planes.append(_plane(d + 1, f"/device:GPU:{d}", lines, ev))
    return P.text_proto_to_serialized_xspace(" ".join(planes))


def test_tpu_ops_come_from_event_names_and_modules_from_enclosing_events():
    evs = profile.device_events(_tpu_space())
    assert {(e.device, e.name, e.module) for e in evs} == {
        (d, n, m) for d in (0, 1) for n, m in (("fusion.0", "jit_f"), ("dot.1", "jit_f"), ("fusion.0", "jit_g"))
    }
    assert all(e.platform == "TPU" and e.line == "XLA Ops" for e in evs)
    assert len(evs) == 6  # the host plane and the "Steps" line are not read
    rows = {(r.module, r.name): r for r in profile.device_op_table(evs)}
    dot = rows[("jit_f", "dot.1")]
    assert dot.devices == (0, 1) and dot.counts == (1, 1)
    assert dot.seconds == pytest.approx((30e-6, 60e-6))
    assert dot.mean_s == pytest.approx(45e-6) and dot.mean_count == 1
    only_g = profile.device_events(_tpu_space(), module="jit_g")
    assert [(e.device, e.name) for e in only_g] == [(0, "fusion.0"), (1, "fusion.0")]


def test_gpu_kernels_from_all_streams_counted_once_per_device():
    evs = profile.device_events(_gpu_space())
    assert {e.line for e in evs} == {"Stream #7(compute)", "Stream #9(compute)"}
    assert all(e.module == "jit_f" for e in evs) and "MemcpyD2D" not in {e.name for e in evs}
    rows = {r.name: r for r in profile.device_op_table(evs)}
    assert set(rows) == {"fusion.0", "dot.1"}
    assert rows["dot.1"].counts == (2, 2)  # two kernels per device, not four
    assert rows["dot.1"].mean_s == pytest.approx(24e-6)
    assert rows["fusion.0"].mean_count == 1  # two GPUs ran it once each: one execution per device


def test_gpu_with_derived_ops_line_reads_only_that_line():
    evs = profile.device_events(_gpu_space(derived=True))
    assert {e.line for e in evs} == {"XLA Ops"}
    rows = {r.name: r for r in profile.device_op_table(evs)}
    assert rows["dot.1"].counts == (1, 1) and rows["dot.1"].mean_s == pytest.approx(25e-6)
    assert rows["fusion.0"].seconds == pytest.approx((10e-6, 10e-6))


def test_synthetic_helper_matches_what_it_was_asked_for():
    ops = (("a.1", 10e-6), ("b.2", 20e-6), ("a.1", 5e-6))
    for platform in ("TPU", "GPU"):
        b = profile.synthetic_device_trace(platform, devices=3, streams=2, ops=ops, module="jit_m", steps=2)
        rows = {r.name: r for r in profile.device_op_table(profile.device_events(b))}
        assert rows["a.1"].counts == (4, 4, 4) and rows["b.2"].counts == (2, 2, 2)
        # device N's times are scaled by 1 + N / 10; two steps
        assert rows["a.1"].seconds == pytest.approx(tuple(2 * 15e-6 * (1 + d / 10) for d in range(3)))
        assert {r.module for r in rows.values()} == {"jit_m"}


def test_cpu_trace_has_no_device_planes_and_the_cpu_path_still_reads_it():
    import jax.numpy as jnp

    trace = profile.capture(jax.jit(lambda x: (x @ x).sum()), jnp.ones((32, 32)), steps=1)
    assert profile.device_events(trace) == []
    assert profile.events(trace)  # the CPU reader still finds the ops


def test_bad_inputs():
    with pytest.raises(ValueError, match="serialized XSpace"):
        profile.device_events(b"\xff\x00 not a proto")
    with pytest.raises(TypeError, match="xspace"):
        profile.device_events(3)
    with pytest.raises(ValueError, match="mixes TPU and GPU"):
        profile.device_op_table(profile.device_events(_tpu_space()) + profile.device_events(_gpu_space()))
    with pytest.raises(ValueError, match="ops"):
        profile.synthetic_device_trace(ops=[("x", -1.0)])
