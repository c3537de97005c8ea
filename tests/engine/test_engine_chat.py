"""The seed two-turn chat (spec §10 s01 / w01) as a closed-loop session through the engine.

Turn A: prompt tokens 1000..1074 (75), outputs 5000..5044 (45); it computes 119 tokens, so 7
blocks (112 tokens) are cached. Turn B: A's prompt + A's first 43 outputs + tokens 9000..9031
(150 tokens), 8 outputs, 2 s of think time: B hits 112, and the token hit rate is
112 / (75 + 150) = 49.8 %.
"""

from __future__ import annotations

from engine_fakes import CollectingRecorder, ConstantStepCost
from engine_specs import engine_config, session_turn, tokens

from sim.engine import simulate
from workloads.spec import RequestSpec, Segment


def two_turn_chat() -> list[RequestSpec]:
    a_prompt, a_outputs = tokens(1000, 75), tokens(5000, 45)
    return [
        session_turn("A", "seed", 0, [Segment("user", "a", a_prompt)], a_outputs, arrival_at=0.0),
        session_turn(
            "B",
            "seed",
            1,
            [
                Segment("history", "a", a_prompt),
                Segment("answer", "a-out", a_outputs[:43]),
                Segment("user", "b", tokens(9000, 32)),
            ],
            tokens(7000, 8),
            think_time_s=2.0,
        ),
    ]


def test_second_turn_hits_112_tokens_and_hit_rate_is_49_8_percent(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    result = simulate(two_turn_chat(), engine_config(), cost_model, recorder=recorder)
    a, b = recorder.requests["A"], recorder.requests["B"]
    assert (a.num_prompt_tokens, a.num_cached_tokens, a.num_computed_prefill_tokens) == (75, 0, 75)
    assert (b.num_prompt_tokens, b.num_cached_tokens, b.num_computed_prefill_tokens) == (
        150,
        112,
        38,
    )
    assert (recorder.num_queries, recorder.num_hits) == (225, 112)
    assert round(100 * recorder.num_hits / recorder.num_queries, 1) == 49.8
    # A: 45 steps of 0.25 s; B arrives 2 s later and takes 8 steps.
    assert a.finished_at == 11.25
    assert (b.arrival_at, b.first_token_at, b.finished_at) == (13.25, 13.5, 15.25)
    assert (result.num_submitted, result.num_steps, result.end_at) == (2, 53, 15.25)
