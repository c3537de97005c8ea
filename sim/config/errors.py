"""Pydantic validation errors as one clear line: where, what was given, what is allowed."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from sim.config.yaml_source import ScenarioSource
from sim.errors import InputError

_NUMBER_LIKE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_YAML11_BOOLEAN_WORDS = ("yes", "no", "on", "off", "y", "n", "true", "false")
_MAX_SHOWN_CHARS = 80
# What each pydantic type error expected, in words, to merge the branches of a union.
_EXPECTED_TYPES = {
    "bool_type": "true or false",
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _float_literal(value: float) -> str:
    """`value` as YAML 1.1 reads a float: with a dot, and a signed exponent."""
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        text = f"{mantissa}.0e{exponent}"
    return text


def _yaml_hint(value: Any, expected: str) -> str:
    """Explain YAML 1.1 surprises: `1e3` is text, `no`/`on` are booleans, empty is null."""
    if isinstance(value, str) and _NUMBER_LIKE.match(value.strip()) and "e" in value.lower():
        number = float(value)
        if not math.isfinite(number):
            return f" ({value!r} is beyond the largest number a float holds, about 1.8e308)"
        if "integer" in expected and number.is_integer():
            suggestion = str(int(number))
        else:
            suggestion = _float_literal(number)
        return (
            f" (YAML 1.1 reads {value!r} as text: a float needs a dot and a signed exponent; "
            f"write {suggestion})"
        )
    if isinstance(value, bool) and "string" in expected:
        words = "/".join(_YAML11_BOOLEAN_WORDS)
        return f" (YAML 1.1 reads unquoted {words} as a boolean; quote the value)"
    if isinstance(value, str) and "true or false" in expected:
        return " (write true or false, unquoted)"
    if value is None:
        return " (an empty value is null in YAML)"
    return ""


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > _MAX_SHOWN_CHARS:
        size = len(value) if isinstance(value, str) else len(text)
        text = f"{text[: _MAX_SHOWN_CHARS - 3]}... ({size} characters)"
    return text


def _data_path(location: tuple[Any, ...], data: Any, *, keep_last: bool) -> list[str]:
    """The parts of a pydantic location that are keys or indexes of the input.

    Unions add their branch or tag names to the location; those are not in the input and are
    dropped. A missing field is not in the input either, so `keep_last` keeps the final part.
    """
    parts: list[str] = []
    current = data
    for position, part in enumerate(location):
        in_input = (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        )
        if in_input:
            current = current[part]
        elif not (keep_last and position == len(location) - 1):
            continue
        parts.append(str(part))
    return parts


def _problem_path(problem: ErrorDetails, data: Any) -> tuple[str, ...]:
    return tuple(_data_path(problem["loc"], data, keep_last=problem["type"] == "missing"))


def _shown_path(problem: ErrorDetails, path: tuple[str, ...]) -> tuple[str, ...]:
    """The path to show and look up: some problems are about one key inside the input there."""
    context = problem.get("ctx") or {}
    if problem["type"] == "unknown_key":
        return (*path, str(context["key"]))
    if problem["type"] == "field_problem":
        return (*path, context["field"])
    if problem["type"] == "union_tag_invalid":
        return (*path, context["discriminator"].strip("'"))
    return path


def _chosen(problems: list[ErrorDetails]) -> ErrorDetails:
    """Of the problems at one field (one per union branch), the one not only about the type."""
    return next((p for p in problems if p["type"] not in _EXPECTED_TYPES), problems[0])


def _describe(problem: ErrorDetails, problems: list[ErrorDetails]) -> str:
    """One problem at one field; union branches that failed on the type alone are merged."""
    kind = problem["type"]
    value = problem.get("input")
    context = problem.get("ctx") or {}
    message = problem["msg"].removeprefix("Value error, ")
    if kind in ("unknown_key", "field_problem"):
        return context["message"]
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        return f"{context['tag']!r} is not allowed; allowed: {context['expected_tags']}"
    if kind == "union_tag_not_found":
        return f"required field {context['discriminator']} is missing (it selects the kind)"
    if kind in _EXPECTED_TYPES:
        expected = {_EXPECTED_TYPES[p["type"]] for p in problems if p["type"] in _EXPECTED_TYPES}
        message = f"expected {' or '.join(sorted(expected))}"
    hint = _yaml_hint(value, message)
    if isinstance(value, dict | list) and kind not in _EXPECTED_TYPES:
        return f"{message}{hint}"
    shown = type(value).__name__ if isinstance(value, dict | list) else _shown(value)
    return f"{shown} is not allowed: {message}{hint}"


def validation_error_to_input_error(error: ValidationError, source: ScenarioSource) -> InputError:
    """The first validation problem as a one-line InputError (file:line: field: problem)."""
    problems = error.errors(include_url=False)
    paths = [_problem_path(problem, source.data) for problem in problems]
    # A union branch refusing a value by its type alone (a number, where a mapping was written)
    # gives way to what the branch that took the value found inside it.
    kept = [
        problem["type"] not in _EXPECTED_TYPES
        or not any(len(other) > len(path) and other[: len(path)] == path for other in paths)
        for problem, path in zip(problems, paths, strict=True)
    ]
    problems = [problem for problem, keep in zip(problems, kept, strict=True) if keep]
    paths = [path for path, keep in zip(paths, kept, strict=True) if keep]
    at_first_path = [p for p, path in zip(problems, paths, strict=True) if path == paths[0]]
    problem = _chosen(at_first_path)
    path = _shown_path(problem, paths[0])
    text = _describe(problem, at_first_path)
    if path:
        # A key written as a block scalar may span lines; the message must not.
        shown = ".".join(part if part.isprintable() else repr(part) for part in path)
        text = f"{shown}: {text}"
    num_others = len(set(paths)) - 1
    if num_others:
        text += f" (and {num_others} more problem{'s' if num_others > 1 else ''})"
    file_name, line = source.location(".".join(path))
    return InputError(text, source=file_name, line=line)
