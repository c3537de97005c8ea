"""Prompt layouts: a named order of slots; one workload under two layouts differs in order only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workloads.errors import WorkloadError
from workloads.prompt import Piece

SLOT_NAMES = (
    "system_prompt",
    "tools",
    "few_shot",
    "documents",
    "history",
    "user_fields",
    "question",
)

# Chat role each slot renders under in text mode; history pieces carry their own roles.
SLOT_ROLES = {
    "system_prompt": "system",
    "tools": "system",
    "few_shot": "system",
    "documents": "user",
    "user_fields": "system",
    "question": "user",
}


@dataclass(slots=True, frozen=True)
class PromptLayout:
    """The order in which a prompt's slots appear; slots a workload does not produce are skipped."""

    name: str
    order: tuple[str, ...]

    def __post_init__(self) -> None:
        allowed = ", ".join(SLOT_NAMES)
        for slot in self.order:
            if slot not in SLOT_NAMES:
                raise WorkloadError(
                    f"layout {self.name!r}: segment {slot!r} is not known; allowed: {allowed}"
                )
        duplicates = sorted({slot for slot in self.order if self.order.count(slot) > 1})
        if duplicates:
            raise WorkloadError(
                f"layout {self.name!r}: segments {duplicates} appear more than once; "
                "each segment may appear once"
            )

    def require(self, slots: Sequence[str], workload: str) -> None:
        """Raise unless every slot the workload produces has a place in this layout."""
        missing = [slot for slot in slots if slot not in self.order]
        if missing:
            raise WorkloadError(
                f"layout {self.name!r} lacks segments {missing} that the {workload} workload "
                f"produces; the layout lists {list(self.order)}"
            )

    def arrange(self, pieces_by_slot: Mapping[str, Sequence[Piece]]) -> list[Piece]:
        """The pieces of every slot, in layout order (within a slot, in the given order)."""
        arranged: list[Piece] = []
        for slot in self.order:
            arranged.extend(pieces_by_slot.get(slot, ()))
        return arranged


CHAT_LAYOUT = PromptLayout(
    "chat", ("system_prompt", "tools", "few_shot", "history", "user_fields", "question")
)
CHAT_USER_FIELDS_FIRST_LAYOUT = PromptLayout(
    "chat_user_fields_first",
    ("user_fields", "system_prompt", "tools", "few_shot", "history", "question"),
)
AGENT_LAYOUT = PromptLayout(
    "agent", ("system_prompt", "tools", "user_fields", "question", "history")
)
RAG_DOCUMENTS_FIRST_LAYOUT = PromptLayout(
    "rag_documents_first", ("system_prompt", "few_shot", "documents", "user_fields", "question")
)
RAG_QUESTION_FIRST_LAYOUT = PromptLayout(
    "rag_question_first", ("system_prompt", "few_shot", "user_fields", "question", "documents")
)

BUILTIN_LAYOUTS = {
    layout.name: layout
    for layout in (
        CHAT_LAYOUT,
        CHAT_USER_FIELDS_FIRST_LAYOUT,
        AGENT_LAYOUT,
        RAG_DOCUMENTS_FIRST_LAYOUT,
        RAG_QUESTION_FIRST_LAYOUT,
    )
}


def builtin_layout(name: str) -> PromptLayout:
    """A built-in layout by name; unknown names raise WorkloadError listing the allowed ones."""
    layout = BUILTIN_LAYOUTS.get(name)
    if layout is None:
        raise WorkloadError(
            f"layout: {name!r} is not a built-in layout; allowed: {', '.join(BUILTIN_LAYOUTS)}"
        )
    return layout
