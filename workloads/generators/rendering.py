"""From a session's plan to each turn's prompt segments, prompt array and output tokens.

A plan names the session's own contents once and says, per turn, which it asks (the question
slot), which it answers, and which the history gains after it. Any token mode renders it
prompt by prompt: pieces arranged by the layout, through `TokenMode.render`. Synthetic tokens
take a faster road, decided here alone: the session's distinct contents are laid out once, in
the order they first appear, in one buffer whose own part is synthesised in one numpy pass;
segments are views into it, a slot's segments are built once and the history grows by its
gain, and a prompt whose slots lie back to back in the buffer (each turn repeating the previous
prompt and its answer, then adding to them) is one slice of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workloads.layout import PromptLayout
from workloads.prompt import Piece, TokenMode
from workloads.spec import Segment, TokenArray
from workloads.synthetic_tokens import SyntheticTokens

# Slots whose contents recur across sessions: kept in the token mode's cache. The session's
# own contents and the other slots' (user fields) are synthesised with the session.
_SHARED_SLOTS = frozenset({"system_prompt", "tools", "few_shot", "documents"})

# Per turn, the pieces of the slots the plan does not fill (common slots, documents).
SlotPieces = Mapping[str, Sequence[Piece]]
# A content by identity and length.
Content = tuple[str, int]


@dataclass(slots=True)
class SessionPlan:
    """A session's own contents (identity, chat role, length) and, per turn, the indices of
    those it asks, answers and carries: after turn k the history gains carried_before[k], the
    answer (as an assistant piece), then carried_after[k]."""

    content_ids: list[str]
    roles: list[str]
    lengths: list[int]
    questions: list[tuple[int, ...]]
    answers: list[int]
    carried_before: list[tuple[int, ...]]
    carried_after: list[tuple[int, ...]]

    @classmethod
    def one_question(cls, question: Content, answer: Content) -> SessionPlan:
        """One turn: a user's question (identity, length) and its answer."""
        (question_id, question_tokens), (answer_id, answer_tokens) = question, answer
        return cls(
            [question_id, answer_id],
            ["user", "assistant"],
            [question_tokens, answer_tokens],
            questions=[(0,)],
            answers=[1],
            carried_before=[()],
            carried_after=[()],
        )

    def gain(self, turn: int) -> tuple[int, ...]:
        """The contents the history gains after `turn`, in order."""
        return (*self.carried_before[turn], self.answers[turn], *self.carried_after[turn])

    def piece(self, slot: str, content: int) -> Piece:
        """Content `content` as a piece of `slot`."""
        return Piece(slot, self.content_ids[content], self.roles[content], self.lengths[content])


@dataclass(slots=True)
class RenderedTurn:
    """A turn's prompt segments, its prompt as one array (None: join the segments), its length
    and the output tokens."""

    segments: list[Segment]
    prompt_array: TokenArray | None
    num_prompt_tokens: int
    output_tokens: list[int]


def render_session(
    tokens: TokenMode, plan: SessionPlan, turn_slots: Sequence[SlotPieces], layout: PromptLayout
) -> Iterator[RenderedTurn]:
    """Each turn's rendering, in turn order (lazily); `turn_slots` gives every turn's pieces of
    the slots besides history and question (the same mapping object where they do not change)."""
    if isinstance(tokens, SyntheticTokens):
        return _SyntheticSession(tokens, plan, turn_slots, layout).turns()
    return _render_prompts(tokens, plan, turn_slots, layout)


def _render_prompts(
    tokens: TokenMode, plan: SessionPlan, turn_slots: Sequence[SlotPieces], layout: PromptLayout
) -> Iterator[RenderedTurn]:
    """Prompt by prompt through the token mode."""
    history: list[Piece] = []
    for turn, slots in enumerate(turn_slots):
        question = [plan.piece("question", content) for content in plan.questions[turn]]
        segments = tokens.render(
            layout.arrange({**slots, "history": history, "question": question})
        )
        answer = plan.answers[turn]
        output = tokens.output_tokens(plan.content_ids[answer], plan.lengths[answer])
        yield RenderedTurn(segments, None, sum(len(s.tokens) for s in segments), output)
        history = [*history, *(plan.piece("history", content) for content in plan.gain(turn))]


# Consecutive segments of a prompt: (segments, start, stop, number of tokens). `start` is where
# their tokens begin in the session buffer when they lie there back to back, else -1; `stop` is
# where the last one ends. Plain tuples: a few are made per turn.
_Block = tuple[list[Segment], int, int, int]
_EMPTY: _Block = ([], -1, -1, 0)


