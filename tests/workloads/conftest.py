"""Shared fixtures for the workloads tests: where the real traces live in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES_DIR = REPO / "tests" / "fixtures" / "traces"
# The trace a shipped scenario replays lives with the scenarios, not twice.
SCENARIO_TRACES_DIR = REPO / "scenarios" / "data" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """tests/fixtures/traces: Azure, Dynamo and the Mooncake arXiv sample (see its READMEs)."""
    return TRACES_DIR


@pytest.fixture(scope="session")
def mooncake_conversation_trace() -> Path:
    """The gzipped Mooncake conversation trace that scenarios/mooncake_replay.yaml replays."""
    return SCENARIO_TRACES_DIR / "mooncake" / "conversation_trace.jsonl.gz"
