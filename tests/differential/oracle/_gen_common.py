"""Prompt and token helpers shared by random_streams.py and random_workloads.py.

Stdlib only.  Everything draws from the random.Random passed in, so a
generator seeded the same way writes the same files.
"""

from __future__ import annotations

import random

# Token ids spread over the ranges where pickle and CBOR switch integer
# encodings (<24, <256, <65536, larger), so hashing of every width is exercised.
_TOKEN_RANGES = ((0, 23), (24, 255), (256, 65535), (65536, 151935))
_TOKEN_WEIGHTS = (0.05, 0.15, 0.60, 0.20)

SALTS = ["", "tenant-a", "tenant-b", "t\u00fcr-7"]

# LoRA variants: the block hash keys on (name, path); the integer id is not hashed.
LORAS = [
    {"name": "sql", "id": 1, "path": "/adapters/sql-v1"},
    {"name": "sql", "id": 7, "path": "/adapters/sql-v1"},  # same name+path, other id
    {"name": "sql", "id": 1, "path": "/adapters/sql-v2"},  # same name, new path
    {"name": "chat", "id": 2, "path": "/adapters/chat"},
    {"name": "chat", "path": "/adapters/chat"},  # id defaults to 1
    {"name": "sql-v1", "id": 3, "path": "/adapters/sql-v1"},  # other name, same path
]


def tokens(rng: random.Random, n: int) -> list[int]:
    """n random token ids."""
    out = []
    for _ in range(n):
        lo, hi = rng.choices(_TOKEN_RANGES, _TOKEN_WEIGHTS)[0]
        out.append(rng.randint(lo, hi))
    return out


def near_block_length(rng: random.Random, bs: int, max_blocks: int) -> int:
    """A length of k blocks plus -1, 0, +1 or a random offset (never below 1)."""
    k = rng.randint(0, max(0, max_blocks))
    d = rng.choice([-1, 0, 0, 1, 1, rng.randint(1, bs - 1) if bs > 1 else 0])
    return max(1, k * bs + d)


def pick_salt(rng: random.Random, p: float) -> str | None:
    return rng.choice(SALTS) if rng.random() < p else None


def pick_lora(rng: random.Random, p: float) -> dict | None:
    return dict(rng.choice(LORAS)) if rng.random() < p else None


class PromptFactory:
    """Builds prompts around a few shared prefixes ("system prompts").

    Kinds: fresh random tokens; prefix + user suffix; an exact duplicate of an
    earlier prompt; a fork (an earlier prompt cut at a random point, often a
    block boundary +-1, plus new tokens); a multi-turn continuation (an earlier
    request's prompt + outputs + new user tokens) via `continuation`.
    """

    def __init__(self, rng: random.Random, block_size: int, max_prompt: int, prefix_blocks: int):
        self.rng = rng
        self.bs = block_size
        self.max_prompt = max(2, max_prompt)
        self.prefixes: list[list[int]] = []
        for _ in range(rng.randint(1, 4)):
            n = min(near_block_length(rng, block_size, prefix_blocks), self.max_prompt - 1)
            if self.prefixes and rng.random() < 0.35:
                # Derive from an existing prefix: shared head, different tail.
                base = rng.choice(self.prefixes)
                cut = self._cut(len(base))
                p = (base[:cut] + tokens(rng, max(1, n - cut)))[: max(n, 1)]
            else:
                p = tokens(rng, n)
            self.prefixes.append(p)
        self.history: list[list[int]] = []

    def _cut(self, n: int) -> int:
        """A cut point in [0, n], biased to block boundaries and +-1 around them."""
        if n <= 0:
            return 0
        if self.rng.random() < 0.6:
            k = self.rng.randint(0, n // self.bs)
            c = k * self.bs + self.rng.choice([-1, 0, 0, 1])
        else:
            c = self.rng.randint(0, n)
        return min(max(c, 0), n)

    def _suffix_len(self) -> int:
        return self.rng.randint(1, 2 * self.bs + 1)

    def new_prompt(self) -> tuple[list[int], str, int | None]:
        """(prompt, kind, index in `history` of the prompt it copies or forks)."""
        rng = self.rng
        r = rng.random()
        src = None
        if r < 0.12 and self.history:
            src = rng.randrange(len(self.history))
            kind, p = "dup", list(self.history[src])
        elif r < 0.24 and self.history:
            src = rng.randrange(len(self.history))
            base = self.history[src]
            cut = self._cut(len(base))
            kind, p = "fork", base[:cut] + tokens(rng, self._suffix_len())
        elif r < 0.36:
            kind, p = "fresh", tokens(rng, near_block_length(rng, self.bs, 3))
        else:
            pre = rng.choice(self.prefixes)
            suffix = 0 if rng.random() < 0.1 else self._suffix_len()
            kind, p = "prefix", pre + tokens(rng, suffix)
        p = p[: self.max_prompt] or tokens(rng, 1)
        self.history.append(p)
        return p, kind, src

    def continuation(self, all_tokens: list[int]) -> list[int] | None:
        """Next turn: previous prompt + outputs (sometimes minus the last one,
        as when the stop token is not echoed) + new user tokens.  None if too
        long.  Appended to `history` when returned."""
        rng = self.rng
        prev = list(all_tokens)
        if len(prev) > 1 and rng.random() < 0.25:
            prev = prev[:-1]
        p = prev + tokens(rng, self._suffix_len())
        if len(p) > self.max_prompt:
            return None
        self.history.append(p)
        return p
