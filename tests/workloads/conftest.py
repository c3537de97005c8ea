"""Shared fixtures for the workloads tests: where the shared traces live."""

from __future__ import annotations

from pathlib import Path

import pytest

TRACES_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """shared/data/traces next to the repository (as laid out for developers and CI)."""
    assert TRACES_DIR.is_dir(), f"missing {TRACES_DIR}"
    return TRACES_DIR
