"""One trace replay in a process of its own, so its peak memory is its own.

`python -m sim.bench.replay_child JOB_JSON` replays the scenario's trace through the engine
(`run_scenario`, result files in a scratch directory) or the cache alone (`replay_cache_only`
on the scenario's pool), then prints one JSON line: requests replayed, hit rate, wall seconds
of the replay and the program's peak resident memory in bytes (imports included).
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim.config import Scenario
from sim.replay.trace_replay import replay_cache_only
from sim.runner import run_scenario, scheduler_config

REPLAY_PATHS = ("engine", "cache-only")


@dataclass(slots=True, frozen=True)
class ReplayMeasurement:
    """What one replay did and cost."""

    num_requests: int
    hit_rate: float
    wall_s: float
    peak_rss_bytes: int


def peak_rss_bytes() -> int:
    """This program's peak resident set size in bytes.

    Linux carries a parent's footprint at fork into the child's ru_maxrss, across exec, so
    there the program's own high-water mark (VmHWM in /proc/self/status) is read instead.
    """
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes, Linux KiB


def replay(replay_path: str, scenario: Scenario, scratch: Path) -> tuple[int, float]:
    """Replay the scenario's trace; returns the number of requests and the token hit rate."""
    if replay_path == "engine":
        summary = run_scenario(scenario, scratch, run_dir=scratch / "run").summary
        return summary["num_requests"], summary["hit_rate"]
    if replay_path != "cache-only":
        raise ValueError(f"replay path {replay_path!r} is not one of {', '.join(REPLAY_PATHS)}")
    config = scheduler_config(scenario)
    result = replay_cache_only(
        scenario.workload.build(seed=scenario.seed, until_s=None, base_dir=scratch),
        block_size=config.block_size,
        num_gpu_blocks=config.num_gpu_blocks,
        hash_algo=config.hash_algo,
        hash_seed=config.hash_seed,
    )
    return result.num_requests, result.stats.hit_rate


def measure_replay(replay_path: str, scenario_data: dict[str, Any]) -> ReplayMeasurement:
    """Time one replay of the scenario (a trace scenario) along `replay_path`."""
    scenario = Scenario.model_validate(scenario_data)
    with tempfile.TemporaryDirectory(prefix="prefixsim-bench-") as scratch:
        started_at = time.perf_counter()
        num_requests, hit_rate = replay(replay_path, scenario, Path(scratch))
        wall_s = time.perf_counter() - started_at
    return ReplayMeasurement(num_requests, hit_rate, wall_s, peak_rss_bytes())


def main(argv: list[str]) -> int:
    """Run the job given as one JSON argument ({"path": ..., "scenario": {...}}); print JSON."""
    job = json.loads(argv[0])
    measurement = measure_replay(job["path"], job["scenario"])
    print(json.dumps(asdict(measurement)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
