"""The synthetic Mooncake-format trace: seeded, prefix-stable, readable by the Mooncake reader."""

from __future__ import annotations

import json

import pytest

from sim.bench.synthetic_trace import (
    SyntheticTraceConfig,
    synthetic_trace_lines,
    write_synthetic_trace,
)
from workloads.api import read_trace

CONFIG = SyntheticTraceConfig(seed=5)


def test_trace_is_seeded_and_any_prefix_is_the_shorter_trace():
    lines = list(synthetic_trace_lines(CONFIG, 300))
    assert len(lines) == 300
    assert lines == list(synthetic_trace_lines(CONFIG, 300))
    assert lines[:100] == list(synthetic_trace_lines(CONFIG, 100))
    assert lines != list(synthetic_trace_lines(SyntheticTraceConfig(seed=6), 300))
    assert lines[0] == (
        '{"timestamp": 19, "input_length": 560, "output_length": 2, "hash_ids": [25, 32]}\n'
    )


def test_requests_share_system_prompts_and_conversation_prefixes():
    """Seed 5, 300 requests: 81 continue a conversation (more than 2 blocks, at most 4), 31 of
    the 32 system prompts are used, each request adds exactly one new block, lengths fill every
    block but the last, and arrivals (2.94 s in all, about 100 req/s) never go back in time."""
    records = [json.loads(line) for line in synthetic_trace_lines(CONFIG, 300)]
    assert sum(len(record["hash_ids"]) > 2 for record in records) == 81
    assert max(len(record["hash_ids"]) for record in records) == 4
    assert len({record["hash_ids"][0] for record in records}) == 31
    assert all(record["hash_ids"][0] < 32 for record in records)
    assert [record["hash_ids"][-1] for record in records] == list(range(32, 332))
    for record in records:
        full_blocks = len(record["hash_ids"]) - 1
        assert 16 <= record["input_length"] - 512 * full_blocks <= 256
        assert 1 <= record["output_length"] <= 8
    timestamps = [record["timestamp"] for record in records]
    assert timestamps == sorted(timestamps)
    assert timestamps[-1] == 2939
    follow_ups = [record["hash_ids"] for record in records if len(record["hash_ids"]) > 2]
    earlier = {tuple(record["hash_ids"]) for record in records}
    assert all(tuple(hash_ids[:-1]) in earlier for hash_ids in follow_ups)


def test_written_trace_replays_through_the_mooncake_reader(tmp_path):
    path = tmp_path / "trace.jsonl"
    write_synthetic_trace(path, CONFIG, 50)
    specs = list(read_trace("mooncake", path))
    assert len(specs) == 50
    assert sum(spec.num_prompt_tokens for spec in specs) == sum(
        json.loads(line)["input_length"] for line in synthetic_trace_lines(CONFIG, 50)
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tail_tokens": (0, 10)}, r"tail_tokens must satisfy 1 <= low <= high <= 512"),
        ({"tail_tokens": (16, 513)}, r"tail_tokens must satisfy 1 <= low <= high <= 512"),
        ({"max_conversation_blocks": 1}, r"max_conversation_blocks must be at least 2"),
    ],
)
def test_bad_settings_are_rejected(changes, message):
    with pytest.raises(ValueError, match=message):
        SyntheticTraceConfig(**changes)
