"""CI runs the README's commands: the GitHub workflows are valid YAML and run `make test`, and `make book` for
Pages; the CI script (.ci/run) runs exactly `make test`. What `make test` runs (pytest over tests/ beside the
pinned chapter jobs) is held by tests/test_device_matrix.py."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict) and "jobs" in data, f"{name} is not a workflow"
    return data


def _runs(job: dict) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def test_test_workflow_runs_make_test():
    jobs = _load("test.yml")["jobs"]
    assert any(run.strip() == "make test" for job in jobs.values() for run in _runs(job))


def test_pages_workflow_builds_the_book_and_publishes_it():
    data = _load("pages.yml")
    build = data["jobs"]["build"]
    assert "make book" in [r.strip() for r in _runs(build)]
    upload = [s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in data["jobs"]["deploy"]["steps"])
    assert data["permissions"]["pages"] == "write" and data["permissions"]["id-token"] == "write"


def test_ci_script_runs_exactly_make_test():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith(("set ", "cd "))]
    assert commands == ["make test"]
