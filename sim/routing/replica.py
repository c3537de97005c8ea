"""What a router reads of one replica: its load and its prefix cache, without changing either."""

from __future__ import annotations

from sim.sched import NativeScheduler, Request, Scheduler


class SchedulerReplica:
    """A replica seen through its scheduler (the live state, read at routing time)."""

    __slots__ = ("index", "scheduler")

    def __init__(self, index: int, scheduler: Scheduler | NativeScheduler) -> None:
        self.index = index
        self.scheduler = scheduler

    @property
    def num_unfinished_requests(self) -> int:
        """Requests waiting or running: the pending-request count routers balance on."""
        return self.scheduler.num_waiting + self.scheduler.num_running

    @property
    def num_queued_tokens(self) -> int:
        """Tokens of unfinished requests not yet scheduled (Scheduler.num_queued_tokens)."""
        return self.scheduler.num_queued_tokens

    def num_cached_prefix_tokens(self, request: Request) -> int:
        """Tokens of `request` this replica's prefix cache would serve if it arrived now."""
        return self.scheduler.kv_cache_manager.get_computed_blocks(request)[1]
