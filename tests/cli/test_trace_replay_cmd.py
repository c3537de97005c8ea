"""`prefixsim replay`: the cache alone (`--cache-only`) takes any block size, its pool sized
from the default deployment's KV memory (Llama-3.1-8B on one H100) for that block size; an
engine replay on a cache too small for most requests says which option grows it.

Scenario: the Mooncake arXiv trace fixture (its first 50 requests, cache only; all 1,000 on 400
blocks).
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


def test_an_engine_replay_on_too_small_a_cache_names_the_option_that_grows_it(
    capsys, tmp_path: Path
) -> None:
    """400 blocks of 16 tokens hold 6,384 tokens a request (399 blocks: the null block holds
    none), so the replay sets max_model_len to that, and 536 of the 1,000 arXiv requests are
    longer: the run fails (exit 2, nothing written), advising the replay's own options, not the
    engine.max_model_len the replay set."""
    argv = ["replay", str(TRACE), "--format", "mooncake", "--num-gpu-blocks", "400"]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--out", str(tmp_path / "run"), "--no-progress"])
    assert raised.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "run failed: 536 of 1,000 requests were rejected: 536 with prompts of at least "
            "engine.max_model_len tokens; shorten the prompts, or give the cache more blocks with "
            "--num-gpu-blocks or --kv-tokens (6,384 is all the cache holds)"
        )
    )
    assert not (tmp_path / "run").exists()


def test_a_cache_only_replay_names_the_requests_it_skipped(capsys) -> None:
    """The 1,000 arXiv requests in 16,000 tokens of cache (1,001 blocks): 141 are longer and
    skipped, which a warning says (the hit rate, 0.42 against 0.29 with the default cache,
    counts only the shorter ones); in 2 blocks (16 tokens) all are, and the replay fails."""
    argv = ["replay", str(TRACE), "--format", "mooncake", "--cache-only", "--no-progress"]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--kv-tokens", "16000"])
    assert raised.value.code == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["num_skipped"] == 141
    assert captured.err == (
        "WARNING: 141 of 1,000 requests were skipped, each longer than the 16,000 tokens the "
        "cache holds: the hit rate counts only the shorter ones\n"
    )
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--num-gpu-blocks", "2"])
    assert raised.value.code == 2
    assert capsys.readouterr().err.endswith(
        "replay failed: 1,000 of 1,000 requests were skipped, each longer than the 16 tokens the "
        "cache holds; give the cache more blocks with --num-gpu-blocks or --kv-tokens\n"
    )


def test_a_cache_only_replay_refuses_out(capsys, tmp_path: Path) -> None:
    """--out names an engine run's directory; a cache-only replay writes none, so it said
    nothing and wrote nothing: now refused up front."""
    argv = ["replay", str(TRACE), "--format", "mooncake", "--cache-only", "--no-progress"]
    with pytest.raises(SystemExit) as raised:
        main([*argv, "--out", str(tmp_path / "run")])
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        "error: --out: a cache-only replay writes no run directory, only its summary line; drop "
        "--out, or drop --cache-only for an engine run's files\n"
    )
