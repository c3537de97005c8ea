"""Random add / step / abort sequences keep the scheduler's invariants (hypothesis).

Every config lets one request of max_model_len tokens fit the pool alone (as vLLM checks at
start-up), so an engine with unfinished requests always makes progress and drains.
Prompts share prefixes of three fixed token runs, so prefix hits are frequent.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings, target
from hypothesis import strategies as st

from sim.native import CORES
from sim.sched import POLICIES, Request, Scheduler, SchedulerConfig


@st.composite
def configs(draw: st.DrawFn) -> SchedulerConfig:
    block_size = draw(st.sampled_from([2, 4]))
    num_usable_blocks = draw(st.integers(3, 10))
    max_model_len = num_usable_blocks * block_size
    max_num_seqs = draw(st.integers(1, 4))
    chunked = draw(st.booleans())
    lowest_budget = max_num_seqs if chunked else max_model_len
    return SchedulerConfig(
        num_gpu_blocks=num_usable_blocks + 1,
        block_size=block_size,
        max_num_batched_tokens=draw(st.integers(lowest_budget, lowest_budget + 24)),
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        enable_chunked_prefill=chunked,
        long_prefill_token_threshold=draw(st.sampled_from([0, 0, 1, 3, 8])),
        policy=draw(st.sampled_from(POLICIES)),
        watermark=draw(st.sampled_from([0.0, 0.0, 0.25])),
        scheduler_reserve_full_isl=draw(st.booleans()),
        enable_caching=draw(st.booleans()),
        core=draw(st.sampled_from(CORES)),
    )


# Prompts start with a prefix of one of three shared token runs, so they share blocks.
SHARED_RUNS = [list(range(1000 * run, 1000 * run + 40)) for run in range(3)]
ADD = st.tuples(
    st.just("add"),
    st.integers(0, 2),  # which shared run
    st.integers(0, 40),  # length of its prefix
    st.lists(st.integers(0, 2), max_size=8),  # own tail
    st.integers(1, 16),  # number of outputs
    st.integers(0, 2),  # priority
)
STEP = st.tuples(st.just("step"), st.integers(1, 4))
ABORT = st.tuples(st.just("abort"), st.integers(0, 1000))
OPS = st.lists(st.one_of(ADD, ADD, ADD, STEP, ABORT), min_size=3, max_size=30)


def check_blocks(scheduler: Scheduler) -> None:
    """free + held = usable, and each held block's ref_cnt counts its holders."""
    manager = scheduler.kv_cache_manager
    holders = Counter(
        block_id
        for request_id in scheduler.requests
        for block_id in manager.get_block_ids(request_id)
    )
    pool = manager.block_pool
    assert manager.num_free_blocks + len(holders) == pool.num_usable_blocks
    for block_id, count in holders.items():
        assert pool.ref_cnt(block_id) == count
    assert 0 not in holders  # the null block is never handed out


def check_step(scheduler: Scheduler, now: float) -> None:
    config = scheduler.config
    had_work = scheduler.has_unfinished_requests
    num_eligible = len(scheduler.running) + len(scheduler.waiting)
    output = scheduler.schedule(now)
    scheduled = output.num_scheduled_tokens
    assert len(scheduler.running) <= config.max_num_seqs
    assert output.total_num_scheduled_tokens == sum(scheduled.values())
    assert output.total_num_scheduled_tokens <= config.max_num_batched_tokens
    assert all(count > 0 for count in scheduled.values())
    assert [request.request_id for request in output.scheduled] == list(scheduled)
    assert len(output.prefill_new_tokens) + len(output.decode_context_lens) == len(scheduled)
    assert (
        sum(output.prefill_new_tokens) + len(output.decode_context_lens)
        == output.total_num_scheduled_tokens
    )
    if had_work:
        # A step may schedule nothing only when its first running request preempted itself
        # (priority policy, tied (priority, arrival_at) keys): never a stall.
        assert output.total_num_scheduled_tokens > 0 or (
            config.policy == "priority" and output.preempted
        )
    if output.preempted:
        assert output.admitted == []
    for request in output.scheduled:
        assert request.num_computed_tokens <= request.num_tokens
    if config.long_prefill_token_threshold and num_eligible > 1:  # spec §12.1
        assert max(scheduled.values(), default=0) <= config.long_prefill_token_threshold
    check_blocks(scheduler)
    scheduler.update_from_output(output, now)
    check_blocks(scheduler)


@settings(max_examples=150, deadline=None)
@given(config=configs(), ops=OPS)
def test_random_sequences_keep_invariants_and_drain(
    config: SchedulerConfig, ops: list[tuple[Any, ...]]
) -> None:
    scheduler = Scheduler(config)
    added: dict[str, Request] = {}
    aborted: set[str] = set()
    now = 0.0
    for op in ops:
        if op[0] == "add":
            _, run, prefix_len, tail, num_outputs, priority = op
            prompt = (SHARED_RUNS[run][:prefix_len] + tail)[: config.max_model_len - 1]
            if not prompt:
                continue
            request_id = f"r{len(added)}"
            request = Request(
                request_id,
                prompt,
                list(range(100, 100 + num_outputs)),
                scheduler.hasher,
                arrival_at=now,
                priority=priority,
            )
            scheduler.add_request(request)
            added[request_id] = request
        elif op[0] == "step":
            for _ in range(op[1]):
                now += 1.0
                check_step(scheduler, now)
        else:
            live = sorted(scheduler.requests)
            if live:
                request_id = live[op[1] % len(live)]
                scheduler.abort_request(request_id, now)
                aborted.add(request_id)
                check_blocks(scheduler)

    # Alone, a request needs at most one step per prompt and output token; draining has never
    # needed more than the sum of those (even with recomputation), so twice it means a stall.
    max_steps = 2 * sum(r.num_prompt_tokens + r.max_tokens for r in added.values()) + 10
    for _ in range(max_steps):
        if not scheduler.has_unfinished_requests:
            break
        now += 1.0
        check_step(scheduler, now)
    # Under priority, requests tied on (priority, arrival) can preempt each other forever, as
    # in vLLM (tests/fixtures/sched_rules/tied_priority_livelock); all others drain.
    keys = {(request.priority, request.arrival_at) for request in added.values()}
    drained = not scheduler.has_unfinished_requests
    if config.policy == "fcfs" or len(keys) == len(added):
        assert drained
    # Steer generation towards the interesting cases: preemptions and prefix hits.
    stats = scheduler.kv_cache_manager.cumulative_stats
    target(float(scheduler.num_preemptions), label="preemptions")
    target(float(stats.hits + stats.preempted_hits), label="hit tokens")
    if not drained:
        return  # the tied-priority livelock allowed above still holds its blocks
    assert scheduler.kv_cache_manager.num_free_blocks == config.num_gpu_blocks - 1
    for request_id, request in added.items():
        if request_id in aborted:
            continue
        assert request.status.is_finished
        assert (
            request.num_output_tokens == request.max_tokens
            or request.num_tokens == config.max_model_len
        )
        assert request.all_token_ids[request.num_prompt_tokens :].tolist() == list(
            request.planned_output_token_ids[: request.num_output_tokens]
        )
        # The first admission's hit: whole blocks, capped below the prompt length.
        assert 0 <= request.num_cached_tokens < request.num_prompt_tokens
        assert request.num_cached_tokens % config.block_size == 0
        if not config.enable_caching:
            assert request.num_cached_tokens == 0
