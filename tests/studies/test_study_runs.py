"""A study's engine refuses a run whose prompts reach max_model_len, saying what would help.

Scenario: one replica of 65 blocks of 16 tokens, max_model_len 1,024, constant 10 ms steps; two
open-loop requests, one of 100 prompt tokens and one of 1,024 (rejected: a prompt must be
shorter than max_model_len).
"""

from __future__ import annotations

import pytest
from engine.engine_specs import engine_config, open_spec, tokens

from sim.costmodel import load_cost_model
from sim.errors import InputError
from sim.studies.study_runs import StudyEngine

SPECS = [
    open_spec("short", 0.0, tokens(10, 100), 4),
    open_spec("too-long", 0.5, tokens(10, 1024), 4),
]


@pytest.mark.parametrize(
    ("model_context", "remedy"),
    [
        (131_072, "raise engine.max_model_len (1,024) or shorten the prompts"),
        (1_024, "shorten the prompts (engine.max_model_len 1,024 is the model's whole context"),
    ],
)
def test_rejected_prompts_fail_the_study_run(model_context: int, remedy: str) -> None:
    engine = StudyEngine(engine_config(), load_cost_model("constant:0.01"), model_context)
    with pytest.raises(InputError) as raised:
        engine.run(SPECS)
    assert str(raised.value).startswith(
        "1 prompt was at least engine.max_model_len tokens long and rejected; " + remedy
    )


def test_a_run_without_rejections_returns_every_record() -> None:
    engine = StudyEngine(engine_config(), load_cost_model("constant:0.01"), 131_072)
    records = engine.run(SPECS[:1])
    assert list(records) == ["short"]
    assert records["short"].num_prompt_tokens == 100
