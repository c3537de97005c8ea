"""Reading trace files line by line with errors that name the file, the line and the problem."""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from workloads.errors import WorkloadError
from workloads.synthetic_tokens import SyntheticTokens
from workloads.text_lines import bounded_lines

# Larger token counts than any model context window are input errors, not workloads.
MAX_TRACE_TOKENS = 1 << 24


def check_trace_path(path: str | os.PathLike[str]) -> str:
    """The path as a string, once it names an existing regular file."""
    source = os.fspath(path)
    if os.path.isdir(source):
        raise WorkloadError("is a directory; expected a trace file", source=source)
    if not os.path.isfile(source):
        raise WorkloadError("no such file", source=source)
    return source


def trace_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, raw line) of a trace file, gunzipped if `.gz`."""
    source = check_trace_path(path)
    line_number = 0
    try:
        with gzip.open(source) if source.endswith(".gz") else open(source, "rb") as handle:
            for line_number, raw in bounded_lines(handle, source):
                yield line_number, raw
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise WorkloadError(
            f"not a readable gzip file ({error})", source=source, line=line_number + 1
        ) from None


def line_text(raw: bytes, source: str, line_number: int) -> str:
    """A raw line as text without its line break; a WorkloadError if it is not UTF-8."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WorkloadError(
            f"not UTF-8 text ({error.reason})", source=source, line=line_number
        ) from None
    return line.rstrip("\r\n")


def open_trace(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without its line break) of a UTF-8 text file, gzipped if `.gz`."""
    source = check_trace_path(path)
    for line_number, raw in trace_lines(source):
        yield line_number, line_text(raw, source, line_number)


def default_namespace(path: str | os.PathLike[str]) -> str:
    """The token namespace of a trace: its file name without the extension (and `.gz`)."""
    name = os.path.basename(os.fspath(path)).removesuffix(".gz")
    return os.path.splitext(name)[0]


@dataclass(slots=True, frozen=True)
class ReplayOptions:
    """What every trace reader takes besides the file: validated, with defaults filled in."""

    namespace: str  # keys the synthetic tokens of the trace's blocks
    speedup: float
    max_requests: int | None
    tokens: SyntheticTokens


def replay_options(
    path: str | os.PathLike[str],
    namespace: str | None,
    speedup: float,
    max_requests: int | None,
    tokens: SyntheticTokens | None,
) -> ReplayOptions:
    """The reader options, checked; the namespace defaults to the file's stem."""
    check_replay_options(speedup, max_requests)
    return ReplayOptions(
        namespace if namespace is not None else default_namespace(path),
        speedup,
        max_requests,
        tokens if tokens is not None else SyntheticTokens(),
    )


def check_replay_options(speedup: float, max_requests: int | None) -> None:
    """Validate the options every trace adapter shares."""
    if (
        isinstance(speedup, bool)
        or not isinstance(speedup, int | float)
        or not (math.isfinite(speedup) and speedup > 0)
    ):
        raise WorkloadError(f"speedup: {speedup!r} is not allowed; use a finite number > 0")
    if max_requests is not None and (
        isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1
    ):
        raise WorkloadError(f"max_requests: {max_requests!r} is not allowed; use an int >= 1")


