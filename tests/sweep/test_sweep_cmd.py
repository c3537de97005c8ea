"""`prefixsim sweep` as users call it: exit 0 all ok, 1 a run failed, 2 a bad sweep file.

Scenario: the tiny chat sweeps of sweep_files.py, run through sim.cli.main in this process.
"""

from __future__ import annotations

import pytest
from sweep_files import FOUR_RUNS, TWO_TOO_SMALL, write_sweep

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
    """TWO_TOO_SMALL: dry run lists 2 runs to do and the 2 whose 32-block cache vLLM would not
    start with; the run exits 1 naming those 2 failures."""
    sweep_file = write_sweep(tmp_path, TWO_TOO_SMALL)
    plan = load_sweep(sweep_file)
    results = tmp_path / "results"
    common = ("sweep", str(sweep_file), "--results", str(results))
    status, out, err = prefixsim(capsys, *common, "--dry-run")
    assert status == 0
    statuses = ["would run", "would run", "would fail", "would fail"]
    assert out.splitlines() == ["run_id          seed  status      variant"] + [
        f"{run.run_id}  {run.seed:>6}  {status:<10}  {run.variant}"
        for run, status in zip(plan.runs, statuses, strict=True)
    ]
    err_lines = err.splitlines()
    assert err_lines[-1] == "4 runs: 0 done, 2 would run, 2 would fail"
    for line, run in zip(err_lines[:2], plan.runs[2:], strict=True):
        assert line.startswith(
            f"would fail: {run.run_id} [engine.num_gpu_blocks=32, seed {run.seed}]: "
            "engine.max_model_len 1,008 is larger than the KV cache (31 usable blocks"
        )
    assert len(err_lines) == 3
    assert not results.exists()

    status, out, err = prefixsim(capsys, *common, "-j", "2", "--no-progress")
    assert (status, out) == (1, "")
    lines = err.splitlines()
    for line, run in zip(lines[:2], plan.runs[2:], strict=True):
        assert line.startswith(
            f"failed {run.run_id} [engine.num_gpu_blocks=32, seed {run.seed}]: "
            "engine.max_model_len 1,008"
        )
    manifest = results / "tiny" / "manifest.parquet"
    totals = f"sweep tiny: 4 runs, 2 ok (0 already done), 2 failed; manifest {manifest}"
    assert lines[-1] == totals
    # 5 s of chat at 2 sessions/s never settles: runs that reach no steady state are named.
    assert all(line.startswith("WARNING: ") for line in lines[2:-1])

    status, out, err = prefixsim(capsys, *common, "--dry-run")
    assert (status, err.splitlines()[-1]) == (0, "4 runs: 2 done, 0 would run, 2 would fail")
    statuses = [line.split()[2:4] for line in out.splitlines()[1:]]
    assert statuses == [["done", "engine.num_gpu_blocks=128"]] * 2 + [["would", "fail"]] * 2


def test_all_runs_ok_exits_0(tmp_path, capsys):
    """Two seeds of the base with the progress bar on: exit 0 and the totals line."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [1, 2]\n")
    status, _, err = prefixsim(capsys, "sweep", str(sweep_file), "--results", str(tmp_path))
    manifest = tmp_path / "tiny" / "manifest.parquet"
    assert status == 0
    assert err.splitlines()[-1] == (
        f"sweep tiny: 2 runs, 2 ok (0 already done), 0 failed; manifest {manifest}"
    )


def test_dry_run_refuses_a_sweep_beyond_the_limits_as_the_sweep_does(tmp_path, capsys):
    """max_model_len 16 under the base's chat prompts of at least 516 tokens: every request of
    every run would be rejected, so the dry run refuses the sweep (exit 2, one line, its first
    run named) as running it would, listing nothing."""
    sweep_file = write_sweep(tmp_path, TWO_TOO_SMALL)
    common = ("sweep", str(sweep_file), "--results", str(tmp_path / "results"))
    status, out, err = prefixsim(capsys, *common, "--set", "engine.max_model_len=16", "--dry-run")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("error: sweep run ")
    assert (
        "[engine.num_gpu_blocks=128, seed 1]: workload.source: every prompt holds at least " in err
    )
    assert "516 tokens" in err


def test_runs_that_rejected_requests_are_named(tmp_path, capsys):
    """max_model_len 800 under chat prompts that grow with each turn: seed 2 rejects some
    (fewer than half: the run stands), seed 1 none; the closing lines name seed 2's run."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [1, 2]\n")
    common = ("sweep", str(sweep_file), "--results", str(tmp_path / "results"), "--no-progress")
    status, _, err = prefixsim(capsys, *common, "--set", "engine.max_model_len=800")
    assert status == 0
    assert (
        "WARNING: 1 run rejected requests (their latencies leave those out; the manifest's "
        "num_rejected counts them): base seed 2"
    ) in err.splitlines()


