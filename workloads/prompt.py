"""Prompt pieces (what a generator puts in a prompt) and the token modes that render them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from workloads.spec import Segment

ROLES = ("system", "user", "assistant", "tool")


@dataclass(slots=True, frozen=True)
class Piece:
    """One piece of prompt content before tokenization.

    `slot` is the layout slot it belongs to, `content_id` its identity (equal ids mean equal
    content), `role` the chat role it is rendered under in text mode, `num_tokens` its length in
    synthetic mode (and its approximate length in text mode unless `text` is given verbatim).
    """

    slot: str
    content_id: str
    role: str
    num_tokens: int
    text: str | None = None


class TokenMode(Protocol):
    """Turns pieces into token segments and makes the tokens of generated answers."""

    def render(self, pieces: Sequence[Piece]) -> list[Segment]:
        """The prompt's segments, in order."""
        ...

    def output_tokens(self, content_id: str, num_tokens: int) -> list[int]:
        """Exactly `num_tokens` tokens the fake model emits for answer `content_id`."""
        ...
