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
        return len(self.scheduler.waiting) + len(self.scheduler.running)

    @property
    def num_queued_tokens(self) -> int:
        """Tokens of unfinished requests not yet scheduled: mostly prompts still to prefill.

        With async scheduling a decode step in flight has computed a token that is not appended
        yet (its output placeholder): counted, so that a decoding request is 1 either way.
        """
        return sum(
            len(request.all_token_ids)
            + request.num_output_placeholders
            - request.num_computed_tokens
            for request in self.scheduler.requests.values()
        )

    def num_cached_prefix_tokens(self, request: Request) -> int:
        """Tokens of `request` this replica's prefix cache would serve if it arrived now."""
        return self.scheduler.kv_cache_manager.get_computed_blocks(request)[1]
