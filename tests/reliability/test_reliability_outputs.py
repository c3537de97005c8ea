"""Output paths that cannot be written, on every command that writes: one `error: PATH: ...` line,
exit 2, no traceback, nothing half-written, and the check done before the work starts.

Each command's work function is replaced by one that fails the test, so a case passes only when
the output place is refused first. Writes that fail later (a full disk while writing parquet, a
temp file that cannot be synced) are simulated here at the single choke point, sim.fileio and the
parquet sink; test_reliability_faults.py repeats them on a real full and read-only tmpfs.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from reliability_cases import GOOD_MOONCAKE
from reliability_cli import assert_input_error, files_and_partials, prefixsim, written_entries

import sim.fileio
import sim.sweep.driver
from sim.config import load_scenario
from sim.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
CALIBRATION_CSV = REPO / "tests" / "costmodel" / "fixtures" / "h100_llama8b_measurements.csv"
LAYOUT_STUDY = REPO / "scenarios" / "study_layout_advisor.yaml"
SIDE_CHANNEL_STUDY = REPO / "scenarios" / "study_side_channel.yaml"
TINY = """\
name: tiny-out
duration_s: 5.0
engine: {num_gpu_blocks: 400, max_model_len: 4096}
cost_model: 'constant:0.01'
workload:
  source: {kind: chat, tenants: [{name: acme}]}
  arrivals: {process: poisson, rate_per_s: 2.0}
"""
TINY_SWEEP = TINY + "sweep:\n  seeds: [1, 2]\n"

# Command -> its arguments ({out} is the output place) and the work that must not start.
DIRECTORY_COMMANDS = {
    "run_out": ("run {valid} --out {out} --no-progress", "sim.runner._simulate_into"),
    "run_results": ("run {valid} --results {out} --no-progress", "sim.runner._simulate_into"),
    "sweep": ("sweep {sweep} --results {out} --no-progress", "sim.sweep.driver.BACKENDS"),
    "replay": (
        "replay {trace} --format mooncake --out {out} --no-progress",
        "sim.cli.trace_cmd.run_scenario",
    ),
    "report": ("report {run_dir} --out {out}", "sim.report.report.write_report"),
    "plan": ("plan {valid} --slo ttft_p99=2s --out {out}", "sim.cli.plan_cmd.plan"),
    "layout": ("layout {layout} --out {out} --no-progress", "sim.cli.study_cmd.advise_layout"),
    "side_channel": (
        "side-channel {side_channel} --out {out} --no-progress",
        "sim.cli.study_cmd.run_side_channel",
    ),
    "eviction": ("eviction {valid} --out {out}", "sim.studies.eviction.compare_eviction_policies"),
    "costmodel_validate": (
        "costmodel validate --out {out}",
        "sim.cli.costmodel_cmd.validate_shipped_profiles",
    ),
    "costmodel_derive": (
        "costmodel derive --out-dir {out}",
        "sim.cli.costmodel_cmd.write_derived_profiles",
    ),
    "demo": ("demo --out {out}", "sim.sweep.driver.BACKENDS"),
}
FILE_COMMANDS = {
    "schema": ("schema --out {out}", "sim.cli.file_schema.file_json_schema"),
    "cache_replay": ("cache replay {ops} --out {out}", "sim.replay.cache_replay.read_ops"),
    "engine_replay": ("engine replay {ops} --out {out}", "sim.replay.engine_replay.read_ops"),
    "calibrate_out": ("calibrate {csv} --out {out}", "sim.cli.costmodel_cmd.calibrate"),
    "calibrate_plot": (
        "calibrate {csv} --out {tmp}/ok.yaml --plot {out}",
        "sim.cli.costmodel_cmd.calibrate",
    ),
}
# Bad output place -> (how to make it from a scratch file, what the line must say).
DIRECTORY_PLACES = {
    "is_a_file": ("{file}", "is a file, not a directory"),
    "under_a_file": ("{file}/sub", "cannot be made: {file} is a file"),
}
FILE_PLACES = {
    "is_a_directory": ("{directory}", "is a directory; name a file"),
    "under_a_file": ("{file}/out.txt", "cannot be made: {file} is a file"),
}
CASES = [
    (f"{command}-{place}", arguments, work, *DIRECTORY_PLACES[place])
    for command, (arguments, work) in DIRECTORY_COMMANDS.items()
    for place in DIRECTORY_PLACES
] + [
    (f"{command}-{place}", arguments, work, *FILE_PLACES[place])
    for command, (arguments, work) in FILE_COMMANDS.items()
    for place in FILE_PLACES
]
# calibrate --plot sits on the same read-only disk as its --out, which is refused first.
ALL_COMMANDS = {**DIRECTORY_COMMANDS, **FILE_COMMANDS}
ALL_COMMANDS.pop("calibrate_plot")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished run directory, for `report`."""
    directory = tmp_path_factory.mktemp("finished")
    scenario_path = directory / "tiny.yaml"
    scenario_path.write_text(TINY)
    loaded = load_scenario(scenario_path)
    return run_scenario(loaded.scenario, loaded.base_dir, run_dir=directory / "run").run_dir


