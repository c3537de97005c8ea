"""The Dynamo agent trace (`dynamo.request.trace.v1`): 16-token chained block hashes per request.

Block tokens come from the hash ids as for Mooncake. The trace's measured `cached_tokens` is kept
on each spec (`measured_cached_tokens`) with its timings in `extras`, for comparison. Events are
written when a request ends, so the adapter reads all `request_end` events and orders them by
`request_received_ms` (such traces are small); tool events are skipped.

vLLM also caches the blocks a request generates, and an agent's next turn repeats the answer.
With `outputs_from_next_turn`, when the session's next request extends a request's full blocks,
that request's partial last block and its output tokens are taken from the next request's
tokens, so the answer's blocks can be reused as they were in the measured run. So its prompts
are plain token segments, not block ids (TracePrompt): a block an answer fills must get the
same identity as the next request's prompt block of the same tokens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from workloads.errors import WorkloadError
from workloads.spec import RequestSpec, Segment
from workloads.synthetic_tokens import (
    TRACE_BLOCK_SEGMENT,
    SyntheticTokens,
    TracePrompt,
    trace_block_content_id,
)
from workloads.traces.blocks import answer_tokens, trace_request_spec
from workloads.traces.fields import (
    RecordReader,
    check_trace_path,
    iter_json_objects,
    replay_options,
)
from workloads.traces.trace_format import TraceFormat
from workloads.validation import require_int

DYNAMO_BLOCK_SIZE = 16
_TIMING_FIELDS = ("ttft_ms", "prefill_time_ms", "prefill_wait_time_ms", "total_time_ms")


@dataclass(slots=True, frozen=True)
class DynamoRecord:
    """One validated `request_end` event."""

    line: int
    request_id: str
    session_id: str | None
    received_ms: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    hashes: list[int]
    timings_ms: dict[str, float]


# The schema of the traces this reader was written for (the events name it).
DYNAMO_SCHEMA = "dynamo.request.trace.v1"


def iter_dynamo_records(
    path: str | os.PathLike[str], *, trace_block_size: int = DYNAMO_BLOCK_SIZE
) -> Iterator[DynamoRecord]:
    """Validated request records in file (end-time) order."""
    require_int("read_dynamo", "trace_block_size", trace_block_size, 1)
    source = check_trace_path(path)
    return _records(source, trace_block_size)


def _records(source: str, trace_block_size: int) -> Iterator[DynamoRecord]:
    found = False
    for line, record in iter_json_objects(source):
        event = RecordReader(record, source, line).mapping("event")
        schema = event.record.get("schema", DYNAMO_SCHEMA)
        if schema != DYNAMO_SCHEMA:
            raise WorkloadError(
                f"event.schema {schema!r} is not the trace schema this reader knows "
                f"({DYNAMO_SCHEMA}): its fields may mean other things",
                source=source,
                line=line,
            )
        if event.text("event_type") != "request_end":
            continue
        found = True
        yield _request_record(event, trace_block_size)
    if not found:
        raise WorkloadError("the trace holds no request_end events", source=source)


def _request_record(event: RecordReader, trace_block_size: int) -> DynamoRecord:
    request = event.mapping("request")
    replay = request.mapping("replay")
    block_size = replay.count("trace_block_size", minimum=1)
    if block_size != trace_block_size:
        raise replay.fail(
            f"trace_block_size: {block_size} differs from the expected {trace_block_size}"
        )
    input_tokens = request.count("input_tokens", minimum=1)
    input_length = replay.count("input_length", minimum=1)
    if input_length != input_tokens:
        raise replay.fail(
            f"input_length {input_length} differs from the request's input_tokens {input_tokens}"
        )
    hashes = replay.hash_list("input_sequence_hashes")
    replay.check_block_count(hashes, input_tokens, block_size)
    cached_tokens = request.count("cached_tokens", maximum=input_tokens)
    session_id = None
    if "agent_context" in event.record:
        session_id = event.mapping("agent_context").text("session_id")
    return DynamoRecord(
        line=event.line,
        request_id=request.text("request_id"),
        session_id=session_id,
        received_ms=request.time("request_received_ms"),
        input_tokens=input_tokens,
        output_tokens=request.count("output_tokens", minimum=1),
        cached_tokens=cached_tokens,
        hashes=hashes,
        timings_ms={name: request.time(name) for name in _TIMING_FIELDS if name in request.record},
    )


def read_dynamo(
    path: str | os.PathLike[str],
    *,
    trace_block_size: int = DYNAMO_BLOCK_SIZE,
    namespace: str | None = None,
    speedup: float = 1.0,
    max_requests: int | None = None,
    outputs_from_next_turn: bool = True,
    tokens: SyntheticTokens | None = None,
) -> Iterator[RequestSpec]:
    """Open-loop specs ordered by arrival (from 0 at the first request received)."""
    options = replay_options(path, namespace, speedup, max_requests, tokens)
    records = sorted(
        iter_dynamo_records(path, trace_block_size=trace_block_size),
        key=lambda record: (record.received_ms, record.line),
    )
    builder = _SpecBuilder(options.namespace, trace_block_size, options.tokens)
    following = _next_turns(records, trace_block_size) if outputs_from_next_turn else {}
    start_ms = records[0].received_ms
    return (
        builder.spec(
            index, record, following.get(index), (record.received_ms - start_ms) / 1000.0 / speedup
        )
        for index, record in enumerate(records[:max_requests])
    )


def _next_turns(records: list[DynamoRecord], block_size: int) -> dict[int, DynamoRecord]:
    """For each request, the session's next request when that one extends its full blocks."""
    following: dict[int, DynamoRecord] = {}
    last_index: dict[str, int] = {}
    for index, record in enumerate(records):
        if record.session_id is None:
            continue
        previous_index = last_index.get(record.session_id)
        if previous_index is not None:
            previous = records[previous_index]
            num_full = previous.input_tokens // block_size
            if (
                record.input_tokens >= previous.input_tokens
                and record.hashes[:num_full] == previous.hashes[:num_full]
            ):
                following[previous_index] = record
        last_index[record.session_id] = index
    return following