@pytest.mark.parametrize(
    ("assignment", "swept_by"),
    [
        ("engine.block_size=64", "engine.block_size is swept by sweep.grid"),
        ("engine.block_size.x=64", "engine.block_size is swept by sweep.grid"),
        ("seed=7", "seed is swept by sweep.seeds"),
    ],
)
def test_set_on_a_swept_path_is_refused(tmp_path, capsys, assignment, swept_by):
    """FOUR_RUNS sweeps engine.block_size and the seed: a --set on either (or inside one)
    would be replaced in every run, so it is refused, exit 2, one line. (A --set of the whole
    engine mapping is left alone: its other keys take effect.)"""
    sweep_file = write_sweep(tmp_path, FOUR_RUNS)
    common = ("sweep", str(sweep_file), "--results", str(tmp_path / "results"), "--dry-run")
    status, out, err = prefixsim(capsys, *common, "--set", assignment)
    assert (status, out) == (2, "")
    assert err == (
        f"error: --set {assignment!r}: {swept_by}, whose values replace it in every run; "
        "change the sweep's values instead\n"
    )


def test_a_seed_beyond_int64_is_refused(tmp_path, capsys):
    """Seeds are stored in the manifest's int64 column: 2**63 is refused before any run (it
    crashed the manifest's write), exit 2, naming the line."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [9223372036854775808]\n")
    status, out, err = prefixsim(capsys, "sweep", str(sweep_file), "--results", str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        f"error: {sweep_file}:11: sweep.seeds: [9223372036854775808] is not a non-empty list of "
        "integers from 0 to 9223372036854775807 (2**63 - 1)\n"
    )
    assert not (tmp_path / "tiny").exists()


def test_a_folder_of_other_files_is_not_swept_into(tmp_path, capsys):
    """results/tiny holds a user's report.md and no sweep.resolved.yaml: the sweep (and so
    `prefixsim demo --out`, which sweeps into its folder) refuses it, exit 2, and the file is
    untouched."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [1]\n")
    folder = tmp_path / "results" / "tiny"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("notes\n")
    common = ("sweep", str(sweep_file), "--results", str(tmp_path / "results"), "--no-progress")
    status, out, err = prefixsim(capsys, *common)
    assert (status, out) == (2, "")
    assert err == (
        f"error: {folder}: holds files but is not an earlier sweep (no sweep.resolved.yaml); a "
        "sweep writes its runs, manifest and report there, over files of the same names, so "
        "choose a new or empty folder\n"
    )
    assert [path.name for path in folder.iterdir()] == ["report.md"]
    assert (folder / "report.md").read_text() == "notes\n"


def test_a_sweep_folder_stopped_before_its_first_file_is_taken_again(tmp_path, capsys):
    """A sweep stopped while writing sweep.resolved.yaml leaves only that write's temporary
    file: the folder is still the sweep's own (nothing of a user's is in it), so it is used."""
    sweep_file = write_sweep(tmp_path, "sweep:\n  seeds: [1]\n")
    folder = tmp_path / "results" / "tiny"
    folder.mkdir(parents=True)
    (folder / ".sweep.resolved.yaml.abc123.tmp").write_text("sweep:")
    common = ("sweep", str(sweep_file), "--results", str(tmp_path / "results"), "--no-progress")
    status, _, err = prefixsim(capsys, *common)
    assert status == 0, err
    assert (folder / "sweep.resolved.yaml").is_file()
