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


def test_setup_again_is_safe_and_too_many_is_explained():
    devices.setup(8)
    with pytest.raises(RuntimeError, match="Restart the kernel"):
        devices.setup(16)


@pytest.mark.parametrize("kind, chip", [("TPU v5 lite", "v5e"), ("TPU v5p", "v5p"), ("TPU v4", "v4p"),
                                        ("TPU v6 lite", "v6e"), ("NVIDIA H100 80GB HBM3", "h100"),
                                        ("cpu", None)])
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
    code = ("import sys, tpu_notes; from tpu_notes import hardware, roofline, units, exercises, devices;"
            "exercises.all_ids(); assert 'jax' not in sys.modules, 'jax was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
