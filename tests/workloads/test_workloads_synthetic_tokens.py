"""Synthetic tokens: a deterministic, prefix-stable id stream per content identity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workloads._token_streams import fill_streams
from workloads.lru import WeightedLru
from workloads.prompt import Piece
from workloads.spec import RequestSpec, Segment
from workloads.synthetic_tokens import (
    SyntheticTokens,
    _reduce,
    _streams,
    content_seed,
    content_seeds,
    reference_streams,
    token_stream,
)


def test_streams_are_pinned_so_replays_stay_comparable_across_versions() -> None:
    assert token_stream("a", 4, 128_000) == [2423, 97588, 56104, 77732]
    assert token_stream("system", 3, 128_000) == [53543, 54762, 36797]


@given(
    content_id=st.text(max_size=20),
    short=st.integers(min_value=0, max_value=600),
    extra=st.integers(min_value=0, max_value=600),
)
def test_a_shorter_run_is_a_prefix_of_a_longer_one(content_id: str, short: int, extra: int) -> None:
    tokens = SyntheticTokens(cache_max_tokens=1000)
    longer = tokens.tokens(content_id, short + extra)
    assert tokens.tokens(content_id, short).tolist() == longer[:short].tolist()
    assert len(longer) == short + extra
    assert all(0 <= token < 128_000 for token in longer)


def test_different_identities_give_different_blocks() -> None:
    blocks = {tuple(token_stream(f"doc/{index}", 16, 128_000)) for index in range(2000)}
    assert len(blocks) == 2000
    assert content_seed("doc/1") != content_seed("doc/2")


def test_vocab_size_bounds_the_ids() -> None:
    assert set(SyntheticTokens(vocab_size=5).tokens("x", 500)) == {0, 1, 2, 3, 4}


def test_cache_keeps_at_most_its_token_budget() -> None:
    tokens = SyntheticTokens(cache_max_tokens=1000)
    for index in range(50):
        tokens.tokens(f"c{index}", 300)
    assert tokens.num_cached_tokens == 900


def test_render_gives_one_segment_per_piece() -> None:
    tokens = SyntheticTokens()
    segments = tokens.render(
        [Piece("system_prompt", "sys", "system", 5), Piece("question", "q", "user", 3)]
    )
    assert [(segment.name, segment.content_id, len(segment.tokens)) for segment in segments] == [
        ("system_prompt", "sys", 5),
        ("question", "q", 3),
    ]
    assert segments[0].tokens.tolist() == token_stream("sys", 5, 128_000)
    assert tokens.output_tokens("q", 3) == segments[1].tokens.tolist()


def test_weighted_lru_evicts_least_recently_used_first() -> None:
    cache: WeightedLru[str] = WeightedLru(10)
    cache.put("a", "A", 4)
    cache.put("b", "B", 4)
    assert cache.get("a") == "A"  # now "b" is the oldest
    cache.put("c", "C", 4)
    assert cache.get("b") is None
    assert cache.get("a") == "A" and cache.get("c") == "C"
    cache.put("huge", "H", 11)
    assert cache.get("huge") is None and cache.total_weight == 8


def test_prompt_tokens_concatenate_segments_in_order() -> None:
    spec = RequestSpec(
        request_id="r",
        arrival_at=0.0,
        session_id=None,
        turn_index=0,
        think_time_s=0.0,
        segments=[Segment("a", "a", [1, 2]), Segment("b", "b", [3])],
        output_tokens=[7, 8],
    )
    assert spec.prompt_tokens() == [1, 2, 3]
    assert spec.num_prompt_tokens == 3 and spec.num_output_tokens == 2
    assert spec.prompt_tokens() is not spec.segments[0].tokens


@given(
    lengths=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=8),
    warm=st.integers(min_value=0, max_value=40),
)
def test_batched_generation_equals_one_at_a_time(lengths: list[int], warm: int) -> None:
    content_ids = [f"block#{index % 3}" for index in range(len(lengths))]
    batched = SyntheticTokens(cache_max_tokens=100)
    batched.tokens("block#0", warm)  # a cached entry shorter or longer than some requests
    expected = [token_stream(cid, n, 128_000) for cid, n in zip(content_ids, lengths, strict=True)]
    assert [row.tolist() for row in batched.tokens_many(content_ids, lengths)] == expected


@given(
    content_ids=st.lists(st.text(max_size=12), min_size=0, max_size=10),
    lengths=st.data(),
)
def test_streams_of_many_identities_are_each_identity_s_stream_end_to_end(
    content_ids: list[str], lengths: st.DataObject
) -> None:
    """One pass over several streams (seeds shifted modulo 2^64) gives the streams one by
    one, and the seeds as an array are content_seed's."""
    counts = [lengths.draw(st.integers(min_value=0, max_value=50)) for _ in content_ids]
    streams = SyntheticTokens().streams(content_ids, counts)
    expected = [
        token
        for cid, n in zip(content_ids, counts, strict=True)
        for token in token_stream(cid, n, 128_000)
    ]
    assert streams.tolist() == expected
    assert content_seeds(content_ids).tolist() == [content_seed(cid) for cid in content_ids]


