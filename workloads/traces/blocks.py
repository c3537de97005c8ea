"""Prompt tokens of a trace request from its block hash ids (see workloads.synthetic_tokens)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import numpy as np

from workloads.spec import RequestSpec, Segment, TokenArray
from workloads.synthetic_tokens import SyntheticTokens, trace_block_content_id
from workloads.traces.fields import ReplayOptions

TRACE_BLOCK_SEGMENT = "block"


class _CountedRecord(Protocol):
    @property
    def arrival_s(self) -> float: ...

    @property
    def line(self) -> int: ...


_Record = TypeVar("_Record", bound=_CountedRecord)


def block_segments(
    namespace: str,
    hash_ids: list[int],
    num_tokens: int,
    block_size: int,
    tokens: SyntheticTokens,
) -> list[Segment]:
    """One segment per block of a `num_tokens` prompt; the last is partial when tokens run out.

    A prompt's blocks are synthesised together in one numpy pass, each block's segment a
    read-only view of it: most trace blocks occur once, so caching them costs more than it
    saves."""
    content_ids = [trace_block_content_id(namespace, hash_id) for hash_id in hash_ids]
    lengths = [min(block_size, num_tokens - index * block_size) for index in range(len(hash_ids))]
    prompt = tokens.streams(content_ids, lengths)
    prompt.flags.writeable = False
    starts = itertools.accumulate(lengths, initial=0)
    return [
        Segment(TRACE_BLOCK_SEGMENT, content_id, prompt[start : start + length])
        for content_id, start, length in zip(content_ids, starts, lengths, strict=False)
    ]


def answer_tokens(tokens: SyntheticTokens, content_id: str, num_tokens: int) -> list[int]:
    """`tokens.output_tokens(content_id, num_tokens)`, uncached: a trace request's answer is its
    own, and caching millions of short answers would hold memory for nothing."""
    return tokens.streams([content_id], [num_tokens]).tolist()


def token_range(
    namespace: str,
    hash_ids: list[int],
    num_tokens: int,
    block_size: int,
    tokens: SyntheticTokens,
    start: int,
    end: int,
) -> TokenArray:
    """Tokens at positions [start, min(end, num_tokens)) of the prompt those blocks describe."""
    end = min(end, num_tokens)
    if start >= end:
        return np.zeros(0, dtype=np.int64)
    first_block = start // block_size
    last_block = (end - 1) // block_size
    covered = np.concatenate(
        [
            tokens.block_tokens(
                namespace, hash_ids[index], min(block_size, num_tokens - index * block_size)
            )
            for index in range(first_block, last_block + 1)
        ]
    )
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


def counted_trace_specs(
    records: Iterator[_Record],
    options: ReplayOptions,
    prompt_of: Callable[[int, _Record], list[Segment]],
    num_output_tokens_of: Callable[[_Record], int],
) -> Iterator[RequestSpec]:
    """The specs of trace records that give their output as a count: unique output tokens,
    arrivals scaled by the replay's speedup, each record's line as an extra."""
    namespace = options.namespace
    for index, record in enumerate(itertools.islice(records, options.max_requests)):
        prompt = prompt_of(index, record)
        yield trace_request_spec(
            namespace,
            index,
            record.arrival_s / options.speedup,
            prompt,
            answer_tokens(
                options.tokens, f"{namespace}/output/{index}", num_output_tokens_of(record)
            ),
            {"trace_line": record.line},
        )
