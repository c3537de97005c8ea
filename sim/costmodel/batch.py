"""The shape of one scheduled engine step, and the four features the step-time form uses."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class BatchShape:
    """Per prefill chunk: tokens computed now and tokens already in KV; per decode: its context."""

    prefill_new_tokens: list[int] = field(default_factory=list)
    prefill_context_tokens: list[int] = field(default_factory=list)
    decode_context_lens: list[int] = field(default_factory=list)
    # Decodes given in aggregate (the scheduler's event-driven decoders): how many, their total
    # KV length and the longest sequence after the step. Features sum them exactly as if each
    # were listed in decode_context_lens.
    num_aggregate_decodes: int = 0
    aggregate_decode_kv_tokens: int = 0
    aggregate_longest_context: int = 0


def count_decodes(batch: BatchShape) -> int:
    """Decoding sequences in the step, listed or in aggregate."""
    return len(batch.decode_context_lens) + batch.num_aggregate_decodes


def step_features(batch: BatchShape) -> tuple[int, int, int, int]:
    """(num_tokens T, twice the attention pairs 2S, KV tokens read K, num decodes B) of a step.

    S = sum n * (p + (n + 1) / 2) is kept doubled so every feature is an exact integer.
    """
    num_decodes = count_decodes(batch)
    num_tokens = num_decodes
    twice_attention_pairs = 0
    kv_tokens = sum(batch.decode_context_lens) + batch.aggregate_decode_kv_tokens
    for num_new, num_context in zip(
        batch.prefill_new_tokens, batch.prefill_context_tokens, strict=True
    ):
        num_tokens += num_new
        twice_attention_pairs += num_new * (2 * num_context + num_new + 1)
        kv_tokens += num_context
    return num_tokens, twice_attention_pairs, kv_tokens, num_decodes


def longest_context(batch: BatchShape) -> int:
    """Longest sequence in KV after the step (what attention efficiency depends on)."""
    longest = max(max(batch.decode_context_lens, default=-1) + 1, batch.aggregate_longest_context)
    for num_new, num_context in zip(
        batch.prefill_new_tokens, batch.prefill_context_tokens, strict=True
    ):
        longest = max(longest, num_new + num_context)
    return longest
