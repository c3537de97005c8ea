"""Step-time profiles: the §5.1 coefficients of one (GPU, model, tp) with their provenance, as YAML.

Shipped profiles live in `data/profiles/<gpu>/<model>/tp<N>.yaml`, named `<gpu>/<model>/tp<N>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from sim.costmodel.frontend import FrontEnd, frontend_from_mapping, frontend_to_mapping
from sim.costmodel.model import FeatureRanges, StepCoefficients
from sim.costmodel.spec_types import GpuSpec, ModelSpec
from sim.costmodel.specs import get_gpu, get_model
from sim.errors import InputError
from sim.fileio import atomic_write_bytes

SHIPPED_PROFILE_DIR = Path(__file__).parent / "data" / "profiles"
FORM = (
    "step_s = step_overhead_s + per_token_s * max(T, t_star_tokens) + per_attention_pair_s * S"
    " + per_kv_token_s * K + per_decode_seq_s * B_dec"
)
_NAME_PATTERN = re.compile(r"^([^/]+)/([^/]+)/tp(\d+)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FitQuality:
    num_rows: int
    rms_rel_err: float
    max_rel_err: float


@dataclass(frozen=True, slots=True)
class Profile:
    """Coefficients and their origin; `source` is kernel-derived, calibrated or roofline."""

    name: str
    gpu: str
    model: str
    tp: int
    dtype: str
    engine: str
    source: str
    provenance: str
    coefficients: StepCoefficients
    fit: FitQuality | None = None
    covered: FeatureRanges | None = None
    frontend: FrontEnd | None = None  # calibrated from serving runs; None: the shipped one


def profile_name(gpu: str, model: str, tp: int) -> str:
    return f"{gpu}/{model}/tp{tp}"


def spec_profile(
    gpu: GpuSpec,
    model: ModelSpec,
    tp: int,
    *,
    engine: str,
    source: str,
    provenance: str,
    coefficients: StepCoefficients,
    fit: FitQuality | None = None,
    covered: FeatureRanges | None = None,
) -> Profile:
    """A profile of a spec'd (gpu, model, tp): named after their keys, in the model's dtype."""
    return Profile(
        name=profile_name(gpu.key, model.key, tp),
        gpu=gpu.key,
        model=model.key,
        tp=tp,
        dtype=model.dtype,
        engine=engine,
        source=source,
        provenance=provenance,
        coefficients=coefficients,
        fit=fit,
        covered=covered,
    )


def is_profile_name(spec: str) -> bool:
    return _NAME_PATTERN.match(spec.strip()) is not None


def shipped_profile_path(name: str) -> Path:
    """File of the shipped profile `name` ("h100/llama-3.1-8b/tp1"; GPU/model aliases accepted)."""
    match = _NAME_PATTERN.match(name.strip())
    if match is None:
        raise InputError(f"profile name {name!r} is not of the form <gpu>/<model>/tp<N>")
    gpu_key = get_gpu(match.group(1)).key
    model_key = get_model(match.group(2)).key
    path = SHIPPED_PROFILE_DIR / gpu_key / model_key / f"tp{int(match.group(3))}.yaml"
    if not path.is_file():
        raise InputError(
            f"no shipped profile {profile_name(gpu_key, model_key, int(match.group(3)))!r}; "
            f"shipped: {', '.join(shipped_profile_names())} "
            "(use 'roofline' with gpu/model/tp for other combinations)"
        )
    return path


def shipped_profile_names() -> list[str]:
    return sorted(
        profile_name(path.parent.parent.name, path.parent.name, int(path.stem[2:]))
        for path in SHIPPED_PROFILE_DIR.glob("*/*/tp*.yaml")
    )


def load_profile(path: Path) -> Profile:
    """Read and check a profile YAML; problems raise InputError naming the file and field.
    Each text is parsed once per process: a run's validation, selection and summary, and a
    sweep's runs, read the same few files."""
    source = str(path)
    if not path.is_file():
        raise InputError("profile file not found", source=source)
    text = path.read_text()
    profile = _PARSED_PROFILES.get(text)
    if profile is None:
        profile = _parse_profile(text, source)
        if len(_PARSED_PROFILES) >= MAX_PARSED_PROFILES:
            _PARSED_PROFILES.clear()
        _PARSED_PROFILES[text] = profile
    return profile


# A profile (immutable) is a function of its file's text alone (the file names only errors).
_PARSED_PROFILES: dict[str, Profile] = {}
MAX_PARSED_PROFILES = 256


