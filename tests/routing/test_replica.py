"""SchedulerReplica reads a live scheduler's load and prefix cache without changing them."""

from __future__ import annotations

from sim.routing import SchedulerReplica
from sim.sched import Request, Scheduler, SchedulerConfig


def make_request(scheduler: Scheduler, request_id: str, prompt: list[int]) -> Request:
    return Request(request_id, prompt, [7, 8, 9], scheduler.hasher)


def test_load_and_cached_prefix_of_a_scheduler() -> None:
    # 16-token blocks. Request a (40 tokens) is prefilled in one step, caching its 2 full
    # blocks (tokens 0..31); request b (50 tokens) then waits.
    scheduler = Scheduler(SchedulerConfig(num_gpu_blocks=33, block_size=16, max_model_len=256))
    replica = SchedulerReplica(3, scheduler)
    assert (replica.num_unfinished_requests, replica.num_queued_tokens) == (0, 0)

    scheduler.add_request(make_request(scheduler, "a", list(range(40))))
    assert (replica.num_unfinished_requests, replica.num_queued_tokens) == (1, 40)
    output = scheduler.schedule(0.0)
    # During the step every token of a is scheduled: nothing is queued.
    assert replica.num_queued_tokens == 0
    scheduler.update_from_output(output, 0.25)
    # a sampled its first output token, the one the next decode step computes.
    assert replica.num_queued_tokens == 1
    scheduler.add_request(make_request(scheduler, "b", list(range(100, 150))))
    assert (replica.num_unfinished_requests, replica.num_queued_tokens) == (2, 51)

    manager = scheduler.kv_cache_manager
    queries_before = manager.stats.queries
    shares_two_blocks = make_request(scheduler, "c", [*range(32), *range(500, 520)])
    shares_one_block = make_request(scheduler, "d", [*range(16), *range(600, 640)])
    unrelated = make_request(scheduler, "e", list(range(900, 960)))
    assert replica.num_cached_prefix_tokens(shares_two_blocks) == 32
    assert replica.num_cached_prefix_tokens(shares_one_block) == 16
    assert replica.num_cached_prefix_tokens(unrelated) == 0
    assert replica.index == 3
    assert manager.stats.queries == queries_before
    assert (replica.num_unfinished_requests, replica.num_queued_tokens) == (2, 51)


def test_queued_tokens_with_async_scheduling_count_a_decoding_request_once() -> None:
    # Async scheduling: step 2 (a's first decode) is scheduled before step 1's output arrives,
    # so a has computed 41 tokens while 40 are appended and 1 is a placeholder. A decoding
    # request is 1 queued token, as with sync scheduling, never -1 (which made the busiest
    # replica look least loaded to least_loaded and session_affinity routing).
    config = SchedulerConfig(
        num_gpu_blocks=33, block_size=16, max_model_len=256, async_scheduling=True
    )
    scheduler = Scheduler(config)
    replica = SchedulerReplica(0, scheduler)
    scheduler.add_request(make_request(scheduler, "a", list(range(40))))
    prefill = scheduler.schedule(0.0)
    decode = scheduler.schedule(0.0)
    assert decode.num_scheduled_tokens == {"a": 1}
    request = scheduler.requests["a"]
    assert (len(request.all_token_ids), request.num_computed_tokens) == (40, 41)
    assert replica.num_queued_tokens == 1
    scheduler.update_from_output(prefill, 0.25)
    assert replica.num_queued_tokens == 1
