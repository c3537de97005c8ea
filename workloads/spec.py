"""The request spec every generator and trace adapter produces, and the engine consumes."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from workloads.errors import WorkloadError

# Token ids as synthetic token modes make them: int64, read-only, shared through their caches.
TokenArray: TypeAlias = npt.NDArray[np.int64]


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
        prompt = array("q")
        if self.segments:
            tokens = np.concatenate(
                [np.asarray(segment.tokens, dtype=np.int64) for segment in self.segments]
            )
            prompt.frombytes(tokens.data.cast("B"))
        return prompt

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


class TurnContent(Protocol):
    """A session's turns as a generator holds them, from which a spec is made on first use."""

    def segments(self, turn: int) -> list[Segment]:
        """The turn's prompt segments (a new list)."""
        ...

    def prompt_array(self, turn: int) -> TokenArray:
        """The turn's prompt tokens end to end (read-only, maybe a view)."""
        ...

    def num_prompt_tokens(self, turn: int) -> int:
        """The turn's prompt length."""
        ...

    def output_tokens(self, turn: int) -> list[int]:
        """The tokens the fake model emits for the turn (a new list)."""
        ...

    def output_array(self, turn: int) -> TokenArray:
        """The turn's output tokens (read-only, maybe a view)."""
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


class _MadeOnFirstRead(Generic[Made]):
    """A RequestSpec field that a SessionTurnSpec makes from its content when first read: it
    lives in RequestSpec's slot, which holds _NOT_MADE until then."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._slot: Any = RequestSpec.__dict__[name]

    @overload
    def __get__(self, spec: None, owner: object = None) -> _MadeOnFirstRead[Made]: ...

    @overload
    def __get__(self, spec: SessionTurnSpec, owner: object = None) -> Made: ...

    def __get__(
        self, spec: SessionTurnSpec | None, owner: object = None
    ) -> Made | _MadeOnFirstRead[Made]:
        if spec is None:
            return self
        value = self._slot.__get__(spec)
        if value is _NOT_MADE:
            value = getattr(spec._content, self._name)(spec._turn)
            self._slot.__set__(spec, value)
        return value

    def __set__(self, spec: SessionTurnSpec, value: Made) -> None:
        self._slot.__set__(spec, value)

    def is_made(self, spec: SessionTurnSpec) -> bool:
        """Whether the field holds its value (made, or set)."""
        return self._slot.__get__(spec) is not _NOT_MADE


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
            **tags,
        )

    def prompt_token_array(self) -> array[int]:
        """The prompt as one new int64 array ('q'), from the content unless segments were set."""
        if _SEGMENTS.is_made(self):
            return RequestSpec.prompt_token_array(self)
        prompt = array("q")
        prompt.frombytes(self._content.prompt_array(self._turn).data.cast("B"))
        return prompt

    def output_token_array(self) -> array[int]:
        """The output tokens as one new int64 array ('q'), from the content unless they were set
        (no Python int per token)."""
        if _OUTPUT_TOKENS.is_made(self):
            return RequestSpec.output_token_array(self)
        output = array("q")
        output.frombytes(self._content.output_array(self._turn).data.cast("B"))
        return output

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt length without making the segments."""
        if _SEGMENTS.is_made(self):
            return RequestSpec.num_prompt_tokens.__get__(self)
        return self._content.num_prompt_tokens(self._turn)

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
