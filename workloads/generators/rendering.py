"""From a session's plan to its turns' prompt segments, prompt arrays and output tokens.

A plan names the session's own contents once and says, per turn, which it asks (the question
slot), which it answers, and which the history gains after it. Rendering gives a TurnContent
from which each turn's spec is made when read (spec.SessionTurnSpec). Any token mode renders
prompt by prompt: pieces arranged by the layout, through `TokenMode.render`. Synthetic tokens
take a faster road, decided here alone: the session's contents are laid out once in one buffer
(the common slots' pieces, then the session's own contents in the order the conversation shows
them), its own part synthesised in one pass; a turn is a few numbers (where its prompt
lies and how long it is) until its segments, views into the buffer, are asked for, and a
prompt whose slots lie back to back there (each turn repeating the previous prompt and its
answer, then adding to them) is one slice of it.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from itertools import accumulate

import numpy as np

from workloads.layout import PromptLayout
from workloads.prompt import Piece, TokenMode
from workloads.spec import (
    Segment,
    TokenArray,
    TurnContent,
    segments_token_array,
    token_array,
)
from workloads.synthetic_tokens import SyntheticTokens

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
    roles: Sequence[str]
    lengths: list[int]
    questions: Sequence[tuple[int, ...]]
    answers: Sequence[int]
    carried_before: Sequence[tuple[int, ...]]
    carried_after: Sequence[tuple[int, ...]]
    # Made by `conversation`: every prompt ends with the conversation so far, in content order.
    is_conversation: bool = field(default=False, init=False)

    @classmethod
    def conversation(cls, content_ids: list[str], lengths: list[int]) -> SessionPlan:
        """A chat's turns: turn k asks content 2k (a user's message) and is answered by content
        2k + 1; the history gains both."""
        roles, questions, answers, carried_after = _conversation_turns(len(content_ids) // 2)
        plan = cls(content_ids, roles, lengths, questions, answers, questions, carried_after)
        plan.is_conversation = True
        return plan

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


@functools.cache
def _conversation_turns(
    num_turns: int,
) -> tuple[tuple[str, ...], tuple[tuple[int], ...], tuple[int, ...], tuple[tuple[()], ...]]:
    """A conversation's roles, questions, answers and carried_after: they depend on its number
    of turns alone, so they are made once per number and shared (tuples: no plan changes them)."""
    questions = tuple((content,) for content in range(0, 2 * num_turns, 2))
    answers = tuple(range(1, 2 * num_turns, 2))
    return ("user", "assistant") * num_turns, questions, answers, ((),) * num_turns


def render_session(
    tokens: TokenMode, plan: SessionPlan, turn_slots: Sequence[SlotPieces], layout: PromptLayout
) -> TurnContent:
    """The session's turns; `turn_slots` gives every turn's pieces of the slots besides history
    and question (the same mapping object where they do not change)."""
    return render_sessions(tokens, [(plan, turn_slots)], layout)[0]


def render_sessions(
    tokens: TokenMode,
    sessions: Sequence[tuple[SessionPlan, Sequence[SlotPieces]]],
    layout: PromptLayout,
) -> list[TurnContent]:
    """`render_session` for several sessions (plan, turn slots); synthetic tokens of all their
    own contents are made in one numpy pass, and their buffers are views of one array."""
    if isinstance(tokens, SyntheticTokens):
        return _synthetic_sessions(tokens, sessions, layout)
    return [_RenderedSession(tokens, plan, turn_slots, layout) for plan, turn_slots in sessions]


def _synthetic_sessions(
    tokens: SyntheticTokens,
    sessions: Sequence[tuple[SessionPlan, Sequence[SlotPieces]]],
    layout: PromptLayout,
) -> list[TurnContent]:
    """Each session's buffer (its common pieces, then its own contents) laid end to end in one
    array: the own contents of all sessions synthesised in one pass, common pieces from the
    token cache (laid out and joined once per distinct set of slot mappings)."""
    commons: dict[tuple[int, ...], _CommonLayout] = {}
    made: list[_SyntheticSession] = []
    for plan, turn_slots in sessions:
        # The distinct mappings, in order (they live as long as `sessions`): sessions of any
        # number of turns with the same slots share one layout.
        key = tuple(dict.fromkeys(map(id, turn_slots)))
        common = commons.get(key)
        if common is None:
            common = commons[key] = _CommonLayout(turn_slots, layout, tokens)
        made.append(_SyntheticSession(plan, turn_slots, layout, common))
    own = tokens.passing_streams(
        [content_id for session in made for content_id in session.plan.content_ids],
        [num_tokens for session in made for num_tokens in session.plan.lengths],
    )
    parts: list[TokenArray] = []
    own_start = 0
    for session in made:
        own_stop = own_start + session.num_own_tokens
        parts += (session.common.tokens, own[own_start:own_stop])
        own_start = own_stop
    # The buffer is an int64 array('q') with a read-only numpy view: an answer is copied out of
    # it by slicing the array, one call making the new array('q') it must be.
    batch_tokens = array("q", bytes(_TOKEN_BYTES)) * sum(
        session.num_buffer_tokens for session in made
    )
    buffer = np.frombuffer(batch_tokens, dtype=np.int64)
    if parts:
        np.concatenate(parts, out=buffer)
    buffer.flags.writeable = False
    token_bytes = memoryview(batch_tokens).cast("B")
    start = 0
    for session in made:
        stop = start + session.num_buffer_tokens
        session.buffer = buffer[start:stop]
        session.tokens, session.token_bytes, session.offset = batch_tokens, token_bytes, start
        start = stop
    return list(made)


@dataclass(slots=True)
class _RenderedTurn:
    segments: list[Segment]
    output_tokens: list[int]


class _RenderedSession:
    """Prompt by prompt through the token mode, in turn order, as far as turns are asked for."""

    def __init__(
        self,
        tokens: TokenMode,
        plan: SessionPlan,
        turn_slots: Sequence[SlotPieces],
        layout: PromptLayout,
    ) -> None:
        self.plan = plan
        self._rendered: list[_RenderedTurn] = []
        self._rendering = self._render(tokens, turn_slots, layout)

    def _render(
        self, tokens: TokenMode, turn_slots: Sequence[SlotPieces], layout: PromptLayout
    ) -> Iterator[_RenderedTurn]:
        plan = self.plan
        history: list[Piece] = []
        for turn, slots in enumerate(turn_slots):
            question = [plan.piece("question", content) for content in plan.questions[turn]]
            pieces = layout.arrange({**slots, "history": history, "question": question})
            answer = plan.answers[turn]
            output = tokens.output_tokens(plan.content_ids[answer], plan.lengths[answer])
            yield _RenderedTurn(tokens.render(pieces), output)
            history = [*history, *(plan.piece("history", content) for content in plan.gain(turn))]

    def _turn(self, turn: int) -> _RenderedTurn:
        while len(self._rendered) <= turn:
            self._rendered.append(next(self._rendering))
        return self._rendered[turn]

    def segments(self, turn: int) -> list[Segment]:
        return list(self._turn(turn).segments)

    def prompt_token_array(self, turn: int) -> array[int]:
        return segments_token_array(self._turn(turn).segments)

    def num_prompt_tokens(self, turn: int) -> int:
        return sum(len(segment.tokens) for segment in self._turn(turn).segments)

    def output_tokens(self, turn: int) -> list[int]:
        return list(self._turn(turn).output_tokens)

    def output_token_array(self, turn: int) -> array[int]:
        return array("q", self._turn(turn).output_tokens)

    def num_output_tokens(self, turn: int) -> int:
        return self.plan.lengths[self.plan.answers[turn]]


# Bytes per token in a session buffer (int64).
_TOKEN_BYTES = 8

# A run of a prompt's contents: (start, stop, number of tokens). `start` is where their tokens
# begin in the session buffer when they lie there back to back, else -1; `stop` is where the
# last one ends. Plain tuples: a few are made per turn.
_Span = tuple[int, int, int]
_EMPTY: _Span = (-1, -1, 0)


def _then(first: _Span, second: _Span) -> _Span:
    """`first` followed by `second` (an empty span, stop -1, adds nothing)."""
    if first[1] < 0:
        return second
    if second[1] < 0:
        return first
    back_to_back = first[0] >= 0 and second[0] == first[1]
    return first[0] if back_to_back else -1, second[1], first[2] + second[2]


def _join(spans: Iterable[_Span]) -> _Span:
    """The spans one after another."""
    return reduce(_then, spans, _EMPTY)


class _CommonLayout:
    """The common slots' pieces of a session's slot mappings, where each starts in its buffer
    (in layout order, each identity once), their tokens end to end, and each mapping's slot
    spans; shared by the sessions of a batch with the same mappings."""

    __slots__ = ("piece_start", "num_tokens", "tokens", "_layout", "_slots", "_conversation_starts")

    def __init__(
        self, turn_slots: Sequence[SlotPieces], layout: PromptLayout, tokens: SyntheticTokens
    ) -> None:
        self._layout = layout
        self.piece_start: dict[str, int] = {}
        pieces: list[Piece] = []
        start = 0
        for slots in {id(slots): slots for slots in turn_slots}.values():
            for slot in layout.order:
                for piece in slots.get(slot, ()):
                    if piece.content_id not in self.piece_start:
                        self.piece_start[piece.content_id] = start
                        pieces.append(piece)
                        start += piece.num_tokens
        self.num_tokens = start
        parts = tokens.tokens_many(
            [piece.content_id for piece in pieces], [piece.num_tokens for piece in pieces]
        )
        self.tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        self._slots: dict[int, tuple[dict[str, _Span], list[str]]] = {}
        self._conversation_starts: dict[int, int | None] = {}

    def slot_spans(self, slots: SlotPieces) -> tuple[dict[str, _Span], list[str]]:
        """Where each slot of `slots` lies, and the layout's slots a turn with them fills (a new
        dict: the caller adds history and question)."""
        made = self._slots.get(id(slots))
        if made is None:
            piece_start = self.piece_start
            spans = {
                slot: _join(
                    (
                        piece_start[piece.content_id],
                        piece_start[piece.content_id] + piece.num_tokens,
                        piece.num_tokens,
                    )
                    for piece in pieces
                )
                for slot, pieces in slots.items()
            }
            present = {*slots, "history", "question"}
            order = [slot for slot in self._layout.order if slot in present]
            made = self._slots[id(slots)] = (spans, order)
        return dict(made[0]), made[1]

    def conversation_start(self, slots: SlotPieces) -> int | None:
        """Where every prompt of a conversation (SessionPlan.conversation) with `slots` in each
        turn starts, when each is one run of the buffer: the slots before the history lie back
        to back up to the session's own contents, and none lies between history and question
        or after the question. None otherwise."""
        key = id(slots)
        if key in self._conversation_starts:
            return self._conversation_starts[key]
        spans, order = self.slot_spans(slots)
        history, question = order.index("history"), order.index("question")
        start: int | None = None
        trailing = (spans[slot] for slot in order[history + 1 :] if slot != "question")
        if question > history and all(span[1] < 0 for span in trailing):
            lead = _join(spans[slot] for slot in order[:history])
            if lead[1] < 0:
                start = self.num_tokens
            elif lead[0] >= 0 and lead[1] == self.num_tokens:
                start = lead[0]
        self._conversation_starts[key] = start
        return start


class _SyntheticSession:
    """A session's contents in one buffer: the common slots' pieces, then the session's own
    contents in plan order (the order a conversation first shows them). The buffer (a numpy
    view of `tokens`, the batch's array('q'), from `offset` on, which prompt and output arrays
    are copied from) is set by `_synthetic_sessions` once the tokens are made."""

    __slots__ = (
        "plan",
        "common",
        "buffer",
        "tokens",
        "token_bytes",
        "offset",
        "num_own_tokens",
        "num_buffer_tokens",
        "_turn_slots",
        "_layout",
        "_piece_start",
        "_own_start",
        "_prompt_spans",
    )

    def __init__(
        self,
        plan: SessionPlan,
        turn_slots: Sequence[SlotPieces],
        layout: PromptLayout,
        common: _CommonLayout,
    ) -> None:
        self.plan = plan
        self.common = common
        self._turn_slots = turn_slots
        self._layout = layout
        self._piece_start = common.piece_start
        self._own_start = list(accumulate(plan.lengths, initial=common.num_tokens))
        self.num_buffer_tokens = self._own_start[-1]
        self.num_own_tokens = self.num_buffer_tokens - common.num_tokens
        self.buffer: TokenArray
        self.tokens: array[int]
        self.token_bytes: memoryview
        self.offset: int
        self._prompt_spans = self._spans()

    def _own_span(self, contents: tuple[int, ...]) -> _Span:
        """Where the session's own `contents` lie: back to back where their indices follow one
        another, as one or two contents of a conversation do (taken without a loop)."""
        own_start = self._own_start
        if 0 < len(contents) <= 2 and contents[-1] - contents[0] == len(contents) - 1:
            first, stop = own_start[contents[0]], own_start[contents[-1] + 1]
            return first, stop, stop - first
        return _join(
            (
                own_start[content],
                own_start[content + 1],
                own_start[content + 1] - own_start[content],
            )
            for content in contents
        )

    def _spans(self) -> list[_Span]:
        """Every turn's prompt span: slot spans joined in layout order."""
        plan, turn_slots = self.plan, self._turn_slots
        if (
            plan.is_conversation
            and turn_slots
            and turn_slots.count(turn_slots[0]) == len(turn_slots)
        ):
            start = self.common.conversation_start(turn_slots[0])
            if start is not None:
                # Turn k's prompt: the slots before the conversation, then contents 0 to 2k.
                return [(start, stop, stop - start) for stop in self._own_start[1::2]]
        history = _EMPTY
        slots: SlotPieces | None = None
        spans: dict[str, _Span] = {}
        order: list[str] = []
        prompt_spans = []
        for turn, slots_of_turn in enumerate(turn_slots):
            if slots_of_turn is not slots:
                slots = slots_of_turn
                spans, order = self.common.slot_spans(slots_of_turn)
            spans["history"], spans["question"] = history, self._own_span(plan.questions[turn])
            # _join over the slots, unrolled: a few run per turn, for every turn of every session.
            start, stop, num_tokens = _EMPTY
            for slot in order:
                slot_start, slot_stop, slot_tokens = spans[slot]
                if slot_stop < 0:
                    continue
                if stop < 0:
                    start = slot_start
                elif start >= 0 and slot_start != stop:
                    start = -1
                stop = slot_stop
                num_tokens += slot_tokens
            prompt_spans.append((start, stop, num_tokens))
            history = _then(history, self._own_span(plan.gain(turn)))
        return prompt_spans

    def _own_segments(self, slot: str, contents: Iterable[int]) -> list[Segment]:
        plan, buffer, own_start = self.plan, self.buffer, self._own_start
        return [
            Segment(
                slot, plan.content_ids[content], buffer[own_start[content] : own_start[content + 1]]
            )
            for content in contents
        ]

    def segments(self, turn: int) -> list[Segment]:
        plan, buffer, piece_start = self.plan, self.buffer, self._piece_start
        slot_segments: dict[str, list[Segment]] = {
            slot: [
                Segment(
                    slot,
                    piece.content_id,
                    buffer[
                        piece_start[piece.content_id] : piece_start[piece.content_id]
                        + piece.num_tokens
                    ],
                )
                for piece in pieces
            ]
            for slot, pieces in self._turn_slots[turn].items()
        }
        slot_segments["history"] = self._own_segments(
            "history", (content for earlier in range(turn) for content in plan.gain(earlier))
        )
        slot_segments["question"] = self._own_segments("question", plan.questions[turn])
        return [segment for slot in self._layout.order for segment in slot_segments.get(slot, ())]

    def prompt_array(self, turn: int) -> TokenArray:
        start, stop, _ = self._prompt_spans[turn]
        if start >= 0:
            return self.buffer[start:stop]
        segments = self.segments(turn)
        if not segments:
            return self.buffer[:0]
        return np.concatenate([segment.tokens for segment in segments])

    def prompt_token_array(self, turn: int) -> array[int]:
        start, stop, _ = self._prompt_spans[turn]
        if start < 0:
            return token_array(self.prompt_array(turn))
        # Copied by frombytes, as token_array copies: it leaves the new array room to grow (about
        # a sixteenth), where the engine appends the turn's output tokens.
        offset = self.offset
        prompt = array("q")
        prompt.frombytes(
            self.token_bytes[(offset + start) * _TOKEN_BYTES : (offset + stop) * _TOKEN_BYTES]
        )
        return prompt

    def num_prompt_tokens(self, turn: int) -> int:
        return self._prompt_spans[turn][2]

    def output_tokens(self, turn: int) -> list[int]:
        return self.output_token_array(turn).tolist()

    def output_token_array(self, turn: int) -> array[int]:
        answer, offset, own_start = self.plan.answers[turn], self.offset, self._own_start
        return self.tokens[offset + own_start[answer] : offset + own_start[answer + 1]]

    def num_output_tokens(self, turn: int) -> int:
        return self.plan.lengths[self.plan.answers[turn]]
