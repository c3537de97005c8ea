"""Calibration CSVs (cost_model.md §5.2): measured steps, request TTFTs and decode ITLs.

Each row carries exactly one measured time, which decides its kind:

- `step_ms`: one engine step, either as lists (`num_prefill_tokens_per_seq`,
  `cached_tokens_per_seq`, `decode_context_lens`, ';'-separated, empty for none) or pre-aggregated
  (`T`, `S`, `K`, `B_dec`);
- `ttft_ms`: a request prefilled alone, `input_tokens` with `cached_tokens` already cached, in
  chunks of `max_num_batched_tokens` when that column is set;
- `itl_ms`: a pure decode step of `batch` sequences at `mean_context` tokens.
"""

from __future__ import annotations

import csv
import difflib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from sim.costmodel.batch import BatchShape
from sim.costmodel.fit import Measurement, StepFeatures
from sim.errors import InputError

Number = TypeVar("Number", int, float)

TIME_COLUMNS = ("step_ms", "ttft_ms", "itl_ms")
STEP_LIST_COLUMNS = ("num_prefill_tokens_per_seq", "cached_tokens_per_seq", "decode_context_lens")
STEP_TOTAL_COLUMNS = ("T", "S", "K", "B_dec")
READ_COLUMNS = (
    *TIME_COLUMNS,
    *STEP_LIST_COLUMNS,
    *STEP_TOTAL_COLUMNS,
    "input_tokens",
    "cached_tokens",
    "max_num_batched_tokens",
    "batch",
    "mean_context",
)
MAX_CSV_BYTES = 64 * 2**20


def read_measurements(path: Path) -> list[Measurement]:
    """Every row of the CSV at `path` as a measurement; bad input raises InputError (file, line)."""
    source = str(path)
    if path.is_dir():
        raise InputError("is a directory; expected a measurement CSV file", source=source)
    if not path.exists():
        raise InputError("measurement file not found", source=source)
    if not path.is_file():
        raise InputError("is not a regular file; expected a measurement CSV file", source=source)
    # Bounds every line too: a few hundred rows of numbers are kilobytes.
    if path.stat().st_size > MAX_CSV_BYTES:
        raise InputError(
            f"{path.stat().st_size:,} bytes is more than the {MAX_CSV_BYTES // 2**20} MiB a "
            "measurement file may have; is this the right file?",
            source=source,
        )
    with path.open("rb") as handle:
        rows = csv.reader(_text_lines(handle, source))
        try:
            header = next(rows, None)
            if not header:
                raise InputError(
                    "empty file: expected a header row and measurements", source=source
                )
            _check_header(header, source)
            measurements = [
                _RowParser(
                    _cells(header, row, source, rows.line_num), source, rows.line_num
                ).measurement()
                for row in rows
                if row
            ]
        except csv.Error as error:
            raise InputError(_csv_problem(error), source=source, line=rows.line_num) from None
    if not measurements:
        raise InputError("no measurement rows after the header", source=source)
    return measurements


def _text_lines(handle: BinaryIO, source: str) -> Iterator[str]:
    """The file's lines as text: UTF-8, no NUL bytes (binary input)."""
    for line_number, raw in enumerate(handle, start=1):
        if b"\0" in raw:
            raise InputError(
                "binary data (NUL bytes); expected CSV text", source=source, line=line_number
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                "not UTF-8 text; expected CSV", source=source, line=line_number
            ) from None


def _check_header(header: list[str], source: str) -> None:
    names = [name.strip() for name in header]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(
            f"the header repeats column {repeated[0]!r}; each column once", source=source, line=1
        )
    for name in names:
        missing_times = [column for column in TIME_COLUMNS if column not in names]
        close = difflib.get_close_matches(name, missing_times, n=1, cutoff=0.8)
        if name not in READ_COLUMNS and close:
            # A misspelt time column leaves every row without its time: refuse it by name.
            # Columns of other names (notes, output_tokens) are kept out of the fit, as before.
            raise InputError(
                f"column {name!r} is not one calibrate reads (did you mean {close[0]!r}?)",
                source=source,
                line=1,
            )
    if not any(column in names for column in TIME_COLUMNS):
        raise InputError(
            f"no time column: the header needs at least one of {', '.join(TIME_COLUMNS)}",
            source=source,
            line=1,
        )


def _cells(header: list[str], row: list[str], source: str, line: int) -> dict[str, str]:
    """The row by column name; a row with more or fewer cells than the header is an error."""
    if len(row) != len(header):
        raise InputError(
            f"{len(row)} cells; the header has {len(header)} columns", source=source, line=line
        )
    return {name.strip(): value for name, value in zip(header, row, strict=True)}


def _csv_problem(error: csv.Error) -> str:
    text = str(error)
    if "field larger than field limit" in text:
        return f"a field is longer than {csv.field_size_limit():,} characters; malformed CSV"
    return f"malformed CSV: {text}"


