"""No tuning to the answer: the efficiency model's parameters are keyed on hardware and kinds of work, never on a
run, a group of runs or a model; every fitted figure names its subset, and a run in a fit's subset is marked
in-sample."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tpu_notes import efficiency as E
from tpu_notes import runs, validation
from tpu_notes.hardware import CHIPS
from tpu_notes.transformer import PRESETS


def _names_to_avoid() -> set[str]:
    names = {r.name.lower() for r in validation.all_runs()}
    names |= {g.lower() for g in runs.GROUPS}
    names |= {m.lower() for m in PRESETS}
    names |= {str(getattr(r.model, "name", r.model)).lower() for r in validation.all_runs()}
    return names


def test_no_parameter_is_keyed_on_a_run_a_group_or_a_model():
    avoid = _names_to_avoid()
    allowed = set(CHIPS) | {"tpu", "gpu"} | set(E.LINKS) | set(E.EXPOSED_KINDS)
    allowed |= {f"{fam}:{k}" for fam in ("tpu", "gpu") for k in E.EXPOSED_KINDS}
    for f in dataclasses.fields(E.DEFAULT):
        value = getattr(E.DEFAULT, f.name)
        keys = list(value) if isinstance(value, (Mapping, tuple)) else []
        for k in keys:
            assert k in allowed, f"{f.name} is keyed on {k!r}: only chips, families, links and kinds are allowed"
            assert k.lower() not in avoid, f"{f.name}[{k!r}] names a run, a group or a model"


def test_a_key_that_names_a_model_is_caught():
    # the check above is not vacuous: a parameter keyed on a model or a group is in the names it refuses
    avoid = _names_to_avoid()
    assert "llama3-8b" in avoid and "megatron" in avoid and "32b synthetic, v5e-256" in avoid


def test_every_fitted_figure_names_its_subset_and_no_other_figure_claims_a_fit():
    fitted = {f.parameter.replace('"', "") for f in validation.FITS}
    for key, source in E.SOURCES.items():
        claims = source.startswith("fitted")
        assert claims == (key in fitted), f"SOURCES[{key!r}] and validation.FITS disagree on whether it is fitted"
    for f in validation.FITS:
        chosen = [r for r in validation.all_runs() if f.select(r)]
        assert len(chosen) >= 4, f"{f.parameter} is fitted on {len(chosen)} runs: a fit needs a group, not a run"
        assert f.subset


def test_in_sample_marks_exactly_the_runs_a_fit_touches():
    all_runs = validation.all_runs()
    touched = [r for r in all_runs if validation.in_sample(r)]
    untouched = [r for r in all_runs if not validation.in_sample(r)]
    assert touched and untouched  # both kinds exist: the held-out set is not empty
    for r in touched:
        assert any(f.select(r) for f in validation.FITS)
    # the v5e multi-slice series checks slice_jitter out of sample
    v5e = [r for r in all_runs if r.name.startswith("32B synthetic,") and "x v5e-256" in r.name]
    assert v5e and all("slice_jitter" not in validation.in_sample(r) for r in v5e)
