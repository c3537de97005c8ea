"""Sweeps on the local backend: layout, resume, and runs that fail, raise, die or cannot write.

Scenario: the tiny chat sweeps of sweep_files.py (four runs, each well under a wall second).
Every failure must leave the other runs finished, the manifest consistent, no partial run
directory, and a rerun that completes only what is missing.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_files import FOUR_RUNS, TWO_TOO_SMALL, leftovers, manifest_rows, write_sweep

import sim.runner
import sim.sweep.driver
from sim.runner import run_scenario
from sim.sweep import SweepPlan, load_sweep, run_sweep
from sim.sweep import execute as execute_module
from sim.sweep.execute import KILL_RUN_ENV, KILLED_MESSAGE


def record_runs(monkeypatch: pytest.MonkeyPatch, fail_run_id: str | None = None) -> list[str]:
    """Count in-process runs (and make `fail_run_id` raise); returns the list of run ids run."""
    run_ids: list[str] = []

    def counting_run(scenario, base_dir, **options):
        run_ids.append(scenario.run_id())
        if scenario.run_id() == fail_run_id:
            raise RuntimeError("simulated crash in the engine")
        return run_scenario(scenario, base_dir, **options)

    monkeypatch.setattr(execute_module, "run_scenario", counting_run)
    return run_ids


def summary_mtimes(sweep_dir: Path, plan: SweepPlan) -> dict[str, int]:
    """mtime (ns) of each finished run's summary.json: unchanged means not run again."""
    paths = {run.run_id: sweep_dir / "runs" / run.run_id / "summary.json" for run in plan.runs}
    return {run_id: path.stat().st_mtime_ns for run_id, path in paths.items() if path.exists()}


def test_layout_and_manifest_match_each_run(tmp_path):
    """FOUR_RUNS at -j 1: four run directories; each manifest row carries its summary numbers."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    result = run_sweep(plan, results_root=tmp_path / "results", progress=False)
    sweep_dir = tmp_path / "results" / "tiny"
    assert result.sweep_dir == sweep_dir
    assert (result.failed_run_ids, result.num_already_done) == ([], 0)
    assert sorted(path.name for path in sweep_dir.iterdir()) == [
        "manifest.parquet",
        "runs",
        "sweep.resolved.yaml",
    ]
    assert sorted(path.name for path in (sweep_dir / "runs").iterdir()) == sorted(
        run.run_id for run in plan.runs
    )
    rows = manifest_rows(sweep_dir)
    assert [(row["engine.block_size"], row["seed"]) for row in rows] == [
        (16, 1),
        (16, 2),
        (32, 1),
        (32, 2),
    ]
    for run, row in zip(plan.runs, rows, strict=True):
        assert (row["run_id"], row["status"], row["error"]) == (run.run_id, "ok", None)
        assert (row["run_dir"], row["variant"]) == (f"runs/{run.run_id}", run.variant)
        summary = json.loads((sweep_dir / row["run_dir"] / "summary.json").read_text())
        numbers = {key: value for key, value in summary.items() if key in row}
        assert numbers == {key: row[key] for key in numbers}
        assert {"hit_rate", "ttft_p50_s", "num_requests", "num_evictions"} <= numbers.keys()
    alone = run_scenario(plan.runs[3].scenario, plan.base_dir, run_dir=tmp_path / "alone")
    swept = json.loads((sweep_dir / rows[3]["run_dir"] / "summary.json").read_text())
    assert alone.summary == swept


def test_rerun_skips_finished_runs(tmp_path, monkeypatch):
    """A second sweep runs nothing, touches no run and writes the same manifest bytes."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    run_sweep(plan, results_root=tmp_path, progress=False)
    sweep_dir = tmp_path / "tiny"
    before = (summary_mtimes(sweep_dir, plan), (sweep_dir / "manifest.parquet").read_bytes())
    run_ids = record_runs(monkeypatch)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert (run_ids, result.num_already_done, result.failed_run_ids) == ([], 4, [])
    after = (summary_mtimes(sweep_dir, plan), (sweep_dir / "manifest.parquet").read_bytes())
    assert after == before


