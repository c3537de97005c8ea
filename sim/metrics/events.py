"""events.parquet: prefix-cache block stored / hit / evicted events with residency times.

`age_since_stored_s` is the time since the block was last stored; `idle_s` the time since its
last use, where a use is its `stored` or a `hit` event (recorders are not told when a block is
freed, so idle time counts from the last lookup that reused it). Both are null on `stored` rows
and when the block's `stored` event was never seen. Hashes are lowercase hex strings, as in the
replay formats.

With CPU offloading the tier's events are rows too (kinds cpu_stored, cpu_loaded, cpu_evicted,
block_id -1, num_tokens 0); their residency is tracked per hash, apart from the GPU's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from sim.metrics.parquet_sink import DEFAULT_BATCH_ROWS, ParquetSink
from sim.metrics.recorder import NullRecorder
from sim.metrics.records import BLOCK_EVENT_KINDS, OFFLOAD_EVENT_KINDS, BlockEvent

EVENTS_SCHEMA = pa.schema(
    [
        ("at", pa.float64()),
        ("kind", pa.string()),
        ("block_hash", pa.string()),
        ("block_id", pa.int64()),
        ("num_tokens", pa.int64()),
        ("age_since_stored_s", pa.float64()),
        ("idle_s", pa.float64()),
        ("replica", pa.int64()),
    ]
)


@dataclass(slots=True)
class _Residency:
    stored_at: float
    last_used_at: float


class EventsWriter(NullRecorder):
    """Writes events.parquet; keeps one residency entry per cached block of each replica."""

    def __init__(self, path: Path, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.sink = ParquetSink(path, EVENTS_SCHEMA, batch_rows=batch_rows)
        # Keyed by (replica, block id): every replica numbers its own pool's blocks from 0.
        self._residency_by_block: dict[tuple[int, int], _Residency] = {}
        self._cpu_residency_by_hash: dict[tuple[int, bytes], _Residency] = {}

    @property
    def num_tracked_blocks(self) -> int:
        """Cached blocks whose residency is tracked (at most the pool size)."""
        return len(self._residency_by_block)

    def on_block_event(self, event: BlockEvent) -> None:
        """Append the event with its age and idle time, and update the block's residency."""
        age_since_stored_s: float | None = None
        idle_s: float | None = None
        key = (event.replica, event.block_id)
        if event.kind in OFFLOAD_EVENT_KINDS:
            age_since_stored_s, idle_s = self._cpu_residency(event)
        elif event.kind not in BLOCK_EVENT_KINDS:
            kinds = BLOCK_EVENT_KINDS + OFFLOAD_EVENT_KINDS
            raise ValueError(f"block event kind {event.kind!r} is not one of {kinds}")
        elif event.kind == "stored":
            self._residency_by_block[key] = _Residency(event.at, event.at)
        else:
            residency = (
                self._residency_by_block.pop(key, None)
                if event.kind in ("evicted", "cleared")
                else self._residency_by_block.get(key)
            )
            if residency is not None:
                age_since_stored_s = event.at - residency.stored_at
                idle_s = event.at - residency.last_used_at
                residency.last_used_at = event.at
        self.sink.append(
            (
                event.at,
                event.kind,
                event.block_hash.hex(),
                event.block_id,
                event.num_tokens,
                age_since_stored_s,
                idle_s,
                event.replica,
            )
        )

    def _cpu_residency(self, event: BlockEvent) -> tuple[float | None, float | None]:
        """Age and idle time of a CPU-tier chunk event, keyed by hash (one copy per hash)."""
        residency_by_hash = self._cpu_residency_by_hash
        key = (event.replica, event.block_hash)
        if event.kind == "cpu_stored":
            residency_by_hash[key] = _Residency(event.at, event.at)
            return None, None
        if event.kind == "cpu_evicted":
            residency = residency_by_hash.pop(key, None)
        else:
            residency = residency_by_hash.get(key)
        if residency is None:
            return None, None
        ages = (event.at - residency.stored_at, event.at - residency.last_used_at)
        residency.last_used_at = event.at
        return ages

    def close(self, end_at: float) -> None:
        """Finish events.parquet."""
        self.sink.close()
