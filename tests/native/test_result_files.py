"""Both cache cores write byte-identical result files.

The scenarios of the engine's fast-path equivalence test, in the scheduling modes it runs them
(preemption, priority, chunked prefill, a small running set, two prefix-aware replicas, mixed
tenants with salts, LoRA and prompt logprobs, caching off; async and sync), and the first run of
every shipped sweep, cut to 30 simulated seconds (a trace to its first 60 requests), and the
CPU offload runs (a chat on a small GPU cache with a 1 GiB tier, async and sync; the three
shipped offload study scenarios with their first probe's tier), run with `engine.core: python`
and `native`; every file of the run directory must be equal byte for byte.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from sim.config import Scenario, load_scenario
from sim.runner import RunResult, run_scenario
from sim.sweep.expand import load_sweep

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "fast_path_scenarios", REPO / "tests" / "engine" / "test_fast_path_equivalence.py"
)
assert _spec is not None and _spec.loader is not None
fast_path_scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fast_path_scenarios)

SWEEPS = sorted(
    path
    for path in (REPO / "scenarios").glob("*.yaml")
    if "sweep:" in path.read_text() and not path.name.startswith("study_")
)


def run_on_core(data: dict[str, Any], core: str, base_dir: Path, run_dir: Path) -> RunResult:
    """Run the scenario `data` on one core."""
    engine = {**data.get("engine", {}), "core": core}
    scenario = Scenario.model_validate({**data, "engine": engine})
    return run_scenario(scenario, base_dir, run_dir=run_dir)


def assert_identical_runs(first: RunResult, second: RunResult) -> None:
    """Same file names, every file byte-identical (the resolved config leaves the core out)."""
    names = sorted(path.name for path in first.run_dir.iterdir())
    assert names == sorted(path.name for path in second.run_dir.iterdir())
    assert "summary.json" in names and "requests.parquet" in names
    for name in names:
        assert (first.run_dir / name).read_bytes() == (second.run_dir / name).read_bytes(), name


# The preempting chat stays in the fast lane in both scheduling modes; the rest run in
# make test-all, as in the fast-path test.
@pytest.mark.parametrize(
    ("name", "async_scheduling"),
    [
        key if key[0] == "chat-preempting" else pytest.param(*key, marks=pytest.mark.slow)
        for key in fast_path_scenarios.EXPECTED_COUNTS
    ],
)
def test_engine_scenarios_write_identical_files(
    name: str, async_scheduling: bool, tmp_path: Path
) -> None:
    scenario = fast_path_scenarios.SCENARIOS[name]
    data = {
        "name": name,
        "seed": 3,
        "duration_s": 30,
        "cost_model": fast_path_scenarios.PROFILE,
        **scenario,
        "engine": {**scenario.get("engine", {}), "async_scheduling": async_scheduling},
    }
    python = run_on_core(data, "python", tmp_path, tmp_path / "python")
    native = run_on_core(data, "native", tmp_path, tmp_path / "native")
    assert_identical_runs(python, native)
    summary = native.summary
    expected = fast_path_scenarios.EXPECTED_COUNTS[name, async_scheduling]
    assert (summary["num_requests"], summary["num_preemptions"]) == expected


def shortened_run_on_both_cores(scenario: Scenario, base_dir: Path, tmp_path: Path) -> RunResult:
    """Run `scenario` cut to 60 trace requests or 30 s, no warm-up, on both cores; assert their
    result files are identical and return the native run."""
    data = scenario.model_dump(mode="json")
    source = data["workload"]["source"]
    data["warmup_s"] = 0
    if source["kind"] == "trace":
        source["max_requests"] = 60
    else:
        data["duration_s"] = 30
    python = run_on_core(data, "python", base_dir, tmp_path / "python")
    native = run_on_core(data, "native", base_dir, tmp_path / "native")
    assert_identical_runs(python, native)
    return native


@pytest.mark.slow
@pytest.mark.parametrize("sweep", SWEEPS, ids=[path.stem for path in SWEEPS])
def test_shipped_sweeps_write_identical_files(sweep: Path, tmp_path: Path) -> None:
    plan = load_sweep(sweep)
    native = shortened_run_on_both_cores(plan.runs[0].scenario, plan.base_dir, tmp_path)
    assert native.summary["num_requests"] > 0


OFFLOAD_CHAT = {
    "name": "offload-chat",
    "seed": 3,
    "duration_s": 30,
    "warmup_s": 5,
    "deployment": {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1},
    "cost_model": "auto",
    "engine": {"block_size": 16, "num_gpu_blocks": 300, "max_model_len": 4096},
    "workload": {
        "source": {"kind": "chat", "common": {"system_prompt_tokens": 512}},
        "arrivals": {"process": "poisson", "rate_per_s": 2.0},
    },
    "outputs": {"events": True, "scrape_interval_s": 5},
}


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_offload_runs_write_identical_files(async_scheduling: bool, tmp_path: Path) -> None:
    engine = {
        **OFFLOAD_CHAT["engine"],
        "async_scheduling": async_scheduling,
        "kv_offloading_size": 1,
    }
    data = {**OFFLOAD_CHAT, "engine": engine}
    python = run_on_core(data, "python", tmp_path, tmp_path / "python")
    native = run_on_core(data, "native", tmp_path, tmp_path / "native")
    assert_identical_runs(python, native)
    assert native.summary["num_external_hits"] > 0


OFFLOAD_STUDIES = sorted((REPO / "scenarios").glob("study_offload_*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("study", OFFLOAD_STUDIES, ids=[path.stem for path in OFFLOAD_STUDIES])
def test_offload_study_scenarios_write_identical_files(study: Path, tmp_path: Path) -> None:
    loaded = load_scenario(study, ["engine.kv_offloading_size=2"])
    native = shortened_run_on_both_cores(loaded.scenario, loaded.base_dir, tmp_path)
    assert native.summary["offload_num_chunks"] > 0
