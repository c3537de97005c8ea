"""The router interface: pick a replica for each arriving request from the replicas' state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sim.sched import Request


class ReplicaView(Protocol):
    """The per-replica state a router may read (see SchedulerReplica)."""

    index: int

    @property
    def num_unfinished_requests(self) -> int: ...

    @property
    def num_queued_tokens(self) -> int: ...

    def num_cached_prefix_tokens(self, request: Request) -> int: ...


class Router(Protocol):
    """Chooses the replica index for a request; told when a session has ended."""

    policy: str

    def choose(self, request: Request, replicas: Sequence[ReplicaView]) -> int: ...

    def on_session_end(self, session_id: str) -> None: ...


def least_loaded_by_tokens(replicas: Sequence[ReplicaView]) -> int:
    """Fewest queued tokens, then fewest unfinished requests, then the lowest index."""
    return min(
        replicas,
        key=lambda replica: (
            replica.num_queued_tokens,
            replica.num_unfinished_requests,
            replica.index,
        ),
    ).index


def least_loaded_by_requests(replicas: Sequence[ReplicaView]) -> int:
    """Fewest unfinished requests, then the lowest index."""
    return min(replicas, key=lambda replica: (replica.num_unfinished_requests, replica.index)).index