class _RowParser:
    def __init__(self, row: dict[str, str], source: str, line: int) -> None:
        self._row = row
        self._source = source
        self._line = line

    def measurement(self) -> Measurement:
        given = [column for column in TIME_COLUMNS if self._cell(column)]
        if len(given) != 1:
            raise self._error(
                f"expected exactly one of {', '.join(TIME_COLUMNS)} to be filled, got "
                f"{', '.join(given) if given else 'none'}"
            )
        time_column = given[0]
        time_ms = self._number(time_column)
        if time_ms <= 0:
            raise self._error(f"column {time_column!r}: {time_ms:g} must be > 0 ms")
        kind, build = {
            "step_ms": ("step", self._step),
            "ttft_ms": ("request", self._request),
            "itl_ms": ("decode", self._decode),
        }[time_column]
        return Measurement(build(), time_ms * 1e-3, f"{self._source}:{self._line}", kind)

    def _step(self) -> tuple[StepFeatures, ...]:
        if any(self._cell(column) for column in STEP_LIST_COLUMNS):
            new = self._int_list("num_prefill_tokens_per_seq")
            cached = self._int_list("cached_tokens_per_seq")
            if len(new) != len(cached):
                raise self._error(
                    f"num_prefill_tokens_per_seq has {len(new)} entries but "
                    f"cached_tokens_per_seq has {len(cached)}; they must pair up"
                )
            if any(count == 0 for count in new):
                raise self._error("num_prefill_tokens_per_seq: every chunk needs >= 1 token")
            decodes = self._int_list("decode_context_lens")
            return (StepFeatures.of(BatchShape(new, cached, decodes)),)
        if all(self._cell(column) for column in STEP_TOTAL_COLUMNS):
            return (self._aggregated_step(),)
        raise self._error(
            f"a step_ms row needs the lists {', '.join(STEP_LIST_COLUMNS)} "
            f"or the totals {', '.join(STEP_TOTAL_COLUMNS)}"
        )

    def _aggregated_step(self) -> StepFeatures:
        num_tokens = self._int("T")
        attention_pairs = self._number("S")
        if attention_pairs < 0:
            raise self._error(f"column 'S': {attention_pairs:g} must be >= 0")
        kv_tokens = self._int("K")
        num_decodes = self._int("B_dec")
        if num_tokens < 1 or num_decodes > num_tokens:
            raise self._error(
                f"T={num_tokens}, B_dec={num_decodes}: need T >= 1 and B_dec <= T "
                "(every decode computes one token)"
            )
        return StepFeatures(num_tokens, round(2 * attention_pairs), kv_tokens, num_decodes, None)

    def _request(self) -> tuple[StepFeatures, ...]:
        num_input = self._int("input_tokens")
        num_cached = self._int("cached_tokens")
        if num_cached >= num_input:
            raise self._error(
                f"cached_tokens={num_cached} must be < input_tokens={num_input} "
                "(at least one prompt token is computed)"
            )
        chunk_limit = num_input
        if self._cell("max_num_batched_tokens"):
            chunk_limit = self._int("max_num_batched_tokens")
            if chunk_limit < 1:
                raise self._error("column 'max_num_batched_tokens': must be >= 1")
        steps = []
        num_done = num_cached
        while num_done < num_input:
            num_new = min(chunk_limit, num_input - num_done)
            steps.append(StepFeatures.of(BatchShape([num_new], [num_done], [])))
            num_done += num_new
        return tuple(steps)

    def _decode(self) -> tuple[StepFeatures, ...]:
        batch = self._int("batch")
        if batch < 1:
            raise self._error("column 'batch': must be >= 1")
        mean_context = self._number("mean_context")
        if mean_context < 0:
            raise self._error(f"column 'mean_context': {mean_context:g} must be >= 0")
        return (
            StepFeatures(batch, 0, round(batch * mean_context), batch, math.ceil(mean_context) + 1),
        )

    def _cell(self, column: str) -> str:
        value = self._row.get(column)
        return value.strip() if value else ""

    def _require(self, column: str) -> str:
        text = self._cell(column)
        if not text:
            raise self._error(f"column {column!r} is missing or empty")
        return text

    def _number(self, column: str) -> float:
        text = self._require(column)
        return self._convert(column, text, float, "a number")

    def _int(self, column: str) -> int:
        return self._non_negative_int(column, self._require(column))

    def _int_list(self, column: str) -> list[int]:
        text = self._cell(column)
        if not text:
            return []
        return [self._non_negative_int(column, part.strip()) for part in text.split(";")]

    def _non_negative_int(self, column: str, text: str) -> int:
        value = self._convert(column, text, int, "a whole number >= 0")
        if value < 0:
            raise self._error(
                f"column {column!r}: {text!r} is negative; expected a whole number >= 0"
            )
        return value

    def _convert(
        self, column: str, text: str, kind: Callable[[str], Number], allowed: str
    ) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise self._error(f"column {column!r}: {_shown(text)} is not {allowed}") from None
        if not math.isfinite(value):
            raise self._error(f"column {column!r}: {_shown(text)} is not {allowed}")
        return value

    def _error(self, message: str) -> InputError:
        return InputError(message, source=self._source, line=self._line)


def _shown(text: str) -> str:
    """A cell as quoted in an error: long ones cut, so the line stays readable."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"
