"""Transfer timing of the CPU offload tier in simulated time (spec §13.6, §13.7.3, §13.12).

One replica, 5 usable GPU blocks of 16 tokens, 10 ms per step, a host link of 1 GB/s with no
per-job cost and 1 MB per chunk, so one chunk moves in 1 ms. A (64 tokens) is stored; C (64
other tokens) evicts A#1-A#3 from the GPU; D = A's prompt then hits 16 tokens on the GPU and
48 on the CPU tier.
"""

from __future__ import annotations

import dataclasses

import pytest
import simpy

from sim.costmodel import load_cost_model
from sim.costmodel.transfer import HostLink
from sim.engine import EngineCore
from sim.engine.offload import OffloadSpec
from sim.sched import Request, SchedulerConfig

LINK = HostLink("test", 1e9, 1.0, 0.0)
SPEC = OffloadSpec(
    num_chunks=16, policy="lru", prompt_only=True, link=LINK, chunk_bytes_per_gpu=10**6
)


def run(
    *, async_scheduling: bool = False, spec: OffloadSpec = SPEC, d_extra: int = 0
) -> dict[str, Request]:
    env = simpy.Environment()
    config = SchedulerConfig(
        num_gpu_blocks=6, block_size=16, max_model_len=80, async_scheduling=async_scheduling
    )
    engine = EngineCore(
        env, config, load_cost_model("constant:0.01"), record_block_events=False, offload=spec
    )
    prompts = {
        "A": list(range(100, 164)),
        "C": list(range(200, 264)),
        "D": list(range(100, 164)) + list(range(900, 900 + d_extra)),
    }
    requests: dict[str, Request] = {}

    def arrivals():
        for name, at in (("A", 0.0), ("C", 0.1), ("D", 0.2)):
            yield env.timeout(at - env.now)
            request = Request(name, prompts[name], [1], engine.hasher, arrival_at=env.now)
            requests[name] = request
            engine.submit(request)

    env.process(arrivals())
    env.run(until=1.0)
    return requests


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_cpu_hit_waits_for_its_load_then_computes_one_token(async_scheduling: bool) -> None:
    # With async scheduling the steps around the load are empty and take no time, so the
    # extra step a load costs there (spec §13.7.3) costs no time here.
    requests = run(async_scheduling=async_scheduling)
    d = requests["D"]
    # Admitted at 0.2 as an async load of 3 chunks (3 ms), reported at 0.203 and scheduled
    # then with 1 token to recompute: its first token comes one 10 ms step later.
    assert d.first_scheduled_at == pytest.approx(0.203)
    assert d.first_token_at == pytest.approx(0.213)
    assert (d.num_host_cached_tokens, d.num_cached_tokens) == (48, 63)
    assert d.num_computed_prefill_tokens == 1


def test_stores_run_after_the_forward_that_computed_them() -> None:
    requests = run()
    # A's prefill is one 10 ms step; it finishes at 0.01 and its 4-chunk store ends at 0.014,
    # long before D looks it up.
    assert requests["A"].first_token_at == pytest.approx(0.01)
    assert requests["C"].num_host_cached_tokens == 0


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_sync_load_runs_inside_the_admitting_step(async_scheduling: bool) -> None:
    """D = A's prompt + 6 tokens. A budget of 3 chunks' bytes (one GPU's: 48 tokens x 62,500 B)
    makes its CPU hit a sync load (spec §13.7.6): D is scheduled at once at 0.2, its step waits
    3 ms for the copy and computes 6 tokens in 10 ms."""
    spec = dataclasses.replace(SPEC, sync_load_budget_bytes=3 * 10**6)
    d = run(async_scheduling=async_scheduling, spec=spec, d_extra=6)["D"]
    assert d.first_scheduled_at == pytest.approx(0.2)
    assert d.first_token_at == pytest.approx(0.213)
    assert (d.num_host_cached_tokens, d.num_cached_tokens) == (48, 64)
    assert d.num_computed_prefill_tokens == 6


def test_no_sync_load_over_the_budget_or_without_a_token_to_compute() -> None:
    """One byte short of the budget, D (+6 tokens) loads async and is scheduled when the load
    is reported, 3 ms later; D = A's prompt exactly would leave nothing to compute once
    loaded, so even a large budget keeps its hit async."""
    short = dataclasses.replace(SPEC, sync_load_budget_bytes=3 * 10**6 - 1)
    assert run(spec=short, d_extra=6)["D"].first_scheduled_at == pytest.approx(0.203)
    large = dataclasses.replace(SPEC, sync_load_budget_bytes=10**9)
    assert run(spec=large)["D"].first_scheduled_at == pytest.approx(0.203)
