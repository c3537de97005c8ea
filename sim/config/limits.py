"""Sizes a run may ask for: refused up front, with the estimate and the way round, instead of a
run that hangs for days or fills memory.

The simulator skips idle time, so what costs is what happens: arrivals (each one a request to
build, schedule and record), metric scrapes (one per `outputs.scrape_interval_s` of simulated
time), KV pool blocks, tokens per request, and runs per sweep.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from sim.config.scenario import Scenario
from sim.config.workload import (
    GammaSettings,
    GeneratorSourceSettings,
    MixSource,
    PiecewiseSettings,
    PoissonSettings,
    TraceSource,
)
from sim.errors import InputError
from sim.kvcache import BYTES_PER_BLOCK, MAX_NUM_GPU_BLOCKS, pool_size_problem
from workloads.api import RequestSpec, shortest_prompt_tokens

MAX_ARRIVALS = 100_000_000
MAX_SCRAPES = 10_000_000
MAX_TOKENS_PER_REQUEST = 2**24  # as the trace readers allow
DEFAULT_MAX_RUNS = 10_000
# What a measured request leaves on disk, events included (requests, steps, events, metrics).
RESULT_BYTES_PER_REQUEST = 2048


def expected_arrivals(scenario: Scenario) -> float | None:
    """Arrivals the arrival process brings in `duration_s` (at most `num_arrivals`); None for a
    trace, whose length is its file's."""
    workload = scenario.workload
    arrivals = workload.arrivals
    if arrivals is None:
        return None
    count = math.inf
    if scenario.duration_s is not None:
        count = _arrivals_within(arrivals, scenario.duration_s)
    if workload.num_arrivals is not None:
        count = min(count, workload.num_arrivals)
    return count


def _arrivals_within(
    arrivals: PoissonSettings | GammaSettings | PiecewiseSettings, duration_s: float
) -> float:
    if isinstance(arrivals, PoissonSettings | GammaSettings):
        return arrivals.rate_per_s * duration_s
    count, start = 0.0, 0.0
    cycle_s = sum(piece.duration_s for piece in arrivals.pieces)
    cycle_count = sum(piece.duration_s * piece.rate_per_s for piece in arrivals.pieces)
    if arrivals.repeat:
        full_cycles = math.floor(duration_s / cycle_s)
        count, start = full_cycles * cycle_count, full_cycles * cycle_s
    for piece in arrivals.pieces:
        overlap = min(piece.duration_s, max(0.0, duration_s - start))
        count += overlap * piece.rate_per_s
        start += piece.duration_s
    return count


def _simulated_span_s(scenario: Scenario, arrivals_count: float | None) -> float | None:
    if scenario.duration_s is not None:
        return scenario.duration_s
    arrivals = scenario.workload.arrivals
    if arrivals_count is None or arrivals is None:
        return None
    if isinstance(arrivals, PoissonSettings | GammaSettings):
        return arrivals_count / arrivals.rate_per_s
    cycle_s = sum(piece.duration_s for piece in arrivals.pieces)
    cycle_count = sum(piece.duration_s * piece.rate_per_s for piece in arrivals.pieces)
    return arrivals_count / cycle_count * cycle_s


def check_scenario_limits(scenario: Scenario) -> None:
    """Refuse a scenario whose arrivals, simulated time, pool or prompts are beyond the limits."""
    count = expected_arrivals(scenario)
    if count is not None and count > MAX_ARRIVALS:
        within = (
            f"in duration_s {scenario.duration_s:g}"
            if scenario.duration_s is not None
            else "from workload.num_arrivals"
        )
        raise InputError(
            f"workload.arrivals: about {count:.3g} arrivals {within} is more than the limit of "
            f"{MAX_ARRIVALS:,}; shorten duration_s, lower the rate or set workload.num_arrivals"
        )
    span_s = _simulated_span_s(scenario, count)
    if span_s is not None:
        check_scrape_count(span_s, scenario.outputs.scrape_interval_s, "duration_s")
    max_model_len = scenario.engine.max_model_len
    if max_model_len > MAX_TOKENS_PER_REQUEST:
        raise InputError(
            f"engine.max_model_len: {max_model_len:,} is more than the limit of "
            f"{MAX_TOKENS_PER_REQUEST:,} tokens per request"
        )
    source = scenario.workload.source
    for field, shortest in _prompt_floors(source, "workload.source"):
        if shortest >= max_model_len:
            raise InputError(
                f"{field}: every prompt holds at least {shortest:,} tokens (shared parts and the "
                "shortest sampled ones), not fewer than engine.max_model_len, so every request "
                "would be rejected; "
                + too_long_remedy(max_model_len, scenario.deployment.model_spec.context_length)
            )


