"""Prefix-cache counters, counted exactly where vLLM counts them (spec §6.4, §8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class _LookupRequest(Protocol):
    @property
    def num_tokens(self) -> int: ...

    skip_reading_prefix_cache: bool
    num_preemptions: int


@dataclass(slots=True)
class PrefixCacheStats:
    """Token queries and hits; lookups of preempted requests go to the preempted_* fields."""

    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    reset: bool = False

    def record(self, num_tokens: int, num_hit_tokens: int, preempted: bool) -> None:
        """Count one admission's lookup."""
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hit_tokens
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hit_tokens

    def add(self, other: PrefixCacheStats) -> None:
        """Accumulate another window's counters."""
        self.requests += other.requests
        self.queries += other.queries
        self.hits += other.hits
        self.preempted_requests += other.preempted_requests
        self.preempted_queries += other.preempted_queries
        self.preempted_hits += other.preempted_hits
        self.reset = self.reset or other.reset

    @property
    def hit_rate(self) -> float:
        """hits / queries in tokens (0 when nothing was queried)."""
        return self.hits / self.queries if self.queries else 0.0

    def as_dict(self) -> dict[str, int]:
        """The six counters, in vLLM's field order."""
        return {
            "requests": self.requests,
            "queries": self.queries,
            "hits": self.hits,
            "preempted_requests": self.preempted_requests,
            "preempted_queries": self.preempted_queries,
            "preempted_hits": self.preempted_hits,
        }


class _CountingHost(Protocol):
    """What a manager using PrefixLookupCounting provides: the counters and two core hooks."""

    stats: PrefixCacheStats
    cumulative_stats: PrefixCacheStats

    def _caches(self) -> bool:
        """Whether prefix caching is on (an attribute in one core, a property in the other)."""
        ...

    def _reset_pool(self, now: float) -> bool:
        """Drop every cached hash unless a block is held (the pool's part of the reset)."""
        ...


class PrefixLookupCounting:
    """The counting half of the reference KV cache manager (the native core counts in C++);
    the manager provides `_caches` and `_reset_pool` (`_CountingHost`)."""

    stats: PrefixCacheStats
    cumulative_stats: PrefixCacheStats

    def record_prefix_cache_stats(
        self: _CountingHost, request: _LookupRequest, num_hit_tokens: int
    ) -> None:
        """Count an admitted request's lookup (skipped lookups are not counted)."""
        if not self._caches() or request.skip_reading_prefix_cache:
            return
        preempted = request.num_preemptions > 0
        self.stats.record(request.num_tokens, num_hit_tokens, preempted)
        self.cumulative_stats.record(request.num_tokens, num_hit_tokens, preempted)

    def make_prefix_cache_stats(self) -> PrefixCacheStats:
        """Counters since the previous call (vLLM reports per-step deltas)."""
        stats, self.stats = self.stats, PrefixCacheStats()
        return stats

    def reset_prefix_cache(self: _CountingHost, now: float = 0.0) -> bool:
        """Clear the cache if no request holds a block."""
        if not self._reset_pool(now):
            return False
        self.stats.reset = True
        return True
