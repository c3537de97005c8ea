"""`load_cost_model`: one entry point from a scenario's cost-model string to a `CostModel`."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from sim.costmodel.engine_terms import eager_engine_model, engine_coefficients
from sim.costmodel.model import CostModel, StepCoefficients, StepTimeModel
from sim.costmodel.profiles import (
    Profile,
    is_profile_name,
    load_profile,
    profile_name,
    shipped_profile_names,
    shipped_profile_path,
)
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import GpuSpec, ModelSpec, get_gpu, get_model, is_registry_model
from sim.errors import InputError

ACCEPTED_SPECS = (
    "a shipped profile name like 'h100/llama-3.1-8b/tp1', a path to a profile YAML, "
    "'roofline' (with gpu and model), 'constant:<seconds>' or 'linear:<b0_s>,<per_token_s>'"
)


def load_cost_model(
    spec: str,
    *,
    gpu: str | GpuSpec | None = None,
    model: str | ModelSpec | None = None,
    tp: int = 1,
    cuda_graphs: bool = True,
) -> CostModel:
    """The cost model `spec` names; `gpu`/`model`/`tp` (names or specs), when given, must match
    a profile's. `cuda_graphs` False: an engine that launches every decode step eagerly."""
    text = spec.strip()
    if text.startswith("constant:"):
        (step_s,) = _parse_seconds(text, "constant:", 1)
        if step_s <= 0:
            raise InputError(f"cost model {spec!r}: the constant step time must be > 0 seconds")
        return StepTimeModel(_linear_coefficients(step_s, 0.0), label=text)
    if text.startswith("linear:"):
        step_overhead_s, per_token_s = _parse_seconds(text, "linear:", 2)
        if step_overhead_s + per_token_s <= 0:
            raise InputError(f"cost model {spec!r}: at least one coefficient must be > 0")
        return StepTimeModel(_linear_coefficients(step_overhead_s, per_token_s), label=text)
    if text == "roofline":
        if gpu is None or model is None:
            raise InputError("cost model 'roofline' needs a gpu and a model")
        return cost_model_from_profile(
            roofline_profile(get_gpu(gpu), get_model(model), tp), cuda_graphs=cuda_graphs
        )
    if text.endswith((".yaml", ".yml")) or Path(text).is_file():
        profile = load_profile(Path(text))
    elif is_profile_name(text):
        profile = load_profile(shipped_profile_path(text))
    else:
        raise InputError(f"unknown cost model {spec!r}; expected {ACCEPTED_SPECS}")
    _check_matches(profile, gpu, model, tp)
    return cost_model_from_profile(profile, cuda_graphs=cuda_graphs)


def auto_cost_model_spec(gpu: GpuSpec, model: ModelSpec, tp: int) -> str:
    """What `cost_model: auto` means for a deployment: the shipped profile of a registry model
    in its shipped dtypes (the only case a profile of that name describes), else 'roofline', the
    prior derived from the model's config and the GPU's specs."""
    name = profile_name(gpu.key, model.key, tp)
    return name if is_registry_model(model) and name in shipped_profile_names() else "roofline"


def cost_model_from_profile(profile: Profile, *, cuda_graphs: bool = True) -> CostModel:
    """The §5.1 form with `profile`'s coefficients (kernel-only ones with the real-engine terms:
    the prefill factor, and the eager host time without `cuda_graphs`), warning outside its
    covered ranges."""
    step_model = StepTimeModel(
        engine_coefficients(
            profile.coefficients, profile.source, _known_key(profile.gpu, get_gpu) or profile.gpu
        ),
        covered=profile.covered,
        label=f"cost model {profile.name} ({profile.source})",
    )
    if cuda_graphs:
        return step_model
    return eager_engine_model(
        step_model, get_model(profile.model).num_layers, profile.tp, profile.source
    )


def _linear_coefficients(step_overhead_s: float, per_token_s: float) -> StepCoefficients:
    return StepCoefficients(
        step_overhead_s=step_overhead_s,
        per_token_s=per_token_s,
        t_star_tokens=0,
        per_attention_pair_s=0.0,
        per_kv_token_s=0.0,
        per_decode_seq_s=0.0,
    )


def _parse_seconds(text: str, prefix: str, count: int) -> list[float]:
    parts = text[len(prefix) :].split(",")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != count or any(not 0 <= value < math.inf for value in values):
        raise InputError(
            f"cost model {text!r}: expected {prefix}"
            + ",".join(["<seconds>"] * count)
            + " with finite numbers >= 0"
        )
    return values


def _check_matches(
    profile: Profile, gpu: str | GpuSpec | None, model: str | ModelSpec | None, tp: int
) -> None:
    """A profile fitted on other hardware silently mis-times a run: refuse a known mismatch.

    Profiles calibrated without naming their GPU or model match any.
    """
    mismatches = []
    profile_gpu = _known_key(profile.gpu, get_gpu)
    if gpu is not None and profile_gpu is not None and get_gpu(gpu).key != profile_gpu:
        mismatches.append(f"gpu {get_gpu(gpu).key!r} vs profile gpu {profile.gpu!r}")
    profile_model = _known_key(profile.model, get_model)
    if model is not None and profile_model is not None and get_model(model).key != profile_model:
        mismatches.append(f"model {get_model(model).key!r} vs profile model {profile.model!r}")
    if (gpu is not None or model is not None) and tp != profile.tp:
        mismatches.append(f"tp {tp} vs profile tp {profile.tp}")
    if mismatches:
        raise InputError(
            f"cost model profile {profile.name!r} does not match the scenario: "
            + "; ".join(mismatches)
        )


def _known_key(name: str, lookup: Callable[[str], GpuSpec | ModelSpec]) -> str | None:
    try:
        return lookup(name).key
    except InputError:
        return None