@pytest.fixture
def places(tmp_path, finished_run) -> dict[str, Path]:
    """Inputs for every command and scratch outputs: a plain file and a directory."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "valid.yaml").write_text(TINY)
    (inputs / "sweep.yaml").write_text(TINY_SWEEP)
    (inputs / "ops.jsonl").write_text("")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "a_file").write_text("keep me\n")
    (scratch / "a_directory").mkdir()
    return {
        "tmp": scratch,
        "valid": inputs / "valid.yaml",
        "sweep": inputs / "sweep.yaml",
        "ops": inputs / "ops.jsonl",
        "trace": GOOD_MOONCAKE,
        "run_dir": finished_run,
        "layout": LAYOUT_STUDY,
        "side_channel": SIDE_CHANNEL_STUDY,
        "csv": CALIBRATION_CSV,
        "file": scratch / "a_file",
        "directory": scratch / "a_directory",
    }


def _work_must_not_start(monkeypatch: pytest.MonkeyPatch, work: str) -> None:
    def started(*args, **kwargs):
        raise AssertionError(f"{work} ran before the output place was checked")

    if work == "sim.sweep.driver.BACKENDS":
        monkeypatch.setitem(sim.sweep.driver.BACKENDS, "local", started)
    else:
        monkeypatch.setattr(work, started)


def _argv(arguments: str, names: dict[str, Path | str]) -> list[str]:
    return arguments.format(**{key: str(value) for key, value in names.items()}).split()


@pytest.mark.parametrize(
    ("arguments", "work", "place", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_output_place_refused_before_work(
    arguments, work, place, fragment, places, capsys, monkeypatch
):
    """An output that is a file where a directory goes, a directory where a file goes, or lies
    under a file: one line naming it, exit 2, the work never started, nothing written."""
    monkeypatch.chdir(places["tmp"])
    _work_must_not_start(monkeypatch, work)
    out = place.format(file=places["file"], directory=places["directory"])
    outcome = prefixsim(capsys, *_argv(arguments, {**places, "out": out}))
    # --results names a root: the line names the directory under it that cannot be made.
    under_root = "--results" in arguments
    line = assert_input_error(
        outcome, None if under_root else out, None, (fragment.format(file=places["file"]),)
    )
    assert line.startswith(f"error: {out}")
    assert written_entries(places["tmp"]) == ["a_directory", "a_file"]
    assert places["file"].read_text() == "keep me\n"


@pytest.mark.parametrize(("arguments", "work"), list(ALL_COMMANDS.values()), ids=list(ALL_COMMANDS))
def test_read_only_output_refused_before_work(arguments, work, places, capsys, monkeypatch):
    """A read-only file system (simulated at sim.fileio's check): one line saying so, exit 2."""
    monkeypatch.chdir(places["tmp"])
    _work_must_not_start(monkeypatch, work)
    monkeypatch.setattr(sim.fileio, "_writable", lambda path: False)
    monkeypatch.setattr(sim.fileio, "_read_only", lambda path: True)
    out = places["tmp"] / "new" / "out.txt"
    outcome = prefixsim(capsys, *_argv(arguments, {**places, "out": out}))
    line = assert_input_error(outcome, None, None, ("cannot write: Read-only file system",))
    assert "the file system is read-only; write somewhere else" in line
    assert str(out) in line
    assert written_entries(places["tmp"]) == ["a_directory", "a_file"]


def test_schema_full_disk_keeps_the_old_file(places, capsys, monkeypatch):
    """fsync of the new schema hits ENOSPC: one line, the old file intact, no temp file."""
    out = places["file"]

    def full_disk(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sim.fileio.os, "fsync", full_disk)
    outcome = prefixsim(capsys, "schema", "--out", out)
    assert_input_error(
        outcome,
        out,
        None,
        ("cannot write: No space left on device; the disk is full; free space or write",),
    )
    assert out.read_text() == "keep me\n"
    assert written_entries(places["tmp"]) == ["a_directory", "a_file"]


def test_run_full_disk_in_the_parquet_writer(places, capsys, monkeypatch):
    """The parquet writer reports ENOSPC as pyarrow does (text only): one line naming the run
    directory, exit 2, and the results directory is left as it was: empty."""

    def full_disk(self, batch) -> None:
        raise OSError("IOError: No space left on device. Detail: [errno 28]")

    monkeypatch.setattr(pq.ParquetWriter, "write_batch", full_disk)
    results = places["tmp"] / "results"
    results.mkdir()
    outcome = prefixsim(capsys, "run", places["valid"], "--results", results, "--no-progress")
    line = assert_input_error(outcome, None, None, ("cannot write: IOError: No space left",))
    assert line.startswith(f"error: {results}/tiny-out/")
    assert "the disk is full" in line
    assert files_and_partials(results) == []


def test_free_space_estimate_refuses_a_large_run(places, capsys, monkeypatch):
    """10^6 expected arrivals need about 1.9 GiB of results; with 1 GiB free the run is refused
    before it starts, naming both figures."""

    class OneGiBFree:
        free = 2**30

    monkeypatch.setattr(sim.fileio.shutil, "disk_usage", lambda path: OneGiBFree)
    results = places["tmp"] / "results"
    outcome = prefixsim(
        capsys,
        "run",
        places["valid"],
        "--set",
        "duration_s=500000.0",
        "--results",
        results,
        "--no-progress",
    )
    line = assert_input_error(
        outcome, None, None, ("needs about 1.9 GiB for its results but only 1.0 GiB is free",)
    )
    assert line.startswith(f"error: {results}/tiny-out/")
    assert written_entries(places["tmp"]) == ["a_directory", "a_file"]


def test_abandoned_temp_files_go_with_the_next_write(places, capsys):
    """Beside `schema.json`: a temp file whose writer died (no lock) is removed by the next
    `schema --out`; one a living writer still holds (locked here) is left alone."""
    out = places["tmp"] / "schema.json"
    abandoned = places["tmp"] / ".schema.json.dead1234.tmp"
    abandoned.write_text("{")
    in_use = places["tmp"] / ".schema.json.live5678.tmp"
    in_use.write_text("{")
    with in_use.open("rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        outcome = prefixsim(capsys, "schema", "--out", out)
        assert (outcome.status, outcome.err) == (0, "")
    assert written_entries(places["tmp"]) == [
        ".schema.json.live5678.tmp",
        "a_directory",
        "a_file",
        "schema.json",
    ]
    assert json.loads(out.read_text())["title"] == "prefixsim input file"


def test_a_partial_directory_being_made_survives_a_leftover_sweep(tmp_path, monkeypatch):
    """Another run sweeps leftovers beside a run whose partial directory exists but is not
    locked yet (a sweep's two workers starting together): the sweep finds nothing to remove
    and the run writes and publishes its directory."""
    lock = sim.fileio._lock
    swept: list[list[Path]] = []

    def lock_after_a_sweep(descriptor: int) -> None:
        if not swept:
            swept.append([])
            swept[0] = sim.fileio.remove_leftovers(tmp_path)
        lock(descriptor)

    monkeypatch.setattr(sim.fileio, "_lock", lock_after_a_sweep)
    final = tmp_path / "run"
    with sim.fileio.partial_dir(final) as partial:
        (partial / "summary.json").write_text("{}")
        sim.fileio.publish(partial, final, "summary.json")
    assert swept == [[]]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]
    assert (final / "summary.json").read_text() == "{}"


def test_a_published_folder_and_its_files_get_the_umask_modes(tmp_path):
    """A result folder and its atomically written files get the modes mkdir() and open() give
    under the process's umask (0755 and 0644 under 022), though the staging folder and temp
    files start 0700 and 0600: others on a shared machine can read the results."""
    umask = os.umask(0o022)
    os.umask(umask)
    final = tmp_path / "run"
    with sim.fileio.partial_dir(final) as partial:
        sim.fileio.atomic_write_text(partial / "summary.json", "{}")
        sim.fileio.publish(partial, final, "summary.json")
    assert final.stat().st_mode & 0o777 == 0o777 & ~umask
    assert (final / "summary.json").stat().st_mode & 0o777 == 0o666 & ~umask


REPLACING_COMMANDS = {name: DIRECTORY_COMMANDS[name] for name in ("run_out", "replay")}


@pytest.mark.parametrize(
    ("arguments", "work"), list(REPLACING_COMMANDS.values()), ids=list(REPLACING_COMMANDS)
)
def test_a_folder_of_other_files_is_refused_not_replaced(
    arguments, work, places, capsys, monkeypatch
):
    """--out names a folder holding a user's notes and a subfolder, no summary.json: a run
    replaces its folder, so it is refused before the work with one line; nothing is deleted."""
    monkeypatch.chdir(places["tmp"])
    _work_must_not_start(monkeypatch, work)
    out = places["directory"]
    (out / "notes.txt").write_text("important\n")
    (out / "sub").mkdir()
    (out / "sub" / "data.csv").write_text("x\n")
    outcome = prefixsim(capsys, *_argv(arguments, {**places, "out": out}))
    assert_input_error(
        outcome, out, None, ("holds files but is not an earlier result (no summary.json)",)
    )
    assert sorted(path.name for path in out.rglob("*")) == ["data.csv", "notes.txt", "sub"]
    assert (out / "notes.txt").read_text() == "important\n"


@pytest.mark.parametrize(
    ("arguments", "work"), list(REPLACING_COMMANDS.values()), ids=list(REPLACING_COMMANDS)
)
def test_the_current_directory_is_refused_as_a_run_folder(
    arguments, work, places, capsys, monkeypatch
):
    """--out . (the directory the command runs in, holding a file): refused with one line,
    the file kept; a run could not replace the folder it runs in."""
    monkeypatch.chdir(places["tmp"])
    _work_must_not_start(monkeypatch, work)
    outcome = prefixsim(capsys, *_argv(arguments, {**places, "out": "."}))
    assert_input_error(outcome, ".", None, ("is the current directory or holds it",))
    assert written_entries(places["tmp"]) == ["a_directory", "a_file"]
    assert places["file"].read_text() == "keep me\n"


def test_a_rerun_replaces_an_earlier_run_and_an_empty_folder_is_used(places, capsys):
    """`run --out` into an earlier run's folder (with summary.json) replaces it, and into an
    empty folder writes there: both exit 0 with the run's files, nothing else left."""
    earlier = places["tmp"] / "earlier"
    for out in (earlier, earlier, places["directory"]):
        outcome = prefixsim(capsys, "run", str(places["valid"]), "--out", str(out), "--no-progress")
        assert outcome.status == 0, outcome.err
        assert (out / "summary.json").is_file()
    assert sorted(path.name for path in places["tmp"].iterdir()) == [
        "a_directory",
        "a_file",
        "earlier",
    ]


def test_a_symbolic_link_is_refused_as_a_run_folder(places, capsys, monkeypatch) -> None:
    """--out names a link to an earlier run's folder: refused before the work with one line
    (a run replaces its folder and cannot replace a link), the link and its target kept."""
    monkeypatch.chdir(places["tmp"])
    earlier = places["tmp"] / "earlier"
    outcome = prefixsim(capsys, "run", str(places["valid"]), "--out", str(earlier), "--no-progress")
    assert outcome.status == 0, outcome.err
    link = places["tmp"] / "link"
    link.symlink_to(earlier)
    _work_must_not_start(monkeypatch, "sim.runner._simulate_into")
    outcome = prefixsim(capsys, *_argv(DIRECTORY_COMMANDS["run_out"][0], {**places, "out": link}))
    assert_input_error(outcome, link, None, ("is a symbolic link",))
    assert link.is_symlink() and (earlier / "summary.json").is_file()