def test_a_run_that_lost_a_result_file_runs_again(tmp_path, monkeypatch):
    """Run 2's requests.parquet is deleted after the sweep: it is no longer counted done (the
    report would fail on it), so the next sweep runs it alone and restores the file."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    run_sweep(plan, results_root=tmp_path, progress=False)
    damaged = tmp_path / "tiny" / "runs" / plan.runs[1].run_id / "requests.parquet"
    intact = damaged.read_bytes()
    damaged.unlink()
    rows = manifest_rows(tmp_path / "tiny")
    assert rows[1]["status"] == "ok"  # the manifest was written before the loss
    run_ids = record_runs(monkeypatch)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert (run_ids, result.num_already_done, result.failed_run_ids) == (
        [plan.runs[1].run_id],
        3,
        [],
    )
    assert damaged.read_bytes() == intact


@pytest.mark.slow
def test_parallel_manifest_is_byte_identical_and_input_errors_fail_alone(tmp_path):
    """TWO_TOO_SMALL at -j 1 and -j 2: the 32-block runs fail as 'input'; same manifest bytes."""
    plan = load_sweep(write_sweep(tmp_path, TWO_TOO_SMALL))
    serial = run_sweep(plan, results_root=tmp_path / "serial", progress=False)
    parallel = run_sweep(plan, results_root=tmp_path / "parallel", num_workers=2, progress=False)
    too_small = [run.run_id for run in plan.runs if run.scenario.engine.num_gpu_blocks == 32]
    assert serial.failed_run_ids == parallel.failed_run_ids == too_small
    assert serial.manifest_path.read_bytes() == parallel.manifest_path.read_bytes()
    rows = manifest_rows(serial.sweep_dir)
    assert [row["status"] for row in rows] == ["ok", "ok", "failed", "failed"]
    assert [row["hit_rate"] is None for row in rows] == [False, False, True, True]
    error = json.loads((serial.sweep_dir / "runs" / f"{too_small[0]}.error.json").read_text())
    assert error["kind"] == "input"
    assert "max_model_len 1,008 is larger than the KV cache (31 usable blocks" in error["error"]
    assert rows[2]["error"] == error["error"]
    assert not (serial.sweep_dir / "runs" / too_small[0]).exists()
    assert leftovers(serial.sweep_dir) == leftovers(parallel.sweep_dir) == []


def test_raising_run_fails_alone_and_rerun_retries_only_it(tmp_path, monkeypatch):
    """Run 2 of FOUR_RUNS raises RuntimeError: recorded as 'exception'; the rerun runs only it."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    target = plan.runs[1].run_id
    record_runs(monkeypatch, fail_run_id=target)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    sweep_dir = result.sweep_dir
    assert result.failed_run_ids == [target]
    error_path = sweep_dir / "runs" / f"{target}.error.json"
    assert json.loads(error_path.read_text()) == {
        "error": "RuntimeError: simulated crash in the engine",
        "kind": "exception",
    }
    rows = manifest_rows(sweep_dir)
    assert [row["status"] for row in rows] == ["ok", "failed", "ok", "ok"]
    assert (rows[1]["error"], rows[1]["num_requests"]) == (
        "RuntimeError: simulated crash in the engine",
        None,
    )
    assert not (sweep_dir / "runs" / target).exists()
    assert leftovers(sweep_dir) == []

    run_ids = record_runs(monkeypatch)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert (run_ids, result.num_already_done, result.failed_run_ids) == ([target], 3, [])
    assert not error_path.exists()
    assert [row["status"] for row in manifest_rows(sweep_dir)] == ["ok"] * 4


