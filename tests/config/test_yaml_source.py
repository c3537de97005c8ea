"""Resolved configs written as YAML: libyaml's emitter, where PyYAML has it, writes the same text
as the pure-Python one for every shipped file, the resolved scenarios and sweeps among them, and
the text loads back to the same document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.config import load_scenario, yaml_text
from sim.errors import InputError
from sim.sweep import load_sweep
from sim.sweep.expand import is_sweep_file

REPO_DIR = Path(__file__).resolve().parents[2]
SHIPPED_FILES = sorted((REPO_DIR / "scenarios").rglob("*.yaml"))


def documents_written_for(path: Path) -> list[Any]:
    """The file as read, and the resolved configs a run or a sweep of it writes."""
    documents: list[Any] = [yaml.safe_load(path.read_text())]
    try:
        if is_sweep_file(path):
            plan = load_sweep(path)
            documents.append({**plan.base_data, "sweep": plan.spec.as_data()})
            documents.extend(run.scenario.resolved() for run in plan.runs)
        else:
            documents.append(load_scenario(path).scenario.resolved())
    except InputError:
        pass  # a base or study file: not a scenario on its own
    return documents


def test_every_shipped_file_is_compared() -> None:
    assert len(SHIPPED_FILES) == 16
    resolved = [path.name for path in SHIPPED_FILES if len(documents_written_for(path)) > 1]
    assert {"arrival_rate.yaml", "block_size.yaml", "mooncake_replay.yaml"} <= set(resolved)


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda path: path.name)
def test_libyaml_writes_the_pure_python_text(path: Path) -> None:
    for document in documents_written_for(path):
        text = yaml_text(document)
        assert text == yaml_text(document, dumper=yaml.SafeDumper)
        assert yaml.safe_load(text) == document


def test_the_fast_emitter_is_used_where_pyyaml_has_it() -> None:
    # A plain mapping in written order, as a run's config.resolved.yaml is made.
    text = yaml_text({"name": "chat", "seed": 7, "engine": {"block_size": 16, "core": "native"}})
    assert text == "name: chat\nseed: 7\nengine:\n  block_size: 16\n  core: native\n"
    expected = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper
    assert yaml_text.__kwdefaults__ == {"dumper": expected}
