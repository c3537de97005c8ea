"""Turning a workload's request spec into a scheduler request, validated at the API boundary."""

from __future__ import annotations

from array import array
from typing import Protocol

from sim.errors import InputError
from sim.kvcache import (
    NO_HASH_KEYS,
    CacheRequest,
    Hasher,
    HashKeys,
    SymbolicPrompt,
    TraceBlocks,
    cache_salt_problem,
    symbolic_prompt,
)
from sim.sched import Request


class LoraLike(Protocol):
    """What the engine reads from a LoRA adapter spec (read-only, so any subtype conforms)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...


class SpecLike(Protocol):
    """What the engine reads from a workload request spec (workloads.spec.RequestSpec).

    Members are read-only properties: a spec whose fields are narrower types still conforms."""

    @property
    def request_id(self) -> str: ...

    @property
    def arrival_at(self) -> float | None: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def think_time_s(self) -> float: ...

    @property
    def output_tokens(self) -> list[int]: ...

    def output_token_array(self) -> array[int]: ...

    @property
    def tenant(self) -> str | None: ...

    @property
    def cache_salt(self) -> str | None: ...

    @property
    def lora(self) -> LoraLike | None: ...

    @property
    def prompt_logprobs(self) -> bool: ...

    @property
    def priority(self) -> int: ...

    def prompt_token_array(self) -> array[int]:
        """The prompt's tokens, a new int64 array('q') per call (the request keeps it)."""
        ...

    def trace_prompt(self) -> TraceBlocks | None: ...

    @property
    def num_prompt_tokens(self) -> int: ...

    @property
    def num_output_tokens(self) -> int: ...


def hash_keys_from_spec(spec: SpecLike) -> HashKeys:
    """What besides tokens enters the spec's block hashes; a bad cache_salt is rejected exactly
    as vLLM's OpenAI API rejects it."""
    lora, cache_salt = spec.lora, spec.cache_salt
    if lora is None and cache_salt is None:
        # The shared constant: the compiled hasher recognises it by identity.
        return NO_HASH_KEYS
    problem = cache_salt_problem(cache_salt)
    if problem is not None:
        raise InputError(f"request {spec.request_id!r}: {problem}")
    return HashKeys(
        lora_name=lora.name if lora is not None else None,
        lora_path=lora.path if lora is not None else None,
        cache_salt=cache_salt,
    )


def prompt_from_spec(spec: SpecLike, hasher: Hasher, keys: HashKeys) -> array[int] | SymbolicPrompt:
    """The spec's prompt as trace block ids where `hasher` identifies their blocks without
    tokens, else its tokens."""
    return symbolic_prompt(spec.trace_prompt(), hasher, keys) or spec.prompt_token_array()


def request_from_spec(
    spec: SpecLike,
    hasher: Hasher,
    arrival_at: float,
    prefix_source: CacheRequest | None = None,
) -> Request:
    """A scheduler Request for `spec`, arriving at `arrival_at`; `prefix_source` (say, the
    session's previous turn) lends the hashes of the blocks it shares with the prompt."""
    keys = hash_keys_from_spec(spec)
    return Request(
        spec.request_id,
        prompt_from_spec(spec, hasher, keys),
        spec.output_token_array(),
        hasher,
        arrival_at=arrival_at,
        priority=spec.priority,
        hash_keys=keys,
        skip_reading_prefix_cache=spec.prompt_logprobs,
        session_id=spec.session_id,
        tenant=spec.tenant,
        prefix_source=prefix_source,
        owns_prompt=True,
    )


def cache_request_from_spec(spec: SpecLike, hasher: Hasher) -> CacheRequest:
    """The cache-level request of `spec`, for cache-only replays (no timing, no outputs yet)."""
    keys = hash_keys_from_spec(spec)
    return CacheRequest(
        spec.request_id,
        prompt_from_spec(spec, hasher, keys),
        hasher,
        hash_keys=keys,
        skip_reading_prefix_cache=spec.prompt_logprobs,
        owns_prompt=True,
    )
