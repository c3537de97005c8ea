"""Prefix-cache counters, counted exactly where vLLM counts them (spec §6.4, §8)."""

from __future__ import annotations

from dataclasses import dataclass


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
