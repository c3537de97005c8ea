"""Engine settings vLLM derives from the deployment, for every file that has both (scenario and
study files): set where the file leaves them unwritten, then checked against the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sim.config.engine import DeploymentSettings, EngineSettings
from sim.costmodel import get_gpu, resolve_model
from sim.errors import InputError
from sim.sched import defaults


def with_deployment_defaults(data: Any, base_dir: Path | None) -> Any:
    """A file's raw fields with the engine fields it does not write set as vLLM sets them for
    its deployment: max_model_len the model's context (2048 where its config names none, as
    vLLM assumes), and the batch limits vLLM's OpenAI server takes on the GPU. Anything that
    does not resolve is left for the fields' own validation to name."""
    if not isinstance(data, dict):
        return data
    # Settings built in Python fill in as a file's fields do: by what they set.
    engine, deployment = (
        value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value
        for value in (data.get("engine", {}), data.get("deployment", {}))
    )
    if not isinstance(engine, dict) or not isinstance(deployment, dict):
        return data
    filled = dict(engine)
    if "max_model_len" not in filled:
        max_model_len = _served_max_model_len(deployment, base_dir)
        if max_model_len is not None:
            filled["max_model_len"] = max_model_len
    gpu_name = deployment.get("gpu", DeploymentSettings.model_fields["gpu"].default)
    unwritten = "max_num_batched_tokens" not in filled or "max_num_seqs" not in filled
    if unwritten and isinstance(gpu_name, str):
        try:
            gpu = get_gpu(gpu_name)
            tokens, seqs = EngineSettings.model_validate(filled).batch_limits(gpu)
        except (InputError, ValidationError):
            pass
        else:
            filled.setdefault("max_num_batched_tokens", tokens)
            filled.setdefault("max_num_seqs", seqs)
    return {**data, "engine": filled} if filled != engine else data


def deployed_engine(gpu: str, model: str | dict[str, Any], tp: int) -> EngineSettings:
    """The engine settings a file writing none gets for the deployment (`with_deployment_defaults`):
    those vLLM's server starts with, for runs built without a file."""
    data = with_deployment_defaults(
        {"engine": {}, "deployment": {"gpu": gpu, "model": model, "tp": tp}}, None
    )
    return EngineSettings.model_validate(data["engine"])


def context_problem(
    engine: EngineSettings, deployment: DeploymentSettings
) -> tuple[str, str] | None:
    """(field, message) when engine.max_model_len is beyond the model's context, which vLLM
    refuses; None otherwise (and past the tokens-per-request limit, which names itself)."""
    from sim.config.limits import MAX_TOKENS_PER_REQUEST  # limits imports the scenario module

    model = deployment.model_spec
    context, max_model_len = model.context_length, engine.max_model_len
    if context is None or max_model_len <= context or max_model_len > MAX_TOKENS_PER_REQUEST:
        return None
    return (
        "engine.max_model_len",
        f"{max_model_len:,} is more than {model.name}'s context of {context:,} tokens "
        f"({model.context_length_source} in its config), which vLLM refuses; "
        f"allowed: 2 to {context:,}",
    )


def _served_max_model_len(deployment: dict[str, Any], base_dir: Path | None) -> int | None:
    """max_model_len as vLLM starts the model without one: its context, or the length vLLM
    assumes for a config naming none. None where the model does not resolve."""
    reference = deployment.get("model", DeploymentSettings.model_fields["model"].default)
    if not isinstance(reference, str | dict):
        return None
    try:
        context = resolve_model(reference, base_dir).context_length
    except InputError:
        return None
    return defaults.UNKNOWN_CONTEXT_MAX_MODEL_LEN if context is None else context
