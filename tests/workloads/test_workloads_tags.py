"""TagSampler: a session's prompt_logprobs drawn together equal those drawn one at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.tags import TagSampler


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    fraction=st.sampled_from((0.0, 0.3, 1.0)),
    counts=st.lists(st.integers(0, 6), max_size=5),
)
def test_drawn_together_or_one_by_one_the_same(
    seed: int, fraction: float, counts: list[int]
) -> None:
    together = TagSampler((), fraction, np.random.default_rng(seed))
    one_by_one = TagSampler((), fraction, np.random.default_rng(seed))
    for count in counts:
        expected = [one_by_one.prompt_logprobs() for _ in range(count)]
        assert together.prompt_logprobs_many(count) == expected


def test_prompt_logprobs_in_numbers() -> None:
    # Seed 0's first uniform draws are 0.637, 0.270, 0.041: below 0.3 for the second and third.
    sampler = TagSampler((), 0.3, np.random.default_rng(0))
    assert sampler.prompt_logprobs_many(3) == [False, True, True]
    assert TagSampler((), 0.0, np.random.default_rng(0)).prompt_logprobs_many(2) == [False, False]