def json_object(text: str, source: str, line_number: int) -> dict:
    """The JSON object on one line; a WorkloadError naming the line if it is not one."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise WorkloadError(
            f"invalid JSON ({error.msg} at column {error.colno})", source=source, line=line_number
        ) from None
    except RecursionError:
        raise WorkloadError(
            "invalid JSON (nested too deeply)", source=source, line=line_number
        ) from None
    except ValueError:
        # json's one plain ValueError: an integer longer than Python converts from text.
        raise WorkloadError(
            f"invalid JSON (an integer has more than {sys.get_int_max_str_digits()} digits)",
            source=source,
            line=line_number,
        ) from None
    if not isinstance(record, dict):
        raise WorkloadError(
            f"expected a JSON object, got {type(record).__name__}", source=source, line=line_number
        )
    return record


_Record = TypeVar("_Record")

# Any JSON object, read in one pass; json (in iter_json_records) reads what it refuses.
_ANY_OBJECT: msgspec.json.Decoder[dict[str, Any]] = msgspec.json.Decoder(dict[str, Any])


def iter_json_records(
    path: str | os.PathLike[str],
    decoder: msgspec.json.Decoder[_Record],
    check: Callable[[RecordReader], _Record],
) -> Iterator[tuple[int, _Record]]:
    """Yield (line number, record) for each non-blank JSON-lines record; the file must have one.

    `decoder` reads and validates a good line in one pass (in C). A line it refuses is read
    again by json and `check`, the reference: that raises the exact error (file, line, field,
    value) or, for what only json reads (NaN, say), returns the record."""
    source = os.fspath(path)
    found = False
    for line_number, raw in trace_lines(source):
        try:
            record = decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            text = line_text(raw, source, line_number)
            if not text.strip():
                continue
            fields = json_object(text, source, line_number)
            record = check(RecordReader(fields, source, line_number))
        found = True
        yield line_number, record
    if not found:
        raise WorkloadError("the file holds no records", source=source)


def iter_json_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank JSON-lines record; the file must have one."""
    return iter_json_records(path, _ANY_OBJECT, _whole_object)


def _whole_object(reader: RecordReader) -> dict[str, Any]:
    return dict(reader.record)


class RecordReader:
    """Typed access to one record's fields, raising WorkloadError at the record's line."""

    def __init__(self, record: Mapping[str, object], source: str, line: int) -> None:
        self.record = record
        self.source = source
        self.line = line

    def fail(self, message: str) -> WorkloadError:
        """An error located at this record."""
        return WorkloadError(message, source=self.source, line=self.line)

    def field(self, name: str) -> object:
        """The raw value of a required field."""
        if name not in self.record:
            raise self.fail(f"missing field {name!r}")
        return self.record[name]

    def count(self, name: str, minimum: int = 0, maximum: int = MAX_TRACE_TOKENS) -> int:
        """A required integer field in [minimum, maximum]."""
        value = self.field(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{name}: {value!r} is not an integer")
        if not minimum <= value <= maximum:
            raise self.fail(f"{name}: {value!r} is out of range; allowed {minimum}..{maximum}")
        return value

    def time(self, name: str) -> float:
        """A required finite, non-negative number."""
        value = self.field(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{name}: {value!r} is not a number")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            number = math.inf
        if not math.isfinite(number) or number < 0:
            raise self.fail(f"{name}: {value!r} is not allowed; use a finite number >= 0")
        return number

    def hash_list(self, name: str) -> list[int]:
        """A required list of non-negative 64-bit integers."""
        value = self.field(name)
        if not isinstance(value, list):
            raise self.fail(f"{name}: expected a list of integers, got {type(value).__name__}")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < 1 << 64:
                raise self.fail(f"{name}: {item!r} is not a non-negative 64-bit integer")
        return value

    def mapping(self, name: str) -> RecordReader:
        """A required nested object, read with the same location."""
        value = self.field(name)
        if not isinstance(value, dict):
            raise self.fail(f"{name}: expected an object, got {type(value).__name__}")
        return RecordReader(value, self.source, self.line)

    def text(self, name: str) -> str:
        """A required string field."""
        value = self.field(name)
        if not isinstance(value, str):
            raise self.fail(f"{name}: {value!r} is not a string")
        return value

    def check_block_count(self, hashes: list[int], num_tokens: int, block_size: int) -> None:
        """One hash per started block: len(hashes) == ceil(num_tokens / block_size)."""
        check_block_count(hashes, num_tokens, block_size, self.source, self.line)


def check_block_count(
    hashes: list[int], num_tokens: int, block_size: int, source: str, line: int
) -> None:
    """One hash per started block, or a WorkloadError at `line` of `source`."""
    expected = -(-num_tokens // block_size)
    if len(hashes) != expected:
        raise WorkloadError(
            f"{len(hashes)} block hashes for {num_tokens} tokens; expected {expected} at "
            f"trace block size {block_size}",
            source=source,
            line=line,
        )
