"""The strict pydantic base every scenario section uses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class StrictModel(BaseModel):
    """Strict types (YAML `"5"` is not 5), frozen; unknown keys rejected with the allowed list."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = set(cls.model_fields)
            unknown = sorted(str(key) for key in data if key not in allowed)
            if unknown:
                raise ValueError(
                    f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}"
                )
        return data
