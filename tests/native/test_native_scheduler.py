"""The compiled scheduler decides as the reference Scheduler, step for step (hypothesis).

Random add / step / abort streams drive both: the reference (`sim.sched.Scheduler` on the Python
cache core, its straightforward decode path) and `NativeScheduler` (C++ scheduler on the C++
cache core), with sync or async scheduling stepped as EngineCore does (async: up to two steps in
flight). After every engine iteration the batches, preemptions, finishes, queues, free blocks,
each request's block ids and progress must be equal. Small pools force preemption; prompts
share prefixes so lookups hit; some name an earlier request as their prefix source (a session's
next turn), whose block hashes the compiled scheduler copies where their tokens agree.
"""

from __future__ import annotations

import importlib.util
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sim.kvcache import RequestStatus
from sim.sched import (
    NativeScheduler,
    Request,
    Scheduler,
    SchedulerConfig,
    make_scheduler,
    native_scheduler_covers,
)

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "sched_invariants", REPO / "tests" / "sched" / "test_sched_invariants.py"
)
assert _spec is not None and _spec.loader is not None
sched_invariants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sched_invariants)


@st.composite
def configs(draw: st.DrawFn) -> SchedulerConfig:
    """The scheduler invariants' configs, FCFS on the compiled core, with the scheduling
    options the compiled step implements drawn as well."""
    base = draw(sched_invariants.configs())
    return replace(
        base,
        policy="fcfs",
        core="native",
        long_prefill_token_threshold_adaptive=draw(st.booleans()),
        async_scheduling=draw(st.booleans()),
        prefill_schedule_interval=draw(st.sampled_from([1, 1, 2, 3])),
        max_num_active_seqs=draw(st.sampled_from([None, None, *range(1, base.max_num_seqs + 1)])),
    )


SHARED_RUNS = [list(range(1000 * run, 1000 * run + 40)) for run in range(3)]
ADD = st.tuples(
    st.just("add"),
    st.integers(0, 2),  # which shared run
    st.integers(0, 12),  # length of its prefix
    st.lists(st.integers(0, 2), max_size=8),  # own tail
    st.integers(1, 24),  # number of outputs
    # An earlier request it names as its prefix source (-1: none); an even one is a session's
    # next turn: its prompt is the source's prompt and outputs, then its own tail.
    st.integers(-1, 1000),
)
STEP = st.tuples(st.just("step"), st.integers(1, 8))
ABORT = st.tuples(st.just("abort"), st.integers(0, 1000))
OPS = st.lists(st.one_of(ADD, ADD, STEP, ABORT), min_size=3, max_size=40)


def planned_outputs(num_outputs: int) -> list[int]:
    return [7 + i % 3 for i in range(num_outputs)]


class EngineLoop:
    """A scheduler stepped as EngineCore steps it, with time = iteration number."""

    def __init__(
        self, scheduler: Scheduler | NativeScheduler, request_type: type[Request] = Request
    ) -> None:
        self.scheduler = scheduler
        self.request_type = request_type
        self.in_flight: deque[Any] = deque()
        self.now = 0.0
        self.last: dict[str, Any] = {}
        self.added: list[Request] = []

    def add(
        self, request_id: str, prompt: list[int], num_outputs: int, source: int | None = None
    ) -> None:
        """Add a request; `source` indexes an earlier one it names as its prefix source."""
        request = self.request_type(
            request_id,
            prompt,
            planned_outputs(num_outputs),
            self.scheduler.hasher,
            arrival_at=self.now,
            prefix_source=None if source is None else self.added[source],
        )
        self.added.append(request)
        self.scheduler.add_request(request)

    def iterate(self) -> None:
        """One pass of EngineCore._run: launch a step, process the oldest when due."""
        scheduler = self.scheduler
        self.now += 1.0
        self.last = {}
        max_in_flight = 2 if scheduler.async_scheduling else 1
        if scheduler.has_unfinished_requests:
            output = scheduler.schedule(self.now)
            self.last["scheduled"] = [
                (request.request_id, output.num_scheduled_tokens[request.request_id])
                for request in output.scheduled
            ]
            self.last["shape"] = (
                list(output.prefill_new_tokens),
                list(output.prefill_context_tokens),
                list(output.decode_context_lens),
                output.total_num_scheduled_tokens,
            )
            self.last["preempted"] = [request.request_id for request in output.preempted]
            if output.total_num_scheduled_tokens:
                self.in_flight.appendleft(output)
                if len(self.in_flight) < max_in_flight:
                    return
            elif not self.in_flight:
                return
        elif not self.in_flight:
            return
        result = scheduler.update_from_output(self.in_flight.pop(), self.now)
        self.last["sampled"] = [request.request_id for request in result.sampled]
        self.last["finished"] = [request.request_id for request in result.finished]
        self.last["stats"] = result.prefix_cache_stats

    def state(self) -> dict[str, Any]:
        """Everything the two schedulers must agree on after an iteration."""
        scheduler = self.scheduler
        manager = scheduler.kv_cache_manager
        requests = {
            request.request_id: (
                request.status,
                request.num_computed_tokens,
                request.num_tokens,
                request.num_cached_tokens,
                request.num_computed_prefill_tokens,
                request.num_preemptions,
                request.num_output_placeholders,
                request.num_in_flight_tokens,
                request.num_stale_output_tokens,
                request.is_prefill_chunk,
                request.first_scheduled_at,
                request.first_token_at,
                request.finished_at,
                list(request.inter_token_latencies_s),
                manager.get_block_ids(request.request_id),
            )
            for request in [*scheduler.running, *scheduler.waiting]
        }
        return {
            "last": self.last,
            "running": [request.request_id for request in scheduler.running],
            "waiting": [request.request_id for request in scheduler.waiting],
            "requests": requests,
            "unfinished": sorted(scheduler.requests),
            "num_free_blocks": manager.num_free_blocks,
            "num_preemptions": scheduler.num_preemptions,
            "cumulative_stats": manager.cumulative_stats,
            "num_evictions": manager.block_pool.num_evictions,
        }


