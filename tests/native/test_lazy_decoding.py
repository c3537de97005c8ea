"""Lazy decoding in the compiled step loop (LazyDecoders, sim/native/src/scheduler.hpp) changes
nothing anyone can see.

Every run goes through the compiled loop with lazy decoding (its default) and with every request
stepped (`lazy_decoding=False`); the random runs also go through EngineCore's Python loop on the
compiled scheduler, which steps every request. Step records, request records (inter-token
latencies included), block events and, where read mid-run, the requests' own state must be
equal; the schedulers' count of implicit decodes pins that the lazy path ran, and where.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import simpy
from engine.engine_fakes import LINEAR, CollectingRecorder, linear_fitted_on
from engine.engine_specs import RandomSpecs, engine_config, open_spec, random_specs, tokens
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.engine.core as core_module
from sim.engine import EngineCore, request_from_spec, simulate
from sim.routing import make_router
from sim.sched import SchedulerConfig
from workloads.spec import RequestSpec


@contextmanager
def step_loops(lazy: bool) -> Iterator[list[Any]]:
    """Compiled step loops built meanwhile decode lazily or not; yields their SchedulerCores."""
    cores: list[Any] = []
    original = core_module.StepLoop

    def make(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
        cores.append(scheduler)
        return original(scheduler, *args, lazy_decoding=lazy, **kwargs)

    core_module.StepLoop = make  # type: ignore[misc, assignment]
    try:
        yield cores
    finally:
        core_module.StepLoop = original  # type: ignore[misc]


@dataclass(slots=True)
class Run:
    recorder: CollectingRecorder
    num_implicit_decodes: int


def run_specs(
    specs: list[RequestSpec],
    config: SchedulerConfig,
    loop: str,
    *,
    num_replicas: int = 1,
    router: str = "round_robin",
) -> Run:
    """simulate() with events on; `loop` is "lazy", "stepped" (both compiled) or "python"."""
    recorder = CollectingRecorder()
    with step_loops(lazy=loop == "lazy") as cores:
        simulate(
            specs,
            config,
            LINEAR,
            recorder=recorder,
            num_replicas=num_replicas,
            router=make_router(router),
            compiled_loop=loop != "python",
        )
    return Run(recorder, sum(core.num_implicit_decodes for core in cores))


def assert_same_runs(first: Run, second: Run) -> None:
    assert first.recorder.steps == second.recorder.steps
    assert list(first.recorder.requests.items()) == list(second.recorder.requests.items())
    assert first.recorder.block_events == second.recorder.block_events


def lone_decoder(async_scheduling: bool) -> tuple[Run, Run]:
    """One request, a 20-token prompt and 40 outputs, blocks of 8: lazy and stepped."""
    config = engine_config(block_size=8, max_model_len=512, async_scheduling=async_scheduling)
    specs = [open_spec("a", 0.0, tokens(0, 20), 40)]
    return run_specs(specs, config, "lazy"), run_specs(specs, config, "stepped")


def test_a_lone_decoder_is_stepped_only_where_a_block_is_allocated_cached_or_its_output_ends() -> (
    None
):
    # Sync: step 1 prefills 20 tokens (3 blocks, 2 cached) and samples token 1; step k >= 2
    # computes token 18 + k. Lazy windows (block, cache and finish bounds): steps 2-4 (contexts
    # 20-22: step 5 caches block 2 at schedule), then per block of 8 six steps (contexts
    # 25-30, 33-38, 41-46, 49-54: the step at offset 7 caches, the one at offset 0 allocates);
    # steps 39 and 40 are stepped (40 samples the last token). 3 + 4 * 6 = 27 implicit decodes.
    lazy, stepped = lone_decoder(async_scheduling=False)
    assert_same_runs(lazy, stepped)
    assert (lazy.num_implicit_decodes, stepped.num_implicit_decodes) == (27, 0)
    assert len(lazy.recorder.steps) == 40
    assert len(lazy.recorder.requests["a"].inter_token_latencies_s) == 39


def test_a_lone_async_decoder_is_lazy_as_long_and_its_placeholders_balance() -> None:
    # Async: the same windows (a step's sample caches the block the step before filled, so the
    # bound is the same), step 2 scheduled before step 1's sample. Every step is recorded and
    # the request's record (TTFT, each gap) equals the stepped one.
    lazy, stepped = lone_decoder(async_scheduling=True)
    assert_same_runs(lazy, stepped)
    assert (lazy.num_implicit_decodes, stepped.num_implicit_decodes) == (27, 0)
    assert len(lazy.recorder.steps) == 40


def test_the_longest_lazy_context_reaches_the_cost_models_range_check() -> None:
    # The lone sync decoder under a model fitted on contexts up to 50 (a fresh model per loop:
    # each warns once): context 50 (step 32) is decoded lazily, and its step (longest context
    # 51) is the first out of range, in both loops, with the same message.
    config = engine_config(block_size=8, max_model_len=512)
    specs = [open_spec("a", 0.0, tokens(0, 20), 40)]
    messages = []
    for loop in ("lazy", "stepped"):
        model = linear_fitted_on(longest_context=(0, 50))
        with warnings.catch_warnings(record=True) as caught, step_loops(lazy=loop == "lazy"):
            warnings.simplefilter("always")
            simulate(specs, config, model, recorder=CollectingRecorder())
        messages.append([str(warning.message) for warning in caught])
    assert (
        messages[0]
        == messages[1]
        == [
            "test profile: step outside the range it was fitted on (longest_context=51 not in "
            "[0, 50]); the prediction is an extrapolation (warned once per model)"
        ]
    )


def test_caching_off_lets_a_decoder_run_lazy_to_its_blocks_end() -> None:
    # Without prefix caching only allocation and the finish bound a window: contexts 20-23,
    # then 25-31, 33-39, 41-47, 49-55 (offset 0 allocates), and 57 alone is too short (the
    # last token is sampled at step 40). 4 + 4 * 7 = 32.
    config = engine_config(block_size=8, max_model_len=512, enable_caching=False)
    specs = [open_spec("a", 0.0, tokens(0, 20), 40)]
    lazy, stepped = run_specs(specs, config, "lazy"), run_specs(specs, config, "stepped")
    assert_same_runs(lazy, stepped)
    assert lazy.num_implicit_decodes == 32


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_preemption_with_lazy_requests_running(async_scheduling: bool) -> None:
    # Six requests with 60-token prompts and 60 outputs on 20 usable blocks of 8 (160 tokens):
    # decoders grow until a block cannot be had, and the last running request is preempted
    # while the others decode lazily; each such step brings them all up to date first.
    config = engine_config(
        block_size=8, num_gpu_blocks=21, max_model_len=160, async_scheduling=async_scheduling
    )
    specs = [open_spec(f"r{i}", 0.01 * i, tokens(1000 * i, 60), 60) for i in range(6)]
    lazy, stepped = run_specs(specs, config, "lazy"), run_specs(specs, config, "stepped")
    assert_same_runs(lazy, stepped)
    num_preempted = sum(record.num_preemptions for record in lazy.recorder.requests.values())
    assert num_preempted > 0
    assert lazy.num_implicit_decodes > 0
    assert len(lazy.recorder.requests) == 6


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_step_short_of_budget_brings_the_lazy_requests_up_to_date(
    async_scheduling: bool,
) -> None:
    # Four decoders run lazily; then a 300-token prompt arrives under a 64-token budget with
    # chunked prefill: while its chunks run, the running pass would take the whole budget, so
    # every such step materializes the lazy requests and lets them go lazy again after.
    config = engine_config(
        block_size=8,
        max_model_len=512,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        async_scheduling=async_scheduling,
    )
    specs = [open_spec(f"d{i}", 0.0, tokens(100 * i, 20), 50) for i in range(4)]
    specs.append(open_spec("long", 0.1, tokens(5000, 300), 5))
    lazy, stepped = run_specs(specs, config, "lazy"), run_specs(specs, config, "stepped")
    assert_same_runs(lazy, stepped)
    assert lazy.num_implicit_decodes > 0
    prefill_steps = [step for step in lazy.recorder.steps if step.num_prefill_tokens]
    assert any(step.num_prefill_tokens + step.num_decode_tokens == 64 for step in prefill_steps)


def engine_run(
    loop: str, async_scheduling: bool, action: Callable[[EngineCore], Any], at: float
) -> tuple[CollectingRecorder, Any, int]:
    """One engine with three 40-output requests (blocks of 8); `action(engine)` runs at `at`
    from a SimPy process; returns the recorder, what the action returned and the implicit
    decodes."""
    env = simpy.Environment()
    recorder = CollectingRecorder()
    config = engine_config(block_size=8, max_model_len=512, async_scheduling=async_scheduling)
    with step_loops(lazy=loop == "lazy") as cores:
        engine = EngineCore(env, config, LINEAR, recorder=recorder)
    for index in range(3):
        spec = open_spec(f"r{index}", 0.0, tokens(100 * index, 20), 40)
        engine.submit(request_from_spec(spec, engine.hasher, 0.0))
    seen: list[Any] = []

    def act() -> Generator[simpy.Event, Any, None]:
        yield env.timeout(at)
        seen.append(action(engine))

    env.process(act())
    env.run()
    return recorder, seen[0], sum(core.num_implicit_decodes for core in cores)


def request_state(request: Any) -> tuple[Any, ...]:
    """What the scheduler keeps of a request, as Python sees it."""
    return (
        list(request.all_token_ids),
        request.num_computed_tokens,
        list(request.inter_token_latencies_s),
        request.last_token_at,
        request.num_output_placeholders,
        request.num_in_flight_tokens,
        len(request.block_hashes),
    )


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_an_abort_brings_a_lazy_request_up_to_date_first(async_scheduling: bool) -> None:
    # At 0.2 s (step 14 or so, the requests mid-block and lazy) request r1 is aborted: its
    # state as the abort returns it, and everything recorded after, equal the stepped loop's.
    def abort(engine: EngineCore) -> tuple[Any, ...]:
        request = engine.scheduler.abort_request("r1", 0.2)
        assert request is not None
        return request_state(request)

    lazy, lazy_state, num_implicit = engine_run("lazy", async_scheduling, abort, 0.2)
    stepped, stepped_state, _ = engine_run("stepped", async_scheduling, abort, 0.2)
    assert lazy_state == stepped_state
    assert lazy.steps == stepped.steps
    assert lazy.requests == stepped.requests
    assert sorted(lazy.requests) == ["r0", "r2"]
    assert num_implicit > 0
    assert 5 < len(lazy_state[2]) < 39  # aborted mid-decode


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_reading_the_running_list_or_queued_tokens_mid_run_sees_the_stepped_state(
    async_scheduling: bool,
) -> None:
    # At 0.2 s Python reads the queued tokens (lazy requests counted from their stored state)
    # and the running list (every lazy request brought up to date, mid-flight steps included).
    def read(engine: EngineCore) -> tuple[Any, ...]:
        scheduler = engine.scheduler
        queued = scheduler.num_queued_tokens
        return queued, [request_state(request) for request in scheduler.running]

    lazy, lazy_seen, num_implicit = engine_run("lazy", async_scheduling, read, 0.2)
    stepped, stepped_seen, _ = engine_run("stepped", async_scheduling, read, 0.2)
    assert lazy_seen == stepped_seen
    # Async: one token each, the sample in flight counted as one; sync: the step in flight at
    # 0.2 s has computed each request's token, not yet sampled.
    assert lazy_seen[0] == (3 if async_scheduling else 0)
    assert len(lazy_seen[1]) == 3
    assert lazy.steps == stepped.steps
    assert lazy.requests == stepped.requests
    assert num_implicit > 0


def test_python_cannot_step_a_scheduler_its_compiled_loop_decodes_lazily() -> None:
    env = simpy.Environment()
    engine = EngineCore(env, engine_config(), LINEAR, recorder=CollectingRecorder())
    with pytest.raises(RuntimeError, match="run by its compiled step loop"):
        engine.scheduler.schedule(0.0)


@st.composite
def random_runs(draw: st.DrawFn) -> tuple[list[RequestSpec], SchedulerConfig, dict[str, Any]]:
    """Open-loop requests and two-turn sessions with outputs long enough to decode lazily
    across block boundaries; small blocks, budgets, pools and max_model_len so that steps run
    short, requests are preempted and hit the length cap; prefill held back or not; caching on
    and off; sync and async scheduling."""
    block_size = draw(st.sampled_from([4, 8, 16]))
    max_model_len = draw(st.sampled_from([96, 200]))
    min_num_blocks = max_model_len // block_size + 2
    config = engine_config(
        block_size=block_size,
        num_gpu_blocks=draw(st.sampled_from([min_num_blocks, min_num_blocks + 8, 400])),
        max_model_len=max_model_len,
        max_num_batched_tokens=draw(st.sampled_from([32, 96, 2048])),
        max_num_seqs=draw(st.sampled_from([3, 32])),
        long_prefill_token_threshold=draw(st.sampled_from([0, 24])),
        prefill_schedule_interval=draw(st.sampled_from([1, 3])),
        enable_caching=draw(st.booleans()),
        async_scheduling=draw(st.booleans()),
    )
    specs = random_specs(
        draw,
        RandomSpecs(
            num_first_turns=st.integers(1, 12),
            gaps_s=st.sampled_from([0.0, 0.0, 0.01, 0.05, 0.3]),
            prompt_lengths=st.integers(1, 70),
            num_outputs=st.integers(1, 120),
            num_second_turn_outputs=st.integers(1, 40),
            think_times_s=st.sampled_from([0.0, 0.01]),
        ),
    )
    options = {
        "num_replicas": draw(st.integers(1, 2)),
        "router": draw(st.sampled_from(["round_robin", "least_loaded"])),
    }
    return specs, config, options


@settings(max_examples=80, deadline=None)
@given(random_runs())
def test_lazy_stepped_and_python_loops_agree_on_random_runs(
    run: tuple[list[RequestSpec], SchedulerConfig, dict[str, Any]],
) -> None:
    specs, config, options = run
    lazy = run_specs(specs, config, "lazy", **options)
    assert_same_runs(lazy, run_specs(specs, config, "stepped", **options))
    assert_same_runs(lazy, run_specs(specs, config, "python", **options))
