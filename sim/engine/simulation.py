"""Composing one simulated deployment: a SimPy clock, a workload driver and engine replicas."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import simpy

from sim.costmodel import NO_FRONTEND, CostModel, FrontEnd
from sim.engine.arrivals import WorkloadDriver
from sim.engine.cluster import Cluster
from sim.engine.collector import relaxed_garbage_collection
from sim.engine.core import ENGINE_VIEW
from sim.engine.frontend_stage import FrontEndStage
from sim.engine.offload import OffloadSpec
from sim.engine.requests import SpecLike
from sim.engine.sessions import SessionBookkeeping
from sim.kvcache import block_identity_wanted
from sim.metrics import NullRecorder, Recorder
from sim.routing import RoundRobinRouter, Router
from sim.sched import SchedulerConfig


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
    frontend: FrontEnd = NO_FRONTEND,
    offload: OffloadSpec | None = None,
    compiled_loop: bool = True,
) -> SimulationResult:
    """Run the workload through `num_replicas` engines behind `router` (default round robin)
    until every submitted request has finished; `frontend` is the API server before them.

    Requests arriving after `duration_s` are not submitted; those already in flight drain.
    `compiled_loop=False` keeps every replica on the Python step loop (what equivalence tests
    compare the compiled one against).
    """
    recorder = recorder if recorder is not None else NullRecorder()
    router = router if router is not None else RoundRobinRouter()
    # Block events are the only way a block hash leaves a simulation.
    config = replace(config, block_identity=block_identity_wanted(hashes_shown=record_block_events))
    env = simpy.Environment()
    sessions = SessionBookkeeping(router)
    stage = FrontEndStage(env, frontend, sessions.dispatch)
    cluster = Cluster(
        env,
        config,
        cost_model,
        router,
        num_replicas=num_replicas,
        recorder=recorder,
        replica_recorders=replica_recorders,
        record_block_events=record_block_events,
        on_request_finished=sessions.turn_finished,
        on_step=on_progress,
        fast_decode_path=fast_decode_path,
        offload=offload,
        compiled_loop=compiled_loop,
        record_view=ENGINE_VIEW if frontend.is_zero else stage,
    )
    driver = WorkloadDriver(
        env,
        specs,
        stage.hand_off,
        duration_s=duration_s,
        on_session_end=sessions.session_ended,
        dispatch_at=stage.hand_off_at,
    )
    sessions.bind(cluster, driver)
    stage.hold_bursts_in(cluster.compiled_replicas)
    # The recorders' closing conversions allocate many containers too: closed inside.
    with relaxed_garbage_collection():
        try:
            cluster.run_clock()
        except Exception as error:
            # SimPy re-raises a process's exception as a fresh copy built from its args alone;
            # the original (with its attributes, e.g. an InputError's file and line) is the
            # cause.
            original = error.__cause__
            if type(original) is type(error):
                raise original from None
            raise
        recorder.close(env.now)
    return SimulationResult(
        env.now,
        cluster.num_steps,
        driver.num_submitted,
        len(sessions.rejected),
        cluster.num_routed,
        sum(replica.num_queue_full_rejections for replica in cluster.replicas),
    )
