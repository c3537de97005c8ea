"""The request spec every generator and trace adapter produces, and the engine consumes."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from workloads.errors import WorkloadError

if TYPE_CHECKING:
    from workloads.synthetic_tokens import TracePrompt

# Token ids as synthetic token modes make them: int64, read-only, shared through their caches.
TokenArray: TypeAlias = npt.NDArray[np.int64]


def token_array(tokens: TokenArray | bytes) -> array[int]:
    """`tokens` (or their native int64 bytes) as a new int64 array ('q'), copied without a
    Python int per token."""
    made = array("q")
    made.frombytes(tokens if isinstance(tokens, bytes) else tokens.data.cast("B"))
    return made


@dataclass(slots=True, frozen=True)
class LoraSpec:
    """A LoRA adapter as vLLM's LoRARequest names it (the prefix-cache key uses name and path)."""

    name: str
    lora_id: int
    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise WorkloadError(
                f"LoraSpec.name: {self.name!r} is not allowed; use a non-empty string"
            )
        if isinstance(self.lora_id, bool) or not isinstance(self.lora_id, int) or self.lora_id < 1:
            raise WorkloadError(
                f"LoraSpec.lora_id: {self.lora_id!r} is not allowed; use an int >= 1"
            )
        if not isinstance(self.path, str):
            raise WorkloadError(f"LoraSpec.path: {self.path!r} is not allowed; use a string")


