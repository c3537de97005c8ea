"""`prefixsim engine replay FILE [--check]`, run in-process as a user runs it.

Good workloads pass their own `expect` checks (exit 0); bad input exits 2 with exactly one
stderr line "error: FILE:LINE: ..." and no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import CliResult, run_prefixsim

from sim.replay.engine_replay import replay_engine

WORKLOADS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity" / "workloads"
WORKLOADS = sorted(WORKLOADS_DIR.glob("w*.jsonl"))


def run_engine_replay(*args: str | Path) -> CliResult:
    return run_prefixsim("engine", "replay", *args)


def write_script(directory: Path, lines: list[str]) -> Path:
    path = directory / "workload.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_all_five_golden_workloads_are_found() -> None:
    assert len(WORKLOADS) == 5


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda path: path.stem)
def test_check_passes_on_golden_workload(workload: Path) -> None:
    completed = run_engine_replay(workload, "--check")
    assert (completed.returncode, completed.stderr) == (0, "")
    lines = [json.loads(text) for text in completed.stdout.splitlines()]
    assert lines[0]["op"] == "header"
    assert lines[-1]["op"] == "summary"


def test_out_writes_the_replay_lines_to_the_file(tmp_path: Path) -> None:
    workload = WORKLOADS_DIR / "w03_same_step_sharing.jsonl"
    out = tmp_path / "w03.out.jsonl"
    completed = run_engine_replay(workload, "--out", out)
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "", "")
    expected = "".join(json.dumps(line.line) + "\n" for line in replay_engine(workload))
    assert out.read_text() == expected
    assert len(expected.splitlines()) == 7  # header, 2 adds, 2 steps, run_until_idle, summary


def test_check_reports_a_failed_expectation_and_exits_1(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            '{"op":"add","id":"A","prompt":[1,2,3],"outputs":[7]}',
            '{"op":"step","expect":{"scheduled":{"A":2}}}',
        ],
    )
    completed = run_engine_replay(script, "--check")
    assert completed.returncode == 1
    assert completed.stderr == (
        f"check failed: {script}:2: scheduled: expected {{'A': 2}}, got {{'A': 3}}\n"
    )


ADD_A = '{"op":"add","id":"A","prompt":[1,2,3],"outputs":[7,8]}'

# (case, script lines, line number the error names, text the message must contain)
BAD_INPUTS = [
    ("malformed_json", [ADD_A, '{"op":"step"'], 2, "invalid JSON"),
    ("unknown_op", [ADD_A, '{"op":"launch"}'], 2, "unknown op 'launch'"),
    (
        "unknown_add_key",
        ['{"op":"add","id":"A","prompt":[1],"outputs":[2],"colour":1}'],
        1,
        "unknown key 'colour'",
    ),
    (
        "unknown_config_key",
        ['{"op":"config","num_blocks":8,"blocks":8}'],
        1,
        "unknown key 'blocks'",
    ),
    ("duplicate_add_id", [ADD_A, ADD_A], 2, "request 'A' is already queued or running"),
    (
        "prompt_at_max_model_len",
        ['{"op":"config","max_model_len":3}', ADD_A],
        2,
        "prompt of 3 tokens must be shorter than max_model_len 3",
    ),
    (
        "outputs_empty",
        ['{"op":"add","id":"A","prompt":[1,2],"outputs":[]}'],
        1,
        "'outputs' must not be empty",
    ),
    (
        "config_not_first",
        [ADD_A, '{"op":"config","num_blocks":8}'],
        2,
        "a config op may only be the first line",
    ),
    (
        "config_rejected_by_vllm_rule",
        ['{"op":"config","max_num_batched_tokens":8,"max_num_seqs":16}'],
        1,
        "max_num_batched_tokens (8) must be >= max_num_seqs (16)",
    ),
    # 1e11 steps ran until killed; a million is the most one op asks for.
    (
        "step_count_beyond_the_limit",
        [ADD_A, '{"op":"step","n":100000000000}'],
        2,
        "'n' must be an integer from 1 to 1,000,000, got 100,000,000,000",
    ),
    (
        "run_until_idle_beyond_the_limit",
        [ADD_A, '{"op":"run_until_idle","max_steps":1000001}'],
        2,
        "'max_steps' must be an integer from 1 to 1,000,000, got 1,000,001",
    ),
]


@pytest.mark.parametrize(
    ("lines", "line_number", "message"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_exits_2_with_one_located_error_line(
    tmp_path: Path, lines: list[str], line_number: int, message: str
) -> None:
    script = write_script(tmp_path, lines)
    completed = run_engine_replay(script, "--check")
    assert completed.returncode == 2
    assert completed.stderr.startswith(f"error: {script}:{line_number}: ")
    assert message in completed.stderr
    assert completed.stderr.count("\n") == 1
    assert "Traceback" not in completed.stderr
