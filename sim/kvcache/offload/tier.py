"""vLLM's CPU offload tier (`CPUOffloadingManager`, spec §13.3): chunks keyed by block hash,
pending stores, pinned loads, all-or-nothing stores and the per-request recency record."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sim.kvcache.offload.access import RequestAccess
from sim.kvcache.offload.arc import ARCOffloadPolicy
from sim.kvcache.offload.lru import LRUOffloadPolicy
from sim.kvcache.offload.policy import OffloadPolicy

OFFLOAD_POLICIES = ("lru", "arc")
# A chunk's ref count while its store is in flight: present but not readable.
PENDING = -1
CPU_STORED = "cpu_stored"
CPU_EVICTED = "cpu_evicted"


class Lookup(enum.Enum):
    """What `lookup` finds for one key."""

    MISS = "MISS"
    HIT = "HIT"
    HIT_PENDING = "HIT_PENDING"


class OffloadObserver(Protocol):
    """Receives the tier's store completions and evictions (vLLM's CPU-medium KV events)."""

    def on_offload_event(self, kind: str, keys: Sequence[bytes]) -> None:
        """`kind` is CPU_STORED (at completion) or CPU_EVICTED (when decided)."""


@dataclass(frozen=True, slots=True)
class StorePlan:
    """A successful `prepare_store`: the keys now pending and the chunks evicted for them."""

    stored: list[bytes]
    evicted: list[bytes]


def chunk_positions(keys: Sequence[bytes], first_index: int) -> dict[bytes, int]:
    """Each key's position: the 1-based index of its chunk in the request (where it ends)."""
    return {key: first_index + offset + 1 for offset, key in enumerate(keys)}


def make_policy(name: str, num_chunks: int) -> OffloadPolicy:
    """The eviction policy called `name` (`lru` or `arc`)."""
    if name == "lru":
        return LRUOffloadPolicy()
    if name == "arc":
        return ARCOffloadPolicy(num_chunks)
    raise ValueError(f"offload eviction policy must be one of {', '.join(OFFLOAD_POLICIES)}")


