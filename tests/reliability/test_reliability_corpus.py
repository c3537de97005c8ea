"""The bad-input corpus through `prefixsim`, in this process: scenario and sweep YAML, trace files
and command-line arguments.

Every case must exit 2 with exactly one `error: FILE[:LINE]: ...` line on stderr naming the field,
the bad value and what is allowed (reliability_cases.py), print no traceback, and leave the
results directory as it was: empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_cases import (
    SCENARIO_CASES,
    SCENARIO_DIR,
    SWEEP_CASES,
    SWEEP_DIR,
    TRACE_CASES,
    TRACE_DIR,
    BadFile,
    trace_format,
)
from reliability_cli import (
    assert_input_error,
    assert_usage_error,
    files_and_partials,
    prefixsim,
    written_entries,
)

VALID_SCENARIO = """\
name: cli-case
duration_s: 10.0
engine: {num_gpu_blocks: 2000, max_model_len: 8192}
workload:
  source:
    kind: chat
    tenants: [{name: acme}]
  arrivals: {process: poisson, rate_per_s: 1.0}
"""
# Cases whose file is not the one passed on the command line, or that need their own test.
UNLISTED_SCENARIO_FILES = {"extends_cycle_b.yaml", "max_model_len_over_cache.yaml"}


def _reported_path(directory: Path, case: BadFile) -> Path:
    return directory / (case.reported_in or case.name)


def test_every_corpus_file_has_a_case():
    """The tables and the corpus directories list the same files."""
    scenario_files = {path.name for path in SCENARIO_DIR.iterdir()}
    assert scenario_files == {case.name for case in SCENARIO_CASES} | UNLISTED_SCENARIO_FILES
    assert {path.name for path in SWEEP_DIR.iterdir()} == {case.name for case in SWEEP_CASES}
    trace_files = {path.name for path in TRACE_DIR.iterdir() if not path.name.startswith("good_")}
    assert trace_files == {case.name for case in TRACE_CASES}
    assert len(SCENARIO_CASES) >= 20
    assert len(SCENARIO_CASES) + len(SWEEP_CASES) + len(TRACE_CASES) >= 40


@pytest.mark.parametrize("case", SCENARIO_CASES, ids=lambda case: case.id)
def test_bad_scenario_file(case: BadFile, tmp_path, capsys):
    """`prefixsim run BAD.yaml`: one located line, exit 2, nothing under --results."""
    results = tmp_path / "results"
    results.mkdir()
    outcome = prefixsim(
        capsys, "run", SCENARIO_DIR / case.name, "--results", results, "--no-progress"
    )
    assert_input_error(outcome, _reported_path(SCENARIO_DIR, case), case.line, case.fragments)
    assert written_entries(results) == []


@pytest.mark.parametrize("case", SWEEP_CASES, ids=lambda case: case.id)
def test_bad_sweep_file(case: BadFile, tmp_path, capsys):
    """`prefixsim sweep BAD.yaml`: one located line, exit 2, nothing under --results."""
    results = tmp_path / "results"
    results.mkdir()
    outcome = prefixsim(
        capsys, "sweep", SWEEP_DIR / case.name, "--results", results, "--no-progress"
    )
    assert_input_error(outcome, _reported_path(SWEEP_DIR, case), case.line, case.fragments)
    assert written_entries(results) == []


def _trace_scenario(directory: Path, trace: Path) -> Path:
    scenario = directory / "trace_case.yaml"
    scenario.write_text(
        "name: trace-case\n"
        "engine: {num_gpu_blocks: 2000, max_model_len: 8192}\n"
        "workload:\n"
        f"  source: {{kind: trace, path: '{trace}', format: {trace_format(trace.name)}}}\n"
    )
    return scenario


@pytest.mark.parametrize("case", TRACE_CASES, ids=lambda case: case.id)
def test_bad_trace_file_in_a_scenario(case: BadFile, tmp_path, capsys):
    """A scenario replaying a bad trace: the error names the trace file and line; no result
    files and no partial run directory are left."""
    results = tmp_path / "results"
    results.mkdir()
    scenario = _trace_scenario(tmp_path, TRACE_DIR / case.name)
    outcome = prefixsim(capsys, "run", scenario, "--results", results, "--no-progress")
    assert_input_error(outcome, TRACE_DIR / case.name, case.line, case.fragments)
    assert files_and_partials(results) == []


def test_failed_trace_run_leaves_results_empty(tmp_path, capsys):
    """A trace whose line 3 is truncated: the results directory gains nothing, not even a
    directory."""
    results = tmp_path / "results"
    results.mkdir()
    scenario = _trace_scenario(tmp_path, TRACE_DIR / "mooncake_truncated_line.jsonl")
    assert prefixsim(capsys, "run", scenario, "--results", results, "--no-progress").status == 2
    assert written_entries(results) == []


def test_max_model_len_over_cache_names_the_file(tmp_path, capsys):
    """9 usable blocks of 16 tokens cannot hold max_model_len 4096: the error names the
    scenario file and engine.max_model_len, and nothing is written."""
    results = tmp_path / "results"
    results.mkdir()
    scenario = SCENARIO_DIR / "max_model_len_over_cache.yaml"
    outcome = prefixsim(capsys, "run", scenario, "--results", results, "--no-progress")
    assert_input_error(outcome, scenario, None, ("max_model_len 4,096", "144 tokens"))
    assert written_entries(results) == []


@pytest.fixture
def valid_scenario(tmp_path) -> Path:
    path = tmp_path / "valid.yaml"
    path.write_text(VALID_SCENARIO)
    return path


# (id, arguments after `prefixsim`, source named, line, fragments); {tmp} is a scratch
# directory, {valid} a valid scenario in it, {results} an empty results directory.
CLI_CASES = (
    ("run_missing_file", "run {tmp}/no_such.yaml", "{tmp}/no_such.yaml", None, ("file not found",)),
    (
        "run_directory",
        "run {tmp}",
        "{tmp}",
        None,
        ("is a directory; expected a YAML file",),
    ),
    (
        "run_device_file",
        "run /dev/null",
        "/dev/null",
        None,
        ("is not a regular file; expected a YAML file",),
    ),
    (
        "validate_directory",
        "validate {tmp}",
        "{tmp}",
        None,
        ("is a directory; expected a YAML file",),
    ),
    (
        "sweep_missing_file",
        "sweep {tmp}/no_such.yaml",
        "{tmp}/no_such.yaml",
        None,
        ("file not found",),
    ),
    (
        "set_without_equals",
        "run {valid} --set engine.block_size",
        None,
        None,
        ("--set 'engine.block_size': expected dotted.path=value, e.g. engine.block_size=32",),
    ),
    (
        "set_empty_path_part",
        "run {valid} --set engine..block_size=32",
        None,
        None,
        ("--set 'engine..block_size=32': expected dotted.path=value",),
    ),
    (
        "set_inside_a_string",
        "run {valid} --set name.first=x",
        None,
        None,
        ("--set 'name.first=x': 'name' is not a mapping",),
    ),
    (
        "set_past_list_end",
        "run {valid} --set workload.source.tenants.3.name=x",
        None,
        None,
        ("'3' is not an index of a 1-item list",),
    ),
    (
        "set_wrong_type",
        "run {valid} --set engine.block_size=abc",
        "--set engine.block_size=abc",
        None,
        ("engine.block_size: 'abc' is not allowed: expected an integer",),
    ),
    (
        "set_unknown_key",
        "run {valid} --set engine.paint=red",
        "--set engine.paint=red",
        None,
        ("engine.paint: unknown key 'paint'; allowed: ",),
    ),
    (
        "set_yaml11_float",
        "validate {valid} --set duration_s=1e3",
        "--set duration_s=1e3",
        None,
        ("duration_s: '1e3' is not allowed", "write 1000.0"),
    ),
    (
        "cache_replay_directory",
        "cache replay {tmp}",
        "{tmp}",
        None,
        ("is a directory; expected a JSON-lines file",),
    ),
    (
        "engine_replay_missing_file",
        "engine replay {tmp}/no_such.jsonl",
        "{tmp}/no_such.jsonl",
        None,
        ("cannot open: No such file or directory",),
    ),
    (
        "trace_replay_missing_file",
        "replay {tmp}/no_such.jsonl --format mooncake",
        "{tmp}/no_such.jsonl",
        None,
        ("does not exist; expected a mooncake trace file",),
    ),
    (
        "trace_replay_block_size_not_paged",
        "replay {tmp}/no_such.jsonl --format mooncake --block-size 8",
        None,
        None,
        ("--block-size 8: vLLM's GPU attention kernels page the KV cache in multiples of 16",),
    ),
    (
        "goodput_negative_limit",
        "run {valid} --goodput ttft:-5",
        None,
        None,
        ("--goodput 'ttft:-5': the limit must be positive",),
    ),
)


@pytest.mark.parametrize(
    ("arguments", "source", "line", "fragments"),
    [case[1:] for case in CLI_CASES],
    ids=[case[0] for case in CLI_CASES],
)
def test_bad_command_line_argument(
    arguments, source, line, fragments, tmp_path, valid_scenario, capsys
):
    """A bad path or --set: one `error:` line, exit 2, nothing under --results."""
    results = tmp_path / "results"
    results.mkdir()
    names = {"tmp": tmp_path, "valid": valid_scenario, "results": results}
    argv = arguments.format(**names).split()
    if argv[0] in ("run", "sweep"):
        argv += ["--results", str(results), "--no-progress"]
    shown = None if source is None else source.format(**names)
    assert_input_error(prefixsim(capsys, *argv), shown, line, fragments)
    assert written_entries(results) == []


# (id, arguments after `prefixsim`, the command named, what the line must say)
USAGE_CASES = (
    ("unknown_command", "frobnicate", "prefixsim", "No such command 'frobnicate'"),
    ("unknown_option", "run {valid} --colour red", "prefixsim run", "No such option: --colour"),
    ("missing_argument", "run", "prefixsim run", "Missing argument 'scenario_file'"),
    ("jobs_zero", "sweep {valid} -j 0", "prefixsim sweep", "Invalid value for '-j' / '--jobs'"),
    (
        "jobs_text",
        "sweep {valid} -j many",
        "prefixsim sweep",
        "unable to parse string as an integer",
    ),
    ("backend_slurm", "sweep {valid} --backend slurm", "prefixsim sweep", "'slurm' is not one"),
    ("max_runs_zero", "sweep {valid} --max-runs 0", "prefixsim sweep", "'--max-runs'"),
    (
        "max_requests_zero",
        "replay {valid} --format mooncake --max-requests 0",
        "prefixsim replay",
        "Invalid value for '--max-requests'",
    ),
    ("top_zero", "layout {valid} --top 0", "prefixsim layout", "Invalid value for '--top'"),
    ("tp_zero", "calibrate {valid} --out p.yaml --tp 0", "prefixsim calibrate", "'--tp'"),
    ("calibrate_no_out", "calibrate {valid}", "prefixsim calibrate", "Missing option '--out'"),
    ("plan_no_slo", "plan {valid}", "prefixsim plan", "Missing option '--slo'"),
    (
        "block_size_zero",
        "replay {valid} --format mooncake --block-size 0",
        "prefixsim replay",
        "'--block-size'",
    ),
    ("cache_unknown", "cache frobnicate", "prefixsim cache", "No such command 'frobnicate'"),
    ("engine_no_file", "engine replay", "prefixsim engine replay", "Missing argument"),
    ("costmodel_extra", "costmodel validate extra", "prefixsim costmodel validate", "extra"),
    ("eviction_kv_zero", "eviction {valid} --kv-tokens 0", "prefixsim eviction", "--kv-tokens"),
    ("schema_flag_value", "schema --out", "prefixsim", "'--out' requires an argument"),
)


@pytest.mark.parametrize(
    ("arguments", "command", "fragment"),
    [case[1:] for case in USAGE_CASES],
    ids=[case[0] for case in USAGE_CASES],
)
def test_usage_error(arguments, command, fragment, tmp_path, valid_scenario, capsys, monkeypatch):
    """Usage errors from the CLI framework: one `error:` line naming the command and the
    problem, exit 2, no traceback, nothing written."""
    monkeypatch.chdir(tmp_path)
    argv = arguments.format(valid=valid_scenario).split()
    assert_usage_error(prefixsim(capsys, *argv), command, fragment)
    assert written_entries(tmp_path) == ["valid.yaml"]


def test_results_root_is_a_file(tmp_path, valid_scenario, capsys):
    """--results naming an existing file: one `error:` line naming it, exit 2."""
    not_a_directory = tmp_path / "results"
    not_a_directory.write_text("")
    outcome = prefixsim(
        capsys, "run", valid_scenario, "--results", not_a_directory, "--no-progress"
    )
    assert_input_error(outcome, None, None, (str(not_a_directory),))
