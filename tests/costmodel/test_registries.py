"""One registry per extension point: GPUs (data/gpus.csv) and models (data/models/*.json).

The scenario schema, config choices and kernel-table lookups are derived from the registries;
these tests check they agree, and that a new GPU row or model file is all it takes to run one.
"""

from __future__ import annotations

import csv
import json
import shutil
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.config import load_scenario
from sim.config.engine import DeploymentSettings
from sim.config.scenario import scenario_json_schema
from sim.costmodel import specs
from sim.costmodel.derive import KERNEL_DATA_DIR, SHIPPED_COMBINATIONS, kernel_engine_versions
from sim.costmodel.loader import auto_cost_model_spec
from sim.costmodel.specs import (
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    get_gpu,
    get_model,
    gpu_names,
    known_gpus,
    known_models,
    model_names,
)
from sim.errors import InputError
from sim.runner import run_scenario


def deployment_schema() -> dict:
    return scenario_json_schema()["$defs"]["DeploymentSettings"]["properties"]


def test_schema_enums_are_the_registry_names() -> None:
    properties = deployment_schema()
    assert properties["gpu"]["enum"] == gpu_names()
    assert properties["model"]["anyOf"][0]["enum"] == model_names()
    assert set(known_gpus()) <= set(gpu_names())
    assert set(known_models()) <= set(model_names())


def test_config_literals_are_the_registry_choices() -> None:
    fields = DeploymentSettings.model_fields
    quantization = typing.get_args(fields["quantization"].annotation)
    assert typing.get_args(quantization[0]) == QUANTIZATIONS
    assert typing.get_args(fields["kv_cache_dtype"].annotation) == tuple(KV_CACHE_DTYPES)


def test_every_registry_entry_records_its_source() -> None:
    with specs.GPU_TABLE.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["key"] for row in rows) == known_gpus()
    assert all(row["source"].startswith("https://") for row in rows)
    for path in specs.MODEL_DIR.glob("*.json"):
        document = json.loads(path.read_text())
        assert document["source"].startswith("https://huggingface.co/")
        assert document["source"].endswith("/blob/main/config.json")
        assert document["license"]
        assert get_model(path.stem).name == document["name"]


def test_kernel_tables_of_the_registry_are_the_shipped_ones() -> None:
    with_tables = {key: get_gpu(key).kernel_tables for key in known_gpus()}
    folders = {name for name in with_tables.values() if name is not None}
    assert folders == set(kernel_engine_versions())
    assert all((KERNEL_DATA_DIR / folder).is_dir() for folder in folders)
    assert {gpu for gpu, _, _ in SHIPPED_COMBINATIONS} <= {
        key for key, folder in with_tables.items() if folder is not None
    }


@pytest.fixture
def registry_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The registries copied under `tmp_path` and read from there (caches reset around it)."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(specs.GPU_TABLE, data / "gpus.csv")
    shutil.copytree(specs.MODEL_DIR, data / "models")
    monkeypatch.setattr(specs, "GPU_TABLE", data / "gpus.csv")
    monkeypatch.setattr(specs, "MODEL_DIR", data / "models")
    specs._gpu_registry.cache_clear()
    specs._model_registry.cache_clear()
    yield data
    specs._gpu_registry.cache_clear()
    specs._model_registry.cache_clear()


NEW_GPU_ROW = (
    "rtx6000ada,RTX-6000-Ada-48GB,nvidia-rtx-6000-ada,49140,364.2,728.5,0.96,32,"
    "PCIe Gen4 x16,0.65,0.45,0.80,,https://example.org/rtx-6000-ada-datasheet.pdf\n"
)
NEW_MODEL = {
    "name": "Toy-MoE",
    "aliases": ["org/toy-moe-instruct"],
    "source": "https://huggingface.co/org/toy-moe/blob/main/config.json",
    "license": "Apache-2.0",
    "config": {
        "architectures": ["MixtralForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 2048,
        "num_local_experts": 16,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
    },
}


def test_a_new_gpu_row_and_model_file_are_all_it_takes(registry_copy: Path, tmp_path: Path) -> None:
    with (registry_copy / "gpus.csv").open("a") as handle:
        handle.write(NEW_GPU_ROW)
    (registry_copy / "models" / "toy-moe.json").write_text(json.dumps(NEW_MODEL))

    assert get_gpu("NVIDIA RTX 6000 Ada").memory_bytes == 49140 * 1024**2
    assert get_model("org/toy-moe-instruct").num_experts == 16
    properties = deployment_schema()
    assert "rtx6000ada" in properties["gpu"]["enum"]
    assert "toy-moe" in properties["model"]["anyOf"][0]["enum"]

    path = tmp_path / "scenario.yaml"
    path.write_text(
        "name: new-entries\nduration_s: 6\nwarmup_s: 1\n"
        "deployment: {model: toy-moe, gpu: rtx6000ada}\n"
        "workload: {source: {kind: chat}, arrivals: {process: poisson, rate_per_s: 2}}\n"
        "outputs: {events: false}\n"
    )
    loaded = load_scenario(path)
    assert auto_cost_model_spec(get_gpu("rtx6000ada"), get_model("toy-moe"), 1) == "roofline"
    result = run_scenario(loaded.scenario, tmp_path, run_dir=tmp_path / "run")
    assert result.summary["num_requests"] > 0


def test_a_broken_registry_entry_names_its_file_and_line(registry_copy: Path) -> None:
    table = registry_copy / "gpus.csv"
    text = table.read_text()
    table.write_text(text + NEW_GPU_ROW.replace("364.2", "fast"))
    bad_line = text.count("\n") + 1
    with pytest.raises(InputError, match=rf"gpus\.csv:{bad_line}: bad GPU row: ValueError"):
        get_gpu("h100")
    broken = {**NEW_MODEL, "config": {**NEW_MODEL["config"], "kv_lora_rank": 64}}
    (registry_copy / "models" / "toy-mla.json").write_text(json.dumps(broken))
    with pytest.raises(InputError, match=r"toy-mla\.json: model config field config\.kv_lora_rank"):
        get_model("llama-2-7b")
