"""Two JAX processes, one mesh (jax.distributed over 127.0.0.1, gloo CPU collectives, 4 devices each): Chapter 5's
training layout and Chapter 10's collective matmul give the single-process answers."""

import numpy as np
import pytest

from tpu_notes import multihost, parallel
from tpu_notes.training import Parallelism


def _launch(task):
    try:
        return multihost.launch(task, n_processes=2, devices_per_process=4, timeout_s=240)
    except multihost.GlooUnavailable as err:
        pytest.skip(f"gloo CPU collectives are unavailable in this JAX: {err}")


def test_training_across_two_processes_matches_one_process():
    results = _launch("train")
    layout = multihost.train_layout(8, 2)
    assert layout == Parallelism(data=2, fsdp=4)
    for r in results:
        assert r.result["layout"] == layout.label() and r.result["devices"] == 8 and r.result["local_devices"] == 4
    one = parallel.train(
        parallel.ORACLE_CONFIG,
        Parallelism(),
        steps=multihost.TRAIN_STEPS,
        batch=multihost.TRAIN_BATCH,
        seq_len=multihost.TRAIN_SEQ,
        seed=0,
    )
    same_layout = parallel.train(
        parallel.ORACLE_CONFIG,
        layout,
        steps=multihost.TRAIN_STEPS,
        batch=multihost.TRAIN_BATCH,
        seq_len=multihost.TRAIN_SEQ,
        seed=0,
    )
    for r in results:
        losses = np.asarray(r.result["losses"])
        assert losses[-1] < losses[0] - 1.0  # it trained
        np.testing.assert_allclose(losses, same_layout, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(losses, one, rtol=1e-5, atol=1e-5)


def test_collective_matmul_across_two_processes():
    results = _launch("collective_matmul")
    for r in results:
        assert r.result["devices"] == 8 and r.result["local_devices"] == 4
        assert r.result["shape"] == [32, 128 // 2]
        assert r.result["max_rel_error"] < 1e-5
        # one ring round: N - 1 = 7 permutes, no AllGather, as on one process
        assert r.result["collective_permutes"] == 7 and r.result["all_gathers"] == 0


def test_bad_input_is_refused_before_any_process_starts():
    with pytest.raises(ValueError, match="task must be one of"):
        multihost.launch("nosuch")
    with pytest.raises(ValueError, match="n_processes"):
        multihost.launch("train", n_processes=0)
    with pytest.raises(ValueError, match="n_processes"):
        multihost.launch("train", n_processes=10**6)
    with pytest.raises(ValueError, match="devices_per_process"):
        multihost.launch("train", devices_per_process=1000)
    with pytest.raises(ValueError, match="multiple of n_processes"):
        multihost.train_layout(7, 2)


def test_a_hung_run_is_killed_at_its_timeout(monkeypatch):
    """Processes that never join (a coordinator port nobody serves) are killed at timeout_s, not left behind."""
    import subprocess

    started = []
    real = subprocess.Popen

    def one_process_only(cmd, **kw):  # start only process 0 of 2: it waits for its peer forever
        started.append(cmd)
        return real(cmd if len(started) == 1 else ["sleep", "600"], **kw)

    monkeypatch.setattr(subprocess, "Popen", one_process_only)
    with pytest.raises(TimeoutError, match="killed"):
        multihost.launch("train", n_processes=2, timeout_s=8)
    assert len(started) == 2
