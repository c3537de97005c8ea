"""Composing one simulated deployment: a SimPy clock, a workload driver and engine replicas."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import simpy

from sim.costmodel.model import CostModel
from sim.engine.arrivals import WorkloadDriver
from sim.engine.cluster import Cluster
from sim.engine.collector import relaxed_garbage_collection
from sim.engine.offload import OffloadSpec
from sim.engine.requests import SpecLike, request_from_spec
from sim.metrics import NullRecorder, Recorder
from sim.routing import RoundRobinRouter, Router
from sim.sched import Request, SchedulerConfig


@dataclass(slots=True)
class SimulationResult:
    """How a simulation ended."""

    end_at: float
    num_steps: int  # summed over replicas
    num_submitted: int
    num_rejected: int  # refused as vLLM's API does: all of num_rejected_queue_full, and prompts
    # of max_model_len tokens or more
    num_routed: list[int]  # requests sent to each replica, rejected ones included
    num_rejected_queue_full: int = 0  # HTTP 503: max_num_queued_reqs / _tokens reached


def simulate(
    specs: Iterable[SpecLike],
    config: SchedulerConfig,
    cost_model: CostModel,
    *,
    recorder: Recorder | None = None,
    duration_s: float | None = None,
    record_block_events: bool = True,
    on_progress: Callable[[float], None] | None = None,
    num_replicas: int = 1,
    router: Router | None = None,
    replica_recorders: Sequence[Recorder] | None = None,
    fast_decode_path: bool = True,
    offload: OffloadSpec | None = None,
) -> SimulationResult:
    """Run the workload through `num_replicas` engines behind `router` (default round robin)
    until every submitted request has finished.

    Requests arriving after `duration_s` are not submitted; those already in flight drain.
    """
    recorder = recorder if recorder is not None else NullRecorder()
    router = router if router is not None else RoundRobinRouter()
    env = simpy.Environment()
    rejected: list[str] = []

    # Sessions left with no turn in flight. The driver forgets those that have ended when it
    # reads the next first turn, just before dispatching it; the router is then told.
    idle_session_ids: dict[str, None] = {}  # insertion-ordered set
    # Each live session's last finished turn: the next turn's prompt repeats it, so its block
    # hashes are reused rather than recomputed (part of the fast path, like the hash memo).
    last_turns: dict[str, Request] = {}

    def end_turn(session_id: str | None) -> None:
        if session_id is not None:
            driver.on_session_turn_done(session_id)
            idle_session_ids[session_id] = None

    def dispatch(spec: SpecLike) -> None:
        if spec.arrival_at is not None and idle_session_ids:
            for session_id in idle_session_ids:
                if session_id not in driver.sessions:
                    router.on_session_end(session_id)
                    last_turns.pop(session_id, None)
            idle_session_ids.clear()
        prefix_source = last_turns.get(spec.session_id) if spec.session_id is not None else None
        request = request_from_spec(spec, cluster.hasher, float(env.now), prefix_source)
        try:
            cluster.submit(request)
        except ValueError:
            rejected.append(spec.request_id)
            end_turn(spec.session_id)

    def finished(request: Request) -> None:
        if reuse_turn_hashes and request.session_id is not None:
            last_turns[request.session_id] = request
        end_turn(request.session_id)

    cluster = Cluster(
        env,
        config,
        cost_model,
        router,
        num_replicas=num_replicas,
        recorder=recorder,
        replica_recorders=replica_recorders,
        record_block_events=record_block_events,
        on_request_finished=finished,
        on_step=on_progress,
        fast_decode_path=fast_decode_path,
        offload=offload,
    )
    reuse_turn_hashes = all(replica.scheduler.fast_decode_path for replica in cluster.replicas)
    driver = WorkloadDriver(env, specs, dispatch, duration_s=duration_s)
    try:
        with relaxed_garbage_collection():
            env.run()
    except Exception as error:
        # SimPy re-raises a process's exception as a fresh copy built from its args alone;
        # the original (with its attributes, e.g. an InputError's file and line) is the cause.
        original = error.__cause__
        if type(original) is type(error):
            raise original from None
        raise
    recorder.close(env.now)
    return SimulationResult(
        env.now,
        cluster.num_steps,
        driver.num_submitted,
        len(rejected),
        cluster.num_routed,
        sum(replica.num_queue_full_rejections for replica in cluster.replicas),
    )
