"""Every new model and GPU runs: scenarios/models_and_gpus.yaml shortened, a config.json path,
and the one-line refusals (weights that do not fit, unsupported shapes) through the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sim.cli import main
from sim.config import Scenario, load_scenario
from sim.costmodel import get_gpu, get_model
from sim.costmodel.loader import auto_cost_model_spec
from sim.costmodel.specs import MODEL_DIR
from sim.errors import InputError
from sim.runner import deployment_num_gpu_blocks, run_scenario
from sim.sweep import load_sweep

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
# A short run at the rate the original sweep had: the shipped 0.125 sessions/s brings no arrival
# in 12 s.
SHORT = ["duration_s=12", "warmup_s=2", "workload.arrivals.rate_per_s=1.0"]
# KV blocks of 16 tokens vLLM's sizing gives each pair at gpu_memory_utilization 0.92 with the
# 2 GiB activation reserve: (0.92 x memory - weights / tp - 2 GiB) // (16 x KV bytes per token).
EXPECTED_BLOCKS = {
    ("llama-2-7b", "a10g", 1): 785,
    ("gpt-oss-20b", "l4", 1): 16_085,
    ("qwen3-30b-a3b", "l4", 4): 12_225,
    ("mixtral-8x7b", "mi300x", 1): 44_729,
    ("llama-2-70b", "mi300x", 1): 9_394,
    ("codellama-34b", "h200", 1): 21_953,
    ("gpt-oss-120b", "h100", 1): 19_264,
}


def auto_cost_model(scenario: Scenario) -> str:
    """What `cost_model: auto` picks for the scenario's deployment."""
    deployment = scenario.deployment
    return auto_cost_model_spec(get_gpu(deployment.gpu), deployment.model_spec, deployment.tp)


def test_the_shipped_scenario_covers_every_new_model_and_gpu() -> None:
    pairs = {
        (run.scenario.deployment.model, run.scenario.deployment.gpu, run.scenario.deployment.tp)
        for run in load_sweep(SCENARIOS_DIR / "models_and_gpus.yaml").runs
    }
    assert pairs == set(EXPECTED_BLOCKS)
    assert {gpu for _, gpu, _ in pairs} >= {"a10g", "l4", "mi300x"}


def test_gpt_oss_120b_fits_one_h100_only_with_its_mxfp4_experts() -> None:
    # 60.7 GiB of weights as shipped; in bf16 (the mxfp4 experts dequantized) it would not fit.
    block_bytes = 16 * 2 * 18 * 8 * 64 * 2
    usable = math.ceil(0.92 * 81559 * 1024**2) - 65_169_175_680 - 2 * 1024**3
    assert usable // block_bytes == EXPECTED_BLOCKS[("gpt-oss-120b", "h100", 1)]
    assert get_model("gpt-oss-120b").num_params * 2 > get_gpu("h100").memory_bytes


@pytest.mark.parametrize(
    "run_index", range(len(EXPECTED_BLOCKS)), ids=[key[0] for key in EXPECTED_BLOCKS]
)
def test_each_pair_runs_on_the_roofline_prior(tmp_path: Path, run_index: int) -> None:
    run = load_sweep(SCENARIOS_DIR / "models_and_gpus.yaml", SHORT).runs[run_index]
    deployment = run.scenario.deployment
    assert auto_cost_model(run.scenario) == "roofline"  # no shipped profile for these pairs
    result = run_scenario(run.scenario, SCENARIOS_DIR, run_dir=tmp_path / "run")
    summary = result.summary
    assert (
        summary["num_gpu_blocks"]
        == EXPECTED_BLOCKS[(deployment.model, deployment.gpu, deployment.tp)]
    )
    assert summary["num_requests"] > 0
    assert summary["num_rejected"] == 0
    assert 0 < summary["ttft_p50_s"] < 5


