"""The simulation's side of closed-loop sessions, between the workload driver and the cluster.

Each spec goes to the cluster with its session's last finished turn as the prefix source (the
next turn's prompt repeats it, so its block hashes are reused rather than recomputed — part of
the fast path, like the hash memo). A finished or rejected turn is reported to the driver,
which releases the session's next turn; when the driver forgets an ended session, the router
is told and the last turn is dropped.
"""

from __future__ import annotations

from sim.engine.arrivals import WorkloadDriver
from sim.engine.cluster import Cluster
from sim.engine.requests import SpecLike, request_from_spec
from sim.kvcache import Hasher
from sim.routing import Router
from sim.sched import Request


class SessionBookkeeping:
    """Submits specs to the cluster and carries turn ends back to the driver (`bind` first)."""

    __slots__ = (
        "cluster",
        "driver",
        "hasher",
        "last_turns",
        "rejected",
        "reuse_turn_hashes",
        "router",
    )

    def __init__(self, router: Router) -> None:
        self.router = router
        self.last_turns: dict[str, Request] = {}
        self.rejected: list[str] = []  # request ids the cluster refused
        self.cluster: Cluster
        self.driver: WorkloadDriver
        self.hasher: Hasher  # the cluster's
        self.reuse_turn_hashes: bool

    def bind(self, cluster: Cluster, driver: WorkloadDriver) -> None:
        """The cluster the turns go to and the driver that releases them."""
        self.cluster = cluster
        self.driver = driver
        self.hasher = cluster.hasher
        self.reuse_turn_hashes = all(
            replica.scheduler.fast_decode_path for replica in cluster.replicas
        )

    def dispatch(self, spec: SpecLike, now: float) -> None:
        """Submit `spec` at `now`; a rejected turn ends at once."""
        session_id = spec.session_id
        prefix_source = self.last_turns.get(session_id) if session_id is not None else None
        request = request_from_spec(spec, self.hasher, now, prefix_source)
        try:
            self.cluster.submit(request)
        except ValueError:
            self.rejected.append(spec.request_id)
            self._end_turn(session_id)

    def turn_finished(self, request: Request) -> None:
        """A request finished: keep it as its session's last turn, release the next one."""
        session_id = request.session_id
        if session_id is not None:
            if self.reuse_turn_hashes:
                self.last_turns[session_id] = request
            self.driver.on_session_turn_done(session_id)

    def session_ended(self, session_id: str) -> None:
        """The driver forgot an ended session: so do the router and this bookkeeping."""
        self.router.on_session_end(session_id)
        self.last_turns.pop(session_id, None)

    def _end_turn(self, session_id: str | None) -> None:
        if session_id is not None:
            self.driver.on_session_turn_done(session_id)
