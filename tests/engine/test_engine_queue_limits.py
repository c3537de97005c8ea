"""vLLM's front-end queue limits (spec §12.8): a request over max_num_queued_reqs or
max_num_queued_tokens is turned away (HTTP 503), counted, and never reaches the scheduler.

Steps last 0.25 s; each request has a 20-token prompt and 2 outputs, so one admitted at 0
has its first token at 0.25 and finishes at 0.5.
"""

from __future__ import annotations

from engine_fakes import CollectingRecorder, ConstantStepCost
from engine_specs import engine_config, open_spec, tokens

from sim.engine import simulate


def test_max_num_queued_reqs_rejects_requests_beyond_the_unfinished_limit(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Limit 2: a and b are unfinished when c arrives at 0, so c is rejected; a and b finish at
    # 0.5, so d (0.75) is taken.
    specs = [
        open_spec("a", 0.0, tokens(1000, 20), 2),
        open_spec("b", 0.0, tokens(2000, 20), 2),
        open_spec("c", 0.0, tokens(3000, 20), 2),
        open_spec("d", 0.75, tokens(4000, 20), 2),
    ]
    config = engine_config(max_num_queued_reqs=2)
    result = simulate(specs, config, cost_model, recorder=recorder)
    assert (result.num_submitted, result.num_rejected, result.num_rejected_queue_full) == (4, 1, 1)
    assert sorted(recorder.requests) == ["a", "b", "d"]


def test_max_num_queued_tokens_counts_prompts_until_their_first_token(
    cost_model: ConstantStepCost, recorder: CollectingRecorder
) -> None:
    # Limit 30 tokens: b is taken with 20 queued, c is rejected with 40; a and b have their
    # first token at 0.25, so d (0.3) finds nothing in prefill and is taken.
    specs = [
        open_spec("a", 0.0, tokens(1000, 20), 2),
        open_spec("b", 0.0, tokens(2000, 20), 2),
        open_spec("c", 0.0, tokens(3000, 20), 2),
        open_spec("d", 0.3, tokens(4000, 20), 2),
    ]
    config = engine_config(max_num_queued_tokens=30)
    result = simulate(specs, config, cost_model, recorder=recorder)
    assert (result.num_rejected, result.num_rejected_queue_full) == (1, 1)
    assert sorted(recorder.requests) == ["a", "b", "d"]
