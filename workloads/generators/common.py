"""Pieces every generator can put in a prompt (system prompt, tools, few-shot, user fields)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from workloads.distributions import Exponential, Fixed, LogNormal, Uniform
from workloads.errors import WorkloadError
from workloads.layout import SLOT_ROLES, PromptLayout
from workloads.prompt import Piece
from workloads.validation import require_int

_DISTRIBUTIONS = (Fixed, Uniform, LogNormal, Exponential)


@dataclass(slots=True, frozen=True)
class CommonSlots:
    """Lengths of the shared and per-user slots; a length of 0 leaves the slot out.

    `num_prompt_variants` distinct system prompt / tools / few-shot sets exist; each session (or
    open-loop request) uses one, uniformly. `system_prompt_text`, when given, is the verbatim
    system prompt in text mode (one variant only); in synthetic mode its hash names the content.
    """

    system_prompt_tokens: int = 256
    system_prompt_text: str | None = None
    num_prompt_variants: int = 1
    tools_tokens: int = 0
    few_shot_tokens: int = 0
    user_id_tokens: int = 0
    timestamp_tokens: int = 0

    def __post_init__(self) -> None:
        for name in (
            "system_prompt_tokens",
            "tools_tokens",
            "few_shot_tokens",
            "user_id_tokens",
            "timestamp_tokens",
        ):
            require_int("CommonSlots", name, getattr(self, name), 0)
        require_int("CommonSlots", "num_prompt_variants", self.num_prompt_variants, 1)
        if self.system_prompt_text is not None:
            if not isinstance(self.system_prompt_text, str) or not self.system_prompt_text:
                raise WorkloadError(
                    f"CommonSlots.system_prompt_text: {self.system_prompt_text!r} is not allowed; "
                    "use a non-empty string or null"
                )
            if self.num_prompt_variants != 1:
                raise WorkloadError(
                    f"CommonSlots.num_prompt_variants: {self.num_prompt_variants} is not allowed "
                    "with system_prompt_text; use 1"
                )

    def produced_slots(self) -> list[str]:
        """The slots these settings fill."""
        slots = []
        if self.system_prompt_tokens or self.system_prompt_text is not None:
            slots.append("system_prompt")
        if self.tools_tokens:
            slots.append("tools")
        if self.few_shot_tokens:
            slots.append("few_shot")
        if self.user_id_tokens or self.timestamp_tokens:
            slots.append("user_fields")
        return slots

    def pieces(
        self, namespace: str, variant: int, user_key: str, request_key: str
    ) -> dict[str, list[Piece]]:
        """The common slots' pieces for one request of user `user_key`."""
        pieces: dict[str, list[Piece]] = {}
        if self.system_prompt_text is not None:
            digest = hashlib.blake2b(self.system_prompt_text.encode(), digest_size=8).hexdigest()
            pieces["system_prompt"] = [
                Piece(
                    "system_prompt",
                    f"{namespace}/system/{digest}",
                    SLOT_ROLES["system_prompt"],
                    self.system_prompt_tokens,
                    self.system_prompt_text,
                )
            ]
        elif self.system_prompt_tokens:
            pieces["system_prompt"] = [
                _slot_piece(
                    "system_prompt", f"{namespace}/system/{variant}", self.system_prompt_tokens
                )
            ]
        if self.tools_tokens:
            pieces["tools"] = [
                _slot_piece("tools", f"{namespace}/tools/{variant}", self.tools_tokens)
            ]
        if self.few_shot_tokens:
            pieces["few_shot"] = [
                _slot_piece("few_shot", f"{namespace}/few_shot/{variant}", self.few_shot_tokens)
            ]
        user_fields = []
        if self.user_id_tokens:
            user_fields.append(
                _slot_piece("user_fields", f"{namespace}/user_id/{user_key}", self.user_id_tokens)
            )
        if self.timestamp_tokens:
            user_fields.append(
                _slot_piece(
                    "user_fields", f"{namespace}/timestamp/{request_key}", self.timestamp_tokens
                )
            )
        if user_fields:
            pieces["user_fields"] = user_fields
        return pieces


def _slot_piece(slot: str, content_id: str, num_tokens: int) -> Piece:
    return Piece(slot, content_id, SLOT_ROLES[slot], num_tokens)


def require_distribution(owner: str, name: str, value: object) -> None:
    """`value` must be one of the distribution dataclasses."""
    if not isinstance(value, _DISTRIBUTIONS):
        allowed = ", ".join(kind.__name__ for kind in _DISTRIBUTIONS)
        raise WorkloadError(
            f"{owner}.{name}: {value!r} is not a distribution; use one of {allowed}"
        )


def require_name(owner: str, name: object) -> None:
    """A generator name (it prefixes ids and content identities) must be a non-empty string."""
    if not isinstance(name, str) or not name or "/" in name:
        raise WorkloadError(
            f"{owner}.name: {name!r} is not allowed; use a non-empty string without '/'"
        )


def require_layout(owner: str, layout: object, slots: list[str]) -> None:
    """`layout` must be a PromptLayout with a place for every produced slot."""
    if not isinstance(layout, PromptLayout):
        raise WorkloadError(f"{owner}.layout: {layout!r} is not a PromptLayout")
    layout.require(slots, owner)


def require_max_context(owner: str, value: object) -> None:
    """`max_context_tokens` is None or a positive int."""
    if value is not None:
        require_int(owner, "max_context_tokens", value, 1)
