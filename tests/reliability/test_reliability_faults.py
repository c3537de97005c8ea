"""Faults in the run lifecycle: SIGTERM, SIGINT and SIGKILL mid-run and mid-sweep, a full and a
read-only disk (a private tmpfs where the machine allows one), and a missing Ray.

An interrupted command exits 128 + the signal with one `error:` line and leaves nothing partial;
what a SIGKILL leaves is removed by the next run of the same directory, and a sweep resumed after
a SIGKILL ends byte-identical to one that was never interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_cases import GOOD_MOONCAKE
from reliability_cli import assert_input_error, prefixsim, written_entries

from sim.sweep import load_sweep, run_sweep

# About 10 wall seconds of simulation per run: long enough to be caught mid-way.
LONG = """\
name: long
duration_s: {duration}
engine: {{num_gpu_blocks: 2000, max_model_len: 8192}}
cost_model: 'constant:0.01'
workload:
  source: {{kind: chat, tenants: [{{name: acme}}]}}
  arrivals: {{process: poisson, rate_per_s: 5.0}}
"""
SEEDS = "sweep:\n  seeds: [1, 2, 3, 4]\n"
INTERRUPTED = "error: interrupted by {}; stopped, nothing half-written was kept\n"


def _start(arguments: list[str | Path], **options) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "sim", *(str(argument) for argument in arguments)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options
    )


def _wait_for(pattern: str, root: Path, count: int = 1, timeout_s: float = 120.0) -> list[Path]:
    """Poll until `count` paths under `root` match `pattern` (a run being written)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(root.glob(pattern))
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {pattern} under {root} within {timeout_s} s")


def _wait_for_handler(pid: int, signal_number: int, timeout_s: float = 60.0) -> None:
    """Poll /proc until the process catches `signal_number` (the CLI has installed its handler)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) >> (signal_number - 1) & 1:
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never caught signal {signal_number}")


def _session_processes(session_id: int) -> list[int]:
    """Processes still alive in a session (a sweep and its workers, started in a new one)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session_id and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def long_scenario(tmp_path) -> Path:
    path = tmp_path / "long.yaml"
    path.write_text(LONG.format(duration=3000.0))
    return path


@pytest.mark.parametrize(
    "signal_number", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"]
)
def test_signal_mid_run_cleans_up(signal_number, long_scenario, tmp_path):
    """`prefixsim run` signalled while its partial directory is being written: exit 128 + N,
    one line, and the results root holds nothing (not even the directories it made)."""
    results = tmp_path / "results"
    process = _start(["run", long_scenario, "--results", results, "--no-progress"])
    _wait_for("long/.*.partial/.requests.parquet.partial", results)
    process.send_signal(signal_number)
    out, err = process.communicate(timeout=60)
    name = signal.Signals(signal_number).name
    assert (process.returncode, out, err) == (128 + signal_number, "", INTERRUPTED.format(name))
    assert written_entries(results) == []


