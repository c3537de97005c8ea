"""The CPU tier's default LRU with per-request ranks (spec §13.4).

A chunk's rank is `(r, s)`; the smallest evictable, unprotected rank goes first (ties by key).
A live request ranks the chunks it stores or reuses `(R, -position)`, R handed out on its first
access, so deeper chunks go first; when it finishes its chunks get fresh ranks `(r, 0)`, tail
first, so its head chunk is the most recent.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sim.kvcache.offload.access import RequestAccess

Rank = tuple[int, int]


class LRUOffloadPolicy:
    """Ranks per chunk and a lazily pruned min-heap of the evictable ones."""

    __slots__ = ("ranks", "evictable", "heap", "counter")

    def __init__(self) -> None:
        self.ranks: dict[bytes, Rank] = {}
        self.evictable: set[bytes] = set()
        # Entries go stale when a chunk is re-ranked, pinned or evicted; they are skipped
        # when popped and dropped wholesale when the heap outgrows the evictable set.
        self.heap: list[tuple[Rank, bytes]] = []
        self.counter = 0

    def _fresh(self) -> int:
        self.counter += 1
        return self.counter

    def _request_rank(self, request: RequestAccess) -> int:
        if request.rank is None:
            request.rank = self._fresh()
        return request.rank

    def _push(self, key: bytes) -> None:
        heapq.heappush(self.heap, (self.ranks[key], key))
        if len(self.heap) > 2 * len(self.evictable) + 64:
            self.heap = [(self.ranks[k], k) for k in self.evictable]
            heapq.heapify(self.heap)

    def on_access(self, request: RequestAccess, new_keys: Sequence[bytes]) -> None:
        """Raise resident chunks to the request's rank where that is newer."""
        request_rank = self._request_rank(request)
        for key in new_keys:
            current = self.ranks.get(key)
            if current is None:
                continue
            raised = (request_rank, -request.positions[key])
            if raised > current:
                self.ranks[key] = raised
                if key in self.evictable:
                    self._push(key)

    def on_store_miss(self, keys: Sequence[bytes]) -> None:
        """Absent keys have no rank to change."""

    def insert(self, key: bytes, request: RequestAccess, position: int) -> None:
        """A pending chunk takes the storing request's rank at its position."""
        self.ranks[key] = (self._request_rank(request), -position)

    def mark_evictable(self, key: bytes) -> None:
        """Enter the heap with the rank the chunk already has."""
        self.evictable.add(key)
        self._push(key)

    def mark_pinned(self, key: bytes) -> None:
        """Leave the evictable set (its heap entries go stale)."""
        self.evictable.discard(key)

    def on_finish(
        self, keys_in_prefix_order: Sequence[bytes], inserted_only: set[bytes], reused: set[bytes]
    ) -> None:
        """Fresh ranks for every resident key, tail first (pending ones included)."""
        for key in reversed(keys_in_prefix_order):
            if key in self.ranks:
                self.ranks[key] = (self._fresh(), 0)
                if key in self.evictable:
                    self._push(key)

    def evict(
        self, count: int, protected: Collection[bytes], ref_counts: Mapping[bytes, int]
    ) -> list[bytes] | None:
        """The `count` smallest-ranked evictable, unprotected chunks, or None (no change)."""
        if count == 0:
            return []
        chosen: list[tuple[Rank, bytes]] = []
        chosen_keys: set[bytes] = set()
        set_aside: list[tuple[Rank, bytes]] = []
        while self.heap and len(chosen) < count:
            entry = heapq.heappop(self.heap)
            rank, key = entry
            if key not in self.evictable or self.ranks[key] != rank or key in chosen_keys:
                continue
            if key in protected:
                set_aside.append(entry)
                continue
            chosen.append(entry)
            chosen_keys.add(key)
        restore = set_aside if len(chosen) == count else set_aside + chosen
        for entry in restore:
            heapq.heappush(self.heap, entry)
        if len(chosen) < count:
            return None
        for _, key in chosen:
            self.evictable.remove(key)
            del self.ranks[key]
        return [key for _, key in chosen]

    def clear(self) -> None:
        """Forget everything; ranks restart at 1."""
        self.ranks.clear()
        self.evictable.clear()
        self.heap.clear()
        self.counter = 0

    def snapshot(self) -> dict[str, Any]:
        """Every resident chunk in eviction order (pinned ones where they would rank)."""
        return {"order": sorted(self.ranks, key=lambda key: (self.ranks[key], key))}