class CpuOffloadTier:
    """`num_chunks` chunks; ref count -1 pending, 0 evictable, > 0 pinned by that many loads.

    Keys are the GPU cache's block hashes, so salt and LoRA isolate both tiers alike.
    Positions are chunk indices within the request (only their order matters).
    """

    __slots__ = (
        "num_chunks",
        "policy_name",
        "policy",
        "ref_counts",
        "num_evictable",
        "num_pending",
        "requests",
        "allocation_sizes",
        "observer",
    )

    def __init__(
        self, num_chunks: int, policy: str = "lru", *, observer: OffloadObserver | None = None
    ) -> None:
        if num_chunks < 1:
            raise ValueError(f"the CPU tier needs at least 1 chunk, got {num_chunks}")
        self.num_chunks = num_chunks
        self.policy_name = policy
        self.policy = make_policy(policy, num_chunks)
        self.ref_counts: dict[bytes, int] = {}
        self.num_evictable = 0
        self.num_pending = 0
        self.requests: dict[str, RequestAccess] = {}
        # New-chunk counts of prepare_store calls since the last `take_allocation_sizes`.
        self.allocation_sizes: list[int] = []
        self.observer = observer

    @property
    def num_free(self) -> int:
        """Chunks holding nothing."""
        return self.num_chunks - len(self.ref_counts)

    def lookup(self, key: bytes) -> Lookup:
        """MISS, HIT or HIT_PENDING; changes no recency."""
        ref_count = self.ref_counts.get(key)
        if ref_count is None:
            return Lookup.MISS
        return Lookup.HIT_PENDING if ref_count == PENDING else Lookup.HIT

    def prepare_load(self, request_id: str, keys: Sequence[bytes], first_index: int) -> None:
        """Pin ready chunks `keys` (chunk indices from `first_index`) for a load by the request."""
        ref_counts = self.ref_counts
        for key in keys:
            ref_count = ref_counts.get(key)
            if ref_count is None or ref_count == PENDING:
                raise ValueError(f"chunk {key.hex()} is not ready to load")
            if ref_count == 0:
                self.policy.mark_pinned(key)
                self.num_evictable -= 1
            ref_counts[key] = ref_count + 1
        self._record(self._access(request_id), keys, chunk_positions(keys, first_index), keys)

    def complete_load(self, keys: Sequence[bytes]) -> None:
        """Unpin chunks whose load finished."""
        ref_counts = self.ref_counts
        for key in keys:
            ref_count = ref_counts.get(key, 0)
            if ref_count < 1:
                raise ValueError(f"chunk {key.hex()} has no load in flight")
            ref_counts[key] = ref_count - 1
            if ref_count == 1:
                self.num_evictable += 1
                self.policy.mark_evictable(key)

    def prepare_store(
        self, request_id: str, keys: Sequence[bytes], first_index: int
    ) -> StorePlan | None:
        """Offer a request's chunks (prefix order, from chunk `first_index`); None = refused.

        Absent keys are stored (pending), ready ones count as a reuse, pending ones are ignored.
        A refusal changes no chunk, but the offer is still recorded for the request's recency.
        """
        ref_counts = self.ref_counts
        new: list[bytes] = []
        ready: list[bytes] = []
        for key in keys:
            ref_count = ref_counts.get(key)
            if ref_count is None:
                new.append(key)
            elif ref_count != PENDING:
                ready.append(key)
        request = self._access(request_id)
        first_misses = [key for key in new if key not in request.store_missed]
        if first_misses:
            self.policy.on_store_miss(first_misses)
            request.store_missed.update(first_misses)
        positions = chunk_positions(keys, first_index)
        recorded = set(new)
        recorded.update(ready)
        self._record(request, [key for key in keys if key in recorded], positions, ready)
        if not new:
            return StorePlan([], [])
        self.allocation_sizes.append(len(new))
        evicted: list[bytes] = []
        shortfall = len(new) - self.num_free
        if shortfall > 0:
            if shortfall > self.num_evictable:
                return None
            victims = self.policy.evict(shortfall, set(keys), ref_counts)
            if victims is None:
                return None
            for key in victims:
                del ref_counts[key]
            self.num_evictable -= len(victims)
            evicted = victims
            if self.observer is not None:
                self.observer.on_offload_event(CPU_EVICTED, victims)
        for key in new:
            ref_counts[key] = PENDING
            self.policy.insert(key, request, positions[key])
        self.num_pending += len(new)
        request.inserted.update(new)
        return StorePlan(new, evicted)

    def complete_store(self, keys: Sequence[bytes]) -> list[bytes]:
        """Pending chunks among `keys` become readable and evictable; returns those."""
        ref_counts = self.ref_counts
        completed = [key for key in keys if ref_counts.get(key) == PENDING]
        for key in completed:
            ref_counts[key] = 0
            self.policy.mark_evictable(key)
        self.num_pending -= len(completed)
        self.num_evictable += len(completed)
        if completed and self.observer is not None:
            self.observer.on_offload_event(CPU_STORED, completed)
        return completed

    def request_finished(self, request_id: str) -> None:
        """The recency refresh for everything the request stored, loaded or re-offered."""
        request = self.requests.pop(request_id, None)
        if request is None or not request.seen:
            return
        self.policy.on_finish(
            request.in_prefix_order(), request.inserted - request.reused, request.reused
        )

    def reset(self) -> None:
        """Drop every chunk at once, pinned ones included, and every request's record."""
        self.policy.clear()
        self.ref_counts.clear()
        self.requests.clear()
        self.num_evictable = 0
        self.num_pending = 0

    def usage(self) -> float:
        """vLLM's `kv_offload_cpu_cache_usage_perc`: pinned chunks (pending or loading) / all."""
        return (len(self.ref_counts) - self.num_evictable) / self.num_chunks

    def write_usage(self) -> float:
        """The pending-store part of `usage`."""
        return self.num_pending / self.num_chunks

    def take_allocation_sizes(self) -> list[int]:
        """New-chunk counts per store offer since the last call (vLLM's allocation histogram)."""
        sizes, self.allocation_sizes = self.allocation_sizes, []
        return sizes

    def snapshot(self) -> dict[str, Any]:
        """The policy's order plus the chunks that are not plainly evictable."""
        return {
            **self.policy.snapshot(),
            "pinned": {key.hex(): n for key, n in self.ref_counts.items() if n != 0},
        }

    def _access(self, request_id: str) -> RequestAccess:
        request = self.requests.get(request_id)
        if request is None:
            request = self.requests[request_id] = RequestAccess()
        return request

    def _record(
        self,
        request: RequestAccess,
        keys: Sequence[bytes],
        positions: Mapping[bytes, int],
        reused: Sequence[bytes],
    ) -> None:
        """Note keys the request sees for the first time and the ready ones it reuses."""
        new_keys = [key for key in keys if key not in request.positions]
        for key in new_keys:
            request.positions[key] = positions[key]
            request.seen.append(key)
        if new_keys:
            self.policy.on_access(request, new_keys)
        request.reused.update(key for key in reused if key not in request.inserted)
