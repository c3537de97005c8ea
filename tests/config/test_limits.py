"""What the refusals of too-long prompts advise: raising max_model_len only while it is below
the model's context."""

from __future__ import annotations

import pytest

from sim.config import too_long_remedy


@pytest.mark.parametrize(
    ("max_model_len", "model_context", "expected"),
    [
        # Below Llama-3.1-8B's 131,072-token context: raising it is a remedy.
        (8192, 131072, "raise engine.max_model_len (8,192) or shorten the prompts"),
        # At the whole context (Llama-2-7B, 4,096): only shortening the prompts is.
        (
            4096,
            4096,
            "shorten the prompts (engine.max_model_len 4,096 is the model's whole context already)",
        ),
        # A config naming no context: vLLM's assumed length may be raised.
        (2048, None, "raise engine.max_model_len (2,048) or shorten the prompts"),
    ],
)
def test_too_long_remedy(max_model_len: int, model_context: int | None, expected: str) -> None:
    assert too_long_remedy(max_model_len, model_context) == expected
