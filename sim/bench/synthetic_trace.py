"""A seeded Mooncake-format trace with Mooncake-like prefix reuse, for replay benchmarks.

Every request starts with one of `num_system_prompts` shared 512-token blocks (Zipf-like
popularity). A `follow_up_fraction` of requests continue a live conversation: they repeat its
blocks and add one (the conversation's last block, partial before, is now full), as a chat's
next turn does; the rest open a new conversation with one fresh block. Conversations retire at
`max_conversation_blocks`, and at most `max_live_conversations` stay open (a new one replaces
the oldest slot). Each request's last block holds `tail_tokens`; outputs are short, so the
replay's cost is its request count, not decoding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.api import MOONCAKE_BLOCK_SIZE

# Random draws are made this many requests at a time, so any prefix of a longer trace is the
# shorter trace of the same seed.
DRAW_CHUNK = 65_536


@dataclass(slots=True, frozen=True)
class SyntheticTraceConfig:
    """The request stream's arrival rate, sharing and lengths."""

    seed: int = 20_261_129
    requests_per_s: float = 100.0
    num_system_prompts: int = 32
    follow_up_fraction: float = 0.3
    max_conversation_blocks: int = 4
    max_live_conversations: int = 256
    tail_tokens: tuple[int, int] = (16, 256)
    output_tokens: tuple[int, int] = (1, 8)

    def __post_init__(self) -> None:
        low, high = self.tail_tokens
        if not 1 <= low <= high <= MOONCAKE_BLOCK_SIZE:
            raise ValueError(
                f"tail_tokens must satisfy 1 <= low <= high <= {MOONCAKE_BLOCK_SIZE}, "
                f"got {self.tail_tokens}"
            )
        if self.max_conversation_blocks < 2:
            raise ValueError(
                f"max_conversation_blocks must be at least 2 (system prompt and one more), "
                f"got {self.max_conversation_blocks}"
            )


@dataclass(slots=True)
class _Draws:
    gaps_ms: np.ndarray
    follow_ups: np.ndarray
    system_prompts: np.ndarray
    conversation_picks: np.ndarray
    tail_tokens: np.ndarray
    output_tokens: np.ndarray


def _draw_chunk(rng: np.random.Generator, config: SyntheticTraceConfig) -> _Draws:
    popularity = 1.0 / np.arange(1, config.num_system_prompts + 1)
    tail_low, tail_high = config.tail_tokens
    output_low, output_high = config.output_tokens
    return _Draws(
        gaps_ms=rng.exponential(1000.0 / config.requests_per_s, DRAW_CHUNK),
        follow_ups=rng.random(DRAW_CHUNK) < config.follow_up_fraction,
        system_prompts=rng.choice(
            config.num_system_prompts, DRAW_CHUNK, p=popularity / popularity.sum()
        ),
        conversation_picks=rng.random(DRAW_CHUNK),
        tail_tokens=rng.integers(tail_low, tail_high + 1, DRAW_CHUNK),
        output_tokens=rng.integers(output_low, output_high + 1, DRAW_CHUNK),
    )


def synthetic_trace_lines(config: SyntheticTraceConfig, num_requests: int) -> Iterator[str]:
    """The trace's JSON lines (newline-terminated), streamed."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed))
    live: list[list[int]] = []
    next_hash_id = config.num_system_prompts
    num_conversations = 0
    arrival_ms = 0.0
    for chunk_start in range(0, num_requests, DRAW_CHUNK):
        draws = _draw_chunk(rng, config)
        for index in range(min(DRAW_CHUNK, num_requests - chunk_start)):
            arrival_ms += draws.gaps_ms[index]
            if live and draws.follow_ups[index]:
                slot = int(draws.conversation_picks[index] * len(live))
                hash_ids = [*live[slot], next_hash_id]
                if len(hash_ids) >= config.max_conversation_blocks:
                    live[slot] = live[-1]
                    live.pop()
                else:
                    live[slot] = hash_ids
            else:
                hash_ids = [int(draws.system_prompts[index]), next_hash_id]
                if len(live) < config.max_live_conversations:
                    live.append(hash_ids)
                else:
                    live[num_conversations % config.max_live_conversations] = hash_ids
                num_conversations += 1
            next_hash_id += 1
            input_length = (len(hash_ids) - 1) * MOONCAKE_BLOCK_SIZE + int(draws.tail_tokens[index])
            yield (
                f'{{"timestamp": {int(arrival_ms)}, "input_length": {input_length}, '
                f'"output_length": {int(draws.output_tokens[index])}, '
                f'"hash_ids": [{", ".join(map(str, hash_ids))}]}}\n'
            )


def write_synthetic_trace(path: Path, config: SyntheticTraceConfig, num_requests: int) -> None:
    """Write the first `num_requests` requests of the trace to `path` (a scratch input file)."""
    with path.open("w", encoding="utf-8") as trace_file:
        trace_file.writelines(synthetic_trace_lines(config, num_requests))
