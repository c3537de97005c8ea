"""Fixtures of the report tests: one tiny run, and a factory of tiny sweep directories."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from report_runs import build_sweep, run_tiny


@pytest.fixture(scope="session")
def single_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny run with events (seed 0, block size 16)."""
    run_dir = tmp_path_factory.mktemp("single") / "run"
    run_tiny(run_dir, seed=0)
    return run_dir


@pytest.fixture(scope="session")
def sweep_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Builds a fresh sweep directory per call; the caller may rewrite its manifest."""

    def build(
        block_sizes: Sequence[int] = (16, 32),
        seeds: Sequence[int] = (0, 1),
        layouts: Sequence[str] = (),
    ) -> Path:
        sweep_dir = tmp_path_factory.mktemp("sweep")
        build_sweep(sweep_dir, block_sizes, seeds, layouts)
        return sweep_dir

    return build