def test_failed_write_fails_alone(tmp_path, monkeypatch):
    """Writing run 3's summary.json hits ENOSPC: that run fails, leaves nothing; rerun fixes it."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    target = plan.runs[2].run_id
    real_write = sim.runner.atomic_write_text

    def full_disk_for_target(path: Path, text: str) -> None:
        if path.parent.name == f".{target}.partial":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, text)

    monkeypatch.setattr(sim.runner, "atomic_write_text", full_disk_for_target)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert result.failed_run_ids == [target]
    error = json.loads((result.sweep_dir / "runs" / f"{target}.error.json").read_text())
    run_dir = result.sweep_dir / "runs" / target
    assert error == {
        "error": f"{run_dir}: cannot write: No space left on device; the disk is full; free "
        "space or write somewhere else",
        "kind": "input",
    }
    assert [row["status"] for row in manifest_rows(result.sweep_dir)] == [
        "ok",
        "ok",
        "failed",
        "ok",
    ]
    assert not (result.sweep_dir / "runs" / target).exists()
    assert leftovers(result.sweep_dir) == []

    monkeypatch.setattr(sim.runner, "atomic_write_text", real_write)
    run_ids = record_runs(monkeypatch)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert (run_ids, result.failed_run_ids) == ([target], [])


def test_failed_manifest_write_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch):
    """The manifest write after the first run hits ENOSPC: reported; the final manifest is whole."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    real_write = sim.sweep.driver.write_manifest
    num_rows_written: list[int] = []

    def full_disk_once(path: Path, table) -> None:
        num_rows_written.append(table.num_rows)
        if len(num_rows_written) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, table)

    monkeypatch.setattr(sim.sweep.driver, "write_manifest", full_disk_once)
    result = run_sweep(plan, results_root=tmp_path, progress=False)
    assert result.failed_run_ids == []
    assert result.write_problems == [
        f"[Errno 28] No space left on device: '{result.manifest_path}'"
    ]
    assert num_rows_written == [4] * 6  # before the runs, after each of the 4, at the end
    assert [row["status"] for row in manifest_rows(result.sweep_dir)] == ["ok"] * 4


@pytest.mark.slow
def test_killed_worker_fails_only_its_run(tmp_path, monkeypatch):
    """At -j 2, the worker running run 3 is SIGKILLed: 'killed', the others finish, pool renewed."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    target = plan.runs[2].run_id
    monkeypatch.setenv(KILL_RUN_ENV, target)
    result = run_sweep(plan, results_root=tmp_path, num_workers=2, progress=False)
    assert result.failed_run_ids == [target]
    error_path = result.sweep_dir / "runs" / f"{target}.error.json"
    assert json.loads(error_path.read_text()) == {"error": KILLED_MESSAGE, "kind": "killed"}
    rows = manifest_rows(result.sweep_dir)
    assert [row["status"] for row in rows] == ["ok", "ok", "failed", "ok"]
    assert leftovers(result.sweep_dir) == []
    finished = summary_mtimes(result.sweep_dir, plan)

    monkeypatch.delenv(KILL_RUN_ENV)
    result = run_sweep(plan, results_root=tmp_path, num_workers=2, progress=False)
    assert (result.num_already_done, result.failed_run_ids) == (3, [])
    assert not error_path.exists()
    rerun = summary_mtimes(result.sweep_dir, plan)
    assert {run_id: rerun[run_id] for run_id in finished} == finished
    assert set(rerun) == {run.run_id for run in plan.runs}


@pytest.mark.slow
def test_interrupted_sweep_resumes_with_only_the_missing_runs(tmp_path, monkeypatch):
    """`prefixsim sweep -j 1` SIGKILLed at run 3 of 4 leaves 2 ok + 2 missing; rerun runs 2."""
    sweep_file = write_sweep(tmp_path, FOUR_RUNS)
    plan = load_sweep(sweep_file)
    results = tmp_path / "results"
    command = [sys.executable, "-m", "sim", "sweep", str(sweep_file), "--results", str(results)]
    environment = {**os.environ, KILL_RUN_ENV: plan.runs[2].run_id}
    interrupted = subprocess.run(
        [*command, "--no-progress"], env=environment, capture_output=True, text=True, timeout=120
    )
    assert interrupted.returncode == -9, interrupted.stderr
    sweep_dir = results / "tiny"
    rows = manifest_rows(sweep_dir)
    assert [row["status"] for row in rows] == ["ok", "ok", "missing", "missing"]
    assert [row["hit_rate"] is None for row in rows] == [False, False, True, True]
    assert leftovers(sweep_dir) == []
    finished = summary_mtimes(sweep_dir, plan)

    run_ids = record_runs(monkeypatch)
    result = run_sweep(plan, results_root=results, progress=False)
    assert run_ids == [plan.runs[2].run_id, plan.runs[3].run_id]
    assert (result.num_already_done, result.failed_run_ids) == (2, [])
    assert {run_id: summary_mtimes(sweep_dir, plan)[run_id] for run_id in finished} == finished
    assert [row["status"] for row in manifest_rows(sweep_dir)] == ["ok"] * 4
