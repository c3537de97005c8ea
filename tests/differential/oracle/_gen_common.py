"""Prompt, token and file helpers shared by random_streams.py and random_workloads.py.

Stdlib only.  Everything draws from the random.Random passed in, so a
generator seeded the same way writes the same files.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

MAX_ATTEMPTS = 20

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


class OpGenerator(Protocol):
    """A generator that builds its ops against live vLLM (`ops`: those built so far)."""

    ops: list[dict[str, Any]]

    def generate(self) -> list[dict[str, Any]]: ...


_Gen = TypeVar("_Gen", bound=OpGenerator)


def write_ops(path: str, ops: list[dict[str, Any]], comment: str) -> None:
    """One '#' comment line, then one compact JSON op a line; replaced whole, never partial."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"# {comment}\n")
        for op in ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


@dataclass
class GeneratorRun:
    """One run of a generator script: its options, master seed, tallies and clock."""

    args: argparse.Namespace
    seed: int
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)
    cov: collections.Counter[str] = field(default_factory=collections.Counter)
    crashes: int = 0
    started_at: float = field(default_factory=time.time)

    @classmethod
    def parse(
        cls,
        argv: list[str] | None,
        description: str,
        what: str,
        default_count: int,
        default_prefix: str,
        add_options: Callable[[argparse.ArgumentParser], None],
    ) -> GeneratorRun:
        """The options every generator takes, then its own; --outdir is made, the seed fixed."""
        ap = argparse.ArgumentParser(description=description)
        ap.add_argument(
            "--seed",
            type=int,
            default=None,
            help="master seed (default: derived from the current time)",
        )
        ap.add_argument("--count", type=int, default=default_count, help=f"number of {what}")
        ap.add_argument("--outdir", required=True)
        ap.add_argument(
            "--prefix",
            default=default_prefix,
            help=f"file name prefix (default {default_prefix})",
        )
        ap.add_argument("--quiet", action="store_true")
        add_options(ap)
        args = ap.parse_args(argv)
        seed = args.seed if args.seed is not None else int(time.strftime("%Y%m%d%H%M%S"))
        os.makedirs(args.outdir, exist_ok=True)
        return cls(args, seed)

    def generate(
        self,
        index: int,
        new_generator: Callable[[random.Random], _Gen],
        retried: tuple[type[BaseException], ...],
        failed: str,
        gave_up: str,
        label: str,
        vllm_version: str,
    ) -> tuple[_Gen, list[dict[str, Any]]]:
        """Generate and write input `index`, retrying a fresh seed when vLLM raises (`retried`).

        Each failed attempt's ops and traceback are kept under <outdir>/_crashes and reported as
        `failed`; after MAX_ATTEMPTS it exits with `gave_up` (both format strings of `index`
        and `attempt`). The file's comment names `label`, seed, index, attempt and vLLM.
        """
        args, seed = self.args, self.seed
        for attempt in range(MAX_ATTEMPTS):
            gen = new_generator(random.Random(f"{seed}/{index}/{attempt}"))
            try:
                ops = gen.generate()
            except retried as e:
                self.crashes += 1
                cdir = os.path.join(args.outdir, "_crashes")
                os.makedirs(cdir, exist_ok=True)
                name = f"{args.prefix}{seed}_{index:05d}_attempt{attempt}.jsonl"
                write_ops(
                    os.path.join(cdir, name),
                    gen.ops,
                    f"CRASH seed={seed} index={index} attempt={attempt}: {type(e).__name__}: {e}",
                )
                with open(os.path.join(cdir, name + ".traceback"), "w") as f:
                    f.write(traceback.format_exc())
                print(
                    f"{failed.format(index=index, attempt=attempt)} "
                    f"(op {gen.ops[-1].get('op')}): {type(e).__name__}: {e}; "
                    f"saved {cdir}/{name}",
                    file=sys.stderr,
                )
                continue
            write_ops(
                os.path.join(args.outdir, f"{args.prefix}{seed}_{index:05d}.jsonl"),
                ops,
                f"{label} seed={seed} index={index} attempt={attempt} vllm={vllm_version}",
            )
            return gen, ops
        raise SystemExit(gave_up.format(index=index))

    def elapsed_s(self) -> float:
        return time.time() - self.started_at

    def finish(self, summary: str, failures_label: str) -> int:
        """Report the summary, op kinds and coverage (unless --quiet), print the seed; exit 0."""
        if not self.args.quiet:
            print(summary, file=sys.stderr)
            print(f"  ops: {dict(sorted(self.kinds.items()))}", file=sys.stderr)
            print(
                f"  coverage: {dict(sorted(self.cov.items()))}; {failures_label}: {self.crashes}",
                file=sys.stderr,
            )
        print(self.seed)
        return 0
