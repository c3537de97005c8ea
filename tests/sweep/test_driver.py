"""The sweep driver's start checks: runs that start alike are checked once.

Scenario: TWO_TOO_SMALL, num_gpu_blocks 128 and 32 zipped with seeds 1 and 2 (4 runs, 2
engines): the 32-block engine cannot hold one 1,008-token sequence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep.sweep_files import TWO_TOO_SMALL, write_sweep

import sim.sweep.driver as driver
from sim.runner import DeploymentConfig, EngineStart, start_key
from sim.sweep import load_sweep


def test_runs_that_start_alike_are_checked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 engine starts for 4 runs; both 32-block runs refused with the same message."""
    plan = load_sweep(write_sweep(tmp_path, TWO_TOO_SMALL))
    started: list[str] = []
    engine_start = driver.engine_start

    def counted_start(settings: DeploymentConfig, base_dir: Path) -> EngineStart:
        started.append(start_key(settings))
        return engine_start(settings, base_dir)

    monkeypatch.setattr(driver, "engine_start", counted_start)
    refused = driver.runs_refused_at_start(plan)
    assert len(plan.runs) == 4
    assert len(started) == len(set(started)) == 2
    small_runs = [run.run_id for run in plan.runs if run.scenario.engine.num_gpu_blocks == 32]
    assert sorted(refused) == sorted(small_runs)
    assert len(set(refused.values())) == 1
    assert "496 tokens" in next(iter(refused.values()))


def test_start_key_ignores_what_the_engine_start_does_not_read(tmp_path: Path) -> None:
    """Seed and workload aside, the keys differ only where the engine does (the block count)."""
    plan = load_sweep(write_sweep(tmp_path, TWO_TOO_SMALL))
    keys_by_blocks: dict[int | None, set[str]] = {}
    for run in plan.runs:
        keys_by_blocks.setdefault(run.scenario.engine.num_gpu_blocks, set()).add(
            start_key(run.scenario)
        )
    assert {blocks: len(keys) for blocks, keys in keys_by_blocks.items()} == {128: 1, 32: 1}
    assert keys_by_blocks[128] != keys_by_blocks[32]