class _SpecBuilder:
    """Turns records into specs with block tokens from one namespace."""

    def __init__(self, namespace: str, block_size: int, tokens: SyntheticTokens) -> None:
        self.namespace = namespace
        self.block_size = block_size
        self.tokens = tokens

    def _prompt(self, hashes: list[int], num_tokens: int) -> TracePrompt:
        return TracePrompt(self.namespace, hashes, self.block_size, num_tokens, self.tokens)

    def spec(
        self, index: int, record: DynamoRecord, next_turn: DynamoRecord | None, arrival_at: float
    ) -> RequestSpec:
        """The spec of one record; its tail comes from `next_turn` when given."""
        num_full_tokens = record.input_tokens // self.block_size * self.block_size
        num_full_blocks = num_full_tokens // self.block_size
        segments = self._prompt(record.hashes[:num_full_blocks], num_full_tokens).segments()
        remainder = record.input_tokens - num_full_tokens
        answer_id = f"{self.namespace}/output/{index}"
        if next_turn is None:
            if remainder:
                segments.extend(self._prompt(record.hashes[num_full_blocks:], remainder).segments())
            output = answer_tokens(self.tokens, answer_id, record.output_tokens)
        else:
            tail = self._prompt(next_turn.hashes, next_turn.input_tokens).token_array(
                num_full_tokens, record.input_tokens + record.output_tokens
            )
            if remainder:
                block_id = trace_block_content_id(self.namespace, next_turn.hashes[num_full_blocks])
                segments.append(Segment(TRACE_BLOCK_SEGMENT, block_id, tail[:remainder]))
            taken = tail[remainder:]
            output = taken.tolist() + answer_tokens(
                self.tokens, answer_id, record.output_tokens - len(taken)
            )
        extras: dict[str, str | int | float] = {
            "trace_line": record.line,
            "trace_request_id": record.request_id,
            **record.timings_ms,
        }
        if record.session_id is not None:
            extras["trace_session_id"] = record.session_id
        return trace_request_spec(
            self.namespace, index, arrival_at, segments, output, extras, record.cached_tokens
        )


def _arrival_times_s(path: str | os.PathLike[str]) -> Iterator[float]:
    received_ms = sorted(record.received_ms for record in iter_dynamo_records(path))
    return ((value - received_ms[0]) / 1000.0 for value in received_ms)


TRACE_FORMAT = TraceFormat(
    "dynamo",
    "Dynamo request trace JSONL (dynamo.request.trace.v1): agent sessions, block-16 hashes",
    read_dynamo,
    _arrival_times_s,
)
