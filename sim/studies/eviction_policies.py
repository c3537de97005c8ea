"""Eviction policies for the block cache simulator: which free cached block to reuse next.

A policy sees block *copies*: physical blocks carrying a key (several may carry one key, since
vLLM does not de-duplicate). The simulator tells it when copies are pinned by a request's hit,
when a request's copies become free (tail first), and asks it for a victim among free copies.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sim.studies.eviction_trace import BlockTrace


@dataclass(slots=True)
class CopyStore:
    """Every copy ever registered (key and position, indexed by copy id) and those now cached."""

    copy_key: list[int] = field(default_factory=list)
    copy_position: list[int] = field(default_factory=list)
    # Cached copies of each key, oldest registration first (the pool's lookup returns the oldest).
    copies_by_key: dict[int, list[int]] = field(default_factory=dict)


class EvictionPolicy(Protocol):
    """What the simulator asks of a policy, in this order for each request."""

    def admit(self, request_index: int, hit_copies: Sequence[int]) -> None:
        """The request hit these copies: they are pinned until it is released."""

    def evict(self) -> int:
        """Choose a free cached copy to evict (the simulator drops it from the store)."""

    def release(self, request_index: int, copies_tail_first: Sequence[int]) -> None:
        """The request finished: its copies (hit and new) are free, deepest first."""


class LruPolicy:
    """vLLM's free queue: free copies in release order, a request's copies released tail first."""

    __slots__ = ("_queue",)

    def __init__(self, store: CopyStore, traces: Sequence[BlockTrace]) -> None:
        self._queue: OrderedDict[int, None] = OrderedDict()

    def admit(self, request_index: int, hit_copies: Sequence[int]) -> None:
        """Pin the copies the request hit (they leave the free queue)."""
        queue = self._queue
        for copy in hit_copies:
            del queue[copy]

    def evict(self) -> int:
        """The least recently released free copy."""
        return self._queue.popitem(last=False)[0]

    def release(self, request_index: int, copies_tail_first: Sequence[int]) -> None:
        """Free a finished request's copies, deepest first so they are evicted first."""
        queue = self._queue
        for copy in copies_tail_first:
            queue[copy] = None


class _PriorityPolicy(ABC):
    """Evicts the free copy with the smallest (primary, secondary) priority, ties to the earliest
    release: heap entries are (primary, secondary, stamp, copy), the stamp counting pushes."""

    __slots__ = ("_store", "_heap", "_stamps", "_num_pushes")

    def __init__(self, store: CopyStore, traces: Sequence[BlockTrace]) -> None:
        self._store = store
        self._heap: list[tuple[float, int, int, int]] = []
        # Free copy -> stamp of its one valid heap entry; pinned and evicted copies are absent.
        self._stamps: dict[int, int] = {}
        self._num_pushes = 0

    @abstractmethod
    def _priorities(self, request_index: int, copies: Sequence[int]) -> list[tuple[float, int]]:
        """The (primary, secondary) priority of each copy as request `request_index` frees it."""

    def _push(self, primary: float, secondary: int, copy: int) -> None:
        stamp = self._num_pushes
        self._num_pushes += 1
        self._stamps[copy] = stamp
        heapq.heappush(self._heap, (primary, secondary, stamp, copy))

    def admit(self, request_index: int, hit_copies: Sequence[int]) -> None:
        """Pin the copies the request hit."""
        stamps = self._stamps
        for copy in hit_copies:
            del stamps[copy]

    def _pop(self) -> tuple[float, int]:
        heap, stamps = self._heap, self._stamps
        while True:
            primary, _, stamp, copy = heapq.heappop(heap)
            if stamps.get(copy) == stamp:
                del stamps[copy]
                return primary, copy

    def evict(self) -> int:
        """Pop the free copy with the smallest priority."""
        return self._pop()[1]

    def release(self, request_index: int, copies_tail_first: Sequence[int]) -> None:
        """Free a finished request's copies with their current priorities."""
        heap, stamps = self._heap, self._stamps
        first_stamp = self._num_pushes
        self._num_pushes = first_stamp + len(copies_tail_first)
        stamps.update(zip(copies_tail_first, itertools.count(first_stamp)))
        priorities = self._priorities(request_index, copies_tail_first)
        push = heapq.heappush
        for (primary, secondary), stamp, copy in zip(
            priorities, itertools.count(first_stamp), copies_tail_first
        ):
            push(heap, (primary, secondary, stamp, copy))
        # Pinned and re-prioritised copies leave stale entries; drop them once they dominate.
        if len(heap) > 4 * len(stamps) + 1024:
            self._heap = [entry for entry in heap if stamps.get(entry[3]) == entry[2]]
            heapq.heapify(self._heap)


class _FrequencyPolicy(_PriorityPolicy):
    """A priority policy that counts, per copy, the requests that used it since it was filled
    (the request that wrote it, then one per hit)."""

    __slots__ = ("_uses",)

    def __init__(self, store: CopyStore, traces: Sequence[BlockTrace]) -> None:
        super().__init__(store, traces)
        self._uses: dict[int, int] = {}

    def admit(self, request_index: int, hit_copies: Sequence[int]) -> None:
        """Pin the hits and count one more use of each."""
        super().admit(request_index, hit_copies)
        uses = self._uses
        for copy in hit_copies:
            uses[copy] += 1

    def evict(self) -> int:
        """Pop the free copy with the smallest priority and forget its uses."""
        copy = super().evict()
        del self._uses[copy]
        return copy


