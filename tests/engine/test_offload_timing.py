"""Transfer timing of the CPU offload tier in simulated time (spec §13.6, §13.7.3, §13.12).

One replica, 5 usable GPU blocks of 16 tokens, 10 ms per step, a host link of 1 GB/s with no
per-job cost and 1 MB per chunk, so one chunk moves in 1 ms. A (64 tokens) is stored; C (64
other tokens) evicts A#1-A#3 from the GPU; D = A's prompt then hits 16 tokens on the GPU and
48 on the CPU tier.
"""

from __future__ import annotations

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


def run() -> dict[str, Request]:
    env = simpy.Environment()
    config = SchedulerConfig(num_gpu_blocks=6, block_size=16, max_model_len=80)
    engine = EngineCore(
        env, config, load_cost_model("constant:0.01"), record_block_events=False, offload=SPEC
    )
    prompts = {"A": list(range(100, 164)), "C": list(range(200, 264)), "D": list(range(100, 164))}
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


def test_a_cpu_hit_waits_for_its_load_then_computes_one_token() -> None:
    requests = run()
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
