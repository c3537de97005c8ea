"""Row-at-a-time parquet output with a bounded buffer and an atomic rename at close."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sim.fileio import writing

DEFAULT_BATCH_ROWS = 50_000


class ParquetSink:
    """Buffers rows, writes one row group per `batch_rows` rows.

    Rows go to a hidden `.<name>.partial` file next to `path`, which replaces `path` only at
    `close`, so a crashed run never leaves a truncated file under the final name.
    """

    def __init__(
        self, path: Path, schema: pa.Schema, *, batch_rows: int = DEFAULT_BATCH_ROWS
    ) -> None:
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
        self.path = Path(path)
        self.schema = schema
        self.batch_rows = batch_rows
        self.num_rows_written = 0
        self._partial_path = self.path.with_name(f".{self.path.name}.partial")
        self._rows: list[tuple[Any, ...]] = []
        with writing(self.path):
            self._writer = pq.ParquetWriter(self._partial_path, schema, compression="zstd")

    @property
    def num_buffered_rows(self) -> int:
        """Rows held in memory, not yet written."""
        return len(self._rows)

    def append(self, row: tuple[Any, ...]) -> None:
        """Buffer one row (values in schema order); write a row group when the buffer is full."""
        rows = self._rows
        rows.append(row)
        if len(rows) >= self.batch_rows:
            self.flush()

    def extend(self, rows: list[tuple[Any, ...]]) -> None:
        """Buffer several rows at once, with the same row groups as appending them one by one."""
        while rows:
            room = self.batch_rows - len(self._rows)
            self._rows.extend(rows[:room])
            rows = rows[room:]
            if len(self._rows) >= self.batch_rows:
                self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one row group."""
        num_rows = self.num_buffered_rows
        if num_rows == 0:
            return
        # Rows are transposed only here, in C, so appending a row stays one list append.
        columns = zip(*self._rows, strict=True)
        arrays = [
            pa.array(column, type=field.type)
            for column, field in zip(columns, self.schema, strict=True)
        ]
        with writing(self.path):  # a full disk shows here first
            self._writer.write_batch(pa.record_batch(arrays, schema=self.schema))
        self.num_rows_written += num_rows
        self._rows.clear()

    def close(self) -> None:
        """Write what is left, finish the file and move it into place."""
        self.flush()
        with writing(self.path):
            self._writer.close()
            os.replace(self._partial_path, self.path)
