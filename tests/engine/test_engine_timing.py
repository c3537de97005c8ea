"""Request timings through the engine with every step taking 0.25 s (exact in binary).

A step that starts at t sees every request that arrived at or before t; a request's first token
is sampled at the end of the step that computes its last prompt token.
"""

from __future__ import annotations

from engine_fakes import STEP_TIME_S, CollectingRecorder, ConstantStepCost
from engine_specs import engine_config, open_spec, session_turn, tokens

from sim.engine import simulate
from workloads.spec import Segment


def test_single_request_takes_one_step_to_first_token_and_one_per_further_output(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Prompt 20, 4 outputs, arriving at 0: prefill step [0, 0.25), then 3 decode steps.
    result = simulate(
        [open_spec("A", 0.0, tokens(1000, 20), 4)], engine_config(), cost_model, recorder=recorder
    )
    record = recorder.requests["A"]
    assert (record.first_scheduled_at, record.first_token_at, record.finished_at) == (
        0.0,
        STEP_TIME_S,
        4 * STEP_TIME_S,
    )
    assert (record.ttft_s, record.e2e_s, record.queue_s) == (0.25, 1.0, 0.0)
    assert list(record.inter_token_latencies_s) == [0.25, 0.25, 0.25]
    assert (record.num_prompt_tokens, record.num_output_tokens) == (20, 4)
    assert (record.num_cached_tokens, record.num_computed_prefill_tokens) == (0, 20)
    assert (result.end_at, result.num_steps, result.num_submitted, result.num_rejected) == (
        1.0,
        4,
        1,
        0,
    )
    assert recorder.closed_at == 1.0
    assert [step.started_at for step in recorder.steps] == [0.0, 0.25, 0.5, 0.75]
    assert [step.num_prefill_tokens for step in recorder.steps] == [20, 0, 0, 0]
    assert [step.num_decode_tokens for step in recorder.steps] == [0, 1, 1, 1]
    assert [step.duration_s for step in recorder.steps] == [0.25] * 4


def test_idle_engine_starts_a_step_when_a_request_arrives(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    simulate(
        [open_spec("A", 0.5, tokens(1000, 20), 4)], engine_config(), cost_model, recorder=recorder
    )
    record = recorder.requests["A"]
    assert (record.arrival_at, record.first_token_at, record.finished_at) == (0.5, 0.75, 1.5)
    assert (record.ttft_s, record.e2e_s) == (0.25, 1.0)


def test_request_arriving_mid_step_waits_for_the_next_step(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # A (4 outputs) at 0; B (2 outputs) at 0.375, inside step [0.25, 0.5): B is scheduled in
    # the step starting at 0.5, first token 0.75, done at 1.0 together with A.
    result = simulate(
        [open_spec("A", 0.0, tokens(1000, 20), 4), open_spec("B", 0.375, tokens(2000, 30), 2)],
        engine_config(),
        cost_model,
        recorder=recorder,
    )
    a, b = recorder.requests["A"], recorder.requests["B"]
    assert (a.first_token_at, a.finished_at) == (0.25, 1.0)
    assert (b.first_scheduled_at, b.first_token_at, b.finished_at) == (0.5, 0.75, 1.0)
    assert (b.queue_s, b.ttft_s, b.e2e_s) == (0.125, 0.375, 0.625)
    assert [step.num_prefill_tokens for step in recorder.steps] == [20, 0, 30, 0]
    assert [step.num_decode_tokens for step in recorder.steps] == [0, 1, 1, 2]
    assert result.end_at == 1.0


def test_request_arriving_exactly_at_a_step_boundary_joins_that_step(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Same-time rule. C's arrival at 0.25 is scheduled (at 0.125) after the engine's step end
    # (scheduled at 0), so SimPy processes the step end first; the engine must still let C in
    # before it schedules the step starting at 0.25. D arrives at 1.0, when A finishes.
    simulate(
        [
            open_spec("A", 0.0, tokens(1000, 20), 4),
            open_spec("B", 0.125, tokens(2000, 16), 2),
            open_spec("C", 0.25, tokens(3000, 24), 2),
            open_spec("D", 1.0, tokens(4000, 8), 1),
        ],
        engine_config(),
        cost_model,
        recorder=recorder,
    )
    b, c, d = recorder.requests["B"], recorder.requests["C"], recorder.requests["D"]
    assert (b.first_scheduled_at, b.first_token_at, b.finished_at) == (0.25, 0.5, 0.75)
    assert (c.first_scheduled_at, c.first_token_at, c.finished_at) == (0.25, 0.5, 0.75)
    assert (c.queue_s, c.ttft_s) == (0.0, 0.25)
    assert (d.first_scheduled_at, d.first_token_at, d.finished_at) == (1.0, 1.25, 1.25)
    assert [step.started_at for step in recorder.steps] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [step.num_prefill_tokens for step in recorder.steps] == [20, 40, 0, 0, 8]


def test_closed_loop_turn_arrives_think_time_after_the_previous_turn_finishes(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Turn 1 (20 + 4 outputs) runs [0, 1.0). Turn 2 thinks 0.5 s: arrives 1.5, 2 outputs, done
    # 2.0; it repeats turn 1's 24 tokens (23 computed, so 1 cached block: hit 16). Turn 3 thinks
    # 0 s: arrives at 2.0 exactly and is scheduled at 2.0; turn 2 computed 33 tokens, hit 32.
    first_prompt, first_outputs = tokens(1000, 20), tokens(5000, 4)
    second_prompt = first_prompt + first_outputs + tokens(6000, 8)
    second_outputs = [7001, 7002]
    third_prompt = second_prompt + second_outputs + tokens(8000, 4)
    turns = [
        session_turn(
            "t1", "chat", 0, [Segment("user", "u1", first_prompt)], first_outputs, arrival_at=0.0
        ),
        session_turn(
            "t2",
            "chat",
            1,
            [Segment("history", "h2", second_prompt)],
            second_outputs,
            think_time_s=0.5,
        ),
        session_turn(
            "t3", "chat", 2, [Segment("history", "h3", third_prompt)], [9001], think_time_s=0.0
        ),
    ]
    result = simulate(turns, engine_config(), cost_model, recorder=recorder)
    t1, t2, t3 = (recorder.requests[request_id] for request_id in ("t1", "t2", "t3"))
    assert t1.finished_at == 1.0
    assert (t2.arrival_at, t2.first_token_at, t2.finished_at) == (1.5, 1.75, 2.0)
    assert (t3.arrival_at, t3.first_scheduled_at, t3.finished_at) == (2.0, 2.0, 2.25)
    assert (t2.session_id, t3.session_id) == ("chat", "chat")
    assert (t2.num_cached_tokens, t3.num_cached_tokens) == (16, 32)
    assert (t2.num_computed_prefill_tokens, t3.num_computed_prefill_tokens) == (16, 6)
    assert (result.num_submitted, result.num_steps, result.end_at) == (3, 7, 2.25)
