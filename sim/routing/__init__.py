"""Spreading requests over engine replicas: routing policies over the replicas' live state."""

from sim.routing.policies import (
    ROUTER_POLICIES,
    ROUTER_REGISTRY,
    LeastLoadedRouter,
    PrefixAwareRouter,
    RoundRobinRouter,
    RouterTuning,
    SessionAffinityRouter,
    make_router,
)
from sim.routing.replica import SchedulerReplica
from sim.routing.router import ReplicaView, Router

__all__ = [
    "ROUTER_POLICIES",
    "ROUTER_REGISTRY",
    "LeastLoadedRouter",
    "PrefixAwareRouter",
    "ReplicaView",
    "RoundRobinRouter",
    "Router",
    "RouterTuning",
    "SchedulerReplica",
    "SessionAffinityRouter",
    "make_router",
]
