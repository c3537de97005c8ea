"""KV-cache replay speed: a seeded stream of shared-prefix requests driven through KVCacheManager.

Requests draw a system prompt from a fixed set (Zipf-like popularity, so hot prompts stay cached
and cold ones are evicted), add a unique suffix, and go arrive -> admission -> a few decode steps
-> finish, up to `max_running` at a time. The floor is hashing the same token lists alone.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from sim.bench import Figure, Figures
from sim.kvcache import BlockHasher, CacheRequest, KVCacheManager, RequestStatus


@dataclass(slots=True, frozen=True)
class CacheBenchConfig:
    """The request stream and the pool it runs on."""

    seed: int = 20_261_129
    num_requests: int = 6_000
    num_system_prompts: int = 48
    system_prompt_tokens: tuple[int, int] = (256, 2_048)
    suffix_tokens: tuple[int, int] = (16, 384)
    output_tokens: tuple[int, int] = (4, 12)
    max_running: int = 16
    block_size: int = 16
    num_gpu_blocks: int = 2_048
    # Held back from admissions while anyone runs, so decode growth never runs out of blocks.
    watermark: float = 0.02
    vocab_size: int = 128_000
    hash_algo: str = "sha256"
    # Each timing is the best of this many runs (the first pays for cold caches and allocation).
    num_repeats: int = 3

    def __post_init__(self) -> None:
        if self.num_repeats < 1:
            raise ValueError(f"num_repeats must be at least 1, got {self.num_repeats}")


@dataclass(slots=True)
class PlannedRequest:
    """One request of the stream: its prompt and the tokens it will sample."""

    request_id: str
    prompt: list[int]
    outputs: list[int]


@dataclass(slots=True)
class ReplayCounts:
    """What one replay did."""

    num_ops: int = 0
    num_refused_admissions: int = 0
    num_block_hashes: int = 0


@dataclass(slots=True)
class _Running:
    request: CacheRequest
    outputs: list[int]
    num_sampled: int = 0


def plan_requests(config: CacheBenchConfig) -> list[PlannedRequest]:
    """The seeded request stream (plain int token ids, as vLLM hashes them)."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed))
    low, high = config.system_prompt_tokens
    system_prompts = [
        rng.integers(0, config.vocab_size, size=int(rng.integers(low, high + 1))).tolist()
        for _ in range(config.num_system_prompts)
    ]
    popularity = 1.0 / np.arange(1, config.num_system_prompts + 1)
    choices = rng.choice(
        config.num_system_prompts, size=config.num_requests, p=popularity / popularity.sum()
    )
    suffix_low, suffix_high = config.suffix_tokens
    output_low, output_high = config.output_tokens
    plans = []
    for index, choice in enumerate(choices.tolist()):
        suffix_length = int(rng.integers(suffix_low, suffix_high + 1))
        output_length = int(rng.integers(output_low, output_high + 1))
        suffix = rng.integers(0, config.vocab_size, size=suffix_length).tolist()
        outputs = rng.integers(0, config.vocab_size, size=output_length).tolist()
        plans.append(PlannedRequest(f"req-{index}", system_prompts[choice] + suffix, outputs))
    return plans


def _admit(manager: KVCacheManager, request: CacheRequest, has_running: bool) -> bool:
    hit_blocks, num_hit_tokens = manager.get_computed_blocks(request)
    num_new_tokens = request.num_tokens - num_hit_tokens
    new_blocks = manager.allocate_slots(
        request,
        num_new_tokens,
        num_hit_tokens,
        hit_blocks,
        full_sequence_must_fit=True,
        has_running_requests=has_running,
    )
    if new_blocks is None:
        return False
    manager.record_prefix_cache_stats(request, num_hit_tokens)
    request.status = RequestStatus.RUNNING
    request.num_computed_tokens = request.num_tokens
    return True


def replay(
    config: CacheBenchConfig, plans: list[PlannedRequest]
) -> tuple[KVCacheManager, ReplayCounts]:
    """Serve the stream FCFS, `max_running` at a time, one sampled token per request per step."""
    hasher = BlockHasher(config.hash_algo, config.block_size)
    manager = KVCacheManager(config.num_gpu_blocks, config.block_size, watermark=config.watermark)
    counts = ReplayCounts()
    waiting = deque(plans)
    head: CacheRequest | None = None  # the arrived request at the front of the queue
    running: list[_Running] = []
    while waiting or running:
        while waiting and len(running) < config.max_running:
            if head is None:
                head = CacheRequest(waiting[0].request_id, waiting[0].prompt, hasher)
                counts.num_ops += 1
            counts.num_ops += 1
            if not _admit(manager, head, bool(running)):
                counts.num_refused_admissions += 1
                break
            running.append(_Running(head, waiting.popleft().outputs))
            head = None
        still_running = []
        for entry in running:
            request = entry.request
            request.append_output_token_ids((entry.outputs[entry.num_sampled],))
            entry.num_sampled += 1
            counts.num_ops += 2  # the output, then its decode step or the finish
            if entry.num_sampled == len(entry.outputs):
                manager.free(request)
                request.status = RequestStatus.FINISHED_STOPPED
                counts.num_block_hashes += len(request.block_hashes)
                continue
            if manager.allocate_slots(request, 1) is None:
                raise RuntimeError("decode ran out of blocks; raise the benchmark's watermark")
            request.num_computed_tokens += 1
            still_running.append(entry)
        running = still_running
    return manager, counts


def hash_only(config: CacheBenchConfig, token_lists: list[list[int]]) -> int:
    """Hash every full block of each token list, as the replay does; returns the hash count."""
    hasher = BlockHasher(config.hash_algo, config.block_size)
    num_hashes = 0
    for token_ids in token_lists:
        num_hashes += hasher.extend([], token_ids)
    return num_hashes


def run_cache_benchmark(config: CacheBenchConfig | None = None) -> Figures:
    """Replay the stream and hash its tokens alone; report speed and the replay/hashing ratio."""
    config = config or CacheBenchConfig()
    plans = plan_requests(config)
    token_lists = [plan.prompt + plan.outputs for plan in plans]

    replay_s = hashing_s = float("inf")
    for _ in range(config.num_repeats):
        started_at = time.perf_counter()
        manager, counts = replay(config, plans)
        replay_s = min(replay_s, time.perf_counter() - started_at)
        started_at = time.perf_counter()
        num_floor_hashes = hash_only(config, token_lists)
        hashing_s = min(hashing_s, time.perf_counter() - started_at)

    if num_floor_hashes != counts.num_block_hashes:
        raise RuntimeError(
            f"the replay hashed {counts.num_block_hashes} blocks, hashing alone {num_floor_hashes}"
        )
    stats = manager.cumulative_stats
    return {
        "cache ops": Figure(counts.num_ops),
        "block hashes": Figure(counts.num_block_hashes),
        "replay (best of runs)": Figure(replay_s, "s"),
        "replay speed": Figure(counts.num_ops / replay_s, "ops/s"),
        "hashing alone (best of runs)": Figure(hashing_s, "s"),
        "hashing alone speed": Figure(num_floor_hashes / hashing_s, "block hashes/s"),
        "replay / hashing time": Figure(replay_s / hashing_s, "x"),
        "hit rate": Figure(100.0 * stats.hit_rate, "%"),
        "evictions": Figure(manager.block_pool.num_evictions),
        "refused admissions": Figure(counts.num_refused_admissions),
    }
