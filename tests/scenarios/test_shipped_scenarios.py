"""Every scenario shipped in scenarios/ is a sweep file that validates into its documented runs.

The study_*.yaml files there are inputs of `prefixsim layout` / `side-channel`, with their own
schema and tests (tests/studies); scenarios/base/ holds the fragment the scenarios extend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.sweep import is_sweep_file, load_sweep

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
# Runs per file: the product of the grid sizes (a zip block counts once) times the seeds.
EXPECTED_RUNS = {
    "agent_tools.yaml": 8,
    "arrival_rate.yaml": 14,
    "block_size.yaml": 12,
    "chat_layout.yaml": 6,
    "models_and_gpus.yaml": 7,
    "mooncake_replay.yaml": 3,
    "rag_documents.yaml": 9,
}


def shipped_scenarios() -> list[Path]:
    """scenarios/*.yaml except the study inputs."""
    return sorted(
        path for path in SCENARIOS_DIR.glob("*.yaml") if not path.name.startswith("study_")
    )


def test_the_documented_scenarios_are_shipped() -> None:
    assert [path.name for path in shipped_scenarios()] == sorted(EXPECTED_RUNS)


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda path: path.name)
def test_scenario_validates_with_its_runs(path: Path) -> None:
    expected_runs = EXPECTED_RUNS[path.name]
    assert is_sweep_file(path)
    plan = load_sweep(path)
    assert len(plan.runs) == expected_runs
    assert len({run.run_id for run in plan.runs}) == expected_runs


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda path: path.name)
def test_scenario_opens_with_the_question_it_answers(path: Path) -> None:
    assert path.read_text().startswith("# Question: ")


def test_every_scenario_runs_llama_8b_on_h100_from_the_shared_base() -> None:
    for path in shipped_scenarios():
        if path.name == "models_and_gpus.yaml":  # varies the deployment itself
            continue
        for run in load_sweep(path).runs:
            deployment = run.scenario.deployment
            assert (deployment.model, deployment.gpu, deployment.tp) == ("llama-3.1-8b", "h100", 1)


def test_mooncake_replay_reads_the_trace_shipped_in_the_repository() -> None:
    trace = load_sweep(SCENARIOS_DIR / "mooncake_replay.yaml").runs[0].scenario.workload.source
    resolved = (SCENARIOS_DIR / trace.path).resolve()
    expected = SCENARIOS_DIR / "data" / "traces" / "mooncake" / "conversation_trace.jsonl.gz"
    assert resolved == expected.resolve() and expected.is_file()
    assert (trace.format, trace.max_requests) == ("mooncake", 600)
