"""The serving front end around the engine (docs/cost_model.md, "Front end").

A request spends time in the API server before the engine sees it (HTTP parsing, chat template
and tokenization, which grows with the prompt, hand-off to the engine process) and after the
engine emits its first token (detokenization and streaming it back). Both are CPU work outside
the GPU step, so the step-time model cannot hold them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from sim.errors import InputError

SHIPPED_FRONTEND_PATH = Path(__file__).parent / "data" / "frontend.yaml"
FRONTEND_SPECS = (
    "'auto' (a calibrated profile's front end, none for constant:/linear: models, else the "
    "shipped one) or 'none'"
)


@dataclass(frozen=True, slots=True)
class FrontEnd:
    """Seconds the API server adds to a request, on the way in and for the first token out."""

    request_s: float  # HTTP request handling and hand-off to the engine, per request
    per_prompt_token_s: float  # tokenization (and chat templating), per prompt token
    first_token_s: float  # detokenizing and streaming the first token back

    def ingress_s(self, num_prompt_tokens: int) -> float:
        """Arrival at the API server to arrival at the engine."""
        return self.request_s + self.per_prompt_token_s * num_prompt_tokens

    @property
    def is_zero(self) -> bool:
        return self.request_s == 0 and self.per_prompt_token_s == 0 and self.first_token_s == 0


NO_FRONTEND = FrontEnd(0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class FrontEndProfile:
    """A front end with where its numbers came from."""

    frontend: FrontEnd
    provenance: str


def frontend_from_mapping(document: Any, source: str) -> FrontEnd:
    """The `frontend:` mapping of a profile or of the shipped file; bad fields raise InputError."""
    if not isinstance(document, dict):
        raise InputError("field frontend: expected a mapping", source=source)
    values = {}
    for field in fields(FrontEnd):
        value = document.get(field.name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise InputError(
                f"field frontend.{field.name} = {value!r}: expected a number of seconds >= 0",
                source=source,
            )
        values[field.name] = float(value)
    return FrontEnd(**values)


def frontend_to_mapping(frontend: FrontEnd) -> dict[str, float]:
    return {field.name: getattr(frontend, field.name) for field in fields(FrontEnd)}


@functools.cache
def load_shipped_frontend() -> FrontEndProfile:
    """The front end fitted to the vendored serving measurements (see its provenance)."""
    document = yaml.safe_load(SHIPPED_FRONTEND_PATH.read_text())
    frontend = frontend_from_mapping(document.get("frontend"), str(SHIPPED_FRONTEND_PATH))
    return FrontEndProfile(frontend, str(document.get("provenance", "")))


def resolve_frontend(spec: str, profile_frontend: FrontEnd | None) -> FrontEnd:
    """The front end a scenario's `frontend` string names; 'auto' takes `profile_frontend` (the
    cost model's own) when there is one, else the shipped front end."""
    if spec == "none":
        return NO_FRONTEND
    if spec == "auto":
        if profile_frontend is not None:
            return profile_frontend
        return load_shipped_frontend().frontend
    raise InputError(f"unknown frontend {spec!r}; expected {FRONTEND_SPECS}")