class LfuPolicy(_FrequencyPolicy):
    """In-cache LFU per block: a copy counts the requests that used it (its writer and each hit)
    since it was filled; the least used free copy goes first, ties to the least recently released
    (so, within one request, deepest first, as in vLLM's queue)."""

    __slots__ = ()

    def _priorities(self, request_index: int, copies: Sequence[int]) -> list[tuple[float, int]]:
        uses = self._uses
        return [(uses.setdefault(copy, 1), 0) for copy in copies]


class LengthAwarePolicy(_FrequencyPolicy):
    """Greedy-Dual-Size-Frequency with a block's prefix length as its size.

    A block at depth d (0-based) can only be hit by a request sharing its first (d + 1) blocks,
    so it costs d + 1 resident blocks to keep useful, and the number of requests sharing a prefix
    can only shrink as the prefix grows. Priority = L + uses / (d + 1): deep blocks of long,
    rarely shared prefixes (unique documents, conversation tails) go first, shallow blocks of
    popular prefixes stay. L, the priority of the last victim, ages out formerly hot blocks
    (GDSF). A hit on a block is a hit on its ancestors, which are also shallower, so descendants
    normally rank below their ancestors and go first; ties go to the deeper block, then to the
    earlier release.
    """

    __slots__ = ("_inflation",)

    def __init__(self, store: CopyStore, traces: Sequence[BlockTrace]) -> None:
        super().__init__(store, traces)
        self._inflation = 0.0

    def _priorities(self, request_index: int, copies: Sequence[int]) -> list[tuple[float, int]]:
        uses, positions, inflation = self._uses, self._store.copy_position, self._inflation
        return [
            (inflation + uses.setdefault(copy, 1) / (positions[copy] + 1), -positions[copy])
            for copy in copies
        ]

    def _pop(self) -> tuple[float, int]:
        primary, copy = super()._pop()
        # GDSF aging: later blocks start from the priority of the latest victim.
        self._inflation = primary
        return primary, copy


def next_lookup_uses(traces: Sequence[BlockTrace]) -> list[list[int]]:
    """For each request and block: the index of the next request that looks the key up, or
    len(traces) if the key is next rewritten without a lookup (or never referenced again)."""
    never = len(traces)
    next_reference: dict[int, int] = {}
    next_uses: list[list[int]] = [[] for _ in traces]
    for index in range(len(traces) - 1, -1, -1):
        trace = traces[index]
        keys = trace.block_keys
        num_lookup = trace.num_lookup_blocks if trace.reads_prefix_cache else 0
        next_uses[index] = [next_reference.get(key, never) for key in keys]
        for position, key in enumerate(keys):
            # A later copy of a key written without a lookup supersedes any copy kept until then.
            next_reference[key] = index if position < num_lookup else never
    return next_uses


class BeladyPolicy(_PriorityPolicy):
    """Offline optimum: evict the free copy whose key is looked up farthest in the future.

    Copies that can never produce a hit again go first: keys never looked up again, keys whose
    next reference rewrites them without a lookup (past the num_tokens - 1 cap, after outputs,
    prompt-logprob requests), and redundant copies of a key the current request holds or
    rewrites. Ties go to the earlier release. A request that looks up a block looks up all its
    ancestors, so an ancestor's next use is never later than its descendant's; and a request
    frees its blocks deepest first while every other free copy of its keys is marked dead, so
    among equal next uses descendants are released earlier and evicted first: a block kept
    for its next lookup is reachable (all its ancestors cached) at that lookup.

    Bound: with prefix closure a request's hits are exactly its looked-up keys that are cached,
    so this is MIN on block references where a request's references are pinned together and a
    block enters the cache only when a request writes it; MIN's exchange argument carries over,
    so the policy maximises hit blocks (hence hit tokens, and minimises prefill tokens) over
    every eviction choice of this pool, for this order of requests run one at a time. The tests
    check it against an exhaustive search on small streams. It is not a bound for schedulers
    that reorder, batch or preempt requests, nor for caches that may skip writing a block.
    """

    __slots__ = ("_traces", "_next_uses", "_never")

    def __init__(self, store: CopyStore, traces: Sequence[BlockTrace]) -> None:
        super().__init__(store, traces)
        self._traces = traces
        self._next_uses = next_lookup_uses(traces)
        self._never = len(traces)

    def _priorities(self, request_index: int, copies: Sequence[int]) -> list[tuple[float, int]]:
        positions, next_uses = self._store.copy_position, self._next_uses[request_index]
        return [(-next_uses[positions[copy]], 0) for copy in copies]

    def admit(self, request_index: int, hit_copies: Sequence[int]) -> None:
        """Pin the hits, then mark every other free copy of the request's keys as dead."""
        super().admit(request_index, hit_copies)
        stamps = self._stamps
        copies_by_key = self._store.copies_by_key
        dead = -self._never
        for key in self._traces[request_index].block_keys:
            for copy in copies_by_key.get(key, ()):
                if copy in stamps:
                    self._push(dead, 0, copy)


POLICY_CLASSES: dict[str, Callable[[CopyStore, Sequence[BlockTrace]], EvictionPolicy]] = {
    "lru": LruPolicy,
    "lfu": LfuPolicy,
    "length-aware": LengthAwarePolicy,
    "belady": BeladyPolicy,
}
