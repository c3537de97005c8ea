"""The CPU tier's ARC policy (spec §13.5): T1/T2 with ghost lists B1/B2 and target `p`.

Stores enter T1; reuse promotes to T2 only when the request finishes. A store miss on a
ghost key moves `p` once per key per request, before the key is inserted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from sim.kvcache.offload.access import RequestAccess


class ARCOffloadPolicy:
    """T1 (seen once), T2 (reused), ghosts B1/B2, each least recent first."""

    __slots__ = ("capacity", "target_t1", "t1", "t2", "b1", "b2")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target_t1: float = 0.0
        self.t1: OrderedDict[bytes, None] = OrderedDict()
        self.t2: OrderedDict[bytes, None] = OrderedDict()
        self.b1: OrderedDict[bytes, None] = OrderedDict()
        self.b2: OrderedDict[bytes, None] = OrderedDict()

    def on_access(self, request: RequestAccess, new_keys: Sequence[bytes]) -> None:
        """ARC promotes only when the request finishes."""

    def on_store_miss(self, keys: Sequence[bytes]) -> None:
        """Ghost hits move the target, tail first."""
        for key in reversed(keys):
            if key in self.b1:
                step = max(1, len(self.b2) / len(self.b1))
                self.target_t1 = min(self.target_t1 + step, self.capacity)
                self.b1.move_to_end(key)
            elif key in self.b2:
                step = max(1, len(self.b1) / len(self.b2))
                self.target_t1 = max(self.target_t1 - step, 0)
                self.b2.move_to_end(key)

    def insert(self, key: bytes, request: RequestAccess, position: int) -> None:
        """New chunks go to the MRU end of T1 and leave the ghost lists."""
        self.t1[key] = None
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def mark_evictable(self, key: bytes) -> None:
        """Eviction reads ref counts directly."""

    def mark_pinned(self, key: bytes) -> None:
        """Eviction reads ref counts directly."""

    def on_finish(
        self, keys_in_prefix_order: Sequence[bytes], inserted_only: set[bytes], reused: set[bytes]
    ) -> None:
        """Tail first: inserted keys move to their list's MRU end, reused ones into T2."""
        for key in reversed(keys_in_prefix_order):
            if key in inserted_only:
                if key in self.t1:
                    self.t1.move_to_end(key)
                elif key in self.t2:
                    self.t2.move_to_end(key)
            elif key in reused:
                if key in self.t1:
                    del self.t1[key]
                    self.t2[key] = None
                elif key in self.t2:
                    self.t2.move_to_end(key)

    def evict(
        self, count: int, protected: Collection[bytes], ref_counts: Mapping[bytes, int]
    ) -> list[bytes] | None:
        """One victim at a time from T1 while it is at least `int(p)`, else T2, else T1."""
        if count == 0:
            return []

        def candidates(entries: OrderedDict[bytes, None]) -> Iterator[bytes]:
            return (k for k in entries if ref_counts[k] == 0 and k not in protected)

        from_t1, from_t2 = candidates(self.t1), candidates(self.t2)
        victims: list[tuple[bytes, bool]] = []
        virtual_t1_size = len(self.t1)
        for _ in range(count):
            victim = next(from_t1, None) if virtual_t1_size >= int(self.target_t1) else None
            in_t1 = victim is not None
            if victim is None:
                victim = next(from_t2, None)
            if victim is None:
                victim = next(from_t1, None)
                in_t1 = True
                if victim is None:
                    return None
            if in_t1:
                virtual_t1_size -= 1
            victims.append((victim, in_t1))
        for key, in_t1 in victims:
            if in_t1:
                del self.t1[key]
                self.b1[key] = None
            else:
                del self.t2[key]
                self.b2[key] = None
        for ghosts in (self.b1, self.b2):
            while len(ghosts) > self.capacity:
                ghosts.popitem(last=False)
        return [key for key, _ in victims]

    def clear(self) -> None:
        """Forget every list and reset the target."""
        self.t1.clear()
        self.t2.clear()
        self.b1.clear()
        self.b2.clear()
        self.target_t1 = 0.0

    def snapshot(self) -> dict[str, Any]:
        """The four lists, least recent first, and the target T1 size."""
        return {
            "t1": list(self.t1),
            "t2": list(self.t2),
            "b1": list(self.b1),
            "b2": list(self.b2),
            "p": float(self.target_t1),
        }
