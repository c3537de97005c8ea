"""Driving sim.sched.Scheduler step by step as `engine replay` does: time is the step number.

Each step is schedule(now) then update_from_output(output, now); evicted blocks are reported
by label "<request id>#<block index>" of the first request that produced the hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.kvcache import BLOCK_EVICTED, PrefixCacheStats
from sim.sched import Request, Scheduler, SchedulerConfig, SchedulerOutput, StepResult


def tokens(first: int, count: int) -> list[int]:
    """`count` consecutive token ids starting at `first`."""
    return list(range(first, first + count))


class _EvictionLog:
    """Collects the hashes evicted since the last clear."""

    __slots__ = ("evicted",)

    def __init__(self) -> None:
        self.evicted: list[bytes] = []

    def on_block_event(
        self, kind: str, block_hash: bytes, block_id: int, num_tokens: int, now: float
    ) -> None:
        if kind == BLOCK_EVICTED:
            self.evicted.append(block_hash)


@dataclass(slots=True)
class Step:
    """One engine iteration: the scheduler's output, the fake model's result, evictions."""

    index: int
    output: SchedulerOutput
    result: StepResult
    evicted_labels: list[str]
    running: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    num_free_blocks: int = 0

    @property
    def scheduled(self) -> dict[str, int]:
        return dict(self.output.num_scheduled_tokens)

    @property
    def admitted(self) -> list[tuple[str, int, bool]]:
        """(id, hit tokens, resumed) of each request admitted this step."""
        return [(a.request.request_id, a.num_hit_tokens, a.resumed) for a in self.output.admitted]

    @property
    def preempted(self) -> list[str]:
        return [request.request_id for request in self.output.preempted]

    @property
    def finished(self) -> list[str]:
        return [request.request_id for request in self.result.finished]


class SchedDriver:
    """A Scheduler plus the bookkeeping a test needs to read its decisions."""

    def __init__(self, **config: Any) -> None:
        self.events = _EvictionLog()
        self.scheduler = Scheduler(SchedulerConfig(**config), observer=self.events)
        self.requests: dict[str, Request] = {}
        self.labels: dict[bytes, str] = {}
        self.num_steps = 0

    @property
    def stats(self) -> PrefixCacheStats:
        """Cumulative prefix-cache counters since the start."""
        return self.scheduler.kv_cache_manager.cumulative_stats

    @property
    def num_free_blocks(self) -> int:
        return self.scheduler.kv_cache_manager.num_free_blocks

    def block_ids(self, request_id: str) -> list[int]:
        return self.scheduler.kv_cache_manager.get_block_ids(request_id)

    def add(
        self,
        request_id: str,
        prompt: Sequence[int],
        outputs: Sequence[int],
        *,
        priority: int = 0,
        arrival_at: float | None = None,
    ) -> Request:
        """Queue a request arriving now (the current step number unless given)."""
        request = Request(
            request_id,
            prompt,
            outputs,
            self.scheduler.hasher,
            arrival_at=float(self.num_steps) if arrival_at is None else arrival_at,
            priority=priority,
        )
        self.scheduler.add_request(request)
        self.requests[request_id] = request
        self._label(request)
        return request

    def step(self) -> Step:
        """One iteration: schedule, fake execute, update from output."""
        self.num_steps += 1
        now = float(self.num_steps)
        self.events.evicted.clear()
        scheduler = self.scheduler
        output = scheduler.schedule(now)
        result = scheduler.update_from_output(output, now)
        for request in result.sampled:
            self._label(request)
        return Step(
            self.num_steps,
            output,
            result,
            [self.labels[block_hash] for block_hash in self.events.evicted],
            [request.request_id for request in scheduler.running],
            [request.request_id for request in scheduler.waiting],
            self.num_free_blocks,
        )

    def steps(self, count: int) -> dict[int, Step]:
        """Run `count` steps; the result is keyed by step number."""
        return {step.index: step for step in (self.step() for _ in range(count))}

    def run_until_idle(self, max_steps: int = 1000) -> dict[int, Step]:
        """Step until nothing is waiting or running."""
        taken: dict[int, Step] = {}
        while self.scheduler.has_unfinished_requests:
            if len(taken) == max_steps:
                raise AssertionError(f"still busy after {max_steps} steps")
            step = self.step()
            taken[step.index] = step
        return taken

    def _label(self, request: Request) -> None:
        for index, block_hash in enumerate(request.block_hashes):
            self.labels.setdefault(block_hash, f"{request.request_id}#{index}")
