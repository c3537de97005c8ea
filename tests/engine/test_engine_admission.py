"""Which requests the engine takes: max_model_len rejections, the duration window, and
reproducible runs (0.25 s steps)."""

from __future__ import annotations

import pytest
from engine_fakes import CollectingRecorder, ConstantStepCost
from engine_specs import busy_config, busy_workload, engine_config, open_spec, session_turn, tokens

from sim.engine import SimulationResult, simulate
from sim.errors import InputError
from workloads.spec import RequestSpec, Segment


def turn(
    request_id: str, index: int, prompt: list[int], num_outputs: int, **timing: float
) -> RequestSpec:
    """A turn of session "s" with one prompt segment and outputs 1..num_outputs."""
    segments = [Segment("turn", request_id, prompt)]
    return session_turn(request_id, "s", index, segments, tokens(1, num_outputs), **timing)


def test_prompts_of_max_model_len_or_more_are_rejected_while_others_run(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # max_model_len 64: prompts of 64 and 100 tokens are refused, as vLLM's API refuses them.
    specs = [
        open_spec("fits", 0.0, tokens(1000, 20), 2),
        open_spec("at-limit", 0.0, tokens(2000, 64), 2),
        open_spec("over", 0.25, tokens(3000, 100), 2),
        open_spec("later", 0.5, tokens(4000, 63), 1),
    ]
    result = simulate(specs, engine_config(max_model_len=64), cost_model, recorder=recorder)
    assert (result.num_submitted, result.num_rejected) == (4, 2)
    assert sorted(recorder.requests) == ["fits", "later"]
    assert recorder.requests["fits"].finished_at == 0.5
    later = recorder.requests["later"]
    assert (later.first_scheduled_at, later.finished_at) == (0.5, 0.75)


def test_rejected_later_turn_releases_the_next_turn_after_its_think_time(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Turn 1 runs [0, 0.5). Turn 2 (70 tokens > max_model_len 64) is submitted at 0.75 and
    # rejected; turn 3 arrives 0.25 s later, at 1.0.
    specs = [
        turn("t1", 0, tokens(1000, 20), 2, arrival_at=0.0),
        turn("t2", 1, tokens(2000, 70), 2, think_time_s=0.25),
        turn("t3", 2, tokens(3000, 20), 1, think_time_s=0.25),
    ]
    result = simulate(specs, engine_config(max_model_len=64), cost_model, recorder=recorder)
    assert (result.num_submitted, result.num_rejected) == (3, 1)
    assert sorted(recorder.requests) == ["t1", "t3"]
    assert (recorder.requests["t3"].arrival_at, recorder.requests["t3"].finished_at) == (1.0, 1.25)


def test_rejected_first_turn_releases_the_next_turn_after_its_think_time(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Turn 1 (100 tokens > max_model_len 64) is rejected at 0, as a later turn would be (above);
    # turn 2 then arrives after its 0.5 s think time and runs.
    specs = [
        turn("t1", 0, tokens(1000, 100), 2, arrival_at=0.0),
        turn("t2", 1, tokens(2000, 20), 2, think_time_s=0.5),
    ]
    result = simulate(specs, engine_config(max_model_len=64), cost_model, recorder=recorder)
    assert (result.num_submitted, result.num_rejected) == (2, 1)
    assert sorted(recorder.requests) == ["t2"]
    assert (recorder.requests["t2"].arrival_at, recorder.requests["t2"].finished_at) == (0.5, 1.0)


def test_requests_arriving_after_duration_are_not_submitted(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Window [0, 1.0]: the arrival at exactly 1.0 is in and drains to 1.5; the one at 1.5 is not.
    specs = [
        open_spec(f"r{index}", arrival_at, tokens(1000 * (index + 1), 20), 2)
        for index, arrival_at in enumerate([0.0, 0.5, 1.0, 1.5])
    ]
    result = simulate(specs, engine_config(), cost_model, recorder=recorder, duration_s=1.0)
    assert result.num_submitted == 3
    assert sorted(recorder.requests) == ["r0", "r1", "r2"]
    assert recorder.requests["r2"].finished_at == 1.5
    assert result.end_at == 1.5


def test_session_turn_released_after_duration_is_not_submitted(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Turn 1 finishes at 1.0; turn 2 would arrive at 1.5, after the 1.0 s window.
    specs = [
        turn("t1", 0, tokens(1000, 20), 4, arrival_at=0.0),
        turn("t2", 1, tokens(2000, 20), 2, think_time_s=0.5),
    ]
    result = simulate(specs, engine_config(), cost_model, recorder=recorder, duration_s=1.0)
    assert result.num_submitted == 1
    assert sorted(recorder.requests) == ["t1"]
    assert result.end_at == 1.0


def run_busy(cost_model: ConstantStepCost) -> tuple[SimulationResult, CollectingRecorder]:
    recorder = CollectingRecorder()
    return simulate(busy_workload(), busy_config(), cost_model, recorder=recorder), recorder


def test_two_runs_give_identical_records(cost_model: ConstantStepCost) -> None:
    first_result, first = run_busy(cost_model)
    second_result, second = run_busy(cost_model)
    assert first_result == second_result
    assert first.requests == second.requests
    assert first.steps == second.steps
    assert len(first.requests) == 12
    # The run exercised what could diverge: prefix hits, evictions and preemptions.
    assert first.num_hits > 0
    assert sum(step.num_evictions for step in first.steps) > 0
    assert sum(step.num_preemptions for step in first.steps) > 0


def test_step_with_nothing_scheduled_does_not_stop_the_engine(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Priority policy, 2 usable blocks of 4 (max_model_len 8). Y (priority 5) runs from 0; X
    # (priority 0) arrives at 0.125 and joins at 0.25, taking the last block. At 0.5 Y, first in
    # running, needs a block and is its own victim: vLLM schedules nothing in that step and
    # carries on (see tests/sched). Both requests must still finish.
    specs = [
        RequestSpec(
            "Y", 0.0, None, 0, 0.0, [Segment("p", "y", tokens(100, 3))], tokens(1, 4), priority=5
        ),
        RequestSpec(
            "X", 0.125, None, 0, 0.0, [Segment("p", "x", tokens(200, 4))], tokens(1, 2), priority=0
        ),
    ]
    config = engine_config(num_gpu_blocks=3, block_size=4, max_model_len=8, policy="priority")
    simulate(specs, config, cost_model, recorder=recorder)
    assert sorted(recorder.requests) == ["X", "Y"]
    assert recorder.requests["Y"].num_preemptions == 1


def test_pool_that_cannot_hold_one_max_model_len_request_is_refused_up_front(
    cost_model: ConstantStepCost,
) -> None:
    # 7 usable blocks of 16 = 112 tokens, max_model_len 8192. vLLM refuses to start when one
    # max_model_len sequence does not fit its KV cache; here a 100-token prompt with 40 outputs
    # would outgrow the pool and leave the engine with nothing it can schedule.
    config = engine_config(num_gpu_blocks=8, max_model_len=8192)
    with pytest.raises(InputError, match="max_model_len"):
        simulate([open_spec("big", 0.0, tokens(1000, 100), 40)], config, cost_model)
