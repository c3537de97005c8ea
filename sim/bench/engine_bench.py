"""Engine speed: simulated seconds per wall second for an hour of multi-turn chat at 20 req/s.

The scenario is the shipped chat generator (1-8 turns per session, so 4.5 on average) on
Llama-3.1-8B with the H100 profile, block size 16, events off; sessions arrive at
`requests_per_s / 4.5` per second so requests arrive at about `requests_per_s`. The run goes
through `run_scenario`, result files included, as a user's run does; the whole hour is
simulated, never extrapolated from a shorter run.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bench import Figure, Figures
from sim.config import Scenario
from sim.engine import relaxed_garbage_collection
from sim.runner import RunResult, run_scenario

REPO = Path(__file__).resolve().parents[2]


@dataclass(slots=True, frozen=True)
class EngineBenchConfig:
    """The chat traffic and how long it runs."""

    seed: int = 20_261_129
    duration_s: float = 3_600.0
    requests_per_s: float = 20.0
    turns_per_session: tuple[int, int] = (1, 8)
    model: str = "llama-3.1-8b"
    gpu: str = "h100"
    cost_model: str = "h100/llama-3.1-8b/tp1"
    block_size: int = 16
    core: str = "native"

    @property
    def mean_turns_per_session(self) -> float:
        """Turns are uniform over the integers in `turns_per_session`."""
        low, high = self.turns_per_session
        return (low + high) / 2

    @property
    def sessions_per_s(self) -> float:
        """Session arrival rate giving `requests_per_s` requests a second on average."""
        return self.requests_per_s / self.mean_turns_per_session


def chat_scenario_data(config: EngineBenchConfig) -> dict[str, Any]:
    """The benchmark's scenario, as a scenario file would hold it."""
    low, high = config.turns_per_session
    return {
        "name": "bench-engine-chat",
        "seed": config.seed,
        "duration_s": config.duration_s,
        "engine": {"block_size": config.block_size, "core": config.core},
        "deployment": {"model": config.model, "gpu": config.gpu, "tp": 1},
        "cost_model": config.cost_model,
        "workload": {
            "source": {
                "kind": "chat",
                "turns_per_session": {"dist": "uniform", "low": low, "high": high},
            },
            "arrivals": {"process": "poisson", "rate_per_s": config.sessions_per_s},
        },
        "outputs": {"events": False},
    }


def timed_chat_run(config: EngineBenchConfig) -> tuple[RunResult, float, float]:
    """Run the chat scenario into a temporary directory; its result, wall and CPU seconds."""
    scenario = Scenario.model_validate(chat_scenario_data(config))
    with tempfile.TemporaryDirectory(prefix="prefixsim-bench-") as scratch:
        started_at, cpu_before = time.perf_counter(), time.process_time()
        result = run_scenario(scenario, Path(scratch), run_dir=Path(scratch) / "run")
        wall_s, cpu_s = time.perf_counter() - started_at, time.process_time() - cpu_before
    return result, wall_s, cpu_s


def workload_build_cpu_s(config: EngineBenchConfig) -> tuple[float, int]:
    """CPU seconds to generate every request spec the run's workload yields (later turns the
    run drops past `duration_s` included) and its prompt token array, as the engine asks for
    it, and the prompt tokens built. Garbage is collected as seldom as in a run."""
    scenario = Scenario.model_validate(chat_scenario_data(config))
    with relaxed_garbage_collection():
        cpu_before = time.process_time()
        specs = scenario.workload.build(
            seed=scenario.seed, until_s=scenario.duration_s, base_dir=REPO
        )
        num_tokens = sum(len(spec.prompt_token_array()) for spec in specs)
        return time.process_time() - cpu_before, num_tokens


def run_engine_benchmark(config: EngineBenchConfig | None = None) -> Figures:
    """Simulate the chat hour on the native core and on the pure-Python path; report simulated
    seconds per wall second and per CPU second, and the rate achieved."""
    config = config or EngineBenchConfig()
    result, wall_s, cpu_s = timed_chat_run(config)
    _, python_wall_s, python_cpu_s = timed_chat_run(dataclasses.replace(config, core="python"))
    workload_cpu_s, num_prompt_tokens = workload_build_cpu_s(config)
    summary = result.summary
    simulated_s = summary["end_at"]
    return {
        "simulated (arrivals, then drain)": Figure(simulated_s, "s"),
        "wall": Figure(wall_s, "s"),
        "CPU": Figure(cpu_s, "s"),
        "simulated per wall second": Figure(simulated_s / wall_s, "x real time"),
        "simulated per CPU second": Figure(simulated_s / cpu_s, "x real time"),
        "python core: CPU": Figure(python_cpu_s, "s"),
        "python core: simulated per CPU second": Figure(simulated_s / python_cpu_s, "x real time"),
        "request rate (simulated)": Figure(summary["requests_per_s"], "req/s"),
        "requests": Figure(summary["num_requests"]),
        "engine steps": Figure(summary["num_engine_steps"]),
        "engine steps per wall second": Figure(summary["num_engine_steps"] / wall_s, "steps/s"),
        "hit rate": Figure(100.0 * summary["hit_rate"], "%"),
        "workload alone (specs and prompt token arrays): CPU": Figure(workload_cpu_s, "s"),
        "workload alone: prompt tokens": Figure(num_prompt_tokens),
    }
