"""The PROMPT.yaml of `prefixsim layout`: a prompt template's segments, the traffic, the orderings.

Each segment has a scope saying who shares its content: `static` (every request), `per_tenant`,
`per_user` (a user belongs to one tenant) or `per_request`. Its content is `text` (real text,
with placeholders allowed by its scope: {tenant}; {tenant} {user}; {tenant} {user} {request}
{time}), `filler_tokens` of deterministic filler text per scope key, or the text followed by
the filler. Literal braces are written doubled, as in Python format strings.
"""

from __future__ import annotations

import math
import string
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sim.config import StrictModel, field_problem
from sim.studies.study_runs import StudySettings

Scope = Literal["static", "per_tenant", "per_user", "per_request"]
SCOPES: tuple[Scope, ...] = ("static", "per_tenant", "per_user", "per_request")
PLACEHOLDERS_BY_SCOPE: dict[str, tuple[str, ...]] = {
    "static": (),
    "per_tenant": ("tenant",),
    "per_user": ("tenant", "user"),
    "per_request": ("tenant", "user", "request", "time"),
}
MAX_ORDERINGS_LIMIT = 5040  # 7!: beyond this the study takes too long to be interactive
SEGMENT_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


def text_placeholders(text: str) -> list[str]:
    """The placeholder names of a format string, in order; bad braces raise ValueError."""
    names: list[str] = []
    for _, name, format_spec, conversion in string.Formatter().parse(text):
        if name is None:
            continue
        if format_spec or conversion:
            raise ValueError(
                f"placeholder {{{name}}} has a format spec or conversion; write plain {{{name}}}"
            )
        names.append(name)
    return names


class PromptSegmentSettings(StrictModel):
    """One segment of the prompt template: its name, scope, chat role and content."""

    name: str = Field(pattern=SEGMENT_NAME_PATTERN)
    scope: Scope
    role: Literal["system", "user", "assistant", "tool"] = "system"
    text: str | None = None
    filler_tokens: int = Field(0, ge=0, le=100_000, validate_default=True)

    @field_validator("text")
    @classmethod
    def _placeholders_fit_scope(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None:
            return None
        if text == "":
            raise ValueError("text is empty; give some text or leave it out and use filler_tokens")
        scope = info.data.get("scope")
        if scope is None:
            return text
        allowed = PLACEHOLDERS_BY_SCOPE[scope]
        for name in text_placeholders(text):
            if name not in allowed:
                shown = ", ".join(f"{{{allowed_name}}}" for allowed_name in allowed) or "none"
                raise ValueError(
                    f"placeholder {{{name}}} is not allowed in a {scope} segment "
                    f"(allowed: {shown}); widen the scope or write literal braces as {{{{ }}}}"
                )
        return text

    @field_validator("filler_tokens")
    @classmethod
    def _has_content(cls, filler_tokens: int, info: ValidationInfo) -> int:
        # A text that failed validation is absent from info.data: report only that problem.
        if filler_tokens == 0 and "text" in info.data and info.data["text"] is None:
            raise ValueError("the segment has no content; give text, filler_tokens > 0, or both")
        return filler_tokens


class TrafficSettings(StrictModel):
    """Who sends requests and when: uniform tenants, uniform users per tenant, Poisson arrivals."""

    num_tenants: int = Field(1, ge=1, le=100_000)
    users_per_tenant: int = Field(1, ge=1, le=100_000)
    num_requests: int = Field(ge=1, le=1_000_000)
    request_rate_per_s: float = Field(gt=0)
    output_tokens: int = Field(64, ge=1, le=100_000)
    seed: int = Field(0, ge=0)


class LayoutStudySettings(StudySettings):
    """A prompt template to lay out, the traffic it serves and which orderings to compare."""

    chat_template: Literal["chatml", "qwen", "llama3"] = "chatml"
    segments: list[PromptSegmentSettings] = Field(min_length=2, max_length=16)
    traffic: TrafficSettings
    max_orderings: int = Field(120, ge=1, le=MAX_ORDERINGS_LIMIT)
    orderings: list[list[str]] | None = Field(
        None,
        validate_default=True,
        description="orderings to evaluate (each lists every segment once); default: all",
    )

    @field_validator("segments")
    @classmethod
    def _unique_names(cls, segments: list[PromptSegmentSettings]) -> list[PromptSegmentSettings]:
        names = [segment.name for segment in segments]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"segment names {duplicates} repeat; each name must be unique")
        return segments

    @field_validator("orderings")
    @classmethod
    def _orderings_are_permutations(
        cls, orderings: list[list[str]] | None, info: ValidationInfo
    ) -> list[list[str]] | None:
        segments = info.data.get("segments")
        max_orderings = info.data.get("max_orderings")
        if segments is None or max_orderings is None:
            return orderings
        names = [segment.name for segment in segments]
        if orderings is None:
            return None
        if len(orderings) > max_orderings:
            raise ValueError(
                f"{len(orderings)} orderings listed, more than max_orderings ({max_orderings})"
            )
        seen: set[tuple[str, ...]] = set()
        for index, ordering in enumerate(orderings):
            if sorted(ordering) != sorted(names):
                raise ValueError(
                    f"ordering {index} {ordering} must list every segment exactly once: "
                    f"{', '.join(names)}"
                )
            if tuple(ordering) in seen:
                raise ValueError(f"ordering {index} {ordering} is listed twice")
            seen.add(tuple(ordering))
        return orderings

    @model_validator(mode="after")
    def _every_ordering_within_the_limit(self) -> LayoutStudySettings:
        """Without `orderings`, every ordering of the segments is compared: at most
        max_orderings of them (reported at max_orderings, whose line a file shows)."""
        num_orderings = math.factorial(len(self.segments))
        if self.orderings is None and num_orderings > self.max_orderings:
            raise field_problem(
                "max_orderings",
                f"{len(self.segments)} segments have {num_orderings} orderings, more than "
                f"max_orderings ({self.max_orderings}); list the ones to compare under "
                f"'orderings' or raise max_orderings (at most {MAX_ORDERINGS_LIMIT})",
            )
        return self
