"""Arrow arrays built from numpy buffers equal what pa.array makes of the same values."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.metrics.columns import string_array

# Lone surrogates do not encode to UTF-8 (pa.array refuses them too).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=5)


@settings(deadline=None)  # the first pa.array imports pandas
@given(values=st.lists(st.none() | TEXT, max_size=8), times=st.integers(1, 3))
def test_strings_ascii_or_not_equal_pa_array(values: list[str | None], times: int) -> None:
    assert string_array(values, times).equals(pa.array(values * times, pa.string()))
