"""Device setup: simulated CPU devices, descriptions, and the Colab switch."""

import subprocess
import sys

import pytest

from tpu_notes import devices


def test_setup_gives_eight_devices():
    devs = devices.setup(8)
    assert len(devs) == 8 and len({d.id for d in devs}) == 8
    info = devices.describe()
    assert info.count >= 8 and info.platform == "cpu" and info.simulated and info.chip is None
    assert str(info).startswith(f"JAX {info.jax_version} on 8 simulated CPU devices")


def test_setup_again_is_safe_and_too_many_is_explained(capsys):
    """JAX already started with 8: setup(16) says how to get 16 and returns the 8 there are (the demos shrink)."""
    devices.setup(8)
    assert capsys.readouterr().out == ""
    devs = devices.setup(16)
    assert len(devs) == 8
    assert "restart the kernel and run this cell first" in capsys.readouterr().out


def test_demo_devices_follow_one_rule():
    import jax

    assert devices.demo_devices(8) == jax.devices()[:8]
    assert devices.demo_devices(3, backend="cpu") == jax.devices("cpu")[:3]
    given = jax.devices()[2:5]
    assert devices.demo_devices(8, devices=given) == given  # fewer than asked: what there is
    assert devices.demo_devices(2, devices=given) == given[:2]
    assert len(devices.demo_devices(64)) == 8  # no backend has 64: the longest list
    with pytest.raises(ValueError, match="backend must be"):
        devices.demo_devices(2, backend="tpu")
    with pytest.raises(TypeError, match="devices must"):
        devices.demo_devices(2, devices="cpu")
    with pytest.raises(ValueError, match="at least one"):
        devices.demo_devices(2, devices=[])
    with pytest.raises(TypeError, match="JAX devices"):
        devices.demo_devices(2, devices=[1, 2])


def test_demo_devices_fall_back_to_the_cpu_when_the_accelerator_is_small(monkeypatch):
    """A 1-chip runtime (the default backend trimmed to one device): the 8-way demo gets 8 CPU devices."""
    import jax

    one = jax.devices()[:1]
    monkeypatch.setattr(devices, "default_devices", lambda: list(one))
    assert devices.demo_devices(1) == one
    assert devices.demo_devices(8) == jax.devices("cpu")[:8]


@pytest.mark.parametrize(
    "shape, n, fitted",
    [
        ((2, 4), 8, (2, 4)),
        ((2, 4), 4, (1, 4)),
        ((2, 4), 2, (1, 2)),
        ((2, 4), 1, (1, 1)),
        ((8,), 3, (2,)),
        ((3, 5), 5, (1, 5)),
        ((2, 4), 16, (2, 4)),
    ],
)
def test_fit_shape(shape, n, fitted):
    assert devices.fit_shape(shape, n) == fitted


def test_fit_shape_refuses_bad_shapes():
    with pytest.raises(ValueError, match="at most"):
        devices.fit_shape((10**300,), 8)
    with pytest.raises(TypeError, match="shape"):
        devices.fit_shape("2x4", 8)
    with pytest.raises(ValueError, match="n_devices"):
        devices.fit_shape((2, 4), 0)


def test_demo_mesh_shrinks_and_says_so(capsys):
    import jax

    mesh = devices.demo_mesh((2, 4), ("X", "Y"), jax.devices()[:8])
    assert dict(mesh.shape) == {"X": 2, "Y": 4} and capsys.readouterr().out == ""
    small = devices.demo_mesh((2, 4), ("X", "Y"), jax.devices()[:2])
    assert dict(small.shape) == {"X": 1, "Y": 2}
    assert "mesh is 1x2" in capsys.readouterr().out
    explicit = devices.demo_mesh((2, 4), ("X", "Y"), jax.devices()[:8], explicit=True)
    assert "Explicit" in str(explicit.axis_types[0])
    with pytest.raises(TypeError, match="explicit"):
        devices.demo_mesh((2, 4), ("X", "Y"), explicit="yes")


def test_enough_and_require(capsys):
    import jax

    assert devices.enough(8, jax.devices()[:8])
    assert not devices.enough(8, jax.devices()[:2], "the oracle")
    assert "the oracle needs 8 devices and this runtime has 2" in capsys.readouterr().out
    assert devices.require(4) == jax.devices()[:4]
    with pytest.raises(devices.NotEnoughDevices, match="needs 8 devices .* has 2"):
        devices.require(8, jax.devices()[:2])


def test_exercises_report_missing_devices_instead_of_failing(monkeypatch):
    """An exercise whose reference needs 8 devices, on a runtime with 2: "not graded here", and a wrong answer is
    still not marked correct."""
    import jax

    from tpu_notes import exercises

    monkeypatch.setattr(devices, "default_devices", lambda: jax.devices()[:2])
    monkeypatch.setattr(devices, "cpu_devices", lambda: jax.devices("cpu")[:2])
    # references are kept per process (a process's devices do not change); this test fakes a change, so it starts
    # from an empty store
    monkeypatch.setattr(exercises, "_SOLVED", {})
    g = exercises.grade("ch10.q4", [3, 5])  # a two-way ring of 6 devices
    assert not g.correct and "not graded here" in g.message and "needs 6 devices" in g.message


@pytest.mark.parametrize(
    "kind, chip",
    [
        ("TPU v5 lite", "v5e"),
        ("TPU v5p", "v5p"),
        ("TPU v4", "v4p"),
        ("TPU v6 lite", "v6e"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("cpu", None),
    ],
)
def test_device_kind_mapping(kind, chip):
    assert devices.chip_for_device_kind(kind) == chip


def test_bad_arguments():
    with pytest.raises(ValueError, match="n must be"):
        devices.setup(0)
    with pytest.raises(TypeError, match="device_kind"):
        devices.chip_for_device_kind(3)


def test_in_colab_switch(monkeypatch):
    monkeypatch.delenv("TPU_NOTES_FORCE_COLAB", raising=False)
    assert devices.in_colab() is ("google.colab" in sys.modules)
    monkeypatch.setenv("TPU_NOTES_FORCE_COLAB", "1")
    assert devices.in_colab()


def test_importing_tpu_notes_does_not_import_jax():
    code = (
        "import sys, tpu_notes; from tpu_notes import hardware, roofline, units, exercises, devices;"
        "exercises.all_ids(); assert 'jax' not in sys.modules, 'jax was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
