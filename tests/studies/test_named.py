"""Report rows by name: the row, or a KeyError listing the names the report has."""

from __future__ import annotations

import pytest

from sim.studies.named import named_row

ROWS = (("lru", 10), ("lfu", 12), ("belady", 15))


def test_the_row_of_that_name() -> None:
    assert named_row(ROWS, lambda row: row[0], "lfu", "policy") == ("lfu", 12)


def test_an_unknown_name_lists_the_names_there_are() -> None:
    with pytest.raises(
        KeyError, match=r"no policy 'fifo' in this report; it has \['lru', 'lfu', 'belady'\]"
    ):
        named_row(ROWS, lambda row: row[0], "fifo", "policy")
