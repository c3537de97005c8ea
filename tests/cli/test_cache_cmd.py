"""`prefixsim cache replay FILE [options]`, run in-process as a user runs it.

Exit status 0 on success, 1 when --check finds a mismatch, 2 on bad input (one `error:` line on
stderr naming the file and line, never a traceback).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import CliResult, run_prefixsim

TRACES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity" / "traces"


def cache_replay(*args: str | Path) -> CliResult:
    """`prefixsim cache replay ARGS...`: its exit status and output."""
    return run_prefixsim("cache", "replay", *args)


def assert_one_line_input_error(result: CliResult, location: str) -> str:
    """Exit 2, exactly one stderr line `error: <location> ...`, no traceback; returns the line."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {location}"), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "name",
    ["s01_seed_two_turn_chat", "s13_preemption_counters", "s21_duplicate_blocks_not_deduplicated"],
)
def test_fidelity_traces_pass_their_own_checks(name):
    """Every `expect` in these traces holds: exit 0, nothing on stderr, one line per op."""
    trace = TRACES_DIR / f"{name}.jsonl"
    result = cache_replay(trace, "--check")
    assert (result.returncode, result.stderr) == (0, "")
    num_ops = len(trace.read_text().splitlines()) - 1  # the config op prints the header
    lines = [json.loads(text) for text in result.stdout.splitlines()]
    assert len(lines) == num_ops + 2
    assert (lines[0]["op"], lines[-1]["op"]) == ("header", "summary")


def test_check_mismatch_exits_1_naming_line_and_field(tmp_path):
    """s08 with line 3 expecting 14 free blocks instead of 15: exit 1, the line and field named."""
    lines = (TRACES_DIR / "s08_concurrent_sharing.jsonl").read_text().splitlines()
    op = json.loads(lines[2])
    assert op["expect"]["num_free_blocks"] == 15
    op["expect"]["num_free_blocks"] = 14
    lines[2] = json.dumps(op)
    trace = tmp_path / "s08_edited.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    result = cache_replay(trace, "--check")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"check failed: {trace}:3: num_free_blocks: expected 14, got 15"
    ]


def test_without_check_expectations_are_ignored(tmp_path):
    """The same edited script replays with exit 0 when --check is not given."""
    trace = tmp_path / "wrong_expect.jsonl"
    trace.write_text('{"op":"arrive","id":"A","prompt":[1,2],"expect":{"num_tokens":99}}\n')
    assert cache_replay(trace).returncode == 0
    assert cache_replay(trace, "--check").returncode == 1


def test_out_writes_the_file_and_nothing_to_stdout(tmp_path):
    """--out FILE gets header + one line per op + summary; stdout stays empty."""
    out = tmp_path / "results" / "s02.out.jsonl"
    result = cache_replay(TRACES_DIR / "s02_full_hit_cap_64.jsonl", "--out", out)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    ops = [json.loads(text)["op"] for text in out.read_text().splitlines()]
    assert ops == ["header", "arrive", "run", "arrive", "schedule", "summary"]


@pytest.mark.parametrize("text", ["", "\n\n# only comments\n   \n"])
def test_a_script_without_ops_prints_header_and_summary(tmp_path, text):
    """No ops: the default config's header, then an empty summary (63 never-used free blocks)."""
    trace = tmp_path / "empty.jsonl"
    trace.write_text(text)
    result = cache_replay(trace)
    assert (result.returncode, result.stderr) == (0, "")
    header, summary = (json.loads(line) for line in result.stdout.splitlines())
    assert (header["op"], header["config"]["num_blocks"]) == ("header", 64)
    assert summary["op"] == "summary"
    assert summary["stats"]["queries"] == 0
    assert summary["free_queue"] == [[block_id, None, None] for block_id in range(1, 64)]


ARRIVE_A = '{"op":"arrive","id":"A","prompt":[1,2,3]}\n'

