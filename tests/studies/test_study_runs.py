"""A study's engine refuses a run whose prompts reach max_model_len, saying what would help.

Scenario: one replica with max_model_len 1,024 and constant 10 ms steps; open-loop requests of
100 prompt tokens ("short") and of 1,024 or more (rejected: a prompt must be shorter than
max_model_len). The cache holds 1,024 tokens (65 blocks of 16, one the null block) or 2,048
(129 blocks).
"""

from __future__ import annotations

import pytest
from engine.engine_specs import engine_config, open_spec, tokens

from sim.costmodel import load_cost_model
from sim.errors import InputError
from sim.studies.study_runs import StudyEngine

SHORT = open_spec("short", 0.0, tokens(10, 100), 4)
TOO_LONG = [open_spec(f"too-long-{i}", 0.5 + i, tokens(10, 1024 + i), 4) for i in range(3)]


@pytest.mark.parametrize(
    ("model_context", "num_gpu_blocks", "remedy"),
    [
        # Room to grow in both the model's context and the cache.
        (131_072, 129, "raise engine.max_model_len (1,024) or shorten the prompts"),
        # The model's whole context already.
        (
            1_024,
            129,
            "shorten the prompts (engine.max_model_len 1,024 is the model's whole context already)",
        ),
        # All the 1,024-token cache holds.
        (
            131_072,
            65,
            "shorten the prompts, or give the KV cache more memory and raise "
            "engine.max_model_len (1,024 is all the cache holds)",
        ),
    ],
)
def test_a_rejected_prompt_fails_the_study_run(
    model_context: int, num_gpu_blocks: int, remedy: str
) -> None:
    config = engine_config(num_gpu_blocks=num_gpu_blocks)
    engine = StudyEngine(config, load_cost_model("constant:0.01"), model_context)
    with pytest.raises(InputError) as raised:
        engine.run([SHORT, TOO_LONG[0]])
    assert str(raised.value) == (
        f"1 prompt was at least engine.max_model_len tokens long and rejected; {remedy}"
    )


def test_several_rejected_prompts_are_counted() -> None:
    engine = StudyEngine(engine_config(num_gpu_blocks=129), load_cost_model("constant:0.01"), None)
    with pytest.raises(InputError) as raised:
        engine.run([SHORT, *TOO_LONG])
    assert str(raised.value) == (
        "3 prompts were at least engine.max_model_len tokens long and rejected; raise "
        "engine.max_model_len (1,024) or shorten the prompts"
    )


def test_a_run_without_rejections_returns_every_record() -> None:
    engine = StudyEngine(engine_config(), load_cost_model("constant:0.01"), 131_072)
    records = engine.run([SHORT])
    assert list(records) == ["short"]
    assert records["short"].num_prompt_tokens == 100
