"""Azure CSV replay: arrivals and lengths only, every prompt unique."""

from __future__ import annotations

import pytest

from workloads.api import read_azure

CONV = "azure-llm-2023/AzureLLMInferenceTrace_conv.csv"


def test_rows_become_open_loop_requests_with_the_trace_lengths(traces_dir) -> None:
    specs = list(read_azure(traces_dir / CONV, max_requests=3))
    # First rows: 18:15:46.6805900,374,44 / 18:15:50.9951690,396,109.
    assert [spec.num_prompt_tokens for spec in specs[:2]] == [374, 396]
    assert [spec.num_output_tokens for spec in specs[:2]] == [44, 109]
    assert specs[0].arrival_at == 0.0
    assert specs[1].arrival_at == pytest.approx(4.314579)
    assert specs[0].extras == {"trace_line": 2}


def test_whole_trace_is_read_and_prompts_share_nothing(traces_dir) -> None:
    count = 0
    first_blocks = set()
    last = None
    for spec in read_azure(traces_dir / CONV):
        count += 1
        first_blocks.add(tuple(spec.prompt_tokens()[:2]))
        last = spec
    assert count == 19_366
    assert last.arrival_at == pytest.approx(3501.721937)
    assert len(first_blocks) > 19_300  # pairs of random ids out of 128000^2 barely collide
