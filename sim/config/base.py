"""The strict pydantic base every scenario section uses."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

# A run's seed is stored in int64 columns (a sweep's manifest).
MAX_SEED = 2**63 - 1


def field_problem(field: str, message: str) -> PydanticCustomError:
    """A problem found by a model validator, reported at `field` (so errors show its line)."""
    return PydanticCustomError("field_problem", "{message}", {"field": field, "message": message})


class StrictModel(BaseModel):
    """Strict types (YAML `"5"` is not 5), finite numbers, frozen; unknown keys rejected."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = sorted(cls.model_fields)
            unknown = [key for key in data if key not in cls.model_fields]
            if unknown:
                key = unknown[0]
                close = difflib.get_close_matches(str(key), allowed, n=1)
                suggestion = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown key {key!r}{suggestion}; allowed: {', '.join(allowed)}"
                raise PydanticCustomError(
                    "unknown_key", "{message}", {"key": key, "message": message}
                )
        return data