def test_kv_cache_dtype_fp8_doubles_the_blocks_and_leaves_the_shipped_profile(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: fp8kv\nduration_s: 5\n"
        "deployment: {model: llama-3.1-8b, gpu: h100}\n"
        "workload: {source: {kind: chat}, arrivals: {process: poisson, rate_per_s: 1}}\n"
    )
    shipped = load_scenario(path)
    fp8 = load_scenario(path, ["deployment.kv_cache_dtype=fp8"])
    assert auto_cost_model(shipped.scenario) == "h100/llama-3.1-8b/tp1"
    # The kernel-derived profile is bf16 KV; with fp8 KV the run falls back to the roofline.
    assert auto_cost_model(fp8.scenario) == "roofline"
    # Half the bytes per token: 28_834 -> 57_669 blocks on an H100 (0.92 x 79.6 GiB - 14.96 GiB
    # of weights - 2 GiB, over 2 MiB or 1 MiB per 16-token block).
    assert deployment_num_gpu_blocks(shipped.scenario.engine, shipped.scenario.deployment) == 28_834
    assert deployment_num_gpu_blocks(fp8.scenario.engine, fp8.scenario.deployment) == 57_669


def scenario_file(tmp_path: Path, model: str, gpu: str = "l4") -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        f"name: new-model\nduration_s: 8\nwarmup_s: 1\n"
        f"deployment:\n  model: {model}\n  gpu: {gpu}\n"
        "workload: {source: {kind: chat}, arrivals: {process: poisson, rate_per_s: 1}}\n"
        "outputs: {events: false}\n"
    )
    return path


def test_a_config_json_path_runs(tmp_path: Path) -> None:
    config = json.loads((MODEL_DIR / "gpt-oss-20b.json").read_text())["config"]
    (tmp_path / "gpt-oss-20b").mkdir()
    (tmp_path / "gpt-oss-20b" / "config.json").write_text(json.dumps(config))
    path = scenario_file(tmp_path, "gpt-oss-20b/config.json")
    with pytest.raises(SystemExit) as done:
        main(["run", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert done.value.code == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_gpu_blocks"] == EXPECTED_BLOCKS[("gpt-oss-20b", "l4", 1)]


def test_weights_that_do_not_fit_are_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario_file(tmp_path, "mixtral-8x7b")
    with pytest.raises(SystemExit) as done:
        main(["run", str(path), "--out", str(tmp_path / "run"), "--no-progress"])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert "Mixtral-8x7B-v0.1 does not fit on L4-24GB with tp=1" in error
    assert "weights 93405585408 bytes per GPU (bf16)" in error
    assert not (tmp_path / "run").exists()


def test_an_mla_config_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "deepseek.json").write_text(
        json.dumps(
            {
                "architectures": ["DeepseekV3ForCausalLM"],
                "hidden_size": 7168,
                "num_hidden_layers": 61,
                "num_attention_heads": 128,
                "kv_lora_rank": 512,
                "vocab_size": 129280,
            }
        )
    )
    path = scenario_file(tmp_path, "deepseek.json", gpu="mi300x")
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"error: {path}:5: deployment.model: {tmp_path / 'deepseek.json'}: model config field "
        "kv_lora_rank = 512: multi-head latent attention (MLA, as in DeepSeek-V2/V3) is not "
        "supported"
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "deployment.quantization=fp8",
            "deployment.quantization: quantization 'fp8' does not match gpt-oss-20b's "
            "checkpoint, which is quantized with 'mxfp4'; leave quantization null",
        ),
        (
            "deployment.kv_cache_dtype=int8",
            "deployment.kv_cache_dtype: 'int8' is not allowed",
        ),
        (
            "deployment.model=gpt-5",
            "deployment.model: 'gpt-5' is not allowed: unknown model 'gpt-5'; known models: ",
        ),
    ],
)
def test_deployment_dtype_and_model_problems_name_their_field(
    tmp_path: Path, override: str, message: str
) -> None:
    path = scenario_file(tmp_path, "gpt-oss-20b")
    with pytest.raises(InputError) as error:
        load_scenario(path, [override])
    assert message in str(error.value)
