"""Scenario files: `extends:` merging, `--set` overrides, run ids, JSON Schema, YAML 1.1 hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config import load_scenario
from sim.errors import InputError

BASE = """\
name: base-chat
seed: 1
duration_s: 60
engine: {block_size: 16, max_num_seqs: 64}
deployment: {model: llama-3.1-8b, gpu: h100}
workload:
  source: {kind: chat, tenants: [{name: a}, {name: b}]}
  arrivals: {process: poisson, rate_per_s: 2}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_extends_merges_mappings_and_replaces_lists(tmp_path: Path) -> None:
    # The child changes one engine field and the tenants list; everything else comes from base.
    write(tmp_path, "base.yaml", BASE)
    child = write(
        tmp_path,
        "child.yaml",
        "extends: base.yaml\nname: child\nengine: {block_size: 32}\n"
        "workload:\n  source: {kind: chat, tenants: [{name: c}]}\n",
    )
    scenario = load_scenario(child).scenario
    assert scenario.name == "child"
    assert (scenario.engine.block_size, scenario.engine.max_num_seqs) == (32, 64)
    assert [tenant.name for tenant in scenario.workload.source.tenants] == ["c"]
    assert scenario.workload.arrivals.rate_per_s == 2.0


def test_set_overrides_parse_yaml_scalars_and_list_indexes(tmp_path: Path) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    scenario = load_scenario(
        path,
        ["engine.block_size=64", "workload.source.tenants.1.name=z", "engine.policy=priority"],
    ).scenario
    assert scenario.engine.block_size == 64  # an int, not the string "64"
    assert scenario.engine.policy == "priority"
    assert [tenant.name for tenant in scenario.workload.source.tenants] == ["a", "z"]


def test_run_id_is_a_hash_of_the_resolved_config(tmp_path: Path) -> None:
    path = write(tmp_path, "base.yaml", BASE)
    first = load_scenario(path).scenario
    assert first.run_id() == load_scenario(path).scenario.run_id()
    assert len(first.run_id()) == 12
    # Writing a default explicitly resolves to the same config, so to the same run.
    assert load_scenario(path, ["engine.watermark=0.0"]).scenario.run_id() == first.run_id()
    assert load_scenario(path, ["engine.watermark=0.1"]).scenario.run_id() != first.run_id()


def test_cuda_graphs_is_in_the_run_id_only_when_turned_off(tmp_path: Path) -> None:
    """`deployment.cuda_graphs` (default true) came later: at its default it stays out of the
    resolved config, so older scenarios keep their run ids; false is a different run."""
    path = write(tmp_path, "base.yaml", BASE)
    first = load_scenario(path).scenario
    assert "cuda_graphs" not in first.resolved()["deployment"]
    explicit = load_scenario(path, ["deployment.cuda_graphs=true"]).scenario
    assert explicit.run_id() == first.run_id()
    eager = load_scenario(path, ["deployment.cuda_graphs=false"]).scenario
    assert eager.resolved()["deployment"]["cuda_graphs"] is False
    assert eager.run_id() != first.run_id()


def test_an_error_in_a_base_file_names_that_file_and_line(tmp_path: Path) -> None:
    # Line 4 of base.yaml has an unknown engine key; the child that extends it is what was run.
    write(tmp_path, "base.yaml", BASE.replace("max_num_seqs: 64", "max_num_sequences: 64"))
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\n")
    with pytest.raises(InputError) as raised:
        load_scenario(child)
    message = str(raised.value)
    assert f"{tmp_path / 'base.yaml'}:4:" in message
    assert "max_num_sequences" in message and "max_num_seqs" in message


def test_yaml_1_1_exponent_without_a_dot_is_explained(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e3 as the string "1e3", so an integer field gets text.
    path = write(tmp_path, "base.yaml", BASE.replace("max_num_seqs: 64", "max_num_seqs: 1e3"))
    with pytest.raises(InputError, match="YAML 1.1"):
        load_scenario(path)
