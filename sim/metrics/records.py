"""Plain records the engine hands to recorders, stamped with simulated time."""

from __future__ import annotations

from abc import ABC, abstractmethod
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from itertools import chain
from operator import attrgetter
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from sim.metrics.exact_sums import run_fsums

# "cleared": dropped by reset_prefix_cache rather than evicted. The cpu_* kinds are the CPU
# offload tier's: a chunk became readable, was loaded back to the GPU, or was evicted.
BLOCK_EVENT_KINDS = ("stored", "hit", "evicted", "cleared")
OFFLOAD_EVENT_KINDS = ("cpu_stored", "cpu_loaded", "cpu_evicted")


@dataclass(slots=True)
class BlockEvent:
    """A KV block entered the prefix cache, was reused by a lookup, or left the cache."""

    kind: str  # one of BLOCK_EVENT_KINDS
    at: float
    block_hash: bytes  # full digest
    block_id: int
    num_tokens: int  # prefix tokens the block's hash covers: (block index + 1) * block_size
    replica: int = 0  # the engine replica whose cache it is


@dataclass(slots=True)
class StepRecord:
    """One engine iteration: batch shape, queue lengths after scheduling, cache state and stats."""

    step_index: int
    started_at: float
    duration_s: float
    num_prefill_tokens: int
    num_decode_tokens: int
    num_running: int  # after the step's schedule
    num_waiting: int  # after the step's schedule
    num_free_blocks: int
    usage: float  # KV usage in 0..1; evictable cached blocks count as free
    num_preemptions: int  # preemptions in this step
    # Prefix-cache token lookups and hits counted in this step: the counters vLLM exports
    # (vllm:prefix_cache_queries / _hits), which leave out re-lookups after preemption.
    num_queries: int
    num_hits: int
    num_evictions: int
    replica: int = 0  # the engine replica that stepped
    # Free blocks still holding a cached prefix (evictable), as a fraction of the usable blocks:
    # `usage` counts them as free, so a cache full of reusable prefixes can read near 0 %.
    cached_free_usage: float = 0.0
    # CPU offload tier (vllm:external_prefix_cache_queries / _hits): 0 without offloading.
    num_external_queries: int = 0
    num_external_hits: int = 0


Int64Column = npt.NDArray[np.int64]
Float64Column = npt.NDArray[np.float64]


