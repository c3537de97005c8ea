"""Composing one simulated deployment: a SimPy clock, a workload driver and an engine replica."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import simpy

from sim.costmodel.model import CostModel
from sim.engine.arrivals import WorkloadDriver
from sim.engine.core import EngineCore
from sim.engine.requests import SpecLike, request_from_spec
from sim.metrics import NullRecorder, Recorder
from sim.sched import SchedulerConfig


@dataclass(slots=True)
class SimulationResult:
    """How a simulation ended."""

    end_at: float
    num_steps: int
    num_submitted: int
    num_rejected: int  # prompts of max_model_len tokens or more, refused as vLLM's API does


def simulate(
    specs: Iterable[SpecLike],
    config: SchedulerConfig,
    cost_model: CostModel,
    *,
    recorder: Recorder | None = None,
    duration_s: float | None = None,
    record_block_events: bool = True,
    on_progress: Callable[[float], None] | None = None,
) -> SimulationResult:
    """Run the workload through one engine until every submitted request has finished.

    Requests arriving after `duration_s` are not submitted; those already in flight drain.
    """
    recorder = recorder if recorder is not None else NullRecorder()
    env = simpy.Environment()
    rejected: list[str] = []

    def dispatch(spec: SpecLike) -> None:
        request = request_from_spec(spec, engine.hasher, float(env.now))
        try:
            engine.submit(request)
        except ValueError:
            rejected.append(spec.request_id)
            if spec.session_id is not None:
                driver.on_session_turn_done(spec.session_id)

    engine = EngineCore(
        env,
        config,
        cost_model,
        recorder=recorder,
        record_block_events=record_block_events,
        on_request_finished=lambda request: driver.on_request_finished(request),
        on_step=on_progress,
    )
    driver = WorkloadDriver(env, specs, dispatch, duration_s=duration_s)
    env.run()
    recorder.close(env.now)
    return SimulationResult(env.now, engine.num_steps, driver.num_submitted, len(rejected))
