"""One source of engine defaults and limit checks (sim.sched.defaults), read by SchedulerConfig,
the scenario's EngineSettings and the engine replay's config op."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.engine import EngineSettings
from sim.errors import InputError
from sim.replay.engine_replay import replay_engine, scheduler_config_from_op
from sim.sched import SchedulerConfig, defaults


def test_scheduler_config_takes_vllm_scheduler_class_defaults() -> None:
    config = SchedulerConfig()
    assert (config.max_num_batched_tokens, config.max_num_seqs, config.max_model_len) == (
        2048,
        128,
        8192,
    )
    assert (config.num_gpu_blocks, config.block_size, config.async_scheduling) == (64, 16, False)
    assert scheduler_config_from_op(None) == config


def test_scenario_engines_take_the_serving_defaults_with_async_scheduling() -> None:
    engine = EngineSettings()
    assert (engine.max_num_batched_tokens, engine.max_num_seqs, engine.max_model_len) == (
        defaults.SERVING_MAX_NUM_BATCHED_TOKENS,
        defaults.SERVING_MAX_NUM_SEQS,
        defaults.SERVING_MAX_MODEL_LEN,
    )
    assert (engine.max_num_batched_tokens, engine.max_num_seqs, engine.max_model_len) == (
        8192,
        256,
        32768,
    )
    assert engine.async_scheduling is True
    assert (engine.max_num_active_seqs, engine.prefill_schedule_interval) == (None, 1)


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
        EngineSettings.model_validate(fields)
    workload = tmp_path / "w.jsonl"
    workload.write_text(
        '{"op":"config",' + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}\n"
    )
    with pytest.raises(InputError, match="as vLLM requires"):
        list(replay_engine(workload))
