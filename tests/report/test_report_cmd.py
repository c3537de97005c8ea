"""`prefixsim report DIR [--out OUT]`, run in-process as a user runs it.

Exit status 0 with the written paths on stdout; 2 with one `error:` line on stderr for a folder
that does not exist or holds neither a run nor a sweep.
"""

from __future__ import annotations

from pathlib import Path

from cli_helpers import CliResult, run_prefixsim


def report(*args: str | Path) -> CliResult:
    """`prefixsim report ARGS...`: its exit status and output."""
    return run_prefixsim("report", *args)


def assert_one_error_line(result: CliResult, start: str) -> None:
    """Exit 2, exactly one stderr line beginning with `start`, no traceback."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(start), lines[0]


def test_report_of_a_run_exits_0_and_prints_paths(single_run_dir, tmp_path):
    """--out: the five figure paths, then report.md, one per line."""
    result = report(single_run_dir, "--out", tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    printed = result.stdout.splitlines()
    assert printed[-1] == str(tmp_path / "report.md")
    assert printed[0] == str(tmp_path / "figures" / "ttft_cdf.png")
    assert len(printed) == 6
    assert all(Path(line).is_file() for line in printed)


def test_nonexistent_directory_exits_2_with_one_line(tmp_path):
    """A typo in the path: one line naming it."""
    missing = tmp_path / "no-such-run"
    result = report(missing)
    assert_one_error_line(
        result, f"error: report directory {str(missing)!r} does not exist or is not a folder"
    )


def test_directory_without_results_exits_2_with_one_line(tmp_path):
    """An empty folder is neither a run (summary.json) nor a sweep (manifest.parquet)."""
    result = report(tmp_path)
    assert_one_error_line(result, f"error: {tmp_path} is neither a run directory")
    assert not (tmp_path / "report.md").exists()