BAD_SCRIPTS = {
    "malformed_json": (ARRIVE_A + '{"op": "schedule", "id": \n', 2, "invalid JSON"),
    "not_an_object": ("[1, 2, 3]\n", 1, "expected a JSON object, got list"),
    "unknown_op": ('{"op":"frobnicate"}\n', 1, "unknown op 'frobnicate'"),
    "missing_op": ('{"id":"A"}\n', 1, "unknown op None"),
    "unknown_key": ('{"op":"arrive","id":"A","prompt":[1],"colour":1}\n', 1, "'colour'"),
    "unknown_config_key": ('{"op":"config","blocksize":16}\n', 1, "'blocksize'"),
    "unknown_request_id": (ARRIVE_A + '{"op":"schedule","id":"Z"}\n', 2, "'Z'"),
    "negative_token": ('{"op":"arrive","id":"A","prompt":[1,-2]}\n', 1, "got -2"),
    "float_token": ('{"op":"arrive","id":"A","prompt":[1,1.5]}\n', 1, "got 1.5"),
    "string_token": ('{"op":"arrive","id":"A","prompt":[1,"7"]}\n', 1, "got '7'"),
    "bool_token": ('{"op":"arrive","id":"A","prompt":[1,true]}\n', 1, "got True"),
    "bad_output_token": (ARRIVE_A + '{"op":"output","id":"A","tokens":[-1]}\n', 2, "got -1"),
    "op_on_finished_request": (
        ARRIVE_A + '{"op":"finish","id":"A"}\n{"op":"schedule","id":"A"}\n',
        3,
        "'A' has already finished",
    ),
    "config_not_first": (ARRIVE_A + '{"op":"config","num_blocks":8}\n', 2, "first line"),
    "duplicate_arrive": (ARRIVE_A + ARRIVE_A, 2, "'A' already arrived"),
    "bad_hash_algo": ('{"op":"config","hash_algo":"md5"}\n', 1, "'md5'"),
    "deeply_nested_json": ("[" * 100_000 + "\n", 1, "JSON"),
    "schedule_beyond_the_sequence": (
        ARRIVE_A + '{"op":"schedule","id":"A","num_new_tokens":100}\n',
        2,
        "num_new_tokens",
    ),
}


@pytest.mark.parametrize(("text", "line", "problem"), BAD_SCRIPTS.values(), ids=BAD_SCRIPTS.keys())
def test_bad_script_exits_2_with_one_line_naming_file_line_and_problem(
    tmp_path, text, line, problem
):
    """Each bad script fails cleanly at the offending line."""
    trace = tmp_path / "bad.jsonl"
    trace.write_text(text)
    message = assert_one_line_input_error(cache_replay(trace), f"{trace}:{line}: ")
    assert problem in message


@pytest.mark.parametrize(
    ("junk", "line"),
    [(b"\xff\xfe\x00\x81\x9c binary", 1), (ARRIVE_A.encode() + b"\x89PNG\r\n\x1a\n\x00\xff", 2)],
    ids=["first_line", "second_line"],
)
def test_binary_junk_exits_2_naming_the_line(tmp_path, junk, line):
    """Bytes that are not UTF-8 are bad input at the line that holds them."""
    trace = tmp_path / "junk.jsonl"
    trace.write_bytes(junk)
    message = assert_one_line_input_error(cache_replay(trace), f"{trace}:{line}: ")
    assert "UTF-8" in message


def test_directory_instead_of_file_exits_2(tmp_path):
    """A directory is not a script."""
    assert "directory" in assert_one_line_input_error(cache_replay(tmp_path), f"{tmp_path}: ")


def test_missing_file_exits_2(tmp_path):
    """A path that does not exist is named in the one-line error."""
    missing = tmp_path / "nope.jsonl"
    message = assert_one_line_input_error(cache_replay(missing), f"{missing}: ")
    assert "No such file" in message


def test_failed_replay_with_out_leaves_no_file_behind(tmp_path):
    """Bad input on line 3 after two good ops: exit 2 and neither the output nor a temp file."""
    trace = tmp_path / "bad.jsonl"
    trace.write_text(ARRIVE_A + '{"op":"schedule","id":"A"}\n{"op":"schedule","id":"Z"}\n')
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    result = cache_replay(trace, "--out", out_dir / "replay.jsonl")
    assert_one_line_input_error(result, f"{trace}:3: ")
    assert list(out_dir.iterdir()) == []
