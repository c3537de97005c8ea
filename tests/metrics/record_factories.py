"""Record factories for the metrics tests: neutral defaults, overridden per scenario (the
fixtures of conftest.py hand them out; a test module may import them from here)."""

from __future__ import annotations

from typing import Any

from sim.metrics.records import RequestRecord, StepRecord


def build_step(**overrides: Any) -> StepRecord:
    """A step with all counts zero at t=0 unless overridden."""
    fields: dict[str, Any] = {
        "step_index": 0,
        "started_at": 0.0,
        "duration_s": 0.1,
        "num_prefill_tokens": 0,
        "num_decode_tokens": 0,
        "num_running": 0,
        "num_waiting": 0,
        "num_free_blocks": 100,
        "usage": 0.0,
        "num_preemptions": 0,
        "num_queries": 0,
        "num_hits": 0,
        "num_evictions": 0,
    }
    fields.update(overrides)
    return StepRecord(**fields)


def build_request(**overrides: Any) -> RequestRecord:
    """A request arriving at 0 with TTFT 0.5 s, e2e 2 s and queue 0.25 s unless overridden."""
    fields: dict[str, Any] = {
        "request_id": "r0",
        "session_id": None,
        "tenant": None,
        "arrival_at": 0.0,
        "first_scheduled_at": 0.25,
        "first_token_at": 0.5,
        "finished_at": 2.0,
        "num_prompt_tokens": 100,
        "num_cached_tokens": 0,
        "num_computed_prefill_tokens": 100,
        "num_output_tokens": 4,
        "num_preemptions": 0,
        "inter_token_latencies_s": [0.5, 0.5, 0.5],
    }
    fields.update(overrides)
    return RequestRecord(**fields)
