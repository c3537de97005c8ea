"""A trace prompt held as block ids (TracePrompt) and the trace request made from it on first
read (TraceRequestSpec): any token range it makes equals that range of the whole prompt, its
segments are the per-block token streams, and its request equals the eagerly made one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.api import SyntheticTokens
from workloads.spec import RequestSpec, Segment, TraceRequestSpec
from workloads.synthetic_tokens import StreamBatch, TracePrompt, namespace_key
from workloads.traces.blocks import TraceRequestContent

TOKENS = SyntheticTokens()


@st.composite
def prompts(draw: st.DrawFn) -> TracePrompt:
    """1 to 5 block ids of blocks of 1 to 8 or 120 to 300 tokens (tails past a multiple of 128
    inside the last block), the last block 1 to full; maybe made in a StreamBatch after 0 to 2
    other streams."""
    size = draw(st.one_of(st.integers(1, 8), st.integers(120, 300)))
    ids = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=5))
    num_tokens = (len(ids) - 1) * size + draw(st.integers(1, size))
    if not draw(st.booleans()):
        return TracePrompt("ns", ids, size, num_tokens, TOKENS)
    batch = StreamBatch(TOKENS.vocab_size)
    for other in range(draw(st.integers(0, 2))):
        batch.add(f"other/{other}", draw(st.integers(0, 9)))
    return TracePrompt.batched("ns", ids, size, num_tokens, TOKENS, batch)


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
    batch = StreamBatch(TOKENS.vocab_size)
    prompt = TracePrompt.batched("ns", [7, 9], 4, 6, TOKENS, batch)
    spec = TraceRequestSpec(
        TraceRequestContent(prompt, "ns/output/0", 3, batch),
        "ns-0",
        1.5,
        extras={"trace_line": 1},
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


def test_a_stream_batch_makes_each_stream_as_alone_and_takes_none_once_made() -> None:
    """3 tokens of "a", none of "b", 5 of "c" from position 2: each equals its stream made
    alone, as a read-only view and as int64 bytes (from its second token on: 4 tokens of "c",
    2 of "a"); a fourth stream added after the first read is refused."""
    batch = StreamBatch(TOKENS.vocab_size)
    indices = [batch.add("a", 3), batch.add("b", 0), batch.add("c", 5, skip=2)]
    assert indices == [0, 1, 2]
    made = [batch.stream(index) for index in (2, 0, 1)]
    assert [tokens.tolist() for tokens in made] == [
        TOKENS.streams(["c"], [7]).tolist()[2:],
        TOKENS.streams(["a"], [3]).tolist(),
        [],
    ]
    assert not any(tokens.flags.writeable for tokens in made)
    assert [batch.stream_bytes(index) for index in (2, 0, 1)] == [
        tokens.astype("<i8").tobytes() for tokens in made
    ]
    assert batch.stream_bytes(2, skip=1) == made[0][1:].astype("<i8").tobytes()
    assert len(batch.stream_bytes(2, skip=1)) == 4 * 8
    assert batch.stream_bytes(0, skip=1) == made[1][1:].astype("<i8").tobytes()
    with pytest.raises(ValueError, match="StreamBatch.add: the batch's streams are made already"):
        batch.add("d", 1)


def test_a_batched_prompt_makes_its_tail_past_its_last_multiple_of_128_tokens() -> None:
    """Blocks of 512: 1024 tokens in blocks [7, 9] end on a multiple of 128, so the prompt adds
    no stream; 1000 tokens add tokens 384..487 of block 9 (1000 = 7 * 128 + 104); blocks of 100
    and 250 tokens add the last block's 50 (its start, 200, is past 128)."""
    batch = StreamBatch(TOKENS.vocab_size)
    aligned = TracePrompt.batched("ns", [7, 9], 512, 1024, TOKENS, batch)
    tail = TracePrompt.batched("ns", [7, 9], 512, 1000, TOKENS, batch)
    short = TracePrompt.batched("ns", [7, 8, 9], 100, 250, TOKENS, batch)
    assert (aligned.tail, tail.tail, tail.tail_index, tail.tail_start) == (None, batch, 0, 896)
    assert (short.tail_index, short.tail_start) == (1, 200)
    block_9 = TOKENS.block_tokens("ns", 9, 512)
    assert batch.stream(0).tolist() == block_9[384:488].tolist()
    assert batch.stream(1).tolist() == block_9[:50].tolist()
    assert tail.token_bytes(992) == block_9[480:488].tobytes()
    assert tail.token_bytes(512) == block_9[:488].tobytes()  # before the tail: made alone
    assert short.token_bytes(240) == block_9[40:50].tobytes()
    assert aligned.token_bytes(1024) == b""
