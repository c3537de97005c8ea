"""The request spec every generator and trace adapter produces, and the engine consumes."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, TypeAlias

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
    # The segments' tokens end to end as one array, where the builder has them so (a view
    # into a buffer the segments also view); None: joined from the segments when asked.
    prompt_array: TokenArray | None = field(default=None, repr=False, compare=False)

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
        tokens = self.prompt_array
        if tokens is None and self.segments:
            tokens = np.concatenate(
                [np.asarray(segment.tokens, dtype=np.int64) for segment in self.segments]
            )
        if tokens is not None:
            prompt.frombytes(tokens.data.cast("B"))
        return prompt

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt length without building the concatenated list."""
        return sum(len(segment.tokens) for segment in self.segments)

    @property
    def num_output_tokens(self) -> int:
        """Number of tokens the fake model emits for this request."""
        return len(self.output_tokens)