@settings(max_examples=300, deadline=None)
@given(config=configs(), ops=OPS)
def test_native_scheduler_decides_as_the_reference(
    config: SchedulerConfig, ops: list[tuple[Any, ...]]
) -> None:
    reference = EngineLoop(Scheduler(replace(config, core="python"), fast_decode_path=False))
    native_scheduler = make_scheduler(config)
    assert isinstance(native_scheduler, NativeScheduler)
    native = EngineLoop(native_scheduler)
    next_id = 0
    sequences: list[list[int]] = []  # each request's prompt and outputs
    for op in ops:
        if op[0] == "add":
            _, run, prefix_len, tail, num_outputs, source = op
            source_index = source % next_id if source >= 0 and next_id else None
            prompt = SHARED_RUNS[run][:prefix_len] + tail
            if source_index is not None and source % 2 == 0:
                prompt = sequences[source_index] + tail
            prompt = prompt[: config.max_model_len - 1] or [5]
            for loop in (reference, native):
                loop.add(f"r{next_id}", prompt, num_outputs, source_index)
            sequences.append(prompt + planned_outputs(num_outputs))
            next_id += 1
        elif op[0] == "abort":
            if next_id:
                request_id = f"r{op[1] % next_id}"
                aborted = [
                    loop.scheduler.abort_request(request_id, loop.now)
                    for loop in (reference, native)
                ]
                assert (aborted[0] is None) == (aborted[1] is None)
        else:
            for _ in range(op[1]):
                for loop in (reference, native):
                    loop.iterate()
                assert native.state() == reference.state()
    # Drain both: the same finishes in the same iterations until nothing is left.
    for _ in range(2000):
        if not (reference.scheduler.has_unfinished_requests or reference.in_flight):
            break
        for loop in (reference, native):
            loop.iterate()
        assert native.state() == reference.state()
    assert not native.scheduler.has_unfinished_requests and not native.in_flight
    mode = "async" if config.async_scheduling else "sync"
    event(f"{mode}, preempted" if native.scheduler.num_preemptions else f"{mode}, no preemption")


@pytest.mark.parametrize(
    ("changes", "covered"),
    [
        ({}, True),
        ({"async_scheduling": True}, True),
        ({"policy": "priority"}, False),
        ({"core": "python"}, False),
    ],
)
def test_make_scheduler_falls_back_to_the_reference_outside_what_it_covers(
    changes: dict[str, Any], covered: bool
) -> None:
    config = replace(SchedulerConfig(core="native"), **changes)
    scheduler = make_scheduler(config)
    assert isinstance(scheduler, NativeScheduler) is covered
    assert native_scheduler_covers(config, offload=None) is covered
    assert not isinstance(make_scheduler(config, fast_decode_path=False), NativeScheduler)


def test_abort_frees_blocks_and_marks_the_request() -> None:
    """A 10-token prompt on block size 4 holds 3 blocks after its first step; an abort
    returns all of them and the request leaves both queues."""
    scheduler = make_scheduler(SchedulerConfig(num_gpu_blocks=9, block_size=4, core="native"))
    assert isinstance(scheduler, NativeScheduler)
    request = Request("a", list(range(10)), [1, 2], scheduler.hasher)
    scheduler.add_request(request)
    output = scheduler.schedule(0.0)
    assert output.num_scheduled_tokens == {"a": 10}
    assert scheduler.kv_cache_manager.num_free_blocks == 8 - 3
    assert scheduler.abort_request("a", 1.0) is request
    assert request.status is RequestStatus.FINISHED_ABORTED and request.finished_at == 1.0
    assert scheduler.kv_cache_manager.num_free_blocks == 8
    assert scheduler.running == [] and scheduler.waiting == [] and scheduler.requests == {}
    assert scheduler.abort_request("a", 2.0) is None


class TaggedRequest(Request):
    """A Request subclass: the compiled scheduler reads it through the attribute protocol."""

    __slots__ = ("tag",)


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_request_subclass_is_scheduled_alike(async_scheduling: bool) -> None:
    """Six requests (prompts of 6 to 26 tokens, 6 to 11 outputs) on 8 usable blocks of 4
    tokens, 3 sequences at most: the same 30 (sync) or 35 (async) iterations for Request and a
    subclass, with 3 preemptions."""
    config = SchedulerConfig(
        num_gpu_blocks=9,
        block_size=4,
        max_num_seqs=3,
        max_num_batched_tokens=16,
        max_model_len=32,
        async_scheduling=async_scheduling,
        core="native",
    )
    states = []
    for request_type in (Request, TaggedRequest):
        scheduler = make_scheduler(config)
        assert isinstance(scheduler, NativeScheduler)
        loop = EngineLoop(scheduler, request_type)
        for number in range(6):
            loop.add(f"r{number}", list(range(4 * number + 6)), 6 + number)
        trace = []
        while scheduler.has_unfinished_requests or loop.in_flight:
            loop.iterate()
            state = loop.state()
            state["last"].pop("stats", None)
            trace.append(state)
        states.append((trace, scheduler.num_preemptions))
    assert states[0] == states[1]
    assert states[0][1] == 3
    assert len(states[0][0]) == (35 if async_scheduling else 30)