def _parse_profile(text: str, source: str) -> Profile:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML: {error}", source=source, line=line) from None
    if not isinstance(document, dict):
        raise InputError("a profile must be a YAML mapping", source=source)
    reader = _FieldReader(document, source)
    coefficients = _read_coefficients(reader.mapping("coefficients"))
    fit_fields = reader.optional_mapping("fit")
    covered_fields = reader.optional_mapping("covered")
    return Profile(
        name=reader.text("name"),
        gpu=reader.text("gpu"),
        model=reader.text("model"),
        tp=reader.positive_int("tp"),
        dtype=reader.text("dtype"),
        engine=reader.text("engine"),
        source=reader.text("source"),
        provenance=reader.text("provenance"),
        coefficients=coefficients,
        fit=_read_fit(fit_fields) if fit_fields is not None else None,
        covered=_read_covered(covered_fields) if covered_fields is not None else None,
        frontend=(
            frontend_from_mapping(document["frontend"], source) if "frontend" in document else None
        ),
    )


def save_profile(profile: Profile, path: Path) -> None:
    """Write `profile` as YAML atomically (temp file in the same folder, then rename)."""
    document: dict[str, Any] = {
        "name": profile.name,
        "gpu": profile.gpu,
        "model": profile.model,
        "tp": profile.tp,
        "dtype": profile.dtype,
        "engine": profile.engine,
        "source": profile.source,
        "provenance": profile.provenance,
        "form": FORM,
        "coefficients": {
            f.name: getattr(profile.coefficients, f.name) for f in fields(StepCoefficients)
        },
    }
    if profile.fit is not None:
        document["fit"] = {f.name: getattr(profile.fit, f.name) for f in fields(FitQuality)}
    if profile.covered is not None:
        document["covered"] = {
            f.name: tuple(getattr(profile.covered, f.name)) for f in fields(FeatureRanges)
        }
    if profile.frontend is not None:
        document["frontend"] = frontend_to_mapping(profile.frontend)
    text = yaml.dump(document, Dumper=_ProfileDumper, sort_keys=False, width=100)
    atomic_write_bytes(path, text.encode())


class _ProfileDumper(yaml.SafeDumper):
    """Block style, except (min, max) ranges, which read best on one line."""


_ProfileDumper.add_representer(
    tuple,
    lambda dumper, value: dumper.represent_sequence(
        "tag:yaml.org,2002:seq", value, flow_style=True
    ),
)


class _FieldReader:
    """Typed access to a mapping's fields; a missing or mistyped field raises InputError."""

    def __init__(self, mapping: dict, source: str, prefix: str = "") -> None:
        self._mapping = mapping
        self._source = source
        self._prefix = prefix

    def _get(self, key: str) -> Any:
        if key not in self._mapping:
            raise InputError(f"missing field {self._prefix}{key}", source=self._source)
        return self._mapping[key]

    def _fail(self, key: str, value: Any, allowed: str) -> InputError:
        return InputError(
            f"field {self._prefix}{key} = {value!r}: expected {allowed}", source=self._source
        )

    def text(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self._fail(key, value, "a string")
        return value

    def positive_int(self, key: str) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._fail(key, value, "a positive integer")
        return value

    def non_negative_number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise self._fail(key, value, "a number >= 0")
        return float(value)

    def non_negative_int(self, key: str) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._fail(key, value, "an integer >= 0")
        return value

    def number_range(self, key: str) -> tuple[float, float]:
        value = self._get(key)
        if (
            not isinstance(value, list)
            or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)
            or value[0] > value[1]
        ):
            raise self._fail(key, value, "[min, max] with min <= max")
        return (value[0], value[1])

    def mapping(self, key: str) -> _FieldReader:
        value = self._get(key)
        if not isinstance(value, dict):
            raise self._fail(key, value, "a mapping")
        return _FieldReader(value, self._source, f"{self._prefix}{key}.")

    def optional_mapping(self, key: str) -> _FieldReader | None:
        return self.mapping(key) if key in self._mapping else None


def _read_coefficients(reader: _FieldReader) -> StepCoefficients:
    return StepCoefficients(
        step_overhead_s=reader.non_negative_number("step_overhead_s"),
        per_token_s=reader.non_negative_number("per_token_s"),
        t_star_tokens=reader.non_negative_int("t_star_tokens"),
        per_attention_pair_s=reader.non_negative_number("per_attention_pair_s"),
        per_kv_token_s=reader.non_negative_number("per_kv_token_s"),
        per_decode_seq_s=reader.non_negative_number("per_decode_seq_s"),
    )


def _read_fit(reader: _FieldReader) -> FitQuality:
    return FitQuality(
        num_rows=reader.positive_int("num_rows"),
        rms_rel_err=reader.non_negative_number("rms_rel_err"),
        max_rel_err=reader.non_negative_number("max_rel_err"),
    )


def _read_covered(reader: _FieldReader) -> FeatureRanges:
    return FeatureRanges(**{f.name: reader.number_range(f.name) for f in fields(FeatureRanges)})
