"""Pydantic validation errors as one clear line: where, what was given, what is allowed."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from sim.config.yaml_source import ScenarioSource
from sim.errors import InputError

_NUMBER_LIKE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_YAML11_BOOLEAN_WORDS = ("yes", "no", "on", "off", "y", "n", "true", "false")


def _yaml_hint(value: Any, expected: str) -> str:
    """Explain YAML 1.1 surprises: `1e3` is text, `no`/`on` are booleans."""
    if isinstance(value, str) and _NUMBER_LIKE.match(value.strip()) and "e" in value.lower():
        return (
            f" (YAML 1.1 reads {value!r} as text because it has no decimal point; "
            f"write {float(value):.1f} or {float(value):.1e} with a dot, e.g. 1.0e3)"
        )
    if isinstance(value, bool) and "str" in expected:
        words = "/".join(_YAML11_BOOLEAN_WORDS)
        return f" (YAML 1.1 reads unquoted {words} as a boolean; quote the value)"
    return ""


def _dotted(location: tuple[Any, ...]) -> str:
    # Discriminated unions add the tag name to the location; drop those synthetic parts.
    return ".".join(str(part) for part in location if not str(part).startswith("function-"))


def validation_error_to_input_error(error: ValidationError, source: ScenarioSource) -> InputError:
    """The first validation problem as a one-line InputError (file:line: field: problem)."""
    problem = error.errors(include_url=False)[0]
    dotted = _dotted(problem["loc"])
    file_name, line = source.location(dotted)
    value = problem.get("input")
    message = problem["msg"]
    if problem["type"] == "extra_forbidden":
        allowed = problem.get("ctx", {}).get("allowed")
        text = f"{dotted}: unknown key" + (f"; allowed: {allowed}" if allowed else "")
    elif problem["type"] == "missing":
        text = f"{dotted}: required field is missing"
    else:
        shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
        text = f"{dotted}: {shown} is not allowed: {message}{_yaml_hint(value, message)}"
    count = error.error_count()
    if count > 1:
        text += f" (and {count - 1} more problem{'s' if count > 2 else ''})"
    return InputError(text, source=file_name, line=line)