def _join(blocks: Iterable[_Block]) -> _Block:
    """The blocks one after another, in a new list of segments."""
    segments: list[Segment] = []
    first = stop = -1
    back_to_back = True
    num_tokens = 0
    for block_segments, block_start, block_stop, block_tokens in blocks:
        if not block_segments:
            continue
        if not segments:
            first = block_start
        elif block_start != stop or block_start < 0:
            back_to_back = False
        segments += block_segments
        stop = block_stop
        num_tokens += block_tokens
    return segments, first if back_to_back else -1, stop, num_tokens


class _SyntheticSession:
    """A session's contents in one buffer: the common slots' pieces, then the session's own
    contents in plan order (the order a conversation first shows them)."""

    def __init__(
        self,
        tokens: SyntheticTokens,
        plan: SessionPlan,
        turn_slots: Sequence[SlotPieces],
        layout: PromptLayout,
    ) -> None:
        self._plan = plan
        self._turn_slots = turn_slots
        self._layout = layout
        self._piece_start: dict[str, int] = {}
        common: list[Piece] = []
        start = 0
        for slots in {id(slots): slots for slots in turn_slots}.values():
            for slot in layout.order:
                for piece in slots.get(slot, ()):
                    if piece.content_id not in self._piece_start:
                        self._piece_start[piece.content_id] = start
                        common.append(piece)
                        start += piece.num_tokens
        self._own_start = [start]
        for num_tokens in plan.lengths:
            start += num_tokens
            self._own_start.append(start)
        parts = tokens.tokens_many(
            [piece.content_id for piece in common], [piece.num_tokens for piece in common]
        )
        parts.append(tokens.streams(plan.content_ids, plan.lengths))
        self._buffer = np.concatenate(parts)
        self._buffer.flags.writeable = False

    def _block(self, entries: Iterable[tuple[str, str, int, int]]) -> _Block:
        """The block of (segment name, content identity, start, length) entries, in order."""
        buffer = self._buffer
        return _join(
            (
                [Segment(name, content_id, buffer[start : start + length])],
                start,
                start + length,
                length,
            )
            for name, content_id, start, length in entries
        )

    def _own_block(self, slot: str, contents: tuple[int, ...]) -> _Block:
        """The block of the session's own `contents` as segments named `slot` (they lie back to
        back where their indices follow one another)."""
        content_ids, buffer, own_start = self._plan.content_ids, self._buffer, self._own_start
        segments = []
        back_to_back = True
        previous = contents[0] - 1 if contents else 0
        for content in contents:
            start, stop = own_start[content], own_start[content + 1]
            segments.append(Segment(slot, content_ids[content], buffer[start:stop]))
            back_to_back = back_to_back and content == previous + 1
            previous = content
        if not contents:
            return _EMPTY
        first, stop = own_start[contents[0]], own_start[contents[-1] + 1]
        if back_to_back:
            return segments, first, stop, stop - first
        return segments, -1, stop, sum(len(segment.tokens) for segment in segments)

    def _slot_blocks(self, slots: SlotPieces) -> dict[str, _Block]:
        return {
            slot: self._block(
                (slot, piece.content_id, self._piece_start[piece.content_id], piece.num_tokens)
                for piece in pieces
            )
            for slot, pieces in slots.items()
        }

    def turns(self) -> Iterator[RenderedTurn]:
        """Each turn's rendering: slot blocks joined in layout order."""
        plan, buffer, own_start = self._plan, self._buffer, self._own_start
        history = _EMPTY
        slots: SlotPieces | None = None
        blocks: dict[str, _Block] = {}
        order: list[str] = []
        question_blocks: dict[tuple[int, ...], _Block] = {}
        for turn, turn_slots in enumerate(self._turn_slots):
            if turn_slots is not slots:
                slots, blocks = turn_slots, self._slot_blocks(turn_slots)
                present = {*turn_slots, "history", "question"}
                order = [slot for slot in self._layout.order if slot in present]
            question = plan.questions[turn]
            if question not in question_blocks:
                question_blocks[question] = self._own_block("question", question)
            blocks["history"], blocks["question"] = history, question_blocks[question]
            segments, start, stop, num_tokens = _join([blocks[slot] for slot in order])
            answer = plan.answers[turn]
            yield RenderedTurn(
                segments,
                buffer[start:stop] if start >= 0 else None,
                num_tokens,
                buffer[own_start[answer] : own_start[answer + 1]].tolist(),
            )
            history = _join((history, self._own_block("history", plan.gain(turn))))