@given(
    values=st.lists(st.integers(0, 2**64 - 1), max_size=50),
    modulus=st.one_of(st.integers(2, 2**64 - 1), st.sampled_from([2, 128_000, 2**32, 2**63])),
)
def test_reduce_is_the_remainder(values: list[int], modulus: int) -> None:
    """values - values // modulus * modulus, in uint64 (the edges included): value % modulus."""
    array = np.array(values, dtype=np.uint64)
    _reduce(array, modulus, np.empty_like(array))
    assert array.tolist() == [value % modulus for value in values]


@given(
    seeds=st.lists(st.integers(0, 2**64 - 1), max_size=8),
    lengths=st.data(),
    vocab_size=st.one_of(
        st.integers(2, 2**64 - 1), st.sampled_from([2, 3, 128_000, 2**32, 2**63, 2**64 - 1])
    ),
)
def test_compiled_streams_equal_the_numpy_reference(
    seeds: list[int], lengths: st.DataObject, vocab_size: int
) -> None:
    """The compiled pass and the numpy reference give the same ids for any seeds (the uint64
    edges included, where seed + (i + 1) * golden wraps), lengths (empty streams among them) and
    vocabulary size (where the remainder by a multiply needs its corrections)."""
    counts = [lengths.draw(st.integers(min_value=0, max_value=300)) for _ in seeds]
    compiled = _streams(seeds, counts, vocab_size)
    assert compiled.dtype == np.int64
    assert compiled.tolist() == reference_streams(seeds, counts, vocab_size).tolist()


@pytest.mark.parametrize(
    ("seeds", "lengths", "out_size", "message"),
    [
        ([1, 2], [3], 3, "one length per seed"),
        ([1], [-1], 0, "a negative length"),
        ([1, 2], [3, 4], 6, "out must hold the streams' total length"),
    ],
)
def test_the_kernel_refuses_arguments_that_do_not_fit(
    seeds: list[int], lengths: list[int], out_size: int, message: str
) -> None:
    """Lengths that do not match the seeds or the output array raise, writing nothing."""
    out = np.full(out_size, -7, dtype=np.int64)
    with pytest.raises(ValueError, match=message):
        fill_streams(
            np.array(seeds, dtype=np.uint64), np.array(lengths, dtype=np.int64), 128_000, out
        )
    assert (out == -7).all()


def test_passing_streams_are_the_streams_made_in_one_reused_array() -> None:
    """Runs of 12 tokens (an empty stream among them), 5 and 40: each call gives `streams`'
    tokens; the 5 reuse the memory of the 12, the 40 need a larger array."""
    tokens, reference = SyntheticTokens(), SyntheticTokens()
    runs = [(["a", "b", "c"], [4, 0, 8]), (["b", "d"], [2, 3]), (["e", "f"], [1, 39])]
    made = []
    for content_ids, lengths in runs:
        passing = tokens.passing_streams(content_ids, lengths)
        assert passing.tolist() == reference.streams(content_ids, lengths).tolist()
        assert len(passing) == sum(lengths)
        made.append(passing)
    assert np.shares_memory(made[0], made[1]) and not np.shares_memory(made[1], made[2])
