"""The engine benchmark's chat scenario (counts only; timings are never asserted)."""

from __future__ import annotations

import pytest

from sim.bench.engine_bench import EngineBenchConfig, chat_scenario_data, run_engine_benchmark
from sim.config import Scenario


def test_default_scenario_is_an_hour_of_20_requests_per_second():
    """1-8 turns (4.5 on average) at 20 / 4.5 sessions/s; H100 profile, block 16, no events."""
    config = EngineBenchConfig()
    assert config.mean_turns_per_session == 4.5
    assert config.sessions_per_s == pytest.approx(20 / 4.5)
    scenario = Scenario.model_validate(chat_scenario_data(config))
    assert scenario.duration_s == 3600.0
    assert scenario.cost_model == "h100/llama-3.1-8b/tp1"
    assert (scenario.deployment.model, scenario.deployment.gpu) == ("llama-3.1-8b", "h100")
    assert scenario.engine.block_size == 16
    assert scenario.outputs.events is False
    assert scenario.workload.arrivals.rate_per_s == pytest.approx(20 / 4.5)


def test_short_run_reports_its_counts():
    """20 s of chat at 4 req/s (seed 20261129), shipped front end on, async scheduling: 24
    requests finish by 20.915 s in 1513 steps (later turns fall after the 20 s window, so the
    rate is far below 4 on so short a run)."""
    figures = run_engine_benchmark(EngineBenchConfig(duration_s=20.0, requests_per_s=4.0))
    assert {name: figure.unit for name, figure in figures.items()} == {
        "simulated (arrivals, then drain)": "s",
        "wall": "s",
        "CPU": "s",
        "simulated per wall second": "x real time",
        "simulated per CPU second": "x real time",
        "python core: CPU": "s",
        "python core: simulated per CPU second": "x real time",
        "request rate (simulated)": "req/s",
        "requests": "",
        "engine steps": "",
        "engine steps per wall second": "steps/s",
        "hit rate": "%",
        "workload alone (specs and prompt token arrays): CPU": "s",
        "workload alone: prompt tokens": "",
    }
    assert figures["requests"].value == 24
    # Every spec the workload yields: 89 turns of the sessions that start within 20 s.
    assert figures["workload alone: prompt tokens"].value == 111_787
    assert figures["engine steps"].value == 1513
    assert figures["simulated (arrivals, then drain)"].value == 20.914906265
    assert figures["request rate (simulated)"].value == pytest.approx(24 / 20.914906265)
    assert figures["hit rate"].value == pytest.approx(81.4538086)
