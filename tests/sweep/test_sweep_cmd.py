"""`prefixsim sweep` as users call it: exit 0 all ok, 1 a run failed, 2 a bad sweep file.

Scenario: the tiny chat sweeps of sweep_files.py, run through sim.cli.main in this process.
"""

from __future__ import annotations

import pytest
from sweep_files import TWO_TOO_SMALL, write_sweep

from sim.cli import main
from sim.sweep import load_sweep


def prefixsim(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI; returns (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_bad_sweep_file_exits_2_with_one_line(tmp_path, capsys):
    """A block size over 1024 in the grid: one `error:` line naming file, line and variant."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  grid:\n    engine.block_size: [16, 2048]\n")
    status, out, err = prefixsim(capsys, "sweep", str(sweep_file), "--results", str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        f"error: {sweep_file}:12: sweep variant engine.block_size=2048: engine.block_size: "
        "2048 is not allowed: Input should be less than or equal to 1024\n"
    )
    assert not (tmp_path / "tiny").exists()


def test_dry_run_run_and_dry_run_again(tmp_path, capsys):
    """TWO_TOO_SMALL: dry run lists 4 runs to do; the run exits 1 naming the 2 failures."""
    sweep_file = write_sweep(tmp_path, TWO_TOO_SMALL)
    plan = load_sweep(sweep_file)
    results = tmp_path / "results"
    common = ("sweep", str(sweep_file), "--results", str(results))
    status, out, err = prefixsim(capsys, *common, "--dry-run")
    assert (status, err) == (0, "4 runs: 0 done, 4 would run\n")
    assert out.splitlines() == ["run_id          seed  status     variant"] + [
        f"{run.run_id}  {run.seed:>6}  would run  {run.variant}" for run in plan.runs
    ]
    assert not results.exists()

    status, out, err = prefixsim(capsys, *common, "-j", "2", "--no-progress")
    assert (status, out) == (1, "")
    lines = err.splitlines()
    for line, run in zip(lines[:2], plan.runs[2:], strict=True):
        assert line.startswith(
            f"failed {run.run_id} [engine.num_gpu_blocks=32, seed {run.seed}]: "
            "engine.max_model_len 1008"
        )
    manifest = results / "tiny" / "manifest.parquet"
    totals = f"sweep tiny: 4 runs, 2 ok (0 already done), 2 failed; manifest {manifest}"
    assert lines[-1] == totals
    # 5 s of chat at 2 sessions/s never settles: runs that reach no steady state are named.
    assert all(line.startswith("WARNING: ") for line in lines[2:-1])

    status, out, err = prefixsim(capsys, *common, "--dry-run")
    assert (status, err) == (0, "4 runs: 2 done, 2 would run\n")
    assert [line.split()[2] for line in out.splitlines()[1:]] == ["done", "done", "would", "would"]


def test_all_runs_ok_exits_0(tmp_path, capsys):
    """Two seeds of the base with the progress bar on: exit 0 and the totals line."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [1, 2]\n")
    status, _, err = prefixsim(capsys, "sweep", str(sweep_file), "--results", str(tmp_path))
    manifest = tmp_path / "tiny" / "manifest.parquet"
    assert status == 0
    assert err.splitlines()[-1] == (
        f"sweep tiny: 2 runs, 2 ok (0 already done), 0 failed; manifest {manifest}"
    )
