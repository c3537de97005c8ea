"""Looking up one row of a study report by its name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

RowT = TypeVar("RowT")


def named_row(rows: Sequence[RowT], name_of: Callable[[RowT], str], name: str, what: str) -> RowT:
    """The row whose name is `name`; a KeyError listing the names the report has otherwise."""
    for row in rows:
        if name_of(row) == name:
            return row
    raise KeyError(f"no {what} {name!r} in this report; it has {[name_of(row) for row in rows]}")
