"""Arrow arrays built straight from numpy buffers.

`pa.array` imports pandas on first use (0.3 s of a short run's CPU time, for nothing a run
writes), so the writers build their columns here instead: numbers through numpy, strings as
UTF-8 bytes with offsets, nulls as a validity bitmap. The arrays equal what `pa.array` makes
of the same values, so the parquet files are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_NUMPY_TYPES = {pa.float64(): np.float64, pa.int64(): np.int64}


def _validity(nulls: np.ndarray) -> pa.Buffer | None:
    """Arrow's validity bitmap (bit set: a value) of a boolean null mask; None without nulls."""
    if not nulls.any():
        return None
    return pa.py_buffer(np.packbits(~nulls, bitorder="little"))


def numeric_array(
    values: np.ndarray, arrow_type: pa.DataType, nulls: np.ndarray | None = None
) -> pa.Array:
    """A float64 or int64 array of `values` (their dtype must match), null where `nulls`."""
    values = np.ascontiguousarray(values, dtype=_NUMPY_TYPES[arrow_type])
    validity = None if nulls is None else _validity(nulls)
    return pa.Array.from_buffers(arrow_type, len(values), [validity, pa.py_buffer(values)])


def _numeric_column(values: Sequence[float | int | None], arrow_type: pa.DataType) -> pa.Array:
    dtype = _NUMPY_TYPES[arrow_type]
    try:
        converted = np.array(values, dtype=dtype)  # None: NaN in a float array, an error in int
    except TypeError:
        converted = None
    # A NaN may have been a None: only then look at the values one by one.
    if converted is not None and (dtype is np.int64 or not np.isnan(converted).any()):
        return numeric_array(converted, arrow_type)
    nulls = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    filled = [0 if value is None else value for value in values]
    return numeric_array(np.array(filled, dtype=dtype), arrow_type, nulls)


# Integers above this do not survive a round trip through float64.
_EXACT_FLOAT_INT = 2**53


def numeric_columns(rows: Sequence[tuple[object, ...]], schema: pa.Schema) -> list[pa.Array] | None:
    """The columns of rows whose every column is float64 or int64, converted as one float64
    matrix in a single C call; None when a value is None or NaN, or an integer too large to
    pass through float64 exactly (convert column by column then)."""
    matrix = np.array(rows, dtype=np.float64)
    if np.isnan(matrix).any():
        return None
    columns = []
    for index, field in enumerate(schema):
        column = matrix[:, index]
        if field.type == pa.int64():
            if np.abs(column).max(initial=0.0) >= _EXACT_FLOAT_INT:
                return None
            column = column.astype(np.int64)
        columns.append(numeric_array(column, field.type))
    return columns


def _utf8(values: Sequence[str]) -> tuple[np.ndarray, bytes]:
    """Each string's length in UTF-8 bytes (int32), and the strings encoded end to end."""
    text = "".join(values)
    if text.isascii():  # a byte per character: encoded in one call
        return np.fromiter(map(len, values), dtype=np.int32, count=len(values)), text.encode()
    encoded = [value.encode("utf-8") for value in values]
    return np.fromiter(map(len, encoded), dtype=np.int32, count=len(encoded)), b"".join(encoded)


def string_array(values: Sequence[str | None], times: int = 1) -> pa.Array:
    """A string array of `values` (UTF-8), null where a value is None, repeated `times` times
    end to end (each value is encoded once however often it repeats)."""
    nulls = None
    present: Sequence[str | None] = values
    if None in values:
        nulls = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
        present = ["" if value is None else value for value in values]
    lengths, encoded = _utf8(present)  # type: ignore[arg-type]
    offsets = np.zeros(len(lengths) * times + 1, dtype=np.int32)
    np.cumsum(np.tile(lengths, times), out=offsets[1:])
    validity = None if nulls is None else _validity(np.tile(nulls, times))
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(encoded * times)]
    return pa.Array.from_buffers(pa.string(), len(lengths) * times, buffers)


def column_array(values: Sequence[object], arrow_type: pa.DataType) -> pa.Array:
    """The arrow array of one column of row values (float64, int64 or string)."""
    if arrow_type == pa.string():
        return string_array(values)  # type: ignore[arg-type]
    return _numeric_column(values, arrow_type)  # type: ignore[arg-type]
