"""Prompt tokens of a trace request from its block hash ids (see workloads.synthetic_tokens)."""

from __future__ import annotations

from workloads.spec import RequestSpec, Segment
from workloads.synthetic_tokens import SyntheticTokens, trace_block_content_id
from workloads.traces.fields import ReplayOptions

TRACE_BLOCK_SEGMENT = "block"


def block_segments(
    namespace: str,
    hash_ids: list[int],
    num_tokens: int,
    block_size: int,
    tokens: SyntheticTokens,
) -> list[Segment]:
    """One segment per block of a `num_tokens` prompt; the last is partial when tokens run out."""
    content_ids = [trace_block_content_id(namespace, hash_id) for hash_id in hash_ids]
    lengths = [min(block_size, num_tokens - index * block_size) for index in range(len(hash_ids))]
    return [
        Segment(TRACE_BLOCK_SEGMENT, content_id, block)
        for content_id, block in zip(
            content_ids, tokens.tokens_many(content_ids, lengths), strict=True
        )
    ]


def token_range(
    namespace: str,
    hash_ids: list[int],
    num_tokens: int,
    block_size: int,
    tokens: SyntheticTokens,
    start: int,
    end: int,
) -> list[int]:
    """Tokens at positions [start, min(end, num_tokens)) of the prompt those blocks describe."""
    end = min(end, num_tokens)
    if start >= end:
        return []
    first_block = start // block_size
    last_block = (end - 1) // block_size
    covered: list[int] = []
    for index in range(first_block, last_block + 1):
        length = min(block_size, num_tokens - index * block_size)
        covered.extend(tokens.block_tokens(namespace, hash_ids[index], length))
    offset = first_block * block_size
    return covered[start - offset : end - offset]


def trace_request_spec(
    namespace: str,
    index: int,
    arrival_at: float,
    segments: list[Segment],
    output_tokens: list[int],
    extras: dict[str, str | int | float],
    measured_cached_tokens: int | None = None,
) -> RequestSpec:
    """The open-loop spec of a trace's `index`-th request (traces carry no sessions to replay)."""
    return RequestSpec.open_loop(
        f"{namespace}-{index}",
        arrival_at,
        segments,
        output_tokens,
        measured_cached_tokens=measured_cached_tokens,
        extras=extras,
    )


def counted_trace_spec(
    options: ReplayOptions,
    index: int,
    arrival_s: float,
    prompt: list[Segment],
    num_output_tokens: int,
    line: int,
) -> RequestSpec:
    """The spec of a trace record that gives its output as a count: unique output tokens,
    the arrival scaled by the replay's speedup, and the record's line as an extra."""
    namespace = options.namespace
    return trace_request_spec(
        namespace,
        index,
        arrival_s / options.speedup,
        prompt,
        options.tokens.tokens(f"{namespace}/output/{index}", num_output_tokens),
        {"trace_line": line},
    )
