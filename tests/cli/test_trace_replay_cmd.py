"""`prefixsim replay --cache-only`: the cache alone takes any block size, its pool sized from
the default deployment's KV memory (Llama-3.1-8B on one H100) for that block size.

Scenario: the first 50 requests of the Mooncake arXiv trace fixture, cache only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main

TRACE = Path(__file__).parents[1] / "fixtures/traces/mooncake/arxiv_mooncake_trace_first1000.jsonl"


def cache_only_summary(capsys: pytest.CaptureFixture[str], block_size: int) -> dict[str, object]:
    argv = ["replay", str(TRACE), "--format", "mooncake", "--cache-only", "--no-progress"]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--max-requests", "50", "--block-size", str(block_size)])
    assert raised.value.code == 0
    summary: dict[str, object] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return summary


def test_a_cache_only_replay_takes_a_block_size_no_gpu_kernel_pages(capsys) -> None:
    """8-token blocks, refused for an engine run, replay the cache alone: the same KV memory
    holds 57,669 of them against 28,834 16-token ones; the same hits (no eviction in either)."""
    eight, sixteen = cache_only_summary(capsys, 8), cache_only_summary(capsys, 16)
    assert (eight["num_gpu_blocks"], sixteen["num_gpu_blocks"]) == (57_669, 28_834)
    assert eight["hits"] == sixteen["hits"] == 112_128
