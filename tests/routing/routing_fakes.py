"""Replica states set by hand and requests to route, for the routing tests."""

from __future__ import annotations

from dataclasses import dataclass

from sim.kvcache import BlockHasher
from sim.sched import Request


@dataclass(slots=True)
class FakeReplica:
    """A replica whose load and cached prefix (for any request) are given."""

    index: int
    num_unfinished_requests: int = 0
    num_queued_tokens: int = 0
    num_cached_tokens: int = 0

    def num_cached_prefix_tokens(self, request: Request) -> int:
        return self.num_cached_tokens


def replicas(*states: tuple[int, int, int]) -> list[FakeReplica]:
    """Replicas from (unfinished requests, queued tokens, cached tokens) triples."""
    return [FakeReplica(index, *state) for index, state in enumerate(states)]


def request(
    request_id: str = "r", num_prompt_tokens: int = 100, session_id: str | None = None
) -> Request:
    """A request of `num_prompt_tokens` distinct tokens and one output token."""
    return Request(
        request_id,
        list(range(num_prompt_tokens)),
        [1],
        BlockHasher(),
        session_id=session_id,
    )
