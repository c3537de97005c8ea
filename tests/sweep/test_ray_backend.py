"""`--backend ray` on one local 2-CPU Ray (started once for this module: Ray starts slowly).

Scenario: the tiny chat sweeps of sweep_files.py. Ray runs must give the very manifest the local
backend gives, and a task whose worker dies must fail only its run.
"""

from __future__ import annotations

import json

import pytest
from sweep_files import FOUR_RUNS, leftovers, manifest_rows, write_sweep

from sim.sweep import load_sweep, run_sweep
from sim.sweep.execute import KILL_RUN_ENV, KILLED_MESSAGE

# Starts a local Ray cluster: make test-all.
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")

# 2 block sizes x 2 arrival rates x 3 seeds = 12 runs.
TWELVE_RUNS = """\
sweep:
  grid:
    engine.block_size: [16, 32]
  zip:
    workload.arrivals.rate_per_s: [1.0, 2.0]
  seeds: [1, 2, 3]
"""


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_twelve_runs_on_ray_give_the_local_manifest(tmp_path, local_ray):
    """12 runs at -j 2 on both backends: all ok, byte-identical manifests."""
    plan = load_sweep(write_sweep(tmp_path, TWELVE_RUNS))
    assert len(plan.runs) == 12
    local = run_sweep(plan, results_root=tmp_path / "local", num_workers=2, progress=False)
    on_ray = run_sweep(
        plan, results_root=tmp_path / "ray", num_workers=2, backend="ray", progress=False
    )
    assert local.failed_run_ids == on_ray.failed_run_ids == []
    rows = manifest_rows(on_ray.sweep_dir)
    assert [row["status"] for row in rows] == ["ok"] * 12
    assert [row["seed"] for row in rows] == [1, 2, 3] * 4
    assert on_ray.manifest_path.read_bytes() == local.manifest_path.read_bytes()
    assert ray.is_initialized()  # a Ray the sweep did not start is left running


def test_dead_ray_worker_fails_only_its_run(tmp_path, monkeypatch, local_ray):
    """The Ray worker running run 2 of FOUR_RUNS is SIGKILLed: 'killed', not retried."""
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    target = plan.runs[1].run_id
    monkeypatch.setenv(KILL_RUN_ENV, target)
    result = run_sweep(plan, results_root=tmp_path, num_workers=2, backend="ray", progress=False)
    assert result.failed_run_ids == [target]
    error_path = result.sweep_dir / "runs" / f"{target}.error.json"
    assert json.loads(error_path.read_text()) == {"error": KILLED_MESSAGE, "kind": "killed"}
    assert [row["status"] for row in manifest_rows(result.sweep_dir)] == [
        "ok",
        "failed",
        "ok",
        "ok",
    ]
    assert leftovers(result.sweep_dir) == []

    monkeypatch.delenv(KILL_RUN_ENV)
    result = run_sweep(plan, results_root=tmp_path, num_workers=2, backend="ray", progress=False)
    assert (result.num_already_done, result.failed_run_ids) == (3, [])
