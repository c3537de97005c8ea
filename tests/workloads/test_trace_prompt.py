"""A trace prompt held as block ids (TracePrompt) and the trace request made from it on first
read (TraceRequestSpec): any token range it makes equals that range of the whole prompt, its
segments are the per-block token streams, and its request equals the eagerly made one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.api import SyntheticTokens
from workloads.spec import RequestSpec, Segment, TraceRequestSpec
from workloads.synthetic_tokens import TracePrompt, namespace_key
from workloads.traces.blocks import TraceRequestContent

TOKENS = SyntheticTokens()


@st.composite
def prompts(draw: st.DrawFn) -> TracePrompt:
    """1 to 5 block ids of blocks of 1 to 8 tokens, the last block 1 to full."""
    size = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=5))
    num_tokens = (len(ids) - 1) * size + draw(st.integers(1, size))
    return TracePrompt("ns", ids, size, num_tokens, TOKENS)


@settings(max_examples=200, deadline=None)
@given(prompt=prompts(), data=st.data())
def test_any_token_range_is_that_range_of_the_blocks_streams(
    prompt: TracePrompt, data: st.DataObject
) -> None:
    size = prompt.trace_block_size
    whole = np.concatenate(
        [
            TOKENS.block_tokens("ns", hash_id, min(size, prompt.num_tokens - index * size))
            for index, hash_id in enumerate(prompt.block_ids)
        ]
    )
    assert prompt.token_array().tolist() == whole.tolist()
    start = data.draw(st.integers(0, prompt.num_tokens))
    end = data.draw(st.integers(start, prompt.num_tokens + 3))
    assert prompt.token_array(start, end).tolist() == whole[start:end].tolist()
    assert prompt.token_bytes(start) == whole[start:].astype("<i8").tobytes()
    assert [segment.tokens.tolist() for segment in prompt.segments()] == [
        whole[index * size : (index + 1) * size].tolist() for index in range(len(prompt.block_ids))
    ]


def test_segments_name_each_blocks_content() -> None:
    """Blocks 7 and 9 of 4 tokens, 6 tokens in all: "ns#7" whole and "ns#9" cut to 2 tokens."""
    segments = TracePrompt("ns", [7, 9], 4, 6, TOKENS).segments()
    assert segments == [
        Segment("block", "ns#7", TOKENS.block_tokens("ns", 7, 4)),
        Segment("block", "ns#9", TOKENS.block_tokens("ns", 9, 2)),
    ]
    assert TracePrompt("ns", [7], 4, 4, TOKENS).namespace_key == namespace_key("ns")


def test_a_trace_request_equals_its_eager_spec_and_gives_up_its_ids_once_made() -> None:
    prompt = TracePrompt("ns", [7, 9], 4, 6, TOKENS)
    spec = TraceRequestSpec(
        TraceRequestContent(prompt, "ns/output/0", 3), "ns-0", 1.5, extras={"trace_line": 1}
    )
    assert spec.trace_prompt() is prompt
    assert (spec.num_prompt_tokens, spec.num_output_tokens) == (6, 3)
    assert spec.prompt_token_array().tolist() == prompt.token_array().tolist()
    assert spec.trace_prompt() is prompt  # the prompt array does not make the segments
    eager = RequestSpec.open_loop(
        "ns-0",
        1.5,
        prompt.segments(),
        TOKENS.streams(["ns/output/0"], [3]).tolist(),
        extras={"trace_line": 1},
    )
    assert spec == eager  # reads, so makes, the segments
    assert spec.trace_prompt() is None  # the segments are the prompt now
