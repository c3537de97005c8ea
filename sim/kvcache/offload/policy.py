"""The interface the CPU tier's eviction policies implement (LRU and ARC, §13.4-13.5)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from sim.kvcache.offload.access import RequestAccess


class OffloadPolicy(Protocol):
    """Recency bookkeeping and victim choice; the tier owns residency and ref counts."""

    def on_access(self, request: RequestAccess, new_keys: Sequence[bytes]) -> None:
        """A request records keys for the first time (stored, loaded or re-offered)."""

    def on_store_miss(self, keys: Sequence[bytes]) -> None:
        """Absent keys a request offers, before they are inserted (once per key per request)."""

    def insert(self, key: bytes, request: RequestAccess, position: int) -> None:
        """A new chunk, pending until its store completes."""

    def mark_evictable(self, key: bytes) -> None:
        """The chunk's ref count fell to 0."""

    def mark_pinned(self, key: bytes) -> None:
        """The chunk's ref count rose from 0."""

    def on_finish(
        self, keys_in_prefix_order: Sequence[bytes], inserted_only: set[bytes], reused: set[bytes]
    ) -> None:
        """The request finished: refresh the recency of its keys."""

    def evict(
        self, count: int, protected: Collection[bytes], ref_counts: Mapping[bytes, int]
    ) -> list[bytes] | None:
        """Remove `count` evictable, unprotected chunks, or change nothing and return None."""

    def clear(self) -> None:
        """Forget every chunk and all adaptive state."""

    def snapshot(self) -> dict[str, Any]:
        """The policy's order, for differential comparison (first victim first)."""


def reversed_list(keys: Iterable[bytes]) -> list[bytes]:
    """The keys tail first."""
    return list(keys)[::-1]
