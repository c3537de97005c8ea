"""Spreading requests over engine replicas: routing policies over the replicas' live state."""

from sim.routing.policies import (
    ROUTER_POLICIES,
    LeastLoadedRouter,
    PrefixAwareRouter,
    RoundRobinRouter,
    SessionAffinityRouter,
    make_router,
)
from sim.routing.replica import SchedulerReplica
from sim.routing.router import ReplicaView, Router

__all__ = [
    "ROUTER_POLICIES",
    "LeastLoadedRouter",
    "PrefixAwareRouter",
    "ReplicaView",
    "RoundRobinRouter",
    "Router",
    "SchedulerReplica",
    "SessionAffinityRouter",
    "make_router",
]
