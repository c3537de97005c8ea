"""Mooncake traces: `hash_ids` of 512-token prefix blocks become deterministic tokens per hash id.

Each hash id gets its own token block (see workloads.synthetic_tokens), so two requests share
exactly the leading blocks whose ids they share, at any engine block size; the last block of a
request may be partial (its tokens are a prefix of that id's full block). Output tokens are
unique per request: the trace does not hash answers. A request's prompt is held as its block
ids (workloads.synthetic_tokens.TracePrompt) and made into tokens only where they are read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

import msgspec

from workloads.errors import WorkloadError
from workloads.spec import RequestSpec
from workloads.synthetic_tokens import SyntheticTokens, TracePrompt
from workloads.traces.blocks import counted_trace_specs
from workloads.traces.fields import (
    MAX_TRACE_TOKENS,
    RecordReader,
    check_block_count,
    check_trace_path,
    iter_json_records,
    replay_options,
)
from workloads.traces.trace_format import TraceFormat, arrival_times_of
from workloads.validation import require_int

MOONCAKE_BLOCK_SIZE = 512


@dataclass(slots=True, frozen=True)
class MooncakeRecord:
    """One validated trace line; `arrival_s` is the timestamp in seconds from the trace start."""

    line: int
    arrival_s: float
    input_length: int
    output_length: int
    hash_ids: list[int]


class _MooncakeLine(msgspec.Struct):
    """A line's fields as its one-pass decoder checks them; what it refuses, RecordReader
    explains (see iter_json_records)."""

    timestamp: Annotated[float, msgspec.Meta(ge=0)]
    input_length: Annotated[int, msgspec.Meta(ge=1, le=MAX_TRACE_TOKENS)]
    output_length: Annotated[int, msgspec.Meta(ge=1, le=MAX_TRACE_TOKENS)]
    hash_ids: list[Annotated[int, msgspec.Meta(ge=0)]]

    def __post_init__(self) -> None:
        # msgspec bounds integers to int64 only; hash ids go up to 2**64 - 1.
        if self.hash_ids and max(self.hash_ids) >> 64:
            raise ValueError("hash id beyond 64 bits")


_LINE_DECODER = msgspec.json.Decoder(_MooncakeLine)


def _checked_line(reader: RecordReader) -> _MooncakeLine:
    return _MooncakeLine(
        reader.time("timestamp"),
        reader.count("input_length", minimum=1),
        reader.count("output_length", minimum=1),
        reader.hash_list("hash_ids"),
    )


def iter_mooncake_records(
    path: str | os.PathLike[str], *, trace_block_size: int = MOONCAKE_BLOCK_SIZE
) -> Iterator[MooncakeRecord]:
    """Validated records in file order; timestamps (ms) must not decrease."""
    require_int("read_mooncake", "trace_block_size", trace_block_size, 1)
    source = check_trace_path(path)
    return _records(source, trace_block_size)


def _records(source: str, trace_block_size: int) -> Iterator[MooncakeRecord]:
    previous_ms = 0.0
    for line, fields in iter_json_records(source, _LINE_DECODER, _checked_line):
        timestamp_ms = fields.timestamp
        if timestamp_ms < previous_ms:
            raise WorkloadError(
                f"timestamp {timestamp_ms:g} is earlier than the previous {previous_ms:g}; "
                "the trace must be sorted by timestamp",
                source=source,
                line=line,
            )
        previous_ms = timestamp_ms
        check_block_count(fields.hash_ids, fields.input_length, trace_block_size, source, line)
        yield MooncakeRecord(
            line, timestamp_ms / 1000.0, fields.input_length, fields.output_length, fields.hash_ids
        )


def read_mooncake(
    path: str | os.PathLike[str],
    *,
    trace_block_size: int = MOONCAKE_BLOCK_SIZE,
    namespace: str | None = None,
    speedup: float = 1.0,
    max_requests: int | None = None,
    tokens: SyntheticTokens | None = None,
) -> Iterator[RequestSpec]:
    """Open-loop request specs, streamed; `namespace` (default: file stem) keys the block tokens."""
    options = replay_options(path, namespace, speedup, max_requests, tokens)
    records = iter_mooncake_records(path, trace_block_size=trace_block_size)
    return counted_trace_specs(
        records,
        options,
        lambda _, record, batch: TracePrompt.batched(
            options.namespace,
            record.hash_ids,
            trace_block_size,
            record.input_length,
            options.tokens,
            batch,
        ),
        lambda record: record.output_length,
    )


TRACE_FORMAT = TraceFormat(
    "mooncake",
    "Mooncake JSONL: timestamp (ms), input/output lengths, hash ids of 512-token prefix blocks",
    read_mooncake,
    arrival_times_of(iter_mooncake_records),
)
