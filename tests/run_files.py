"""Comparing two run folders file by file (the equivalence tests' common check)."""

from __future__ import annotations

from pathlib import Path

ENGINE_RESULT_FILES = frozenset(
    {"requests.parquet", "steps.parquet", "events.parquet", "summary.json"}
)


def assert_same_run_files(
    first: Path, second: Path, *, required: frozenset[str] = ENGINE_RESULT_FILES
) -> None:
    """Both folders hold the same files, the `required` ones among them (by default the
    engine's result files), byte for byte."""
    names = sorted(path.name for path in first.iterdir())
    assert names == sorted(path.name for path in second.iterdir())
    assert set(names) >= required
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
