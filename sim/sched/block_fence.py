"""vLLM's deferred block free (`defer_block_free`, spec §13.9): with two batches in flight and
a connector that loads KV (CPU offloading is `kv_both`), a load could land in a block that a
step still in flight writes. So the blocks of a request freed while a step that scheduled it
is unprocessed go back to the pool only once the latest step scheduled by then is processed,
tail first; and a running request in that state is not preempted (its free would not help).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from sim.kvcache import CacheManager
from sim.sched.request import Request


class BlockFreeFence:
    """Step sequence numbers (only steps that schedule tokens count) and the frees waiting for
    one to be processed, oldest first."""

    __slots__ = ("sched_step_seq", "processed_step_seq", "pending")

    def __init__(self) -> None:
        self.sched_step_seq = 0
        self.processed_step_seq = 0
        # Blocks are the manager's handles: KVBlock objects or ids, depending on the core.
        self.pending: deque[tuple[int, list[Any]]] = deque()

    def step_scheduled(self, scheduled: Sequence[Request]) -> None:
        """A step with tokens was scheduled: its requests are written until it is processed."""
        self.sched_step_seq += 1
        seq = self.sched_step_seq
        for request in scheduled:
            request.last_sched_seq = seq

    def step_processed(self, manager: CacheManager) -> None:
        """A step with tokens was processed: release the frees it fenced, in order."""
        self.processed_step_seq += 1
        pending = self.pending
        while pending and pending[0][0] <= self.processed_step_seq:
            manager.release_blocks(pending.popleft()[1])

    def can_free_now(self, request: Request) -> bool:
        """Whether no unprocessed step still writes the request's blocks."""
        return request.last_sched_seq <= self.processed_step_seq

    def free(self, request: Request, manager: CacheManager) -> None:
        """Free the request's blocks now, or once the latest scheduled step is processed."""
        if self.can_free_now(request):
            manager.free(request)
            return
        blocks = manager.pop_blocks(request.request_id)
        if blocks:
            self.pending.append((self.sched_step_seq, blocks))
