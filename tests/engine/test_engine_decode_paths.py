"""The engine's event-driven decoding (fast_decode_path, the default) changes nothing observable:
every block event, step record and request record equals the straightforward path's, with a
cost that depends on the batch's tokens and KV lengths."""

from __future__ import annotations

import pytest
import simpy
from engine_fakes import CollectingRecorder, TokenCountStepCost
from engine_specs import busy_config, busy_workload

from sim.engine import EngineCore, WorkloadDriver, request_from_spec
from sim.engine.requests import SpecLike
from sim.sched import Request, SchedulerConfig


def run_one_engine(
    specs: list[SpecLike], config: SchedulerConfig, *, fast_decode_path: bool
) -> CollectingRecorder:
    """One EngineCore fed by a WorkloadDriver, as simulate() wires a single replica."""
    env = simpy.Environment()
    recorder = CollectingRecorder()

    def turn_done(request: Request) -> None:
        if request.session_id is not None:
            driver.on_session_turn_done(request.session_id)

    engine = EngineCore(
        env,
        config,
        TokenCountStepCost(),
        recorder=recorder,
        fast_decode_path=fast_decode_path,
        on_request_finished=turn_done,
    )

    def dispatch(spec: SpecLike) -> None:
        engine.submit(request_from_spec(spec, engine.hasher, float(env.now)))

    driver = WorkloadDriver(env, specs, dispatch)
    env.run()
    return recorder


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_fast_decode_path_records_equal_the_straightforward_path(policy: str) -> None:
    config = busy_config(policy=policy)
    fast = run_one_engine(busy_workload(), config, fast_decode_path=True)
    plain = run_one_engine(busy_workload(), config, fast_decode_path=False)
    assert fast.block_events == plain.block_events
    assert fast.steps == plain.steps
    assert fast.requests == plain.requests
    assert len(plain.requests) == 12
    assert sum(step.num_preemptions for step in plain.steps) > 0
    assert sum(step.num_evictions for step in plain.steps) > 0
