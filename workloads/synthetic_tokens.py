"""Synthetic token ids: a deterministic stream per content identity, fast and cache-friendly.

Token i of content `c` is `mix64(seed(c) + (i + 1) * golden) % vocab_size`, with `seed(c)` the
first 8 bytes of BLAKE2b over `c`. So equal identities give equal tokens at every block size,
a shorter run is a prefix of a longer one (a trace's partial last block), and different
identities differ with overwhelming probability. Trace block tokens use the identity
`"<namespace>#<hash id>"`, so they depend on nothing but the hash id and the position; a trace
prompt is held as its block ids (`TracePrompt`) and made into tokens only where they are read.

Streams are int64 numpy arrays (read-only, shared through the cache): a prompt is built and
hashed from them without a Python int per token. Answers are lists (`output_tokens`), since
the engine samples them one by one.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads._token_streams import fill_streams
from workloads.errors import WorkloadError
from workloads.lru import WeightedLru
from workloads.prompt import Piece
from workloads.spec import Segment, TokenArray

DEFAULT_VOCAB_SIZE = 128_000
DEFAULT_CACHE_TOKENS = 2_000_000

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


# An empty BLAKE2b state with an 8-byte digest: a copy of it hashes an identity in a third less
# time than a new state, whose keyword arguments are parsed on every call.
_BLAKE2B_8 = hashlib.blake2b(digest_size=8)


def _digest(content_id: str) -> bytes:
    state = _BLAKE2B_8.copy()
    state.update(content_id.encode())
    return state.digest()


def content_seed(content_id: str) -> int:
    """A 64-bit seed for a content identity (stable across runs and platforms)."""
    return int.from_bytes(_digest(content_id), "little")


def content_seeds(content_ids: Sequence[str]) -> np.ndarray:
    """`content_seed` of every identity, as one uint64 array (no Python int per seed)."""
    digests = b"".join(map(_digest, content_ids))
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


_SHIFT_1, _SHIFT_2, _SHIFT_3 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix64(values: np.ndarray, scratch: np.ndarray) -> None:
    """SplitMix64's finaliser, in place (`scratch`, as long, is overwritten): every input bit
    flips about half the output bits."""
    np.right_shift(values, _SHIFT_1, out=scratch)
    values ^= scratch
    values *= _MIX_1
    np.right_shift(values, _SHIFT_2, out=scratch)
    values ^= scratch
    values *= _MIX_2
    np.right_shift(values, _SHIFT_3, out=scratch)
    values ^= scratch


def _reduce(values: np.ndarray, modulus: int, scratch: np.ndarray) -> None:
    """`values %= modulus`, in place (`scratch` is overwritten), as values - values // modulus *
    modulus: numpy divides uint64 by a scalar with vector instructions but takes the remainder
    element by element, several times slower."""
    divisor = np.uint64(modulus)
    np.floor_divide(values, divisor, out=scratch)
    scratch *= divisor
    values -= scratch


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


class _Workspace:
    """An int64 array a token mode reuses from pass to pass, grown as needed: a fresh array the
    size of a batch's streams faults in new pages every time (a large part of its cost)."""

    __slots__ = ("_tokens",)

    def __init__(self) -> None:
        self._tokens = np.zeros(0, dtype=np.int64)

    def tokens(self, size: int) -> np.ndarray:
        """The first `size` entries (their contents are left over)."""
        if size > len(self._tokens):
            self._tokens = np.empty(max(size, 2 * len(self._tokens)), dtype=np.int64)
        return self._tokens[:size]


def _streams(
    seeds: Sequence[int] | np.ndarray,
    lengths: Sequence[int],
    vocab_size: int,
    workspace: _Workspace | None = None,
) -> np.ndarray:
    """The first lengths[r] ids of the stream seeded by seeds[r], for every r, end to end
    (int64), in one compiled pass: a new array, or a view of `workspace` (valid until its next
    use) where one is given. `reference_streams` is the same in numpy."""
    counts = np.asarray(lengths, dtype=np.int64)
    total = int(counts.sum())
    tokens = np.empty(total, dtype=np.int64) if workspace is None else workspace.tokens(total)
    fill_streams(np.asarray(seeds, dtype=np.uint64), counts, vocab_size, tokens)
    return tokens