GROW_CACHE = "give the KV cache more memory and raise engine.max_model_len"


def too_long_remedy(
    max_model_len: int,
    model_context: int | None,
    pool_tokens: int | None = None,
    grow_cache: str = GROW_CACHE,
) -> str:
    """What to do about prompts of max_model_len tokens or more: raise max_model_len, unless it
    is the model's whole context already (`model_context`; None where the config names none)
    or all the KV cache holds (`pool_tokens`; None where the cache is not sized yet), where
    `grow_cache` says how the cache is made bigger."""
    if model_context is not None and max_model_len >= model_context:
        return (
            f"shorten the prompts (engine.max_model_len {max_model_len:,} is the model's whole "
            "context already)"
        )
    if pool_tokens is not None and max_model_len >= pool_tokens:
        return f"shorten the prompts, or {grow_cache} ({max_model_len:,} is all the cache holds)"
    return f"raise engine.max_model_len ({max_model_len:,}) or shorten the prompts"


def check_scrape_count(span_s: float, scrape_interval_s: float, what: str) -> None:
    """Refuse a simulated span that needs more than MAX_SCRAPES metric scrapes."""
    num_scrapes = span_s / scrape_interval_s
    if num_scrapes > MAX_SCRAPES:
        raise InputError(
            f"{what}: {span_s:.3g} simulated seconds at outputs.scrape_interval_s "
            f"{scrape_interval_s:g} is {num_scrapes:.3g} metric scrapes, more than the limit of "
            f"{MAX_SCRAPES:,}; simulate less time or raise outputs.scrape_interval_s"
        )


def _prompt_floors(source: Any, field: str) -> Iterator[tuple[str, int]]:
    """(field, tokens every prompt of the source holds at least) for each generator in it."""
    if isinstance(source, MixSource):
        for index, component in enumerate(source.components):
            yield from _prompt_floors(component.source, f"{field}.components.{index}.source")
    elif isinstance(source, GeneratorSourceSettings):
        yield field, shortest_prompt_tokens(source.build())


def estimated_result_bytes(scenario: Scenario) -> int:
    """A rough upper estimate of the run's result files, for the free-space check."""
    count = expected_arrivals(scenario)
    if count is None or not math.isfinite(count):
        return 0
    return int(count * RESULT_BYTES_PER_REQUEST)


def check_pool_size(num_gpu_blocks: int, option: str) -> None:
    """Refuse a KV pool size a command was given that the pool cannot be built with."""
    if not 2 <= num_gpu_blocks <= MAX_NUM_GPU_BLOCKS:
        raise InputError(f"{option}: {pool_size_problem(num_gpu_blocks)}")


def check_total_pool(blocks_per_replica: int, num_replicas: int) -> None:
    """Refuse replicas whose pools together are more blocks than one pool may have."""
    total = blocks_per_replica * num_replicas
    if num_replicas > 1 and total > MAX_NUM_GPU_BLOCKS:
        raise InputError(
            f"deployment.replicas: {num_replicas} replicas x {blocks_per_replica:,} KV blocks is "
            f"{total:,} blocks, more than the {MAX_NUM_GPU_BLOCKS:,} a run may simulate (about "
            f"{total * BYTES_PER_BLOCK / 2**30:.1f} GiB of memory); lower deployment.replicas or "
            "engine.num_gpu_blocks"
        )


def check_sweep_size(num_runs: int, max_runs: int, describe: str) -> None:
    """Refuse a sweep of more than `max_runs` runs before expanding it."""
    if num_runs > max_runs:
        raise InputError(
            f"{describe} is {num_runs:,} runs, more than the limit of {max_runs:,}; use fewer "
            "values or seeds, or pass --max-runs to allow more"
        )


def bounded_trace(
    specs: Iterable[RequestSpec], source: TraceSource, scrape_interval_s: float
) -> Iterator[RequestSpec]:
    """The trace's requests, stopping with an error at the first past the count or time limits."""
    max_span_s = MAX_SCRAPES * scrape_interval_s
    for index, spec in enumerate(specs):
        if index >= MAX_ARRIVALS:
            raise InputError(
                f"workload.source: the trace holds more than {MAX_ARRIVALS:,} requests, the "
                "limit; set workload.source.max_requests"
            )
        if spec.arrival_at is not None and spec.arrival_at > max_span_s:
            raise InputError(
                f"workload.source: trace request {index + 1} arrives at "
                f"{spec.arrival_at:.3g} simulated seconds (speedup {source.speedup:g}), past "
                f"the limit of {max_span_s:.3g} s ({MAX_SCRAPES:,} scrapes of "
                "outputs.scrape_interval_s); raise speedup or outputs.scrape_interval_s, or set "
                "max_requests"
            )
        yield spec