@dataclass(slots=True, eq=False)
class Segment:
    """A run of prompt tokens with one content identity.

    `tokens` may be shared with other specs through the token caches: treat it as read-only.
    Synthetic tokens are int64 arrays, tokenized text is a list; equal tokens are equal either
    way.
    """

    name: str
    content_id: str
    tokens: list[int] | TokenArray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Segment):
            return NotImplemented
        return (
            self.name == other.name
            and self.content_id == other.content_id
            and np.array_equal(self.tokens, other.tokens)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq is


@dataclass(slots=True)
class RequestSpec:
    """One request: when it arrives (or which session turn it is), its prompt and its output.

    Open-loop requests have `arrival_at` and `session_id=None`. A closed-loop session's first turn
    has `arrival_at`; later turns have `arrival_at=None` and are released `think_time_s` after
    the previous turn of the same session finishes. `output_tokens` are the exact tokens the
    fake model emits; a later turn's prompt repeats them where the conversation carries them.
    """

    request_id: str
    arrival_at: float | None
    session_id: str | None
    turn_index: int
    think_time_s: float
    segments: list[Segment]
    output_tokens: list[int]
    tenant: str | None = None
    cache_salt: str | None = None
    lora: LoraSpec | None = None
    prompt_logprobs: bool = False
    priority: int = 0
    measured_cached_tokens: int | None = None
    extras: dict[str, str | int | float] = field(default_factory=dict)

    @classmethod
    def open_loop(
        cls,
        request_id: str,
        arrival_at: float,
        segments: list[Segment],
        output_tokens: list[int],
        **tags: Any,
    ) -> RequestSpec:
        """A request that arrives on its own at `arrival_at` (no session); `tags` are the
        optional fields (tenant, cache_salt, lora, prompt_logprobs, priority, extras, ...)."""
        return cls(request_id, arrival_at, None, 0, 0.0, segments, output_tokens, **tags)

    def prompt_tokens(self) -> list[int]:
        """The prompt as one new list: the segments' tokens in order."""
        return self.prompt_token_array().tolist()

    def prompt_token_array(self) -> array[int]:
        """The prompt as one new int64 array ('q'), built without a Python int per token from
        synthetic tokens."""
        return segments_token_array(self.segments)

    def output_token_array(self) -> array[int]:
        """The output tokens as one new int64 array ('q')."""
        return array("q", self.output_tokens)

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt length without building the concatenated list."""
        return sum(len(segment.tokens) for segment in self.segments)

    @property
    def num_output_tokens(self) -> int:
        """Number of tokens the fake model emits for this request."""
        return len(self.output_tokens)

    def trace_prompt(self) -> TracePrompt | None:
        """The prompt as a trace's block ids, for a trace request whose tokens are not made
        yet (TraceRequestSpec); None: the prompt is its segments' tokens."""
        return None


def segments_token_array(segments: list[Segment]) -> array[int]:
    """The segments' tokens end to end, as a new int64 array ('q')."""
    if not segments:
        return array("q")
    return token_array(
        np.concatenate([np.asarray(segment.tokens, dtype=np.int64) for segment in segments])
    )


class TurnContent(Protocol):
    """A session's turns as a generator holds them, from which a spec is made on first use."""

    def segments(self, turn: int) -> list[Segment]:
        """The turn's prompt segments (a new list)."""
        ...

    def prompt_token_array(self, turn: int) -> array[int]:
        """The turn's prompt tokens end to end, as a new int64 array ('q')."""
        ...

    def num_prompt_tokens(self, turn: int) -> int:
        """The turn's prompt length."""
        ...

    def output_tokens(self, turn: int) -> list[int]:
        """The tokens the fake model emits for the turn (a new list)."""
        ...

    def output_token_array(self, turn: int) -> array[int]:
        """The turn's output tokens, as a new int64 array ('q')."""
        ...

    def num_output_tokens(self, turn: int) -> int:
        """How many tokens the fake model emits for the turn."""
        ...


class _NotMade:
    """What a SessionTurnSpec's segments and output tokens hold until they are made; one
    object, kept so by copies and pickles."""

    def __reduce__(self) -> str:
        return "_NOT_MADE"


_NOT_MADE: Any = _NotMade()
Made = TypeVar("Made")


class _MadeOnFirstRead(property, Generic[Made]):
    """A RequestSpec field that a SessionTurnSpec makes from its content when first read: it
    lives in RequestSpec's slot, which holds _NOT_MADE until then. Setting it is the slot's own
    (C) setter: RequestSpec's __init__ sets both such fields of every spec."""

    def __init__(self, name: str) -> None:
        slot: Any = RequestSpec.__dict__[name]

        def made_on_first_read(spec: SessionTurnSpec) -> Made:
            value: Made = slot.__get__(spec)
            if value is _NOT_MADE:
                value = getattr(spec._content, name)(spec._turn)
                slot.__set__(spec, value)
            return value

        super().__init__(made_on_first_read, slot.__set__)
        # What the slot holds (_NOT_MADE until made): the slot's own getter, called without a
        # Python frame where a spec's arrays are asked for, once per request.
        self.held: Callable[[SessionTurnSpec], Made] = slot.__get__

    if TYPE_CHECKING:

        @overload
        def __get__(self, spec: None, owner: object = None) -> _MadeOnFirstRead[Made]: ...

        @overload
        def __get__(self, spec: SessionTurnSpec, owner: object = None) -> Made: ...

        def __get__(
            self, spec: SessionTurnSpec | None, owner: object = None
        ) -> Made | _MadeOnFirstRead[Made]: ...

        def __set__(self, spec: SessionTurnSpec, value: Made) -> None: ...

    def is_made(self, spec: SessionTurnSpec) -> bool:
        """Whether the field holds its value (made, or set)."""
        return self.held(spec) is not _NOT_MADE


_SEGMENTS = _MadeOnFirstRead[list[Segment]]("segments")
_OUTPUT_TOKENS = _MadeOnFirstRead[list[int]]("output_tokens")


class SessionTurnSpec(RequestSpec):
    """A RequestSpec that makes its segments and output tokens when first read, from its
    session's content; equal to the RequestSpec holding them. The engine reads the prompt array
    and output tokens only, so a run never makes a turn's segments."""

    __slots__ = ("_content", "_turn")

    segments = _SEGMENTS
    output_tokens = _OUTPUT_TOKENS

    def __init__(
        self,
        content: TurnContent,
        turn: int,
        request_id: str,
        arrival_at: float | None,
        session_id: str | None,
        think_time_s: float,
        prompt_logprobs: bool = False,
        **tags: Any,
    ) -> None:
        """Turn `turn` of `content` (its turn_index); `tags` as for RequestSpec.open_loop."""
        self._content = content
        self._turn = turn
        RequestSpec.__init__(
            self,
            request_id,
            arrival_at,
            session_id,
            turn,
            think_time_s,
            _NOT_MADE,
            _NOT_MADE,
            prompt_logprobs=prompt_logprobs,
            **tags,
        )

    def prompt_token_array(self) -> array[int]:
        """The prompt as one new int64 array ('q'), from the content unless segments were set."""
        if _SEGMENTS.held(self) is _NOT_MADE:
            return self._content.prompt_token_array(self._turn)
        return RequestSpec.prompt_token_array(self)

    def output_token_array(self) -> array[int]:
        """The output tokens as one new int64 array ('q'), from the content unless they were set
        (no Python int per token)."""
        if _OUTPUT_TOKENS.held(self) is _NOT_MADE:
            return self._content.output_token_array(self._turn)
        return RequestSpec.output_token_array(self)

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt length without making the segments."""
        if _SEGMENTS.held(self) is _NOT_MADE:
            return self._content.num_prompt_tokens(self._turn)
        return RequestSpec.num_prompt_tokens.__get__(self)

    @property
    def num_output_tokens(self) -> int:
        """Output length without making the output tokens."""
        if _OUTPUT_TOKENS.is_made(self):
            return len(self.output_tokens)
        return self._content.num_output_tokens(self._turn)

    def __eq__(self, other: object) -> bool:
        """Field by field, as RequestSpec compares, against any RequestSpec."""
        if not isinstance(other, RequestSpec):
            return NotImplemented
        return all(
            getattr(self, spec_field.name) == getattr(other, spec_field.name)
            for spec_field in fields(RequestSpec)
            if spec_field.compare
        )

    __hash__ = None  # type: ignore[assignment]


class TraceContent(TurnContent, Protocol):
    """A trace request's content (one turn) whose prompt is a trace's block ids."""

    def trace_prompt(self, turn: int) -> TracePrompt:
        """The turn's prompt as block ids."""
        ...


class TraceRequestSpec(SessionTurnSpec):
    """An open-loop trace request made on first read from its content, like a SessionTurnSpec:
    the engine takes its prompt as the trace's block ids (`trace_prompt`) and, where block
    identities stand in for hashes, never makes its tokens."""

    __slots__ = ("_trace_prompt",)

    def __init__(
        self, content: TraceContent, request_id: str, arrival_at: float, **tags: Any
    ) -> None:
        """The request of `content` arriving at `arrival_at`; `tags` as for open_loop."""
        SessionTurnSpec.__init__(self, content, 0, request_id, arrival_at, None, 0.0, **tags)
        self._trace_prompt = content.trace_prompt(0)

    def trace_prompt(self) -> TracePrompt | None:
        """The prompt as block ids, until the segments are made or set (then they are the
        prompt)."""
        return None if _SEGMENTS.is_made(self) else self._trace_prompt