def reference_streams(
    seeds: Sequence[int] | np.ndarray, lengths: Sequence[int], vocab_size: int
) -> np.ndarray:
    """`_streams` in numpy: the readable reference the compiled kernel is tested against."""
    total = sum(lengths)
    mixed, scratch = np.empty(total, dtype=np.uint64), np.empty(total, dtype=np.uint64)
    positions = _POSITIONS.first(total)
    if len(seeds) == 1:
        np.add(positions, np.uint64(seeds[0]), out=mixed)
    else:
        # Token i of stream r, at offset start_r + i of the run, mixes
        # seed_r + (i + 1) * golden = (seed_r - start_r * golden) + (start_r + i + 1) * golden,
        # all modulo 2^64 (numpy's uint64 arrays wrap).
        counts = np.asarray(lengths, dtype=np.intp)
        starts = np.cumsum(counts, dtype=np.uint64) - counts.astype(np.uint64)
        shifted_seeds = np.asarray(seeds, dtype=np.uint64) - starts * _GOLDEN
        np.add(np.repeat(shifted_seeds, counts), positions, out=mixed)
    _mix64(mixed, scratch)
    _reduce(mixed, vocab_size, scratch)
    return mixed.view(np.int64)  # every id is below vocab_size: the same value as int64


def _shared(tokens: np.ndarray) -> TokenArray:
    """`tokens` made read-only: the cache hands the same array to every caller."""
    tokens.flags.writeable = False
    return tokens


def token_stream(content_id: str, num_tokens: int, vocab_size: int) -> list[int]:
    """The first `num_tokens` synthetic ids of `content_id`, uncached."""
    return _streams([content_seed(content_id)], [num_tokens], vocab_size).tolist()


# The name of a trace block's segment.
TRACE_BLOCK_SEGMENT = "block"


def trace_block_content_id(namespace: str, hash_id: int) -> str:
    """The content identity of one trace block hash (ids are per-trace namespaces)."""
    return f"{namespace}#{hash_id}"


class StreamBatch:
    """The first tokens of several content identities, all made in one pass when one is
    first read: a trace request's answer and the tail of its prompt past the last full engine
    block are a few dozen tokens each, for which numpy's per-call cost outweighs the work.
    Streams are added before any is read; they are uncached, shared and read-only."""

    __slots__ = (
        "vocab_size",
        "_content_ids",
        "_skips",
        "_lengths",
        "_starts",
        "_tokens",
        "_token_bytes",
    )

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._content_ids: list[str] = []
        self._skips: list[int] = []
        self._lengths: list[int] = []
        self._starts: list[int] = []
        self._tokens: TokenArray | None = None
        self._token_bytes = b""

    def add(self, content_id: str, num_tokens: int, skip: int = 0) -> int:
        """Adds `num_tokens` of `content_id`'s stream from position `skip` on; its index for
        `stream`."""
        if self._tokens is not None:
            raise ValueError("StreamBatch.add: the batch's streams are made already")
        self._content_ids.append(content_id)
        self._skips.append(skip)
        self._lengths.append(num_tokens)
        return len(self._lengths) - 1

    def stream(self, index: int) -> TokenArray:
        """The tokens of the `index`-th stream added (a read-only view)."""
        tokens = self._made()
        return tokens[self._starts[index] : self._starts[index + 1]]

    def stream_bytes(self, index: int, skip: int = 0) -> bytes:
        """The `index`-th stream's tokens from its `skip`-th on as little-endian int64 bytes:
        requests take their tokens as bytes, and slicing the batch's bytes costs less than
        converting each stream's view."""
        if not self._token_bytes:
            self._token_bytes = self._made().astype("<i8", copy=False).tobytes()
        starts = self._starts
        return self._token_bytes[(starts[index] + skip) * 8 : starts[index + 1] * 8]

    def _made(self) -> TokenArray:
        tokens = self._tokens
        if tokens is None:
            # From position `skip` on, a stream is the stream of seed + skip * golden.
            seeds = content_seeds(self._content_ids)
            seeds += np.asarray(self._skips, dtype=np.uint64) * _GOLDEN
            tokens = self._tokens = _shared(_streams(seeds, self._lengths, self.vocab_size))
            self._starts = [0, *itertools.accumulate(self._lengths)]
            self._content_ids.clear()
            self._skips.clear()
        return tokens


# A batched trace prompt's tail starts at a multiple of this, so it serves the engine block
# sizes that divide it (vLLM's 1 to 128); larger ones make their tails alone.
BATCHED_TAIL_ALIGNMENT = 128


@functools.lru_cache(maxsize=64)
def namespace_key(namespace: str) -> int:
    """The 64-bit key of a trace namespace, which a trace block's identity pairs with its id."""
    return content_seed(namespace)


