"""The routing policies: round robin, least loaded, prefix-aware (SGLang's rule), session affinity.

prefix_aware applies the decision rule of SGLang's cache-aware router (sgl-project/sglang,
docs/router/router.md), with the replica's exact prefix cache in place of the router's
approximate radix tree:

1. Loads are unfinished (waiting + running) requests. The cluster is imbalanced when
   `max - min > balance_abs_threshold` and `max > balance_rel_threshold * min`; then the
   request goes to the least loaded replica.
2. Otherwise the match ratio of a replica is the prompt fraction its cache holds (whole blocks,
   at most the prompt minus one token, exactly what vLLM's lookup would reuse). The highest
   ratio wins if it exceeds `cache_threshold`; ties go to the less loaded, then lower index.
3. Below the threshold the request goes to the least loaded replica. (SGLang picks the worker
   with the smallest approximate tree instead; a vLLM cache keeps evictable blocks until they
   are reused, so every warm replica's cache is full and its size says nothing about room.)

llm-d's precise prefix-cache scorer reads the same quantity (the matched fraction of the
prompt's blocks, from the engines' KV events) but adds it to a queue-depth score with weights
rather than switching on thresholds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sim.routing.router import (
    ReplicaView,
    Router,
    least_loaded_by_requests,
    least_loaded_by_tokens,
)
from sim.sched import Request


@dataclass(frozen=True, slots=True)
class RouterTuning:
    """The thresholds of the prefix-aware rule (SGLang's documented defaults); other policies
    take none."""

    cache_threshold: float = 0.5
    balance_abs_threshold: int = 32
    balance_rel_threshold: float = 1.0001


class RoundRobinRouter:
    """Replicas in turn, whatever the request or load."""

    policy = "round_robin"

    @classmethod
    def from_tuning(cls, tuning: RouterTuning) -> RoundRobinRouter:
        """This policy has no settings."""
        return cls()

    def __init__(self) -> None:
        self._next_index = 0

    def choose(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """The next replica in turn."""
        index = self._next_index % len(replicas)
        self._next_index = index + 1
        return index

    def on_session_end(self, session_id: str) -> None:
        """Round robin keeps no session state."""


class LeastLoadedRouter:
    """The replica with the fewest queued tokens (ties: fewer requests, lower index)."""

    policy = "least_loaded"

    @classmethod
    def from_tuning(cls, tuning: RouterTuning) -> LeastLoadedRouter:
        """This policy has no settings."""
        return cls()

    def choose(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """The least loaded replica now."""
        return least_loaded_by_tokens(replicas)

    def on_session_end(self, session_id: str) -> None:
        """Least loaded keeps no session state."""


class SessionlessRequestWarning(UserWarning):
    """A session-affinity router met a request without a session."""


class SessionAffinityRouter:
    """A session's first turn goes to the least loaded replica; its later turns follow it there.

    Requests without a session are routed as by LeastLoadedRouter. A session's pin is dropped
    when the session ends, so the table holds only live sessions.
    """

    policy = "session_affinity"

    @classmethod
    def from_tuning(cls, tuning: RouterTuning) -> SessionAffinityRouter:
        """This policy has no settings."""
        return cls()

    def __init__(self) -> None:
        self.pins: dict[str, int] = {}
        self._warned_sessionless = False

    def choose(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """The session's replica, pinning a new session to the least loaded one."""
        session_id = request.session_id
        if session_id is None:
            if not self._warned_sessionless:
                # Said once a run: a workload without sessions (RAG, Mooncake or Azure traces)
                # otherwise runs as least_loaded under this policy's name.
                self._warned_sessionless = True
                warnings.warn(
                    f"deployment.router.policy session_affinity: request "
                    f"{request.request_id!r} has no session, so it (and any other) is routed "
                    "as least_loaded would route it",
                    SessionlessRequestWarning,
                    stacklevel=2,
                )
            return least_loaded_by_tokens(replicas)
        index = self.pins.get(session_id)
        if index is None:
            index = self.pins[session_id] = least_loaded_by_tokens(replicas)
        return index

    def on_session_end(self, session_id: str) -> None:
        """Forget the session's replica."""
        self.pins.pop(session_id, None)


class PrefixAwareRouter:
    """SGLang's cache-aware rule on exact caches (see the module docstring)."""

    policy = "prefix_aware"

    def __init__(self, tuning: RouterTuning | None = None) -> None:
        tuning = tuning if tuning is not None else RouterTuning()
        self.cache_threshold = tuning.cache_threshold
        self.balance_abs_threshold = tuning.balance_abs_threshold
        self.balance_rel_threshold = tuning.balance_rel_threshold

    @classmethod
    def from_tuning(cls, tuning: RouterTuning) -> PrefixAwareRouter:
        """A router with these thresholds."""
        return cls(tuning)

    def is_imbalanced(self, loads: Sequence[int]) -> bool:
        """Both the absolute and the relative load gap exceed their thresholds."""
        highest, lowest = max(loads), min(loads)
        return (
            highest - lowest > self.balance_abs_threshold
            and highest > self.balance_rel_threshold * lowest
        )

    def choose(self, request: Request, replicas: Sequence[ReplicaView]) -> int:
        """Least loaded when imbalanced, else the best prefix match above the threshold."""
        loads = [replica.num_unfinished_requests for replica in replicas]
        if self.is_imbalanced(loads):
            return least_loaded_by_requests(replicas)
        num_prompt_tokens = max(request.num_prompt_tokens, 1)
        ratios = [
            replica.num_cached_prefix_tokens(request) / num_prompt_tokens for replica in replicas
        ]
        best = max(
            range(len(replicas)),
            key=lambda position: (ratios[position], -loads[position], -replicas[position].index),
        )
        if ratios[best] > self.cache_threshold:
            return replicas[best].index
        return least_loaded_by_requests(replicas)

    def on_session_end(self, session_id: str) -> None:
        """Prefix-aware routing keeps no session state."""


# The router registry: adding a policy is its class (with `policy` and `from_tuning`) plus one
# entry here; the scenario schema and docs take the names from ROUTER_POLICIES.
_ROUTERS = (RoundRobinRouter, LeastLoadedRouter, PrefixAwareRouter, SessionAffinityRouter)
ROUTER_REGISTRY: dict[str, Callable[[RouterTuning], Router]] = {
    router.policy: router.from_tuning for router in _ROUTERS
}
ROUTER_POLICIES = tuple(ROUTER_REGISTRY)


def make_router(policy: str, tuning: RouterTuning | None = None) -> Router:
    """A fresh router for `policy` (one of ROUTER_POLICIES), with `tuning` or the defaults."""
    factory = ROUTER_REGISTRY.get(policy)
    if factory is None:
        raise ValueError(
            f"router policy must be one of {', '.join(ROUTER_POLICIES)}, got {policy!r}"
        )
    return factory(tuning if tuning is not None else RouterTuning())
