"""Fit a profile to user measurements (`prefixsim calibrate`), falling back to a prior where the
measurements cannot pin a coefficient down (cost_model.md §5.2 step 6)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.costmodel.derive import t_star_candidates
from sim.costmodel.fit import COLUMNS, FitResult, Measurement, fit_step_form
from sim.costmodel.measurements import read_measurements
from sim.costmodel.profiles import (
    FitQuality,
    Profile,
    load_profile,
    profile_name,
    shipped_profile_names,
    shipped_profile_path,
)
from sim.costmodel.roofline import roofline_profile
from sim.costmodel.specs import get_gpu, get_model
from sim.errors import InputError


@dataclass(frozen=True, slots=True)
class Calibration:
    profile: Profile
    fit: FitResult
    measurements: list[Measurement]
    prior: Profile | None


def prior_profile(gpu: str | None, model: str | None, tp: int) -> Profile | None:
    """The shipped profile of (gpu, model, tp), else its roofline profile; None without both."""
    if gpu is None or model is None:
        return None
    gpu_spec, model_spec = get_gpu(gpu), get_model(model)
    name = profile_name(gpu_spec.key, model_spec.key, tp)
    if name in shipped_profile_names():
        return load_profile(shipped_profile_path(name))
    return roofline_profile(gpu_spec, model_spec, tp)


def check_identifiable(fit: FitResult, num_rows: int, source: str) -> None:
    """Without a prior every coefficient must come from the data: its rank must reach them all."""
    if not fit.unidentified_columns:
        return
    rank = len(COLUMNS) - len(fit.unidentified_columns)
    raise InputError(
        f"{num_rows} measurement row{'s' if num_rows != 1 else ''} (rank {rank}) cannot identify "
        f"the {len(COLUMNS)} coefficients: {', '.join(fit.unidentified_columns)} stay unknown; "
        "add rows of other shapes (prefill lengths, cached prefixes, decode batches) or give "
        "--gpu and --model so a prior profile supplies them",
        source=source,
    )


def calibrate(
    csv_path: Path, *, gpu: str | None = None, model: str | None = None, tp: int = 1
) -> Calibration:
    """Fit the §5.1 form to the measurements in `csv_path`."""
    measurements = read_measurements(csv_path)
    gpu_spec = get_gpu(gpu) if gpu is not None else None
    model_spec = get_model(model) if model is not None else None
    prior = prior_profile(gpu, model, tp)
    fit = fit_step_form(
        measurements,
        t_star_candidates(gpu_spec),
        prior.coefficients if prior is not None else None,
    )
    if prior is None:
        check_identifiable(fit, len(measurements), str(csv_path))
    gpu_key = gpu_spec.key if gpu_spec is not None else "unknown-gpu"
    model_key = model_spec.key if model_spec is not None else "unknown-model"
    provenance = (
        f"prefixsim calibrate {csv_path.name}: {len(measurements)} rows; fitted "
        f"{', '.join(fit.fitted_columns) or 'nothing'}"
    )
    if fit.prior_columns and prior is not None:
        kept = ", ".join(fit.prior_columns)
        provenance += f"; kept from {prior.source} profile {prior.name}: {kept}"
    if fit.zeroed_columns:
        provenance += f"; set to 0: {', '.join(fit.zeroed_columns)}"
    profile = Profile(
        name=profile_name(gpu_key, model_key, tp),
        gpu=gpu_key,
        model=model_key,
        tp=tp,
        dtype=model_spec.dtype if model_spec is not None else "as measured",
        engine="as measured",
        source="calibrated",
        provenance=provenance,
        coefficients=fit.coefficients,
        fit=FitQuality(len(measurements), fit.rms_rel_err, fit.max_rel_err),
        covered=fit.covered,
    )
    return Calibration(profile, fit, measurements, prior)