@dataclass(slots=True)
class StepColumns:
    """A run of engine steps as columns: StepRecord's fields, one equal-length 1-D array each,
    in step order (int64 for integer fields, float64 for the others)."""

    step_index: Int64Column
    started_at: Float64Column
    duration_s: Float64Column
    num_prefill_tokens: Int64Column
    num_decode_tokens: Int64Column
    num_running: Int64Column
    num_waiting: Int64Column
    num_free_blocks: Int64Column
    usage: Float64Column
    num_preemptions: Int64Column
    num_queries: Int64Column
    num_hits: Int64Column
    num_evictions: Int64Column
    replica: Int64Column
    cached_free_usage: Float64Column
    num_external_queries: Int64Column
    num_external_hits: Int64Column

    def __post_init__(self) -> None:
        length = len(self.step_index)
        for name, dtype in _STEP_COLUMN_DTYPES.items():
            column = getattr(self, name)
            if column.dtype != dtype or column.ndim != 1 or len(column) != length:
                raise ValueError(
                    f"StepColumns.{name}: a 1-D {dtype.name} array of length {length} expected,"
                    f" got {column.dtype.name} of shape {column.shape}"
                )

    def __len__(self) -> int:
        return len(self.step_index)

    @classmethod
    def from_records(cls, records: Sequence[StepRecord]) -> StepColumns:
        """The columns of `records`, in their order."""
        count = len(records)
        return cls._trusted(
            np.fromiter(map(attrgetter(name), records), dtype=dtype, count=count)
            for name, dtype in _STEP_COLUMN_DTYPES.items()
        )

    @classmethod
    def concat(cls, parts: Sequence[StepColumns]) -> StepColumns:
        """The steps of `parts`, one after the other."""
        return cls._trusted(
            np.concatenate([getattr(part, name) for part in parts]) for name in _STEP_COLUMN_DTYPES
        )

    @classmethod
    def _trusted(cls, columns: Iterable[np.ndarray]) -> StepColumns:
        """Columns made here from checked ones (cut, gathered, joined): not checked again."""
        steps = object.__new__(cls)
        for name, column in zip(_STEP_COLUMN_DTYPES, columns, strict=True):
            setattr(steps, name, column)
        return steps

    def records(self) -> list[StepRecord]:
        """One StepRecord per step, in order (for tests and small consumers)."""
        columns = [getattr(self, name).tolist() for name in _STEP_COLUMN_DTYPES]
        return [StepRecord(*values) for values in zip(*columns, strict=True)]

    def slice(self, start: int, stop: int) -> StepColumns:
        """Steps start..stop-1 (views, no copy)."""
        return self._trusted(getattr(self, name)[start:stop] for name in _STEP_COLUMN_DTYPES)

    def select(self, which: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> StepColumns:
        """The steps where the mask `which` is true, or at the indexes `which`, in its order."""
        return self._trusted(getattr(self, name)[which] for name in _STEP_COLUMN_DTYPES)

    def by_replica(self) -> Iterator[tuple[int, StepColumns]]:
        """Each replica's steps, in order, replicas ascending."""
        replicas = self.replica
        if not len(replicas):
            return iter(())
        first = int(replicas[0])
        if (replicas == first).all():
            return iter(((first, self),))
        return iter(_replica_groups(self))


def _replica_groups(steps: StepColumns) -> list[tuple[int, StepColumns]]:
    """steps.by_replica() of a batch with several replicas. Every recorder of a fan-out splits
    the same batch: the split of the latest batch is kept and handed to each of them."""
    global _latest_split
    if _latest_split is not None and _latest_split[0] is steps:
        return _latest_split[1]
    order = np.argsort(steps.replica, kind="stable")
    grouped, grouped_replicas = steps.select(order), steps.replica[order]
    bounds = [0, *(np.flatnonzero(np.diff(grouped_replicas)) + 1).tolist(), len(order)]
    groups = [
        (int(grouped_replicas[start]), grouped.slice(start, stop))
        for start, stop in zip(bounds, bounds[1:], strict=False)
    ]
    _latest_split = (steps, groups)
    return groups


# The latest batch split by _replica_groups, and its groups (StepColumns are never changed).
_latest_split: tuple[StepColumns, list[tuple[int, StepColumns]]] | None = None


# StepRecord's fields, in order, with the dtype of their column.
_STEP_COLUMN_DTYPES: dict[str, np.dtype[np.int64] | np.dtype[np.float64]] = {
    field.name: np.dtype(np.int64) if field.type == "int" else np.dtype(np.float64)
    for field in fields(StepRecord)
}


_Time = TypeVar("_Time", float, Float64Column)


class RequestTimes(ABC, Generic[_Time]):
    """The latencies derived from a finished request's timeline. One request's are floats, a
    batch's (RequestColumns) arrays: the same expressions compute both, so a column equals
    the request's value element by element."""

    __slots__ = ()

    arrival_at: _Time
    first_scheduled_at: _Time
    first_token_at: _Time
    finished_at: _Time
    frontend_in_s: _Time
    frontend_out_s: _Time

    @property
    @abstractmethod
    def _prefill_done_at(self) -> _Time:
        """When the step that computed the last prompt token ended."""

    @property
    def ttft_s(self) -> _Time:
        """Time to first token at the client, from arrival at the API server."""
        return self.first_token_at - self.arrival_at

    @property
    def frontend_s(self) -> _Time:
        """TTFT spent in the API server: request in (tokenization, hand-off), first token out."""
        return self.frontend_in_s + self.frontend_out_s

    @property
    def prefill_s(self) -> _Time:
        """First schedule to the end of the step that computed the last prompt token."""
        return self._prefill_done_at - self.first_scheduled_at

    @property
    def first_decode_s(self) -> _Time:
        """Prefill done to the engine emitting the first token (0 when the same step does both).

        queue_s + frontend_s + prefill_s + first_decode_s == ttft_s.
        """
        return self.first_token_at - self.frontend_out_s - self._prefill_done_at

    @property
    def e2e_s(self) -> _Time:
        """End-to-end latency, from arrival to the last token."""
        return self.finished_at - self.arrival_at

    @property
    def queue_s(self) -> _Time:
        """Time the engine kept the request waiting before its first schedule."""
        return self.first_scheduled_at - self.arrival_at - self.frontend_in_s

    @property
    def engine_prefill_s(self) -> _Time:
        """vLLM's request prefill time: first schedule to the engine emitting the first token
        (prefill_s + first_decode_s)."""
        return self.first_token_at - self.frontend_out_s - self.first_scheduled_at

    @property
    def decode_s(self) -> _Time:
        """First token to last token (vLLM's request decode time)."""
        return self.finished_at - self.first_token_at

    @property
    def inference_s(self) -> _Time:
        """vLLM's request inference time: first schedule to the engine emitting the last token."""
        return self.finished_at - self.frontend_out_s - self.first_scheduled_at


@dataclass(slots=True)
class RequestRecord(RequestTimes[float]):
    """A finished request: its timeline, token counts and per-token gaps."""

    request_id: str
    session_id: str | None
    tenant: str | None
    arrival_at: float
    first_scheduled_at: float
    first_token_at: float
    finished_at: float
    num_prompt_tokens: int
    num_cached_tokens: int  # prefix-cache hit tokens at first admission
    num_computed_prefill_tokens: int  # incl. recomputation after preemption
    num_output_tokens: int
    num_preemptions: int
    inter_token_latencies_s: Sequence[float]  # gaps between consecutive output tokens
    # The serving front end (sim.costmodel.frontend): arrival_at is arrival at the API server,
    # the engine sees the request frontend_in_s later, and first_token_at / finished_at are when
    # the client receives the tokens, frontend_out_s after the engine emitted them.
    frontend_in_s: float = 0.0
    frontend_out_s: float = 0.0
    # When the last prompt token was computed; None: in the step that emitted the first token.
    prefill_done_at: float | None = None
    replica: int = 0  # the engine replica that served it
    # The part of num_cached_tokens loaded from the CPU offload tier (the rest hit the GPU).
    num_host_cached_tokens: int = 0

    @property
    def _prefill_done_at(self) -> float:
        if self.prefill_done_at is not None:
            return self.prefill_done_at
        return self.first_token_at - self.frontend_out_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first, as vLLM's benchmark computes it:
        (e2e - TTFT) / (output tokens - 1); None for a single-token output."""
        if self.num_output_tokens < 2:
            return None
        return self.decode_s / (self.num_output_tokens - 1)

    @property
    def itl_max_s(self) -> float | None:
        """The longest gap between two consecutive output tokens; None for one token."""
        gaps = self.inter_token_latencies_s
        return max(gaps) if gaps else None


_REQUEST_FLOAT_FIELDS = (
    "arrival_at",
    "first_scheduled_at",
    "first_token_at",
    "finished_at",
    "frontend_in_s",
    "frontend_out_s",
    "prefill_done_at",
)
_REQUEST_INT_FIELDS = (
    "num_prompt_tokens",
    "num_cached_tokens",
    "num_computed_prefill_tokens",
    "num_output_tokens",
    "num_preemptions",
    "replica",
    "num_host_cached_tokens",
)
_request_floats = attrgetter(*_REQUEST_FLOAT_FIELDS)
_request_ints = attrgetter(*_REQUEST_INT_FIELDS)


@dataclass(slots=True)
class RequestColumns(RequestTimes[Float64Column]):
    """A batch of finished requests as columns: RequestRecord's fields in the order given, one
    array (ids: a list) each, the inter-token gaps of all of them end to end. Recorders buffer
    the records a request at a time and take them in bulk, with no Python work per token."""

    request_id: list[str]
    session_id: list[str | None]
    tenant: list[str | None]
    arrival_at: Float64Column
    first_scheduled_at: Float64Column
    first_token_at: Float64Column
    finished_at: Float64Column
    frontend_in_s: Float64Column
    frontend_out_s: Float64Column
    prefill_done_at: Float64Column  # resolved: the first token's engine time where None
    num_prompt_tokens: Int64Column
    num_cached_tokens: Int64Column
    num_computed_prefill_tokens: Int64Column
    num_output_tokens: Int64Column
    num_preemptions: Int64Column
    replica: Int64Column
    num_host_cached_tokens: Int64Column
    inter_token_latencies_s: Float64Column  # every request's gaps, request after request
    num_gaps: Int64Column  # how many of them each request has

    @classmethod
    def from_records(cls, records: Sequence[RequestRecord]) -> RequestColumns:
        """The columns of `records`, in their order (numbers converted in one C call each)."""
        count = len(records)
        # A record's fields one after the other, then transposed to one contiguous row per field.
        floats = np.fromiter(
            chain.from_iterable(map(_request_floats, records)),
            dtype=np.float64,
            count=count * len(_REQUEST_FLOAT_FIELDS),
        ).reshape(count, len(_REQUEST_FLOAT_FIELDS))
        ints = np.fromiter(
            chain.from_iterable(map(_request_ints, records)),
            dtype=np.int64,
            count=count * len(_REQUEST_INT_FIELDS),
        ).reshape(count, len(_REQUEST_INT_FIELDS))
        columns: dict[str, Any] = {
            **dict(zip(_REQUEST_FLOAT_FIELDS, np.ascontiguousarray(floats.T), strict=True)),
            **dict(zip(_REQUEST_INT_FIELDS, np.ascontiguousarray(ints.T), strict=True)),
        }
        prefill_done_at = columns["prefill_done_at"]  # None became NaN: the first token's step
        engine_first_token_at = columns["first_token_at"] - columns["frontend_out_s"]
        columns["prefill_done_at"] = np.where(
            np.isnan(prefill_done_at), engine_first_token_at, prefill_done_at
        )
        gap_lists = [record.inter_token_latencies_s for record in records]
        # Gaps come as array("d") (a buffer: joined as bytes) or, from tests, as lists.
        if all(isinstance(part, array) and part.typecode == "d" for part in gap_lists):
            gaps = np.frombuffer(b"".join(gap_lists), dtype=np.float64)  # type: ignore[arg-type]
        else:
            gaps = np.fromiter(chain.from_iterable(gap_lists), dtype=np.float64)
        return cls(
            request_id=[record.request_id for record in records],
            session_id=[record.session_id for record in records],
            tenant=[record.tenant for record in records],
            inter_token_latencies_s=gaps,
            num_gaps=np.fromiter(map(len, gap_lists), dtype=np.int64, count=count),
            **columns,
        )

    @classmethod
    def from_engine(cls, columns: dict[str, Any]) -> RequestColumns:
        """The columns the compiled step loops wrote (RequestColumnsBuffer.take): the engine's
        view, as request_record makes it without a front end, nothing loaded from a CPU tier."""
        count = len(columns["num_gaps"])
        return cls(
            **columns,
            frontend_in_s=np.zeros(count),
            frontend_out_s=np.zeros(count),
            prefill_done_at=columns["first_token_at"].copy(),
            num_host_cached_tokens=np.zeros(count, dtype=np.int64),
        )

    @classmethod
    def concat(cls, parts: Sequence[RequestColumns]) -> RequestColumns:
        """The requests of `parts`, one after the other."""
        columns: dict[str, Any] = {}
        for field in fields(RequestColumns):
            values = [getattr(part, field.name) for part in parts]
            if isinstance(values[0], list):
                columns[field.name] = [value for part in values for value in part]
            else:
                columns[field.name] = np.concatenate(values)
        return cls(**columns)

    def through_front_end(self, api_arrival_at: Sequence[float], out_s: float) -> RequestColumns:
        """These requests, as the engine saw them (`from_engine`), as a client sees them through
        the serving front end, as request_record makes each record: arrived at the API server
        at `api_arrival_at` (NaN: when the engine got it), tokens received `out_s` after the
        engine emitted them."""
        engine_arrival_at = self.arrival_at
        api_arrivals = np.array(api_arrival_at, dtype=np.float64)
        arrival_at = np.where(np.isnan(api_arrivals), engine_arrival_at, api_arrivals)
        return replace(
            self,
            arrival_at=arrival_at,
            first_token_at=self.first_token_at + out_s,
            finished_at=self.finished_at + out_s,
            frontend_in_s=engine_arrival_at - arrival_at,
            frontend_out_s=np.full(len(self), out_s),
            prefill_done_at=self.first_token_at,
        )

    def records(self) -> list[RequestRecord]:
        """One RequestRecord per request, in order (for recorders taking them one at a time)."""
        values = {
            name: column if isinstance(column := getattr(self, name), list) else column.tolist()
            for name in _RECORD_FIELDS
            if name != "inter_token_latencies_s"
        }
        gap_ends = np.cumsum(self.num_gaps).tolist()
        gap_bytes = self.inter_token_latencies_s.tobytes()
        values["inter_token_latencies_s"] = [
            array("d", gap_bytes[start * 8 : stop * 8])
            for start, stop in zip([0, *gap_ends], gap_ends, strict=False)
        ]
        # None where the first token's step completed the prefill, as request_record writes
        # it without a front end.
        in_first_step = (self.frontend_out_s == 0) & (self.prefill_done_at == self.first_token_at)
        values["prefill_done_at"] = [
            None if first else at
            for first, at in zip(in_first_step.tolist(), values["prefill_done_at"], strict=True)
        ]
        return [
            RequestRecord(*row)
            for row in zip(*(values[name] for name in _RECORD_FIELDS), strict=True)
        ]

    def __len__(self) -> int:
        return len(self.request_id)

    def by_replica(self) -> Iterator[tuple[int, RequestColumns]]:
        """Each replica's requests, in order, replicas ascending."""
        replicas = self.replica
        if len(replicas) and (replicas == replicas[0]).all():
            return iter(((int(replicas[0]), self),))
        return (
            (int(replica), self._select(replicas == replica)) for replica in np.unique(replicas)
        )

    def _select(self, which: npt.NDArray[np.bool_]) -> RequestColumns:
        """The requests where the mask `which` is true, in order."""
        positions = np.flatnonzero(which).tolist()
        columns: dict[str, Any] = {}
        for field in fields(RequestColumns):
            values = getattr(self, field.name)
            if field.name == "inter_token_latencies_s":  # per gap: each request's run of them
                columns[field.name] = values[np.repeat(which, self.num_gaps)]
            elif isinstance(values, list):
                columns[field.name] = [values[position] for position in positions]
            else:
                columns[field.name] = values[which]
        return RequestColumns(**columns)

    @property
    def _prefill_done_at(self) -> Float64Column:
        return self.prefill_done_at

    @property
    def has_tpot(self) -> npt.NDArray[np.bool_]:
        """Requests with two or more output tokens (a TPOT)."""
        return self.num_output_tokens >= 2

    @property
    def tpot_s(self) -> Float64Column:
        """RequestRecord.tpot_s of each request, 0 where it has none (as vLLM observes it)."""
        tpot_s = np.zeros(len(self))
        np.divide(self.decode_s, self.num_output_tokens - 1, out=tpot_s, where=self.has_tpot)
        return tpot_s

    def gap_sums_s(self) -> Float64Column:
        """Each request's inter-token gaps summed exactly (math.fsum), 0 without gaps."""
        return np.array(run_fsums(self.inter_token_latencies_s, self.num_gaps), dtype=np.float64)

    @property
    def itl_max_s(self) -> Float64Column:
        """RequestRecord.itl_max_s of each request, 0 where it has no gap (num_gaps == 0)."""
        itl_max_s = np.zeros(len(self))
        has_gaps = self.num_gaps > 0
        if has_gaps.any():
            starts = (np.cumsum(self.num_gaps) - self.num_gaps)[has_gaps]
            itl_max_s[has_gaps] = np.maximum.reduceat(self.inter_token_latencies_s, starts)
        return itl_max_s


_RECORD_FIELDS = tuple(field.name for field in fields(RequestRecord))


class RequestBatcher:
    """Finished requests gathered one at a time (`add`) or a batch at a time (`add_columns`)
    and taken as one RequestColumns batch, in order (the recorders fed by requests count them
    in bulk, a fixed cost per batch)."""

    __slots__ = ("batch_size", "_records", "_parts", "_num_in_parts")

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._records: list[RequestRecord] = []  # gathered after every part
        self._parts: list[RequestColumns] = []
        self._num_in_parts = 0

    def add(self, record: RequestRecord) -> bool:
        """Gather `record`; True once a whole batch is gathered."""
        records = self._records
        records.append(record)
        return len(records) + self._num_in_parts >= self.batch_size

    def add_columns(self, requests: RequestColumns) -> bool:
        """Gather a batch of requests, after those gathered so far; True once a whole batch is
        gathered."""
        self._close_records()
        self._parts.append(requests)
        self._num_in_parts += len(requests)
        return self._num_in_parts >= self.batch_size

    def take(self) -> RequestColumns | None:
        """The gathered requests as columns, in order (None when there are none); the batcher
        starts empty again."""
        self._close_records()
        if not self._parts:
            return None
        parts, self._parts, self._num_in_parts = self._parts, [], 0
        return parts[0] if len(parts) == 1 else RequestColumns.concat(parts)

    def _close_records(self) -> None:
        """The records gathered one at a time become a part."""
        if self._records:
            records, self._records = self._records, []
            self._parts.append(RequestColumns.from_records(records))
            self._num_in_parts += len(records)
