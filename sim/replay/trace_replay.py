"""Replaying public traces: through the cache alone (fast hit rate vs capacity) or the engine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sim.engine import SpecLike, cache_request_from_spec, relaxed_garbage_collection
from sim.kvcache import (
    Hasher,
    PrefixCacheStats,
    block_identity_wanted,
    pool_capacity_tokens,
    run_alone,
)
from sim.native import DEFAULT_CORE, make_hasher, make_manager

HASH_MEMO_SIZE = 262144


@dataclass(slots=True)
class CacheOnlyResult:
    """Token hit rate and counters of a cache-only replay."""

    stats: PrefixCacheStats
    num_requests: int
    num_skipped: int  # requests whose whole sequence is larger than the cache
    num_evictions: int
    num_gpu_blocks: int | None  # None: unbounded

    def summary(self) -> dict[str, Any]:
        """The replay's summary line."""
        return {
            "mode": "cache-only",
            "hit_rate": round(self.stats.hit_rate, 9),
            "queries": self.stats.queries,
            "hits": self.stats.hits,
            "num_requests": self.num_requests,
            "num_skipped": self.num_skipped,
            "num_evictions": self.num_evictions,
            "num_gpu_blocks": self.num_gpu_blocks,
        }


def replay_cache_only(
    specs: Iterable[SpecLike],
    *,
    block_size: int,
    num_gpu_blocks: int | None,
    hash_algo: str = "sha256",
    hash_seed: str | None = None,
    core: str = DEFAULT_CORE,
) -> CacheOnlyResult:
    """Each request alone, in arrival order: lookup, prefill, decode, free (no timing).

    With `num_gpu_blocks=None` the cache never evicts, which is modelled as a set of cached
    hashes: a pool that never evicts keeps every block it ever cached, so hits are the same.
    """
    # Only counts leave a cache-only replay, no hash.
    identity = block_identity_wanted(hashes_shown=False)
    hasher = make_hasher(
        core, hash_algo, block_size, hash_seed, memo_size=HASH_MEMO_SIZE, identity=identity
    )
    with relaxed_garbage_collection():
        if num_gpu_blocks is None:
            return _replay_unbounded(specs, hasher)
        return _replay_bounded(specs, hasher, num_gpu_blocks, core)


def _replay_bounded(
    specs: Iterable[SpecLike], hasher: Hasher, num_gpu_blocks: int, core: str
) -> CacheOnlyResult:
    block_size = hasher.block_size
    capacity_tokens = pool_capacity_tokens(num_gpu_blocks, block_size)
    manager = make_manager(core, num_gpu_blocks, block_size, max_model_len=capacity_tokens)
    num_requests = num_skipped = 0
    for spec in specs:
        num_requests += 1
        if spec.num_prompt_tokens + spec.num_output_tokens - 1 > capacity_tokens:
            num_skipped += 1
            continue
        run = run_alone(manager, cache_request_from_spec(spec, hasher), spec.output_tokens)
        if not run.admitted:
            num_skipped += 1
    return CacheOnlyResult(
        manager.cumulative_stats,
        num_requests,
        num_skipped,
        manager.block_pool.num_evictions,
        num_gpu_blocks,
    )


def _replay_unbounded(specs: Iterable[SpecLike], hasher: Hasher) -> CacheOnlyResult:
    block_size = hasher.block_size
    cached: set[bytes] = set()
    stats = PrefixCacheStats()
    num_requests = 0
    for spec in specs:
        num_requests += 1
        request = cache_request_from_spec(spec, hasher)
        if not request.skip_reading_prefix_cache:
            max_blocks = (request.num_tokens - 1) // block_size
            num_hit_blocks = 0
            for block_hash in request.block_hashes[:max_blocks]:
                if block_hash not in cached:
                    break
                num_hit_blocks += 1
            stats.record(request.num_tokens, num_hit_blocks * block_size, preempted=False)
        if spec.output_tokens:
            request.append_output_token_ids(spec.output_tokens)
        # The last sampled token is never computed, so its block is not cached.
        num_cached_blocks = (request.num_tokens - 1) // block_size
        cached.update(request.block_hashes[:num_cached_blocks])
    return CacheOnlyResult(stats, num_requests, 0, 0, None)
