"""Simulations and cache-only replays relax the cycle collector while they run and always
restore the caller's setting."""

from __future__ import annotations

import gc

import pytest
from engine_fakes import ConstantStepCost
from engine_specs import engine_config, tokens

from sim.engine import simulate
from sim.engine.collector import SIMULATION_GC_THRESHOLDS
from sim.replay.trace_replay import replay_cache_only
from workloads.spec import RequestSpec, Segment


def one_request() -> list[RequestSpec]:
    return [
        RequestSpec.open_loop("r", 0.0, [Segment("user", "u", tokens(1000, 40))], tokens(5000, 3))
    ]


@pytest.fixture
def caller_thresholds():
    """A caller's own thresholds, put back after the test whatever happens."""
    saved = gc.get_threshold()
    gc.set_threshold(1234, 5, 6)
    yield (1234, 5, 6)
    gc.set_threshold(*saved)


def test_thresholds_are_relaxed_during_the_run_and_restored_after(caller_thresholds):
    # Three steps (prefill, two decodes): every progress call sees the relaxed thresholds.
    seen = []
    simulate(
        one_request(),
        engine_config(),
        ConstantStepCost(0.01),
        on_progress=lambda now: seen.append(gc.get_threshold()),
    )
    assert seen == [SIMULATION_GC_THRESHOLDS] * 3
    assert gc.get_threshold() == caller_thresholds


def test_thresholds_are_restored_when_the_run_fails(caller_thresholds):
    def fail(now: float) -> None:
        raise RuntimeError("recorder broke")

    with pytest.raises(RuntimeError, match="recorder broke"):
        simulate(one_request(), engine_config(), ConstantStepCost(0.01), on_progress=fail)
    assert gc.get_threshold() == caller_thresholds


@pytest.mark.parametrize("num_gpu_blocks", [None, 64])
def test_cache_only_replay_reads_its_specs_with_relaxed_thresholds(
    caller_thresholds, num_gpu_blocks
):
    # The spec iterable notes the thresholds each time the replay asks for the next spec.
    seen = []

    def specs():
        for spec in one_request() * 2:
            seen.append(gc.get_threshold())
            yield spec

    result = replay_cache_only(specs(), block_size=16, num_gpu_blocks=num_gpu_blocks)
    assert result.num_requests == 2
    assert seen == [SIMULATION_GC_THRESHOLDS] * 2
    assert gc.get_threshold() == caller_thresholds
