"""`prefixsim cache offload-replay` equals vLLM's own offload manager on recorded streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import load_commands
from sim.errors import InputError
from sim.replay.offload_replay import replay_offload

FIXTURES = Path(__file__).parents[1] / "fixtures" / "offload"
STREAMS = sorted(path.name.removesuffix(".ops.jsonl") for path in FIXTURES.glob("*.ops.jsonl"))


def test_fixtures_cover_both_policies() -> None:
    configs = [
        json.loads((FIXTURES / f"{name}.ops.jsonl").read_text().splitlines()[1]) for name in STREAMS
    ]
    assert sorted(config["policy"] for config in configs) == ["arc", "arc", "arc", "lru", "lru"]


@pytest.mark.parametrize("name", STREAMS)
def test_replay_equals_vllm(name: str) -> None:
    expected = [
        json.loads(line) for line in (FIXTURES / f"{name}.vllm.jsonl").read_text().splitlines()
    ]
    actual = [line.line for line in replay_offload(FIXTURES / f"{name}.ops.jsonl")]
    assert len(actual) == len(expected)
    for want, got in zip(expected, actual, strict=True):
        assert got == want


def test_cli_writes_one_file_per_stream(tmp_path: Path) -> None:
    streams = [FIXTURES / f"{name}.ops.jsonl" for name in STREAMS[:2]]
    result = CliRunner().invoke(
        load_commands(["cache"]),
        ["cache", "offload-replay", *map(str, streams), "--outdir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(s.name for s in streams)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "no ops; the first op must be 'config'"),
        (['{"op": "reset"}'], "op 'reset': the first op must be 'config'"),
        (['{"op": "config", "num_chunks": 0}'], "'num_chunks' must be an integer >= 1, got 0"),
        (['{"op": "config", "num_chunks": 2, "policy": "fifo"}'], "must be one of lru, arc"),
        (
            [
                '{"op": "config", "num_chunks": 2}',
                '{"op": "prepare_load", "req": "a", "start": 0, "keys": ["x"]}',
            ],
            "key 'x' is not resident and ready (load needs HIT)",
        ),
        (
            ['{"op": "config", "num_chunks": 2}', '{"op": "complete_load", "keys": ["x"]}'],
            "key 'x' has no load in flight",
        ),
        (
            ['{"op": "config", "num_chunks": 2}', '{"op": "lookup", "keys": ["x", "x"]}'],
            "'keys' must not repeat a key",
        ),
    ],
)
def test_bad_streams_name_the_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "ops.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=None) as error:
        list(replay_offload(path))
    assert message in str(error.value)
    assert str(error.value).startswith(f"{path}:")
