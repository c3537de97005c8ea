"""Token mode "text": pieces become real text, wrapped in a chat template, tokenized by cl100k_base.

Consecutive pieces with the same role form one message (joined by a blank line). Every message
starts with a special token, so encoding message by message gives exactly the tokens of the
whole rendered prompt; each message's encoding is cached. A token belongs to the piece in which
its first character lies; template markers and separators form segments named "template".
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import groupby

import tiktoken

from workloads.chat_templates import chat_encoding, chat_template
from workloads.lru import WeightedLru
from workloads.prompt import Piece
from workloads.pseudo_text import pseudo_tokens
from workloads.spec import Segment

PIECE_SEPARATOR = "\n\n"
TEMPLATE_SEGMENT = "template"
DEFAULT_TEXT_CACHE_TOKENS = 2_000_000

# A message as a tuple of parts: (owner, text); owner is a piece position or None for template text.
_Part = tuple[int | None, str]


class TextTokens:
    """Renders pieces through a chat template and tokenizes them as the real tokenizer would."""

    def __init__(
        self, template: str = "chatml", cache_max_tokens: int = DEFAULT_TEXT_CACHE_TOKENS
    ) -> None:
        self.template = chat_template(template)
        self.encoding = chat_encoding(self.template.name)
        self._allowed_special = frozenset(name for name, _ in self.template.special_tokens)
        self._pseudo: WeightedLru[tuple[list[int], str]] = WeightedLru(cache_max_tokens)
        self._messages: WeightedLru[list[list[int]]] = WeightedLru(cache_max_tokens)

    def encode(self, text: str) -> list[int]:
        """Tokens of `text` with this template's markers recognised as special tokens."""
        return self.encoding.encode(
            text, allowed_special=self._allowed_special, disallowed_special=()
        )

    def render(self, pieces: Sequence[Piece]) -> list[Segment]:
        """Template-wrapped segments of the prompt, ending with the assistant generation prompt."""
        builder = _SegmentBuilder(self.encoding)
        if self.template.begin:
            builder.add(None, self._encode_parts(((None, self.template.begin),))[0])
        position = 0
        for role, group in groupby(pieces, key=lambda piece: piece.role):
            members = list(group)
            parts: list[_Part] = [
                (None, self.template.message_open.format(role=self.template.role_name(role)))
            ]
            for offset, piece in enumerate(members):
                if offset:
                    parts.append((None, PIECE_SEPARATOR))
                parts.append((position + offset, self.piece_text(piece)))
            parts.append((None, self.template.message_close))
            for (owner, _), tokens in zip(parts, self._encode_parts(tuple(parts)), strict=True):
                builder.add(pieces[owner] if owner is not None else None, tokens)
            position += len(members)
        builder.add(None, self._encode_parts(((None, self.template.generation_prompt),))[0])
        return builder.finish()

    def piece_text(self, piece: Piece) -> str:
        """The verbatim text of a piece, or its deterministic filler text."""
        if piece.text is not None:
            return piece.text
        return self._pseudo_entry(piece.content_id, piece.num_tokens)[1]

    def output_tokens(self, content_id: str, num_tokens: int) -> list[int]:
        """The answer's tokens; its history piece renders their decoded text."""
        return self._pseudo_entry(content_id, num_tokens)[0]

    def _pseudo_entry(self, content_id: str, num_tokens: int) -> tuple[list[int], str]:
        key = (content_id, num_tokens)
        entry = self._pseudo.get(key)
        if entry is None:
            tokens = pseudo_tokens(content_id, num_tokens, self.encoding)
            entry = (tokens, self.encoding.decode(tokens))
            self._pseudo.put(key, entry, num_tokens)
        return entry

    def _encode_parts(self, parts: tuple[_Part, ...]) -> list[list[int]]:
        """Tokens of the concatenated parts, split by the part holding each token's first char."""
        key = tuple(text for _, text in parts)
        cached = self._messages.get(key)
        if cached is not None:
            return cached
        tokens = self.encode("".join(key))
        _, offsets = self.encoding.decode_with_offsets(tokens)
        starts: list[int] = []
        length = 0
        for text in key:
            starts.append(length)
            length += len(text)
        per_part: list[list[int]] = [[] for _ in parts]
        for token, offset in zip(tokens, offsets, strict=True):
            per_part[bisect_right(starts, offset) - 1].append(token)
        self._messages.put(key, per_part, len(tokens))
        return per_part


class _SegmentBuilder:
    """Collects tokens per owner, merging consecutive template tokens into one segment."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._encoding = encoding
        self._segments: list[Segment] = []
        self._template_tokens: list[int] = []

    def add(self, piece: Piece | None, tokens: list[int]) -> None:
        if piece is None:
            self._template_tokens.extend(tokens)
            return
        self._flush_template()
        self._segments.append(Segment(piece.slot, piece.content_id, tokens))

    def finish(self) -> list[Segment]:
        self._flush_template()
        return self._segments

    def _flush_template(self) -> None:
        if self._template_tokens:
            text = self._encoding.decode(self._template_tokens)
            self._segments.append(
                Segment(TEMPLATE_SEGMENT, f"template:{text}", self._template_tokens)
            )
            self._template_tokens = []
