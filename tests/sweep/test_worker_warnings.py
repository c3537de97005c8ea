"""A run in a sweep worker reports a warning as one `warning:` line, as the CLI does.

Scenario: one chat session of a 50,000-token prompt on Llama-3.1-8B / H100, past the 49,152
tokens of context its shipped profile was fitted on: the step model warns once.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from sim.config import Scenario
from sim.errors import one_line_warnings
from sim.sweep.execute import RunJob, execute_run

LONG_PROMPT = {
    "name": "long",
    "duration_s": 2,
    "engine": {"max_model_len": 65536},
    "workload": {
        "source": {
            "kind": "chat",
            "turns_per_session": 1,
            "common": {"system_prompt_tokens": 50000},
            "user_message_tokens": 32,
            "answer_tokens": 4,
        },
        "arrivals": {"process": "poisson", "rate_per_s": 2.0},
    },
}


def test_a_worker_run_prints_its_warning_in_one_line(tmp_path: Path, capsys) -> None:
    scenario = Scenario.model_validate(LONG_PROMPT)
    outcome = execute_run(RunJob("long", scenario, tmp_path, tmp_path / "run"))
    assert outcome.error is None
    err_lines = capsys.readouterr().err.splitlines()
    assert [line for line in err_lines if "arning" in line] == [
        "warning: cost model h100/llama-3.1-8b/tp1 (kernel-derived): step outside the range it "
        "was fitted on (longest_context=50032 not in [1, 49152]); the prediction is an "
        "extrapolation (warned once per model)"
    ]


def test_one_line_warnings_keeps_the_filters(capsys) -> None:
    """A multi-line message becomes one line; `-W error` (a filter) still raises."""
    with one_line_warnings():
        warnings.warn("two\n  lines", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == "warning: two lines\n"
    with one_line_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning):
            warnings.warn("raised", UserWarning, stacklevel=1)
