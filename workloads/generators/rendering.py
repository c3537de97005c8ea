"""From the pieces of a session's prompts to token segments, prompt arrays and output tokens.

Any token mode renders prompt by prompt (`TokenMode.render`). Synthetic tokens take a faster
road, decided here alone: the session's distinct contents are laid out once, end to end in the
order they first appear, in one buffer whose session-private part is synthesised in one numpy
pass; segments are views into it, and a prompt whose contents lie there back to back (each
turn repeating the previous prompt and its answer, then adding to them) is one slice of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from workloads.prompt import Piece, TokenMode
from workloads.spec import Segment, TokenArray
from workloads.synthetic_tokens import SyntheticTokens

# A turn's prompt segments, its prompt as one array (None: join the segments) and its output.
RenderedTurn = tuple[list[Segment], TokenArray | None, list[int]]
# An answer: the content identity of the tokens the fake model emits, and how many.
Answer = tuple[str, int]

# Slots whose contents recur across sessions: kept in the token mode's cache. The others are
# a session's own and synthesised with it.
_SHARED_SLOTS = frozenset({"system_prompt", "tools", "few_shot", "documents"})


def render_turns(
    tokens: TokenMode, prompts: Sequence[Sequence[Piece]], answers: Sequence[Answer]
) -> Iterator[RenderedTurn]:
    """Each turn's segments, prompt array and output tokens, in turn order (lazily)."""
    if isinstance(tokens, SyntheticTokens):
        return _synthetic_turns(tokens, prompts, answers)
    return (
        (tokens.render(pieces), None, tokens.output_tokens(*answer))
        for pieces, answer in zip(prompts, answers, strict=True)
    )


def _synthetic_turns(
    tokens: SyntheticTokens, prompts: Sequence[Sequence[Piece]], answers: Sequence[Answer]
) -> Iterator[RenderedTurn]:
    """`render_turns` for synthetic tokens: one buffer per session, views into it."""
    # Where each distinct content (identity and length) lies, in order of first appearance:
    # every turn's prompt, then its answer.
    index_of: dict[Answer, int] = {}
    contents: list[Answer] = []
    shared: list[bool] = []
    turn_indices: list[list[int]] = []
    for pieces, answer in zip(prompts, answers, strict=True):
        indices = []
        for key, is_shared in (
            *(
                ((piece.content_id, piece.num_tokens), piece.slot in _SHARED_SLOTS)
                for piece in pieces
            ),
            (answer, False),
        ):
            index = index_of.get(key)
            if index is None:
                index = index_of[key] = len(contents)
                contents.append(key)
                shared.append(is_shared)
            indices.append(index)
        turn_indices.append(indices)
    buffer, starts = _session_buffer(tokens, contents, shared)
    segment_of: dict[int, Segment] = {}  # by id(piece): carried pieces recur as one object
    for pieces, indices in zip(prompts, turn_indices, strict=True):
        segments = []
        for piece, index in zip(pieces, indices, strict=False):
            segment = segment_of.get(id(piece))
            if segment is None:
                start = starts[index]
                segment = Segment(piece.slot, piece.content_id, buffer[start : starts[index + 1]])
                segment_of[id(piece)] = segment
            segments.append(segment)
        *prompt_indices, answer_index = indices
        back_to_back = all(
            following == index + 1
            for index, following in zip(prompt_indices, prompt_indices[1:], strict=False)
        )
        prompt_array = None
        if back_to_back and prompt_indices:
            prompt_array = buffer[starts[prompt_indices[0]] : starts[prompt_indices[-1] + 1]]
        output = buffer[starts[answer_index] : starts[answer_index + 1]].tolist()
        yield segments, prompt_array, output


def _session_buffer(
    tokens: SyntheticTokens, contents: Sequence[Answer], shared: Sequence[bool]
) -> tuple[TokenArray, list[int]]:
    """The contents' tokens end to end (read-only) and where each starts (one past the last:
    the end)."""
    own = [key for key, is_shared in zip(contents, shared, strict=True) if not is_shared]
    own_tokens = tokens.streams([content_id for content_id, _ in own], [n for _, n in own])
    parts: list[TokenArray] = []
    starts = [0]
    own_start = 0
    for (content_id, num_tokens), is_shared in zip(contents, shared, strict=True):
        if is_shared:
            parts.append(tokens.tokens(content_id, num_tokens))
        else:
            parts.append(own_tokens[own_start : own_start + num_tokens])
            own_start += num_tokens
        starts.append(starts[-1] + num_tokens)
    buffer = np.concatenate(parts)
    buffer.flags.writeable = False
    return buffer, starts
