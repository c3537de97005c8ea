"""`prefixsim validate`: every shipped scenario, sweep and study file validates, and a file
whose run would be refused before it starts (limits, a KV cache vLLM would not start with, a
CPU tier too small) fails validation with the run's own message, naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep.sweep_files import BASE_YAML, TWO_TOO_SMALL, write_sweep
from typer.testing import CliRunner

from sim.cli import load_commands

app = load_commands()

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
SCENARIOS = sorted(SCENARIOS_DIR.glob("*.yaml"))


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


def test_scenario_whose_cache_vllm_would_refuse_fails_validation(tmp_path: Path) -> None:
    """The sweep tests' base on 32 blocks of 16 (31 usable, 496 tokens) cannot hold one
    1,008-token sequence: validate refuses it as the run would, exit 2, one line."""
    path = tmp_path / "small.yaml"
    path.write_text(BASE_YAML)
    result = CliRunner().invoke(app, ["validate", str(path), "--set", "engine.num_gpu_blocks=32"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"error: {path}: engine.max_model_len 1,008 is larger than ")
    assert "the KV cache (31 usable blocks x 16 = 496 tokens)" in result.output


def test_sweep_lists_the_runs_that_would_fail_at_their_start(tmp_path: Path) -> None:
    """TWO_TOO_SMALL (num_gpu_blocks 128 and 32 zipped with seeds 1 and 2): the sweep is valid
    (exit 0), and the two 32-block runs are named as failing at their start."""
    path = write_sweep(tmp_path, TWO_TOO_SMALL)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [
        "ok: sweep tiny with 4 runs",
        "2 of them would fail at their start; the others still run:",
    ]
    assert len(lines) == 4
    assert all("num_gpu_blocks=32" in line and "496 tokens" in line for line in lines[2:])
    assert [", seed 1]" in lines[2], ", seed 2]" in lines[3]] == [True, True]


WHOLE_CONTEXT = """\
name: whole-context
duration_s: 5
deployment: {model: llama-2-7b, gpu: h100}
cost_model: "constant:0.02"
workload:
  source: {kind: chat, common: {system_prompt_tokens: 5000}}
  arrivals: {process: poisson, rate_per_s: 2.0}
"""


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        # A CPU tier of 1e-6 GiB holds not one 2 MiB chunk: refused as the run refuses it.
        (
            BASE_YAML,
            ["--set", "engine.kv_offloading_size=0.000001"],
            "engine.kv_offloading_size 1e-06 GiB holds no chunk of 2,097,152 bytes",
        ),
        # 100,000 GiB of 2 MiB chunks: more chunks than a simulated tier may hold (1e300 GiB
        # ended in an OverflowError traceback; the field's own bound is 1 PiB).
        (
            BASE_YAML,
            ["--set", "engine.kv_offloading_size=100000.0"],
            "engine.kv_offloading_size 100000 GiB is 51,200,000 chunks of 2,097,152 bytes, more "
            "than the 30,000,000 a simulated CPU tier holds; give at most 58,594 GiB",
        ),
        # Llama-2-7B's max_model_len, unset, is its whole 4,096-token context; every prompt
        # holds 5,004 or more: only shorter prompts help.
        (
            WHOLE_CONTEXT,
            [],
            "not fewer than engine.max_model_len, so every request would be rejected; shorten "
            "the prompts (engine.max_model_len 4,096 is the model's whole context already)",
        ),
    ],
    ids=["offload_tier_too_small", "offload_tier_too_large", "prompts_past_the_whole_context"],
)
def test_validate_refuses_what_the_run_would(
    tmp_path: Path, text: str, args: list[str], message: str
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["validate", str(path), *args])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}: ")
    assert message in result.output
    assert result.output.count("\n") == 1


@pytest.mark.parametrize("study", ["study_layout_advisor", "study_side_channel"])
def test_a_study_whose_engine_would_not_start_fails_validation(study: str) -> None:
    """The studies' Llama-3.1-8B on 32 blocks (496 tokens) cannot hold its 131,072 context."""
    path = SCENARIOS_DIR / f"{study}.yaml"
    result = CliRunner().invoke(app, ["validate", str(path), "--set", "engine.num_gpu_blocks=32"])
    assert result.exit_code == 2
    assert result.output == (
        f"error: {path}: engine.max_model_len 131,072 is larger than the KV cache (31 usable "
        "blocks x 16 = 496 tokens), which vLLM refuses at start-up; set max_model_len lower "
        "(unset, it is the model's context, as in vLLM) or give the cache more memory\n"
    )
