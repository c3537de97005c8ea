"""Runs with the CPU offload tier: off (size 0) leaves every result file as without the
feature; on, the CPU tier's hits, events and counters reach the outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from offload_scenario import offload_chat_scenario
from typer.testing import CliRunner

from sim.cli import load_commands
from sim.config import load_scenario
from sim.errors import InputError
from sim.runner import run_scenario

CHAT = offload_chat_scenario("offload-chat", "{events: true, scrape_interval_s: 5}")
RESULT_FILES = (
    "requests.parquet",
    "steps.parquet",
    "events.parquet",
    "metrics.parquet",
    "summary.json",
    "config.resolved.yaml",
)


def run(tmp_path: Path, name: str, overrides: list[str]) -> Path:
    path = tmp_path / "chat.yaml"
    path.write_text(CHAT)
    loaded = load_scenario(path, overrides)
    return run_scenario(loaded.scenario, loaded.base_dir, run_dir=tmp_path / name).run_dir


@pytest.mark.parametrize("async_scheduling", ["true", "false"])
def test_offload_size_zero_writes_the_same_files_as_no_offload(
    tmp_path: Path, async_scheduling: str
) -> None:
    mode = f"engine.async_scheduling={async_scheduling}"
    without = run(tmp_path, "without", [mode])
    zero = run(tmp_path, "zero", [mode, "engine.kv_offloading_size=0"])
    for name in RESULT_FILES:
        assert (without / name).read_bytes() == (zero / name).read_bytes(), name


@pytest.mark.parametrize("async_scheduling", ["true", "false"])
def test_cpu_hits_reach_requests_summary_and_events(tmp_path: Path, async_scheduling: str) -> None:
    run_dir = run(
        tmp_path,
        "on",
        [f"engine.async_scheduling={async_scheduling}", "engine.kv_offloading_size=1"],
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    # 1 GiB / 2 MiB per Llama-3.1-8B block at B = 16 (spec §13.2).
    assert summary["offload_num_chunks"] == 512
    assert summary["offload_host_link"] == "pcie-gen5"
    assert summary["num_external_hits"] > 0
    assert summary["hit_rate_gpu_and_cpu"] == pytest.approx(
        (summary["num_hits"] + summary["num_external_hits"]) / summary["num_queries"], abs=1e-9
    )
    assert summary["external_hit_rate"] == pytest.approx(
        summary["num_external_hits"] / summary["num_external_queries"], abs=1e-9
    )
    requests = pq.read_table(run_dir / "requests.parquet").to_pylist()
    measured = [row for row in requests if row["arrival_at"] >= 5]
    assert (
        sum(row["num_host_cached_tokens"] for row in measured) == summary["num_host_cached_tokens"]
    )
    assert all(0 <= row["num_host_cached_tokens"] <= row["num_cached_tokens"] for row in requests)
    kinds = set(pq.read_table(run_dir / "events.parquet").column("kind").to_pylist())
    assert {"cpu_stored", "cpu_loaded", "stored", "hit"} <= kinds
    steps = pq.read_table(run_dir / "steps.parquet")
    assert sum(steps.column("num_external_hits").to_pylist()) >= summary["num_external_hits"]
    assert CliRunner().invoke(load_commands(["report"]), ["report", str(run_dir)]).exit_code == 0
    report = (run_dir / "report.md").read_text()
    assert f"| num_external_hits | {summary['num_external_hits']:,} |" in report


def test_offload_too_small_for_one_chunk_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds no chunk of 2,097,152 bytes"):
        run(tmp_path, "tiny", ["engine.kv_offloading_size=0.001"])


def test_the_cpu_tier_hit_rate_stands_without_gpu_prefix_caching(tmp_path: Path) -> None:
    """GPU prefix caching off: vLLM counts no GPU queries, so the two rates over them are none,
    but the tier still answers; its own rate (hits over its queries) says how well."""
    run_dir = run(
        tmp_path,
        "off-gpu-caching",
        ["engine.kv_offloading_size=1", "engine.enable_prefix_caching=false"],
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["num_queries"], summary["hit_rate_cpu"]) == (0, None)
    assert summary["num_external_hits"] > 0
    assert summary["external_hit_rate"] == pytest.approx(
        summary["num_external_hits"] / summary["num_external_queries"], abs=1e-9
    )
