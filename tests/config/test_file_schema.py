"""`prefixsim schema`: one JSON Schema that every shipped scenario, sweep, base and study file
satisfies, with a description on every field, enums for GPUs, models, routers and hash
algorithms, and the models' real defaults."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import load_commands
from sim.cli.file_schema import FIELD_DESCRIPTIONS, file_json_schema

REPO_DIR = Path(__file__).resolve().parents[2]
SHIPPED_FILES = sorted((REPO_DIR / "scenarios").rglob("*.yaml"))


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("schema") / "prefixsim.schema.json"
    result = CliRunner().invoke(load_commands(["schema"]), ["schema", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_the_command_writes_the_file_schema(schema: dict) -> None:
    assert schema == json.loads(json.dumps(file_json_schema()))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_sixteen_shipped_files_are_checked() -> None:
    names = [str(path.relative_to(REPO_DIR / "scenarios")) for path in SHIPPED_FILES]
    assert len(names) == 16  # with the three offload studies
    assert {"base/h100_llama8b.yaml", "arrival_rate.yaml", "study_side_channel.yaml"} <= set(names)


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda path: path.name)
def test_every_shipped_file_validates(schema: dict, path: Path) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = [error.message for error in validator.iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"engine": {"block_size": "16"}}, "'16' is not of type 'integer'"),
        ({"engine": {"hash_algo": "md5"}}, "'md5' is not one of"),
        ({"deployment": {"router": {"policy": "random"}}}, "'random' is not one of"),
        ({"sweep": {"grid": {"engine.block_size": 16}}}, "16 is not of type 'array'"),
        ({"enigne": {}}, "Additional properties are not allowed ('enigne' was unexpected)"),
    ],
)
def test_mistakes_are_flagged(schema: dict, document: dict, problem: str) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    messages = [
        sub.message
        for error in validator.iter_errors(document)
        for sub in (error.context or [error])
    ]
    assert any(problem in message for message in messages), messages


def test_every_field_has_a_description_and_every_description_a_field(schema: dict) -> None:
    nodes = {node["title"]: node for node in schema["anyOf"]} | schema["$defs"]
    undescribed = [
        f"{title}.{field}"
        for title, node in nodes.items()
        for field, prop in node.get("properties", {}).items()
        if "description" not in prop
    ]
    assert undescribed == []
    fields = {
        f"{title}.{field}" for title, node in nodes.items() for field in node.get("properties", {})
    }
    assert set(FIELD_DESCRIPTIONS) <= fields


def test_enums_and_defaults_complete_in_an_editor(schema: dict) -> None:
    definitions = schema["$defs"]
    engine = definitions["EngineSettings"]["properties"]
    assert engine["hash_algo"]["enum"] == ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]
    assert engine["hash_algo"]["default"] == "sha256"
    assert engine["block_size"]["default"] == 16
    assert engine["max_num_batched_tokens"]["default"] is None  # the GPU's, set when loaded
    router = definitions["RouterSettings"]["properties"]["policy"]
    assert router["enum"] == ["round_robin", "least_loaded", "prefix_aware", "session_affinity"]
    deployment = definitions["DeploymentSettings"]["properties"]
    assert {"a100", "h100", "h200", "b200", "l40s"} <= set(deployment["gpu"]["enum"])
    assert deployment["gpu"]["default"] == "h100"
    assert "llama-3.1-8b" in deployment["model"]["anyOf"][0]["enum"]
    assert deployment["model"]["default"] == "llama-3.1-8b"
