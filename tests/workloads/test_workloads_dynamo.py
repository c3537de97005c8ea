"""Dynamo agent trace: 16-token block hashes, measured cached tokens kept for comparison."""

from __future__ import annotations

import hashlib

from wl_helpers import num_shared_blocks

from workloads.api import read_dynamo

PI_TRACE = "dynamo-pi-agent/pi_request_trace.jsonl"
MEASURED_CACHED = [
    0,
    0,
    5232,
    0,
    0,
    0,
    2000,
    1504,
    2080,
    2704,
    2688,
    2416,
    4624,
    4912,
    6064,
    7280,
    8752,
]


def test_requests_are_ordered_by_arrival_with_their_measurements(traces_dir) -> None:
    specs = list(read_dynamo(traces_dir / PI_TRACE))
    assert len(specs) == 17
    assert [spec.arrival_at for spec in specs[:3]] == [0.0, 31.191, 53.711]
    assert [spec.measured_cached_tokens for spec in specs] == MEASURED_CACHED
    assert [spec.num_prompt_tokens for spec in specs[:4]] == [15, 4736, 5688, 1629]
    assert [spec.num_output_tokens for spec in specs[:4]] == [3, 709, 389, 412]
    assert specs[2].extras["trace_session_id"] == "pi-qwen-noadm-agentic-20260519T035759Z:root"
    assert specs[2].extras["ttft_ms"] == 418.152193
    assert all(spec.session_id is None for spec in specs)


def _reusable_from_session(specs) -> list[int]:
    """Tokens of each request found in full 16-blocks of its session's previous request + answer."""
    previous: dict[str, object] = {}
    reusable = []
    for spec in specs:
        session = spec.extras["trace_session_id"]
        before = previous.get(session)
        if before is None:
            reusable.append(0)
        else:
            carried = before.prompt_tokens() + before.output_tokens
            reusable.append(16 * num_shared_blocks(carried, spec.prompt_tokens(), 16))
        previous[session] = spec
    return reusable


def test_prompt_blocks_are_shared_exactly_as_the_hashes_say(traces_dir) -> None:
    specs = list(read_dynamo(traces_dir / PI_TRACE, outputs_from_next_turn=False))
    # Leading equal input_sequence_hashes with the session's previous request, times 16.
    assert _reusable_from_session(specs) == [
        0, 0, 4736, 0, 0, 0, 1616, 1616, 2080, 2000, 2448, 2416, 3520, 4672, 5680, 7024, 8272,
    ]  # fmt: skip


def test_answers_from_the_next_turn_bring_reuse_close_to_the_measured_run(traces_dir) -> None:
    specs = list(read_dynamo(traces_dir / PI_TRACE))
    reusable = _reusable_from_session(specs)
    # Request 2: its predecessor's 4736 prompt + 709 answer tokens are the first 5445 of its
    # prompt, so 340 full blocks (5440 tokens) are reusable; vLLM measured 5232.
    assert reusable == [
        0, 0, 5440, 0, 0, 0, 2032, 2384, 2400, 2784, 2688, 2768, 4624, 4928, 6064, 7344, 8752,
    ]  # fmt: skip
    without = _reusable_from_session(
        list(read_dynamo(traces_dir / PI_TRACE, outputs_from_next_turn=False))
    )
    error_with = sum(abs(a - b) for a, b in zip(reusable, MEASURED_CACHED, strict=True))
    error_without = sum(abs(a - b) for a, b in zip(without, MEASURED_CACHED, strict=True))
    assert (error_with, error_without) == (1952, 4400)
    for spec in specs:
        assert spec.num_output_tokens == len(spec.output_tokens)


def test_prompts_and_answers_are_pinned(traces_dir) -> None:
    """The trace's prompts (blocks synthesised a prompt at a time) and answers hash to the
    value the per-block token cache gave."""
    digest = hashlib.sha256()
    for spec in read_dynamo(traces_dir / PI_TRACE):
        digest.update(spec.prompt_token_array().tobytes())
        digest.update(repr(spec.output_tokens).encode())
    assert digest.hexdigest() == "88790b5b1b3390828e2fb63c4c7f3f62960377d5268529fcd9cea03f8481b9e1"
