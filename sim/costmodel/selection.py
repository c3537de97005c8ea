"""Which cost model a run uses, described for its summary: kind, name, front end and the
validated error of that kind of model (`summary.json`'s `cost_model` block)."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from sim.costmodel.engine_terms import EagerEngineModel, load_engine_terms
from sim.costmodel.frontend import NO_FRONTEND, FrontEnd, resolve_frontend
from sim.costmodel.loader import auto_cost_model_spec, load_cost_model
from sim.costmodel.model import CostModel
from sim.costmodel.profiles import Profile, is_profile_name, load_profile, shipped_profile_path
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import GpuSpec, ModelSpec, get_gpu, get_model

VALIDATED_ERRORS_PATH = Path(__file__).parent / "data" / "validated_errors.yaml"


@dataclass(frozen=True, slots=True)
class CostModelChoice:
    """The step-time model and front end of a run, and what they are."""

    model: CostModel
    frontend: FrontEnd
    kind: str  # shipped, roofline, calibrated, derived (a kernel-derived file) or synthetic
    name: str  # the profile's name, its file, or the constant/linear spec
    provenance: str
    cuda_graphs: bool = True  # the deployment's engine replays decode steps as CUDA graphs
    # The host times per layer and per decoding sequence added to decode steps and the floor per
    # layer under prefill steps (docs/cost_model.md §5.8); None: not applied.
    eager_host_per_layer_s: float | None = None
    eager_host_per_sequence_s: float | None = None
    eager_prefill_floor_per_layer_s: float | None = None

    def summary(self) -> dict[str, Any]:
        """What summary.json and the report say about the cost model."""
        return {
            "kind": self.kind,
            "name": self.name,
            "provenance": self.provenance,
            "cuda_graphs": self.cuda_graphs,
            "eager_host_per_layer_s": self.eager_host_per_layer_s,
            "eager_host_per_sequence_s": self.eager_host_per_sequence_s,
            "eager_prefill_floor_per_layer_s": self.eager_prefill_floor_per_layer_s,
            "frontend_request_s": self.frontend.request_s,
            "frontend_per_prompt_token_s": self.frontend.per_prompt_token_s,
            "frontend_first_token_s": self.frontend.first_token_s,
            "validated_error": validated_error(self.kind),
        }


def choose_cost_model(
    spec: str,
    frontend_spec: str,
    *,
    gpu: str | GpuSpec,
    model: str | ModelSpec,
    tp: int,
    cuda_graphs: bool = True,
) -> CostModelChoice:
    """Resolve a scenario's `cost_model` ('auto' included) and `frontend` strings for an engine
    with or without CUDA graphs."""
    choice = _choose(spec, frontend_spec, get_gpu(gpu), get_model(model), tp, cuda_graphs)
    eager = isinstance(choice.model, EagerEngineModel)
    terms = load_engine_terms()
    return replace(
        choice,
        cuda_graphs=cuda_graphs,
        eager_host_per_layer_s=terms.eager_host_per_layer_s if eager else None,
        eager_host_per_sequence_s=terms.eager_sequence_host.at_tp(tp) if eager else None,
        eager_prefill_floor_per_layer_s=terms.eager_prefill_floor_per_layer_s if eager else None,
    )


def _choose(
    spec: str,
    frontend_spec: str,
    gpu_spec: GpuSpec,
    model_spec: ModelSpec,
    tp: int,
    cuda_graphs: bool,
) -> CostModelChoice:
    text = spec.strip()
    if text == "auto":
        text = auto_cost_model_spec(gpu_spec, model_spec, tp)
    # load_cost_model checks a profile against the deployment and parses inline specs.
    step_model = load_cost_model(
        text, gpu=gpu_spec, model=model_spec, tp=tp, cuda_graphs=cuda_graphs
    )
    if text == "roofline":
        profile = roofline_profile(gpu_spec, model_spec, tp)
        return _from_profile(profile, step_model, frontend_spec, text)
    is_file = text.endswith((".yaml", ".yml")) or Path(text).is_file()
    if is_file or is_profile_name(text):
        profile = load_profile(Path(text) if is_file else shipped_profile_path(text))
        kind = _profile_kind(profile, shipped=not is_file)
        choice = _from_profile(profile, step_model, frontend_spec, kind)
        return _renamed(choice, text) if is_file else choice
    # A constant: or linear: model states every time of a hypothetical engine itself, so 'auto'
    # adds no front end to it.
    return CostModelChoice(
        step_model, resolve_frontend(frontend_spec, NO_FRONTEND), "synthetic", text, "given inline"
    )


def validated_error(kind: str) -> dict[str, Any] | None:
    """`costmodel validate`'s leave-one-source-out error for models of this kind, if any."""
    document = _validated_errors()
    entry = document.get("kinds", {}).get(kind)
    if entry is None:
        return None
    return copy.deepcopy({"measured_by": document["measured_by"], **entry})


@functools.cache
def _validated_errors() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(VALIDATED_ERRORS_PATH.read_text())
    return document


def _profile_kind(profile: Profile, *, shipped: bool) -> str:
    if profile.source == "calibrated":
        return "calibrated"
    if profile.source == "roofline":
        return "roofline"
    return "shipped" if shipped else "derived"


def _from_profile(
    profile: Profile, step_model: CostModel, frontend_spec: str, kind: str
) -> CostModelChoice:
    """The choice of `profile` timed by `step_model`; "roofline" as kind means the profile's own
    source decides."""
    if kind == "roofline":
        kind = _profile_kind(profile, shipped=True)
    return CostModelChoice(
        step_model,
        resolve_frontend(frontend_spec, profile.frontend),
        kind,
        profile.name,
        profile.provenance,
    )


def _renamed(choice: CostModelChoice, path: str) -> CostModelChoice:
    return CostModelChoice(choice.model, choice.frontend, choice.kind, path, choice.provenance)