@dataclass(slots=True, frozen=True, eq=False)
class TracePrompt:
    """A trace request's prompt held as its block ids instead of tokens: block i holds the first
    tokens of trace block `block_ids[i]`, `trace_block_size` of them but in the last block,
    `num_tokens` in all. Its tokens are a pure function of the namespace, the block id and the
    position, so the engine can identify its blocks without making them (docs/spec.md §3.5)."""

    namespace: str
    block_ids: list[int]
    trace_block_size: int
    num_tokens: int
    tokens: SyntheticTokens
    # The tokens from `tail_start` on, made with other requests' (see `batched`).
    tail: StreamBatch | None = None
    tail_index: int = 0
    tail_start: int = 0

    @classmethod
    def batched(
        cls,
        namespace: str,
        block_ids: list[int],
        trace_block_size: int,
        num_tokens: int,
        tokens: SyntheticTokens,
        batch: StreamBatch,
    ) -> TracePrompt:
        """A TracePrompt whose tail past its last multiple of BATCHED_TAIL_ALIGNMENT tokens
        within its last block is made in `batch`'s one pass: a request made from block ids holds
        the tokens past its last full engine block, that tail at any block size dividing it."""
        last_block_start = (len(block_ids) - 1) * trace_block_size
        tail_start = max(
            last_block_start, num_tokens // BATCHED_TAIL_ALIGNMENT * BATCHED_TAIL_ALIGNMENT
        )
        if not block_ids or tail_start == num_tokens:
            return cls(namespace, block_ids, trace_block_size, num_tokens, tokens)
        content_id = trace_block_content_id(namespace, block_ids[-1])
        index = batch.add(content_id, num_tokens - tail_start, tail_start - last_block_start)
        return cls(
            namespace, block_ids, trace_block_size, num_tokens, tokens, batch, index, tail_start
        )

    @property
    def namespace_key(self) -> int:
        """The key of the namespace the block ids belong to."""
        return namespace_key(self.namespace)

    def _block_lengths(self, first: int, last: int) -> list[int]:
        size, num_tokens = self.trace_block_size, self.num_tokens
        return [min(size, num_tokens - index * size) for index in range(first, last + 1)]

    def _block_tokens(self, first: int, last: int, skip: int = 0) -> TokenArray:
        """Tokens of blocks first..last end to end but the first `skip`, made in one pass
        (not cached: most trace blocks occur once, so caching them costs more than it saves)."""
        namespace = self.namespace
        seeds = [
            content_seed(trace_block_content_id(namespace, hash_id))
            for hash_id in self.block_ids[first : last + 1]
        ]
        # Token i of a stream mixes seed + (i + 1) * golden, so from position `skip` on it is
        # the stream of seed + skip * golden.
        seeds[0] = (seeds[0] + skip * int(_GOLDEN)) % (1 << 64)
        lengths = self._block_lengths(first, last)
        lengths[0] -= skip
        return _streams(seeds, lengths, self.tokens.vocab_size)

    def token_array(self, start: int = 0, end: int | None = None) -> TokenArray:
        """Tokens at positions [start, min(end, num_tokens)); only those of the blocks they lie
        in from `start` on are made."""
        end = self.num_tokens if end is None else min(end, self.num_tokens)
        if start >= end:
            return np.zeros(0, dtype=np.int64)
        size = self.trace_block_size
        first_block, last_block = start // size, (end - 1) // size
        skip = start - first_block * size
        return self._block_tokens(first_block, last_block, skip)[: end - start]

    def token_bytes(self, start: int) -> bytes:
        """Tokens from `start` to the end as little-endian int64 bytes (what a request holds)."""
        if self.tail is not None and start >= self.tail_start:
            return self.tail.stream_bytes(self.tail_index, start - self.tail_start)
        return self.token_array(start).astype("<i8", copy=False).tobytes()

    def segments(self) -> list[Segment]:
        """One segment per block, each a read-only view of the prompt made in one pass."""
        if not self.block_ids:
            return []
        prompt = self._block_tokens(0, len(self.block_ids) - 1)
        prompt.flags.writeable = False
        size, namespace = self.trace_block_size, self.namespace
        return [
            Segment(
                TRACE_BLOCK_SEGMENT,
                trace_block_content_id(namespace, hash_id),
                prompt[index * size : (index + 1) * size],
            )
            for index, hash_id in enumerate(self.block_ids)
        ]


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
        self._workspace = _Workspace()

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
        """`tokens` for several identities, generating the uncached ones in one pass."""
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
        array, generated in one pass and not cached (for content used by one session)."""
        return _streams(content_seeds(content_ids), lengths, self.vocab_size)

    def passing_streams(self, content_ids: Sequence[str], lengths: Sequence[int]) -> TokenArray:
        """`streams`, made in this token mode's reused workspace: valid until its next call (for
        tokens copied elsewhere at once)."""
        return _streams(content_seeds(content_ids), lengths, self.vocab_size, self._workspace)

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
