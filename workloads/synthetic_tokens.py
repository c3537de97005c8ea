"""Synthetic token ids: a deterministic stream per content identity, fast and cache-friendly.

Token i of content `c` is `mix64(seed(c) + (i + 1) * golden) % vocab_size`, with `seed(c)` the
first 8 bytes of BLAKE2b over `c`. So equal identities give equal tokens at every block size,
a shorter run is a prefix of a longer one (a trace's partial last block), and different
identities differ with overwhelming probability. Trace block tokens use the identity
`"<namespace>#<hash id>"`, so they depend on nothing but the hash id and the position.

Streams are int64 numpy arrays (read-only, shared through the cache): a prompt is built and
hashed from them without a Python int per token. Answers are lists (`output_tokens`), since
the engine samples them one by one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from workloads.errors import WorkloadError
from workloads.lru import WeightedLru
from workloads.prompt import Piece
from workloads.spec import Segment, TokenArray

DEFAULT_VOCAB_SIZE = 128_000
DEFAULT_CACHE_TOKENS = 2_000_000

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def content_seed(content_id: str) -> int:
    """A 64-bit seed for a content identity (stable across runs and platforms)."""
    return int.from_bytes(_seed_bytes(content_id), "little")


def _seed_bytes(content_id: str) -> bytes:
    return hashlib.blake2b(content_id.encode("utf-8"), digest_size=8).digest()


def content_seeds(content_ids: Sequence[str]) -> np.ndarray:
    """`content_seed` of every identity, as one uint64 array (no Python int per seed)."""
    return np.frombuffer(b"".join(map(_seed_bytes, content_ids)), dtype="<u8").astype(np.uint64)


_SHIFT_1, _SHIFT_2, _SHIFT_3 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place: every input bit flips about half the output bits."""
    shifted = values >> _SHIFT_1
    values ^= shifted
    values *= _MIX_1
    np.right_shift(values, _SHIFT_2, out=shifted)
    values ^= shifted
    values *= _MIX_2
    np.right_shift(values, _SHIFT_3, out=shifted)
    values ^= shifted
    return values


class _Positions:
    """(i + 1) * golden for i < n, computed once for the longest stream asked so far: most
    streams are short, so this was a third of their cost."""

    def __init__(self) -> None:
        self._values = np.zeros(0, dtype=np.uint64)

    def first(self, num_tokens: int) -> np.ndarray:
        if num_tokens > len(self._values):
            length = max(num_tokens, 2 * len(self._values), 4096)
            self._values = np.arange(1, length + 1, dtype=np.uint64) * _GOLDEN
        return self._values[:num_tokens]


_POSITIONS = _Positions()


def _streams(
    seeds: Sequence[int] | np.ndarray, lengths: Sequence[int], vocab_size: int
) -> np.ndarray:
    """The first lengths[r] ids of the stream seeded by seeds[r], for every r, end to end
    (int64): one numpy pass however many streams there are."""
    total = sum(lengths)
    if len(seeds) == 1:
        mixed = _POSITIONS.first(total) + np.uint64(seeds[0])
    else:
        # Token i of stream r, at offset start_r + i of the run, mixes
        # seed_r + (i + 1) * golden = (seed_r - start_r * golden) + (start_r + i + 1) * golden,
        # all modulo 2^64 (numpy's uint64 arrays wrap).
        counts = np.asarray(lengths, dtype=np.intp)
        starts = np.cumsum(counts, dtype=np.uint64) - counts.astype(np.uint64)
        shifted_seeds = np.asarray(seeds, dtype=np.uint64) - starts * _GOLDEN
        mixed = np.repeat(shifted_seeds, counts)
        mixed += _POSITIONS.first(total)
    _mix64(mixed)
    mixed %= np.uint64(vocab_size)
    return mixed.view(np.int64)  # every id is below vocab_size: the same value as int64


def _shared(tokens: np.ndarray) -> TokenArray:
    """`tokens` made read-only: the cache hands the same array to every caller."""
    tokens.flags.writeable = False
    return tokens


