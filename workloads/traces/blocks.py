"""Trace requests from their block hash ids (see workloads.synthetic_tokens.TracePrompt)."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from workloads.spec import RequestSpec, Segment, TraceRequestSpec, token_array
from workloads.synthetic_tokens import StreamBatch, SyntheticTokens, TracePrompt
from workloads.traces.fields import ReplayOptions


class _CountedRecord(Protocol):
    @property
    def arrival_s(self) -> float: ...

    @property
    def line(self) -> int: ...


_Record = TypeVar("_Record", bound=_CountedRecord)


def answer_tokens(tokens: SyntheticTokens, content_id: str, num_tokens: int) -> list[int]:
    """`tokens.output_tokens(content_id, num_tokens)`, uncached: a trace request's answer is its
    own, and caching millions of short answers would hold memory for nothing."""
    return tokens.streams([content_id], [num_tokens]).tolist()


class TraceRequestContent:
    """A trace request's prompt (block ids) and answer (a count), made into tokens only when
    read: the content of a TraceRequestSpec. The answer is made in `batch`'s one pass."""

    __slots__ = ("prompt", "num_answer_tokens", "_batch", "_answer_index")

    def __init__(
        self, prompt: TracePrompt, answer_id: str, num_answer_tokens: int, batch: StreamBatch
    ) -> None:
        self.prompt = prompt
        self.num_answer_tokens = num_answer_tokens
        self._batch = batch
        self._answer_index = batch.add(answer_id, num_answer_tokens)

    def segments(self, turn: int) -> list[Segment]:
        """One segment per trace block."""
        return self.prompt.segments()

    def prompt_token_array(self, turn: int) -> array[int]:
        """The prompt's tokens end to end."""
        return token_array(self.prompt.token_array())

    def num_prompt_tokens(self, turn: int) -> int:
        """The prompt length."""
        return self.prompt.num_tokens

    def output_tokens(self, turn: int) -> list[int]:
        """The answer's unique tokens."""
        tokens: list[int] = self._batch.stream(self._answer_index).tolist()
        return tokens

    def output_token_array(self, turn: int) -> array[int]:
        """The answer's unique tokens as an array."""
        return token_array(self._batch.stream_bytes(self._answer_index))

    def num_output_tokens(self, turn: int) -> int:
        """The answer length."""
        return self.num_answer_tokens

    def trace_prompt(self, turn: int) -> TracePrompt:
        """The prompt as block ids."""
        return self.prompt


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


# Trace requests whose answers and prompt tails are made in one pass (see StreamBatch).
TRACE_BATCH_SIZE = 256


def counted_trace_specs(
    records: Iterator[_Record],
    options: ReplayOptions,
    prompt_of: Callable[[int, _Record, StreamBatch], TracePrompt | list[Segment]],
    num_output_tokens_of: Callable[[_Record], int],
) -> Iterator[RequestSpec]:
    """The specs of trace records that give their output as a count: unique output tokens,
    arrivals scaled by the replay's speedup, each record's line as an extra. A prompt of block
    ids makes a TraceRequestSpec, whose tokens are made only when read, with those of the
    TRACE_BATCH_SIZE requests read with it (`prompt_of` adds its prompt's to the batch)."""
    numbered = enumerate(itertools.islice(records, options.max_requests))
    while True:
        batch = StreamBatch(options.tokens.vocab_size)
        specs: list[RequestSpec] = []
        try:
            for index, record in itertools.islice(numbered, TRACE_BATCH_SIZE):
                specs.append(
                    _counted_spec(options, index, record, prompt_of, num_output_tokens_of, batch)
                )
        except Exception:
            # What was read before the bad record comes first, as reading one by one gives it.
            yield from specs
            raise
        if not specs:
            return
        yield from specs


def _counted_spec(
    options: ReplayOptions,
    index: int,
    record: _Record,
    prompt_of: Callable[[int, _Record, StreamBatch], TracePrompt | list[Segment]],
    num_output_tokens_of: Callable[[_Record], int],
    batch: StreamBatch,
) -> RequestSpec:
    namespace = options.namespace
    prompt = prompt_of(index, record, batch)
    arrival_at = record.arrival_s / options.speedup
    answer_id = f"{namespace}/output/{index}"
    num_output_tokens = num_output_tokens_of(record)
    extras: dict[str, str | int | float] = {"trace_line": record.line}
    if isinstance(prompt, TracePrompt):
        content = TraceRequestContent(prompt, answer_id, num_output_tokens, batch)
        return TraceRequestSpec(content, f"{namespace}-{index}", arrival_at, extras=extras)
    output = answer_tokens(options.tokens, answer_id, num_output_tokens)
    return trace_request_spec(namespace, index, arrival_at, prompt, output, extras)
