"""One source of engine defaults and limit checks (sim.sched.defaults), read by SchedulerConfig,
the scenario's EngineSettings and the engine replay's config op."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config import Scenario
from sim.config.engine import EngineSettings
from sim.costmodel import get_gpu
from sim.errors import InputError
from sim.replay.engine_replay import replay_engine, scheduler_config_from_op
from sim.sched import SchedulerConfig, defaults
from sim.studies.study_runs import StudySettings, load_study


def test_scheduler_config_takes_vllm_scheduler_class_defaults() -> None:
    config = SchedulerConfig()
    assert (config.max_num_batched_tokens, config.max_num_seqs, config.max_model_len) == (
        2048,
        128,
        8192,
    )
    assert (config.num_gpu_blocks, config.block_size, config.async_scheduling) == (64, 16, False)
    assert scheduler_config_from_op(None) == config


def _scenario(engine: dict[str, object], gpu: str = "h100") -> Scenario:
    return Scenario.model_validate(
        {
            "name": "defaults",
            "duration_s": 10,
            "engine": engine,
            "deployment": {"gpu": gpu},
            "workload": {
                "source": {"kind": "chat"},
                "arrivals": {"process": "poisson", "rate_per_s": 1.0},
            },
        }
    )


def test_scenario_engines_take_the_serving_defaults_with_async_scheduling() -> None:
    engine = EngineSettings()
    assert (engine.max_num_batched_tokens, engine.max_num_seqs) == (None, None)
    assert engine.max_model_len == defaults.SERVING_MAX_MODEL_LEN == 32768
    assert engine.async_scheduling is True
    assert (engine.max_num_active_seqs, engine.prefill_schedule_interval) == (None, 1)


@pytest.mark.parametrize(
    ("gpu", "limits"),
    [
        ("h100", (8192, 1024)),  # 79.6 GiB
        ("h200", (8192, 1024)),  # 140 GiB
        ("b200", (16384, 1024)),  # 179 GiB
        ("mi300x", (16384, 1024)),  # 192 GiB
        ("a100", (2048, 256)),  # 80 GiB, but an A100
        ("a100-pcie", (2048, 256)),
        ("l40s", (2048, 256)),  # 45 GiB
        ("l4", (2048, 256)),
    ],
)
def test_unset_batch_limits_are_vllm_api_server_defaults_for_the_gpu(
    gpu: str, limits: tuple[int, int]
) -> None:
    """vLLM 0.33's OpenAI server: 16384 tokens and 1024 sequences from 160 GiB, 8192 and 1024
    from 70 GiB but on the A100, 2048 and 256 otherwise; a scenario's engine holds them."""
    engine = _scenario({}, gpu).engine
    assert (engine.max_num_batched_tokens, engine.max_num_seqs) == limits
    assert defaults.serving_batch_limits(get_gpu(gpu).memory_bytes, get_gpu(gpu).name) == limits


def test_a_scenario_built_directly_gets_the_same_limits() -> None:
    """Scenario(**data) and Scenario.model_validate(data) resolve the GPU's limits alike."""
    data = _scenario({}).model_dump(exclude={"engine"})
    assert Scenario(**data).engine == Scenario.model_validate(data).engine
    assert Scenario(**data).engine.max_num_seqs == 1024


def test_a_study_file_gets_the_gpu_limits_and_their_checks(tmp_path: Path) -> None:
    """A study (not a scenario) on an H100 with only max_num_batched_tokens 512 written: the
    GPU's 1024 sequences are checked against it, one line naming the field."""
    study = tmp_path / "study.yaml"
    study.write_text("name: s\nengine: {max_num_batched_tokens: 512}\n")
    with pytest.raises(
        InputError,
        match=r"engine.max_num_batched_tokens: max_num_batched_tokens "
        r"\(512\) must be >= max_num_seqs \(1024\)",
    ):
        load_study(study, StudySettings)
    study.write_text("name: s\ndeployment: {gpu: a100}\n")
    settings, _ = load_study(study, StudySettings)
    assert (settings.engine.max_num_batched_tokens, settings.engine.max_num_seqs) == (2048, 256)


def test_set_batch_limits_stay_and_no_chunked_prefill_raises_the_budget() -> None:
    """Written limits win; without chunked prefill an unwritten budget is at least
    max_model_len (an A100's 2048 becomes Llama-3.1-8B's context, 131072), as vLLM sets it."""
    written = _scenario({"max_num_batched_tokens": 4096, "max_num_seqs": 64}, "a100").engine
    assert (written.max_num_batched_tokens, written.max_num_seqs) == (4096, 64)
    unchunked = _scenario({"enable_chunked_prefill": False}, "a100").engine
    assert (unchunked.max_num_batched_tokens, unchunked.max_num_seqs) == (131072, 256)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"max_num_batched_tokens": 8, "max_num_seqs": 16},
            "max_num_batched_tokens (8) must be >= max_num_seqs (16), as vLLM requires",
        ),
        (
            {"max_num_seqs": 4, "max_num_active_seqs": 5},
            "max_num_active_seqs (5) must be <= max_num_seqs (4), as vLLM requires",
        ),
    ],
)
def test_both_configs_refuse_the_same_limits_with_the_same_message(
    fields: dict[str, int], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SchedulerConfig(**fields)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EngineSettings.model_validate({"max_num_batched_tokens": 8192, **fields})
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _scenario(fields)  # one limit unset: the GPU's default is checked with the other
    workload = tmp_path / "w.jsonl"
    workload.write_text(
        '{"op":"config",' + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}\n"
    )
    with pytest.raises(InputError, match="as vLLM requires"):
        list(replay_engine(workload))
