"""Guards: YAML is loaded safely, nothing in the input is evaluated, and a run writes only under
the chosen results directory (reading a trace from elsewhere leaves it untouched)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reliability_cases import GOOD_MOONCAKE
from reliability_cli import assert_input_error, prefixsim, written_entries

MARKER = "evaluated.txt"
GENERATED = "workload:\n  arrivals: {process: poisson, rate_per_s: 1.0}\n"


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Content and modification time of every file under `root`."""
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(
    "value",
    [
        f"!!python/object/apply:os.system ['touch {MARKER}']",
        f"!!python/object/new:os.system ['touch {MARKER}']",
        "!!python/name:os.system ''",
        "!!python/module:os ''",
    ],
    ids=["object_apply", "object_new", "name", "module"],
)
def test_python_tags_are_refused_not_run(value, tmp_path, monkeypatch, capsys):
    """A scenario whose name is a Python-object tag: one error line at line 1, no command run."""
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "tagged.yaml"
    scenario.write_text(f"name: {value}\nduration_s: 10.0\n{GENERATED}")
    outcome = prefixsim(capsys, "run", scenario, "--results", tmp_path / "results")
    assert_input_error(
        outcome, scenario, 1, ("could not determine a constructor", "only plain YAML is read")
    )
    assert written_entries(tmp_path) == ["tagged.yaml"]


def test_python_tag_in_set_is_plain_text(tmp_path, monkeypatch, capsys):
    """--set name=<tag>: the value stays text, and the name pattern refuses it."""
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "plain.yaml"
    scenario.write_text(f"name: plain\nduration_s: 10.0\n{GENERATED}")
    assignment = f"name=!!python/object/apply:os.system ['touch {MARKER}']"
    outcome = prefixsim(capsys, "validate", scenario, "--set", assignment)
    assert_input_error(
        outcome,
        f"--set {assignment}",
        None,
        ('name: "!!python/object/apply:os.system', "is not allowed"),
    )
    assert written_entries(tmp_path) == ["plain.yaml"]


def test_cost_model_text_is_not_evaluated(tmp_path, monkeypatch, capsys):
    """A cost_model that looks like Python is an unknown cost model, not code."""
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "code.yaml"
    code = f"__import__('os').system('touch {MARKER}')"
    scenario.write_text(f'name: code\nduration_s: 10.0\ncost_model: "{code}"\n{GENERATED}')
    outcome = prefixsim(capsys, "run", scenario, "--results", tmp_path / "results")
    assert_input_error(
        outcome, scenario, 3, ("cost_model: unknown cost model", "expected a shipped")
    )
    assert written_entries(tmp_path) == ["code.yaml"]


@pytest.mark.parametrize("name", ["../escape", "a/b", "/tmp/abs", ".hidden", "..", "."])
def test_names_that_would_leave_results_are_refused(name, tmp_path, capsys):
    """The name becomes RESULTS/<name>/: path separators, '..' and hidden names are refused."""
    results = tmp_path / "results"
    results.mkdir()
    scenario = tmp_path / "named.yaml"
    scenario.write_text(f"name: '{name}'\nduration_s: 10.0\n{GENERATED}")
    outcome = prefixsim(capsys, "run", scenario, "--results", results, "--no-progress")
    assert_input_error(outcome, scenario, 1, (f"name: {name!r} is not allowed",))
    assert written_entries(tmp_path) == ["named.yaml", "results"]


def test_run_writes_only_under_results_and_leaves_the_trace_alone(tmp_path, monkeypatch, capsys):
    """A scenario replaying a trace from another directory, run from a third: every file outside
    --results keeps its bytes and mtime, the working directory stays empty, and the results are
    one complete RESULTS/<name>/<run_id>/ with no partial or temporary files."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(GOOD_MOONCAKE, traces / "outside.jsonl")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    scenario = inputs / "replay.yaml"
    scenario.write_text(
        "name: guarded\n"
        "engine: {num_gpu_blocks: 400, max_model_len: 4096}\n"
        "cost_model: 'constant:0.01'\n"
        "workload:\n"
        "  source: {kind: trace, path: ../traces/outside.jsonl, format: mooncake}\n"
    )
    working = tmp_path / "working"
    working.mkdir()
    monkeypatch.chdir(working)
    before = _snapshot(tmp_path)

    outcome = prefixsim(capsys, "run", scenario, "--results", tmp_path / "results", "--no-progress")

    assert (outcome.status, outcome.err.count("error")) == (0, 0), outcome.err
    assert _snapshot(tmp_path / "traces") == {
        name.removeprefix("traces/"): state
        for name, state in before.items()
        if name.startswith("traces/")
    }
    assert _snapshot(inputs) == {
        name.removeprefix("inputs/"): state
        for name, state in before.items()
        if name.startswith("inputs/")
    }
    assert written_entries(working) == []
    entries = written_entries(tmp_path / "results")
    run_dirs = [entry for entry in entries if entry.count("/") == 1]
    assert len(run_dirs) == 1 and run_dirs[0].startswith("guarded/")
    assert all(entry == "guarded" or entry.startswith(f"{run_dirs[0]}") for entry in entries)
    assert not any(part.startswith(".") for entry in entries for part in entry.split("/"))
    assert f"{run_dirs[0]}/summary.json" in entries


def test_out_writes_only_the_named_directory(tmp_path, capsys):
    """--out DIR: the run's files in DIR, nothing beside it (no partial directory left)."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        "name: small\n"
        "engine: {num_gpu_blocks: 400, max_model_len: 4096}\n"
        "cost_model: 'constant:0.01'\n"
        f"workload:\n  source: {{kind: trace, path: '{GOOD_MOONCAKE}', format: mooncake}}\n"
    )
    out = tmp_path / "out" / "run1"
    outcome = prefixsim(capsys, "run", scenario, "--out", out, "--no-progress")
    assert outcome.status == 0, outcome.err
    assert written_entries(tmp_path / "out") == ["run1", *(f"run1/{name}" for name in _names(out))]
    assert "summary.json" in _names(out)


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())
