"""Eviction policies on one request stream (sim/studies/eviction*.py).

Hand-computed streams use block_size 4 and one output token per request unless said otherwise
(the only output is the last sampled token, so a request caches exactly its prompt's full
blocks). "usable" is num_gpu_blocks - 1.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from sim.studies.eviction import POLICY_NAMES, EvictionReport, compare_eviction_policies
from sim.studies.eviction_plot import plot_eviction_report
from sim.studies.eviction_sim import simulate_policy
from sim.studies.eviction_trace import BlockTrace
from workloads.spec import RequestSpec, Segment

ONLINE_POLICIES = ("lru", "lfu", "length-aware")


def make_spec(
    request_id: str,
    prompt: list[int],
    outputs: list[int] | None = None,
    *,
    cache_salt: str | None = None,
    prompt_logprobs: bool = False,
) -> RequestSpec:
    return RequestSpec(
        request_id=request_id,
        arrival_at=0.0,
        session_id=None,
        turn_index=0,
        think_time_s=0.0,
        segments=[Segment("prompt", request_id, prompt)],
        output_tokens=[9999] if outputs is None else outputs,
        cache_salt=cache_salt,
        prompt_logprobs=prompt_logprobs,
    )


def tokens(start: int, count: int) -> list[int]:
    return list(range(start, start + count))


def hits_of(report: EvictionReport) -> dict[str, int]:
    return {row.name: row.hits for row in report.rows}


def evictions_of(report: EvictionReport) -> dict[str, int]:
    return {row.name: row.num_evictions for row in report.rows}


def test_belady_keeps_the_block_needed_next_where_lru_evicts_it() -> None:
    # X, Y, Z, X with 5-token prompts (one full block + a partial one) and 3 usable blocks.
    # Z must evict X0 or Y0: LRU (and LFU, length-aware: equal uses and depth, so the earlier
    # release) evict X0 and miss X; Belady evicts Y0 (never used again) and X hits 4 tokens.
    x, y, z = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [make_spec("x1", x), make_spec("y", y), make_spec("z", z), make_spec("x2", x)]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    assert hits_of(report) == {"lru-exact": 0, "lru": 0, "lfu": 0, "length-aware": 0, "belady": 4}
    # LRU's X2 recomputes X0 and evicts Y0 for it; Belady's X2 reuses X0 and an empty block.
    assert evictions_of(report) == {
        "lru-exact": 2,
        "lru": 2,
        "lfu": 2,
        "length-aware": 2,
        "belady": 1,
    }
    belady = report.row("belady")
    assert (belady.queries, belady.prefill_tokens_computed) == (20, 16)
    assert belady.hit_rate == pytest.approx(0.2)
    assert belady.hit_rate_gap_points == pytest.approx(20.0)
    assert belady.prefill_tokens_gap == -4
    assert report.baseline == "lru-exact"
    assert (report.num_requests, report.num_skipped) == (4, 0)


def test_lfu_and_length_aware_keep_a_block_that_was_hit() -> None:
    # X, X, Y, Z, X with 3 usable blocks: X's second run hits X0 (4 tokens), so X0 has two uses
    # and Y0 one. Z evicts X0 under LRU (least recent) but Y0 under the others; the last X hits.
    x, y, z = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [
        make_spec("x1", x),
        make_spec("x2", x),
        make_spec("y", y),
        make_spec("z", z),
        make_spec("x3", x),
    ]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    assert hits_of(report) == {"lru-exact": 4, "lru": 4, "lfu": 8, "length-aware": 8, "belady": 8}
    assert {row.queries for row in report.rows} == {25}
    assert report.row("lfu").prefill_tokens_gap == -4


def test_length_aware_evicts_the_tail_of_a_long_prompt_before_a_short_one() -> None:
    # V (1 block + partial), W (3 blocks + partial), U (1 block + partial), V with 5 usable.
    # U must evict one of V0, W2, W1, W0 (all used once): LRU and LFU take V0 (released first);
    # length-aware takes W2 (priority 1/3 against V0's 1/1); Belady takes W2 too (W is never
    # looked up again; deepest first). Only those two hit V0 on V's return.
    v, w, u = tokens(0, 5), tokens(100, 13), tokens(200, 5)
    specs = [make_spec("v1", v), make_spec("w", w), make_spec("u", u), make_spec("v2", v)]
    report = compare_eviction_policies(specs, num_gpu_blocks=6, block_size=4)
    assert hits_of(report) == {"lru-exact": 0, "lru": 0, "lfu": 0, "length-aware": 4, "belady": 4}
    assert {row.queries for row in report.rows} == {28}


def test_length_aware_ages_out_a_formerly_hot_block_that_lfu_keeps_forever() -> None:
    # H three times (H0: 3 uses), then Q1 and Q2 alternate with 3 usable blocks, one cached
    # block each besides H0's. LRU evicts H0 at the first Q2 and hits every later Q. LFU keeps
    # H0 (3 uses) forever, so Q1 and Q2 evict each other and always miss. Length-aware (GDSF)
    # raises L with each victim (1, 2, 3): at the second Q2 a fresh Q1 block ties H0 at 3 and
    # the older H0 goes, so the last Q1 and Q2 hit.
    h, q1, q2 = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [make_spec(f"h{index}", h) for index in range(3)]
    for round_index in range(3):
        specs += [make_spec(f"q1-{round_index}", q1), make_spec(f"q2-{round_index}", q2)]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    assert hits_of(report) == {
        "lru-exact": 24,
        "lru": 24,
        "lfu": 8,
        "length-aware": 16,
        "belady": 24,
    }
    assert {row.queries for row in report.rows} == {45}


def test_a_fully_cached_prompt_loses_its_last_block_and_caches_a_duplicate() -> None:
    # An 8-token prompt three times (2 full blocks, lookup capped at (8 - 1) // 4 = 1 block)
    # with 3 usable blocks. Run 2 hits A0 and writes a second copy of A1 into the last empty
    # block; run 3 hits A0 and must evict for its copy of A1: the oldest free copy (A1).
    prompt = tokens(0, 8)
    specs = [make_spec(f"a{index}", prompt) for index in range(3)]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    assert hits_of(report) == {"lru-exact": 8, "lru": 8, "lfu": 8, "length-aware": 8, "belady": 8}
    assert evictions_of(report) == {
        "lru-exact": 1,
        "lru": 1,
        "lfu": 1,
        "length-aware": 1,
        "belady": 1,
    }
    assert {row.queries for row in report.rows} == {24}


def test_a_hit_takes_the_oldest_copy_of_a_duplicated_block() -> None:
    # 6 usable blocks. A (8 tokens) caches A0, A1; X caches X0; A again hits A0 (cap) and
    # writes a copy A1'; the free queue is A1, X0, A1', A0. A + 1 token hits A0 and the oldest
    # A1, leaving X0, A1', A1, A0. Y then needs one eviction: X0, so X's return misses.
    # (Touching A1' instead would have left A1 in front and X0 cached.)
    a, x, y = tokens(0, 8), tokens(100, 5), tokens(200, 5)
    specs = [
        make_spec("a1", a),
        make_spec("x1", x),
        make_spec("a2", a),
        make_spec("a3", [*a, 8]),
        make_spec("y", y),
        make_spec("x2", x),
    ]
    report = compare_eviction_policies(
        specs, num_gpu_blocks=6, block_size=4, policies=("lru-exact", "lru")
    )
    assert hits_of(report) == {"lru-exact": 12, "lru": 12}
    assert evictions_of(report) == {"lru-exact": 2, "lru": 2}
    assert {row.queries for row in report.rows} == {40}


def test_belady_drops_a_redundant_copy_before_a_block_needed_later() -> None:
    # 6 usable blocks. U (5 tokens) caches U0, next looked up by the last request. A (8 tokens)
    # twice leaves A0, A1 and a copy A1' (the cap); A + 1 token hits A0 and A1, so A1' is now
    # redundant. W (17 tokens, 5 blocks) evicts three: Belady takes A0, A1, A1' (never looked
    # up again) and keeps U0; the others evict U0.
    u, a, w = tokens(0, 5), tokens(100, 8), tokens(200, 17)
    specs = [
        make_spec("u1", u),
        make_spec("a1", a),
        make_spec("a2", a),
        make_spec("a3", [*a, 8]),
        make_spec("w", w),
        make_spec("u2", u),
    ]
    report = compare_eviction_policies(specs, num_gpu_blocks=7, block_size=4)
    assert hits_of(report) == {
        "lru-exact": 12,
        "lru": 12,
        "lfu": 12,
        "length-aware": 12,
        "belady": 16,
    }


@pytest.mark.parametrize(
    ("num_prompt_tokens", "expected_hits"),
    [
        # 5 prompt + 4 outputs: 8 tokens have KV (the last sampled one has none): 2 blocks.
        (5, 8),
        # 4 prompt + 4 outputs: only 7 tokens have KV, so block 1 is never cached.
        (4, 4),
    ],
)
def test_outputs_are_cached_except_the_last_sampled_token(
    num_prompt_tokens: int, expected_hits: int
) -> None:
    # Turn 2's prompt is turn 1's prompt and 4 outputs plus one token (10 or 9 tokens: the
    # lookup may cover 2 blocks). Plenty of room: every policy sees the same hits.
    prompt = tokens(0, num_prompt_tokens)
    outputs = tokens(500, 4)
    specs = [
        make_spec("turn1", prompt, outputs),
        make_spec("turn2", [*prompt, *outputs, 777]),
    ]
    report = compare_eviction_policies(specs, num_gpu_blocks=16, block_size=4)
    assert set(hits_of(report).values()) == {expected_hits}
    assert set(evictions_of(report).values()) == {0}


def test_prompt_logprob_requests_are_not_counted_but_write_their_blocks() -> None:
    # The first request skips the lookup (not in queries), still caches block 0; the second
    # (same 5-token prompt, different output) hits it.
    prompt = tokens(0, 5)
    specs = [make_spec("a", prompt, prompt_logprobs=True), make_spec("b", prompt)]
    report = compare_eviction_policies(specs, num_gpu_blocks=8, block_size=4)
    assert {(row.queries, row.hits, row.prefill_tokens_computed) for row in report.rows} == {
        (5, 4, 6)
    }


def test_a_request_larger_than_the_pool_is_skipped_by_every_policy() -> None:
    # 3 usable blocks of 4 tokens: a 13-token prompt needs 4 and never runs.
    specs = [make_spec("big", tokens(0, 13)), make_spec("a", tokens(100, 5))]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    assert (report.num_requests, report.num_skipped) == (1, 1)
    assert {row.queries for row in report.rows} == {5}


def test_cache_salt_separates_identical_prompts() -> None:
    prompt = tokens(0, 5)
    specs = [make_spec("a", prompt, cache_salt="tenant-a"), make_spec("b", prompt)]
    report = compare_eviction_policies(specs, num_gpu_blocks=8, block_size=4)
    assert set(hits_of(report).values()) == {0}


def test_without_the_exact_pool_the_first_policy_is_the_baseline() -> None:
    x, y, z = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [make_spec("x1", x), make_spec("y", y), make_spec("z", z), make_spec("x2", x)]
    report = compare_eviction_policies(
        specs, num_gpu_blocks=4, block_size=4, policies=("belady", "lru")
    )
    assert report.baseline == "belady"
    assert [row.name for row in report.rows] == ["belady", "lru"]
    assert report.row("lru").hit_rate_gap_points == pytest.approx(-20.0)
    assert report.row("lru").prefill_tokens_gap == 4


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"num_gpu_blocks": 1}, "num_gpu_blocks must be in 2..30,000,000"),
        ({"block_size": 0}, "block_size must be at least 1"),
        ({"hash_algo": "md5"}, "unknown hash_algo 'md5'"),
        ({"policies": ("lru", "fifo")}, "unknown policy 'fifo'; allowed: lru-exact, lru"),
        ({"policies": ("lru", "lru")}, "name a policy twice"),
        ({"policies": ()}, "policies is empty"),
    ],
)
def test_bad_arguments_are_input_errors(arguments: dict[str, object], message: str) -> None:
    options: dict[str, object] = {"num_gpu_blocks": 8, "block_size": 4, **arguments}
    with pytest.raises(InputError, match=message):
        compare_eviction_policies([make_spec("a", tokens(0, 5))], **options)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (make_spec("empty", []), "request 'empty': the prompt is empty"),
        (make_spec("salty", tokens(0, 5), cache_salt="a/b"), "request 'salty': cache_salt"),
    ],
)
def test_bad_requests_are_input_errors(spec: RequestSpec, message: str) -> None:
    with pytest.raises(InputError, match=message):
        compare_eviction_policies([spec], num_gpu_blocks=8, block_size=4)


def test_markdown_table_lists_every_policy() -> None:
    x, y, z = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [make_spec("x1", x), make_spec("y", y), make_spec("z", z), make_spec("x2", x)]
    markdown = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4).to_markdown()
    lines = markdown.splitlines()
    assert lines[0] == (
        "Eviction policies: 4 requests (0 skipped), 4 GPU blocks of 4 tokens; gaps vs lru-exact."
    )
    assert lines[4] == "| lru-exact | 0.00% | +0.00 | 0 | 20 | 20 | +0 | 2 |"
    assert lines[8] == "| belady | 20.00% | +20.00 | 4 | 20 | 16 | -4 | 1 |"
    assert len(lines) == 4 + len(POLICY_NAMES)


def test_plot_writes_a_png(tmp_path: Path) -> None:
    x, y, z = tokens(0, 5), tokens(100, 5), tokens(200, 5)
    specs = [make_spec("x1", x), make_spec("y", y), make_spec("z", z), make_spec("x2", x)]
    report = compare_eviction_policies(specs, num_gpu_blocks=4, block_size=4)
    path = tmp_path / "eviction.png"
    plot_eviction_report(report, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [entry.name for entry in tmp_path.iterdir()] == ["eviction.png"]


# --- generated streams ------------------------------------------------------------------------

BLOCK_SIZE = 4


@st.composite
def shared_prefix_streams(draw: st.DrawFn) -> tuple[list[RequestSpec], int]:
    """Requests built from a few shared system prompts (lengths straddling block boundaries),
    shared or unique suffixes, follow-up turns that repeat a previous prompt and its outputs,
    some salted or prompt-logprob requests; plus a pool small enough to force evictions."""
    # Block-aligned lengths make capped lookups and duplicate copies common.
    lengths = st.sampled_from([0, BLOCK_SIZE, 2 * BLOCK_SIZE]) | st.integers(0, 3 * BLOCK_SIZE + 1)
    system_prompts = [
        tokens(10_000 * (index + 1), draw(lengths)) for index in range(draw(st.integers(1, 4)))
    ]
    shared_suffixes = [tokens(90_000 + 100 * index, BLOCK_SIZE + index) for index in range(2)]
    specs: list[RequestSpec] = []
    for index in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["fresh", "fresh", "common-suffix", "follow-up", "repeat"]))
        unique = tokens(1_000_000 + 1000 * index, draw(lengths))
        if kind in ("follow-up", "repeat") and specs:
            previous = specs[draw(st.integers(0, len(specs) - 1))]
            if kind == "repeat":
                prompt = previous.prompt_tokens()
            else:
                prompt = [*previous.prompt_tokens(), *previous.output_tokens, *unique]
        else:
            prompt = list(draw(st.sampled_from(system_prompts)))
            prompt += draw(st.sampled_from(shared_suffixes)) if kind == "common-suffix" else unique
        if not prompt:
            prompt = [7]
        outputs = tokens(5_000_000 + 1000 * index, draw(st.integers(0, 2 * BLOCK_SIZE)))
        specs.append(
            make_spec(
                f"r{index}",
                prompt,
                outputs,
                cache_salt=draw(st.sampled_from([None, None, None, "salt"])),
                prompt_logprobs=draw(st.integers(0, 9)) == 0,
            )
        )
    return specs, draw(st.integers(2, 14))


@settings(max_examples=150, deadline=None)
@given(shared_prefix_streams())
def test_lru_policy_equals_the_exact_pool(stream: tuple[list[RequestSpec], int]) -> None:
    specs, num_gpu_blocks = stream
    report = compare_eviction_policies(
        specs, num_gpu_blocks=num_gpu_blocks, block_size=BLOCK_SIZE, policies=("lru-exact", "lru")
    )
    exact, lru = report.row("lru-exact"), report.row("lru")
    assert (lru.queries, lru.hits, lru.prefill_tokens_computed, lru.num_evictions) == (
        exact.queries,
        exact.hits,
        exact.prefill_tokens_computed,
        exact.num_evictions,
    )
    assert lru.hit_rate == exact.hit_rate


@settings(max_examples=150, deadline=None)
@given(shared_prefix_streams())
def test_belady_is_never_beaten(stream: tuple[list[RequestSpec], int]) -> None:
    specs, num_gpu_blocks = stream
    report = compare_eviction_policies(specs, num_gpu_blocks=num_gpu_blocks, block_size=BLOCK_SIZE)
    belady = report.row("belady")
    for row in report.rows:
        assert belady.hit_rate >= row.hit_rate, row.name
        assert belady.prefill_tokens_computed <= row.prefill_tokens_computed, row.name
    assert belady.hit_rate_gap_points >= 0.0


def optimum_hit_blocks(traces: list[BlockTrace], num_usable_blocks: int) -> int:
    """Most hit blocks any eviction choice achieves: exhaustive search over which free cached
    blocks (as a multiset of keys) each request evicts when it runs out of unhashed blocks."""

    @functools.cache
    def best(index: int, cached: tuple[tuple[int, int], ...], num_unhashed: int) -> int:
        if index == len(traces):
            return 0
        trace = traces[index]
        free = Counter(dict(cached))
        num_hit = 0
        if trace.reads_prefix_cache:
            while num_hit < trace.num_lookup_blocks and free[trace.block_keys[num_hit]] > 0:
                num_hit += 1
        hit_keys = Counter(trace.block_keys[:num_hit])
        free -= hit_keys
        num_new = trace.num_blocks - num_hit
        num_evict = max(num_new - num_unhashed, 0)
        outcomes = []
        for victims in set(itertools.combinations(sorted(free.elements()), num_evict)):
            after = free - Counter(victims) + hit_keys + Counter(trace.block_keys[num_hit:])
            outcomes.append(
                best(
                    index + 1,
                    tuple(sorted(after.items())),
                    num_unhashed - (num_new - num_evict) + trace.num_blocks - len(trace.block_keys),
                )
            )
        return num_hit + max(outcomes)

    return best(0, (), num_usable_blocks)


@st.composite
def small_traces(draw: st.DrawFn) -> tuple[list[BlockTrace], int]:
    """Up to 6 requests whose block chains are paths in a binary tree of depth 4 (block_size 1:
    a key per token prefix), with lookups capped, partial last blocks and unread requests."""
    key_of: dict[tuple[int, ...], int] = {}
    traces = []
    for index in range(draw(st.integers(1, 6))):
        path = tuple(draw(st.lists(st.integers(0, 1), min_size=1, max_size=4)))
        num_kv_blocks = draw(st.integers(1, len(path)))
        keys = [key_of.setdefault(path[: depth + 1], len(key_of)) for depth in range(num_kv_blocks)]
        has_partial_block = draw(st.booleans())
        traces.append(
            BlockTrace(
                request_id=f"r{index}",
                block_keys=keys,
                num_lookup_blocks=draw(st.integers(0, num_kv_blocks)),
                num_blocks=num_kv_blocks + has_partial_block,
                num_prompt_tokens=num_kv_blocks,
                reads_prefix_cache=draw(st.integers(0, 7)) > 0,
            )
        )
    largest = max(trace.num_blocks for trace in traces)
    return traces, draw(st.integers(largest, largest + 3))


@settings(max_examples=200, deadline=None)
@given(small_traces())
def test_belady_equals_the_exhaustive_optimum(stream: tuple[list[BlockTrace], int]) -> None:
    traces, num_usable_blocks = stream
    belady = simulate_policy(traces, "belady", num_usable_blocks=num_usable_blocks, block_size=1)
    assert belady.hits == optimum_hit_blocks(traces, num_usable_blocks)
    for name in ONLINE_POLICIES:
        online = simulate_policy(traces, name, num_usable_blocks=num_usable_blocks, block_size=1)
        assert online.hits <= belady.hits, name


@settings(max_examples=30, deadline=None)
@given(shared_prefix_streams())
def test_same_stream_gives_the_same_report(stream: tuple[list[RequestSpec], int]) -> None:
    specs, num_gpu_blocks = stream
    first = compare_eviction_policies(specs, num_gpu_blocks=num_gpu_blocks, block_size=BLOCK_SIZE)
    second = compare_eviction_policies(
        iter(specs), num_gpu_blocks=num_gpu_blocks, block_size=BLOCK_SIZE
    )
    assert first == second
    assert first.to_markdown() == second.to_markdown()
