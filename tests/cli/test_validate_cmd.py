"""`prefixsim validate`: every shipped scenario, sweep and study file validates."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import load_commands

app = load_commands()

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def test_scenarios_folder_has_every_kind_of_file() -> None:
    # 6 comparison sweeps and 6 study files (plan, routing, layout, side channel, eviction).
    names = {path.stem for path in SCENARIOS}
    assert {"chat_layout", "block_size", "rag_documents", "agent_tools"} <= names
    assert {"mooncake_replay", "arrival_rate", "study_layout_advisor"} <= names
    assert {"study_side_channel", "study_eviction", "study_routing"} <= names
    assert "study_capacity_plan" in names


@pytest.mark.parametrize("path", SCENARIOS, ids=[path.stem for path in SCENARIOS])
def test_shipped_file_validates(path: Path) -> None:
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ")