def token_stream(content_id: str, num_tokens: int, vocab_size: int) -> list[int]:
    """The first `num_tokens` synthetic ids of `content_id`, uncached."""
    return _streams([content_seed(content_id)], [num_tokens], vocab_size).tolist()


def trace_block_content_id(namespace: str, hash_id: int) -> str:
    """The content identity of one trace block hash (ids are per-trace namespaces)."""
    return f"{namespace}#{hash_id}"


class SyntheticTokens:
    """Token mode "synthetic": segments get the token stream of their content identity.

    Streams are kept in an LRU bounded by `cache_max_tokens`; returned arrays are shared and
    read-only.
    """

    def __init__(
        self, vocab_size: int = DEFAULT_VOCAB_SIZE, cache_max_tokens: int = DEFAULT_CACHE_TOKENS
    ) -> None:
        if vocab_size < 2:
            raise WorkloadError(f"vocab_size: {vocab_size!r} is not allowed; use an int >= 2")
        if cache_max_tokens < 0:
            raise WorkloadError(
                f"cache_max_tokens: {cache_max_tokens!r} is not allowed; use an int >= 0"
            )
        self.vocab_size = vocab_size
        self._cache: WeightedLru[TokenArray] = WeightedLru(cache_max_tokens)

    def tokens(self, content_id: str, num_tokens: int) -> TokenArray:
        """The first `num_tokens` ids of `content_id`'s stream (a shared, read-only array)."""
        cached = self._cache.get(content_id)
        if cached is not None and len(cached) >= num_tokens:
            return cached if len(cached) == num_tokens else cached[:num_tokens]
        tokens = _shared(_streams([content_seed(content_id)], [num_tokens], self.vocab_size))
        self._cache.put(content_id, tokens, num_tokens)
        return tokens

    @property
    def num_cached_tokens(self) -> int:
        """Tokens now held by the cache (bounded by cache_max_tokens)."""
        return self._cache.total_weight

    def tokens_many(self, content_ids: Sequence[str], lengths: Sequence[int]) -> list[TokenArray]:
        """`tokens` for several identities, generating the uncached ones in one numpy pass."""
        found: list[TokenArray | None] = []
        missing: list[int] = []
        for index, (content_id, num_tokens) in enumerate(zip(content_ids, lengths, strict=True)):
            cached = self._cache.get(content_id)
            if cached is not None and len(cached) >= num_tokens:
                found.append(cached if len(cached) == num_tokens else cached[:num_tokens])
            else:
                found.append(None)
                missing.append(index)
        if missing:
            streams = self.streams(
                [content_ids[index] for index in missing], [lengths[index] for index in missing]
            )
            start = 0
            for index in missing:
                stop = start + lengths[index]
                # A copy, so the cache holds no view of the whole run of streams.
                row = _shared(streams[start:stop].copy())
                self._cache.put(content_ids[index], row, len(row))
                found[index] = row
                start = stop
        return found  # type: ignore[return-value]

    def streams(self, content_ids: Sequence[str], lengths: Sequence[int]) -> TokenArray:
        """The first lengths[i] ids of content_ids[i]'s stream for every i, end to end in one new
        array, generated in one numpy pass and not cached (for content used by one session)."""
        return _streams(content_seeds(content_ids), lengths, self.vocab_size)

    def block_tokens(self, namespace: str, hash_id: int, num_tokens: int) -> TokenArray:
        """Tokens of trace block `hash_id`; a partial block is a prefix of the full one."""
        return self.tokens(trace_block_content_id(namespace, hash_id), num_tokens)

    def render(self, pieces: Sequence[Piece]) -> list[Segment]:
        """One segment per piece, no template tokens (explicit texts only name the identity)."""
        return [
            Segment(piece.slot, piece.content_id, self.tokens(piece.content_id, piece.num_tokens))
            for piece in pieces
        ]

    def output_tokens(self, content_id: str, num_tokens: int) -> list[int]:
        """What the fake model emits for an answer; the same ids as the answer's history piece."""
        return self.tokens(content_id, num_tokens).tolist()
