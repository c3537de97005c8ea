"""The cache benchmark's stream and replay (counts only; timings are never asserted)."""

from __future__ import annotations

import dataclasses

import pytest

from sim.bench.cache_bench import (
    CacheBenchConfig,
    hash_only,
    plan_requests,
    replay,
    run_cache_benchmark,
)

SMALL = CacheBenchConfig(
    seed=7,
    num_requests=60,
    num_system_prompts=4,
    system_prompt_tokens=(32, 128),
    suffix_tokens=(1, 40),
    output_tokens=(1, 6),
    max_running=4,
    num_gpu_blocks=48,
    watermark=0.1,
    num_repeats=1,
)


def test_stream_is_seeded_and_uses_plain_int_tokens():
    """Same seed, same stream; token ids are Python ints (numpy ints would hash differently)."""
    plans = plan_requests(SMALL)
    assert plans == plan_requests(SMALL)
    assert plans != plan_requests(dataclasses.replace(SMALL, seed=8))
    assert len(plans) == 60
    assert all(type(token) is int for plan in plans for token in plan.prompt + plan.outputs)


def test_replay_counts_every_op_and_evicts_in_a_small_pool():
    """ops = per request (arrive + admission + 2 per sampled token) + refused admissions; the
    replay hashes exactly the blocks that hashing alone does; a 47-block pool must evict."""
    plans = plan_requests(SMALL)
    manager, counts = replay(SMALL, plans)
    num_sampled = sum(len(plan.outputs) for plan in plans)
    assert counts.num_ops == 2 * len(plans) + 2 * num_sampled + counts.num_refused_admissions
    assert counts.num_block_hashes == hash_only(SMALL, [p.prompt + p.outputs for p in plans])
    assert manager.block_pool.num_evictions > 0
    assert manager.cumulative_stats.requests == len(plans)
    assert manager.num_free_blocks == SMALL.num_gpu_blocks - 1
    again_manager, again_counts = replay(SMALL, plans)
    assert again_counts == counts
    assert again_manager.cumulative_stats == manager.cumulative_stats


def test_benchmark_reports_its_figures():
    """The figures `make bench` prints, with the stream's exact counts."""
    figures = run_cache_benchmark(SMALL)
    assert {name: figure.unit for name, figure in figures.items()} == {
        "cache ops": "",
        "block hashes": "",
        "replay (best of runs)": "s",
        "replay speed": "ops/s",
        "hashing alone (best of runs)": "s",
        "hashing alone speed": "block hashes/s",
        "replay / hashing time": "x",
        "hit rate": "%",
        "evictions": "",
        "refused admissions": "",
    }
    manager, counts = replay(SMALL, plan_requests(SMALL))
    assert (figures["cache ops"].value, figures["block hashes"].value) == (
        counts.num_ops,
        counts.num_block_hashes,
    )
    assert figures["evictions"].value == manager.block_pool.num_evictions
    assert figures["refused admissions"].value == counts.num_refused_admissions


def test_zero_repeats_is_rejected():
    """At least one timed run is needed."""
    with pytest.raises(ValueError, match="num_repeats must be at least 1, got 0"):
        CacheBenchConfig(num_repeats=0)