@pytest.mark.slow
def test_sigkill_leftovers_go_with_the_next_run(long_scenario, tmp_path):
    """A SIGKILLed run leaves its locked partial directory; the next run into the same
    directory (a shorter scenario of the same name) removes it and leaves only its own run."""
    results = tmp_path / "results"
    process = _start(["run", long_scenario, "--results", results, "--no-progress"])
    [killed_partial] = _wait_for("long/.*.partial", results)
    process.kill()
    process.communicate(timeout=60)
    assert killed_partial.is_dir()
    stale_temp = results / "long" / ".summary.json.abcd1234.tmp"
    stale_temp.write_text("{")
    short = tmp_path / "short.yaml"
    short.write_text(LONG.format(duration=5.0))
    outcome = subprocess.run(
        [sys.executable, "-m", "sim", "run", short, "--results", results, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome.returncode == 0, outcome.stderr
    entries = written_entries(results / "long")
    assert [entry for entry in entries if "/" not in entry] == [entries[0]]
    assert not entries[0].startswith(".") and f"{entries[0]}/summary.json" in entries


def _sweep_file(tmp_path: Path, duration: float) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(LONG.format(duration=duration) + SEEDS)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_number", "to_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl_c_to_the_group", "sigterm_to_the_sweep"],
)
def test_signal_mid_sweep_stops_workers_quietly(signal_number, to_group, tmp_path):
    """`sweep -j 2` signalled while both workers write a run: one line (no worker traceback),
    exit 128 + N, no partial run left, and no sweep or worker process still alive."""
    results = tmp_path / "results"
    sweep = _sweep_file(tmp_path, 300.0)
    process = _start(
        ["sweep", sweep, "-j", "2", "--results", results, "--no-progress"],
        start_new_session=True,
    )
    _wait_for("long/runs/.*.partial/.requests.parquet.partial", results, count=2)
    if to_group:
        os.killpg(process.pid, signal_number)
    else:
        process.send_signal(signal_number)
    out, err = process.communicate(timeout=60)
    name = signal.Signals(signal_number).name
    assert (process.returncode, out, err) == (128 + signal_number, "", INTERRUPTED.format(name))
    assert [entry for entry in written_entries(results) if "/." in entry] == []
    deadline = time.monotonic() + 10
    while _session_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _session_processes(process.pid) == []


@pytest.mark.slow
def test_sweep_resumed_after_sigkill_is_byte_identical(tmp_path):
    """SIGKILL a `sweep -j 2` while its first runs are written, leave a torn manifest temp file
    as a kill mid-write would, then resume: every file equals an uninterrupted sweep's."""
    sweep = _sweep_file(tmp_path, 40.0)
    results = tmp_path / "interrupted"
    process = _start(
        ["sweep", sweep, "-j", "2", "--results", results, "--no-progress"],
        start_new_session=True,
    )
    partials = _wait_for("long/runs/.*.partial/.requests.parquet.partial", results, count=2)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    assert all(path.exists() for path in partials)
    (results / "long" / ".manifest.parquet.x1y2z3.tmp").write_bytes(b"PAR1 torn")

    plan = load_sweep(sweep)
    resumed = run_sweep(plan, results_root=results, num_workers=2, progress=False)
    uninterrupted = run_sweep(plan, results_root=tmp_path / "straight", progress=False)
    assert resumed.failed_run_ids == [] and uninterrupted.failed_run_ids == []
    resumed_files = _files(resumed.sweep_dir)
    assert len(resumed_files) == 2 + 4 * 6  # resolved yaml, manifest, 4 runs x 6 files
    assert resumed_files == _files(uninterrupted.sweep_dir)


@pytest.mark.slow
def test_layout_study_sigterm_leaves_nothing(tmp_path):
    """`prefixsim layout` (120 orderings) stopped by SIGTERM: one line, exit 143, no files."""
    out = tmp_path / "layout"
    study = Path(__file__).resolve().parents[2] / "scenarios" / "study_layout_advisor.yaml"
    process = _start(["layout", study, "--out", out, "--no-progress"])
    _wait_for_handler(process.pid, signal.SIGTERM)
    time.sleep(1)  # into the orderings (they take far longer)
    process.send_signal(signal.SIGTERM)
    out_text, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (143, INTERRUPTED.format("SIGTERM"))
    assert not out.exists()


def test_ray_backend_without_ray_writes_nothing(tmp_path, capsys, monkeypatch):
    """`--backend ray` where Ray is not installed: one line on how to install it, exit 2, and
    no sweep directory (no manifest.parquet)."""
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    results = tmp_path / "results"
    sweep = _sweep_file(tmp_path, 5.0)
    outcome = prefixsim(
        capsys, "sweep", sweep, "--backend", "ray", "--results", results, "--no-progress"
    )
    assert_input_error(
        outcome, None, None, ("--backend ray needs Ray; install it with: pip install",)
    )
    assert not results.exists()


def _private_tmpfs_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(
    not _private_tmpfs_allowed(), reason="no private mount namespace (unshare -rm) here"
)


def _in_private_tmpfs(mount: Path, options: str, command: str) -> subprocess.CompletedProcess:
    """Run `command` with a fresh tmpfs (mount options `options`) at `mount`, visible only to
    it; `find` then lists what it left there."""
    script = (
        f"mount -t tmpfs -o {options} tmpfs {mount} && {command}; "
        f"echo rc=$?; find {mount} -mindepth 1"
    )
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120
    )


@needs_tmpfs
def test_full_disk_mid_run(tmp_path):
    """A 16 KiB tmpfs fills while the trace run writes parquet: one line naming the run
    directory with 'No space left on device', exit 2, the tmpfs left empty."""
    mount = tmp_path / "disk"
    mount.mkdir()
    scenario = tmp_path / "trace.yaml"
    scenario.write_text(
        "name: trace\nengine: {num_gpu_blocks: 400, max_model_len: 4096}\n"
        "cost_model: 'constant:0.01'\n"
        f"workload:\n  source: {{kind: trace, path: '{GOOD_MOONCAKE}', format: mooncake}}\n"
    )
    done = _in_private_tmpfs(
        mount,
        "size=16k",
        f"{sys.executable} -m sim run {scenario} --results {mount}/r --no-progress >/dev/null",
    )
    assert done.stdout == "rc=2\n", done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {mount}/r/trace/") and "No space left on device" in line
    assert line.endswith("; the disk is full; free space or write somewhere else")


@needs_tmpfs
def test_full_disk_refused_from_the_estimate(tmp_path):
    """300 expected arrivals need about 600 KiB; a 128 KiB tmpfs is refused before the run."""
    mount = tmp_path / "disk"
    mount.mkdir()
    scenario = tmp_path / "long.yaml"
    scenario.write_text(LONG.format(duration=60.0))
    done = _in_private_tmpfs(
        mount, "size=128k", f"{sys.executable} -m sim run {scenario} --results {mount}/r"
    )
    assert done.stdout == "rc=2\n", done.stdout
    [line] = done.stderr.splitlines()
    assert "needs about 600.0 KiB for its results but only 128.0 KiB is free" in line


@pytest.mark.slow
@needs_tmpfs
def test_read_only_disk(long_scenario, tmp_path):
    """A read-only tmpfs: `run` and `sweep` refuse it with one line each, exit 2, and write
    nothing."""
    mount = tmp_path / "disk"
    mount.mkdir()
    sweep = _sweep_file(tmp_path, 5.0)
    python = f"{sys.executable} -m sim"
    done = _in_private_tmpfs(
        mount,
        "ro,size=1m",
        f"{python} run {long_scenario} --results {mount}/r; echo rc=$?; "
        f"{python} sweep {sweep} --results {mount}/r --no-progress",
    )
    assert done.stdout == "rc=2\nrc=2\n", done.stdout
    run_line, sweep_line = done.stderr.splitlines()
    assert run_line.startswith(f"error: {mount}/r/long/")
    assert sweep_line.startswith(f"error: {mount}/r/long: ")
    for line in (run_line, sweep_line):
        assert line.endswith(
            "cannot write: Read-only file system; the file system is read-only; write somewhere "
            "else"
        )
