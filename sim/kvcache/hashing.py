"""Chained block hashes, serialised exactly as vLLM 0.33 serialises them (spec §3).

A block's hash is H((parent_hash, tuple(block_tokens), extra_keys_or_None)); block 0's parent is
NONE_HASH = H(seed_string). `sha256`/`xxhash` serialise with pickle protocol 5, the `_cbor`
variants with canonical CBOR, so digests are bit-identical to vLLM's for the same seed.

Where no hash value leaves a run, a hasher built with `identity=True` gives each block without
extra keys a cheaper *block identity* instead: XXH3-128 over the parent's bytes and the block's
tokens as raw int64, no serialisation (blocks with extra keys keep vLLM's hash over the same
parent, so vLLM's treatment of their keys is kept). Like vLLM's digest it is a function of the
block's parent and content only, so two blocks get equal identities exactly when they get equal
digests, unless two different prefixes collide in 128 bits (vLLM's own decisions assume no
SHA-256 collision; for 10^9 blocks a 128-bit collision has probability below 10^-20).
`block_identity_wanted` is the one place that chooses it.

A trace's prompt may come as block ids instead of tokens (`TraceBlocks`): the tokens of trace
block b at position p are a pure function of the namespace, b and p, so the engine blocks lying
inside one trace block are identified from b (`extend_trace_blocks`) and their tokens are never
made. The trace block's *anchor* is XXH3-128 of the identity before it, the namespace key and b;
the engine block at offset k in it gets the anchor XOR the mask of k (XXH3-128 of k), one hash
per trace block instead of one per engine block. The anchor fixes everything before the block
and the mask its place, so two such blocks get equal identities exactly when their tokens are
equal (as with the token identity), unless two different anchors differ by exactly the XOR of
two masks: a 128-bit coincidence, as likely as a collision.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import struct
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import cbor2
import xxhash

HASH_ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
DEFAULT_SHA256_SEED = "vllm-none-hash"

HashFunction = Callable[[object], bytes]
ExtraKeys = tuple[tuple[object, ...], ...] | None


def _sha256_pickle(obj: object) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def _sha256_cbor(obj: object) -> bytes:
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def _xxhash_pickle(obj: object) -> bytes:
    return xxhash.xxh3_128_digest(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _xxhash_cbor(obj: object) -> bytes:
    return xxhash.xxh3_128_digest(cbor2.dumps(obj, canonical=True))


_HASH_FUNCTIONS: dict[str, HashFunction] = {
    "sha256": _sha256_pickle,
    "sha256_cbor": _sha256_cbor,
    "xxhash": _xxhash_pickle,
    "xxhash_cbor": _xxhash_cbor,
}


def get_hash_function(algo: str) -> HashFunction:
    """The serialise-then-digest function vLLM uses for `prefix_caching_hash_algo=algo`."""
    try:
        return _HASH_FUNCTIONS[algo]
    except KeyError:
        raise ValueError(f"unknown hash_algo {algo!r}; allowed: {', '.join(HASH_ALGOS)}") from None


def block_identity_wanted(*, hashes_shown: bool) -> bool:
    """Whether a run hashes blocks with the block identity: only where no block hash is shown
    (no block events written, nothing else printing or storing a hash)."""
    return not hashes_shown


def _all_int64(tokens: Sequence[int]) -> bool:
    return all(type(token) is int and -(2**63) <= token < 2**63 for token in tokens)


def _plain_block_identity(parent: bytes, tokens: Sequence[int]) -> bytes:
    """A block without extra keys: XXH3-128 of the parent's bytes and the tokens as int64."""
    return xxhash.xxh3_128_digest(parent + array("q", tokens).tobytes())


# A trace block's anchor follows its parent's bytes with the namespace key, the trace block id
# and a zero byte, so no such input is as long as a token block's (the parent, 8 bytes a token).
_TRACE_BLOCK = struct.Struct("<QQx")
# An offset's mask is XXH3-128 of the offset and a one byte.
_OFFSET = struct.Struct("<QB")


@functools.lru_cache(maxsize=4096)
def _offset_mask(offset: int) -> int:
    """The mask an engine block at `offset` tokens into its trace block XORs into the anchor."""
    return int.from_bytes(xxhash.xxh3_128_digest(_OFFSET.pack(offset, 1)), "big")


class TraceBlocks(Protocol):
    """A prompt held as a trace's block ids (workloads.synthetic_tokens.TracePrompt): block i
    holds the first tokens of trace block `block_ids[i]` of the namespace `namespace_key` names,
    `trace_block_size` of them but in the last, `num_tokens` in all."""

    @property
    def namespace_key(self) -> int: ...

    @property
    def block_ids(self) -> Sequence[int]: ...

    @property
    def trace_block_size(self) -> int: ...

    @property
    def num_tokens(self) -> int: ...

    def token_bytes(self, start: int) -> bytes:
        """Tokens from position `start` to the end as little-endian int64 bytes."""
        ...


def none_hash(algo: str, hash_seed: str | None = None, *, identity: bool = False) -> bytes:
    """NONE_HASH, the parent of block 0: H(seed string).

    `hash_seed` plays PYTHONHASHSEED's role. Unset, sha256 variants use "vllm-none-hash"; vLLM's
    xxhash variants use 32 random bytes per process, which a simulator must not do (it would break
    determinism), so they fall back to the same fixed string here; pass a seed to emulate a run.
    """
    seed = DEFAULT_SHA256_SEED if hash_seed is None else hash_seed
    hash_fn = get_hash_function(algo)
    return xxhash.xxh3_128_digest(seed.encode()) if identity else hash_fn(seed)


@dataclass(slots=True, frozen=True)
class MultiModalItem:
    """A multimodal placeholder range in the prompt, identified by its content hash."""

    identifier: str
    offset: int  # first prompt token of the item
    length: int


@dataclass(slots=True, frozen=True)
class HashKeys:
    """What besides the tokens enters a request's block hashes (spec §3.4)."""

    lora_name: str | None = None
    lora_path: str | None = None
    cache_salt: str | None = None
    mm_items: tuple[MultiModalItem, ...] = ()
    prompt_embeds: bytes | None = None  # raw tensor bytes of the prompt's embeddings
    prompt_embeds_bytes_per_token: int = 0

    @property
    def is_empty(self) -> bool:
        """True when no block of the request carries extra keys."""
        return (
            self.lora_name is None
            and not self.cache_salt
            and not self.mm_items
            and self.prompt_embeds is None
        )

    def for_block(self, block_index: int, block_start: int, block_end: int) -> ExtraKeys:
        """Extra keys of one block: LoRA, multimodal items, cache salt (block 0), prompt embeds."""
        keys: list[tuple[object, ...]] = []
        if self.lora_name is not None:
            keys.append(("lora", self.lora_name, self.lora_path))
        for item in self.mm_items:
            if item.offset < block_end and item.offset + item.length > block_start:
                keys.append(("mm", item.identifier, item.offset - block_start))
        if block_index == 0 and self.cache_salt:
            keys.append(("cache_salt", self.cache_salt))
        if self.prompt_embeds is not None:
            width = self.prompt_embeds_bytes_per_token
            embeds = self.prompt_embeds[block_start * width : block_end * width]
            if embeds:
                keys.append(("prompt_embeds", hashlib.sha256(embeds).hexdigest()))
        return tuple(keys) if keys else None


NO_HASH_KEYS = HashKeys()


class Hasher(Protocol):
    """What requests need of a block hasher: BlockHasher here, or the compiled one."""

    algo: str
    block_size: int
    none_hash: bytes
    identity: bool

    def extend(
        self,
        block_hashes: list[bytes],
        token_ids: Sequence[int],
        keys: HashKeys = ...,
        start: int = ...,
    ) -> int:
        """Append hashes of every newly full block of the tokens `token_ids` holds from position
        `start` on; return how many were added."""
        ...

    def hashes_like(self, other: Hasher) -> bool:
        """True when `other` gives every block the same hash as this hasher does."""
        ...

    def identifies_trace_blocks(self, trace_block_size: int, keys: HashKeys) -> bool:
        """Whether the blocks of a prompt of trace blocks of `trace_block_size` tokens carrying
        `keys` are identified from the block ids (extend_trace_blocks)."""
        ...

    def extend_trace_blocks(
        self,
        block_hashes: list[bytes],
        namespace_key: int,
        block_ids: Sequence[int],
        trace_block_size: int,
        num_tokens: int,
    ) -> int:
        """Append identities of the full blocks of the first `num_tokens` tokens of a prompt of
        trace blocks beyond len(block_hashes); return how many were added."""
        ...


class BlockHasher:
    """Hashes full blocks of token lists into vLLM's chained block hashes (or, with `identity`,
    block identities: see the module docstring).

    With `memo_size > 0` each distinct (parent, tokens, extra keys) is serialised and digested
    once while it stays in a bounded memo (cleared whole when full, which is cheap and keeps
    memory bounded): repeated prefixes such as system prompts and chat histories cost a dict
    lookup instead of a digest. Results are identical either way.
    """

    __slots__ = ("algo", "block_size", "none_hash", "identity", "memo_size", "_hash", "_memo")

    def __init__(
        self,
        algo: str = "sha256",
        block_size: int = 16,
        hash_seed: str | None = None,
        *,
        memo_size: int = 0,
        identity: bool = False,
    ):
        self.algo = algo
        self.block_size = block_size
        self.identity = identity
        self._hash = get_hash_function(algo)
        self.none_hash = none_hash(algo, hash_seed, identity=identity)
        self.memo_size = memo_size
        self._memo: dict[tuple[object, ...], bytes] = {}

    def hashes_like(self, other: Hasher) -> bool:
        """True when `other` gives every block the same hash as this hasher does."""
        return (
            self.algo == other.algo
            and self.block_size == other.block_size
            and self.none_hash == other.none_hash
            and self.identity == other.identity
        )

    def identifies_trace_blocks(self, trace_block_size: int, keys: HashKeys) -> bool:
        """Whether the blocks of a prompt of trace blocks of `trace_block_size` tokens carrying
        `keys` are identified from the block ids: block identities, no extra keys, and every
        block inside one trace block."""
        return self.identity and keys.is_empty and trace_block_size % self.block_size == 0

    def extend_trace_blocks(
        self,
        block_hashes: list[bytes],
        namespace_key: int,
        block_ids: Sequence[int],
        trace_block_size: int,
        num_tokens: int,
    ) -> int:
        """Append identities of the full blocks of the first `num_tokens` tokens of a prompt of
        trace blocks beyond len(block_hashes); return how many were added."""
        block_size = self.block_size
        if not self.identity or trace_block_size % block_size:
            raise ValueError(
                f"trace blocks of {trace_block_size} tokens are not identified by a hasher of "
                f"{block_size}-token blocks{'' if self.identity else ' without the identity'}"
            )
        start_block = len(block_hashes)
        num_full_blocks = num_tokens // block_size
        if num_full_blocks * block_size > len(block_ids) * trace_block_size:
            raise ValueError(f"{len(block_ids)} trace blocks hold fewer than {num_tokens} tokens")
        blocks_per_id = trace_block_size // block_size
        # The identity before the first block of the trace block the first new block lies in.
        trace_start = start_block - start_block % blocks_per_id
        parent = block_hashes[trace_start - 1] if trace_start else self.none_hash
        pack, digest, append = _TRACE_BLOCK.pack, xxhash.xxh3_128_digest, block_hashes.append
        index = start_block
        while index < num_full_blocks:
            trace_block = index // blocks_per_id
            # XXH3-128 of the parent's bytes, the namespace key and the block id: the anchor
            # each engine block of the trace block XORs its offset's mask into.
            parent_and_id = parent + pack(namespace_key, block_ids[trace_block])
            anchor = int.from_bytes(digest(parent_and_id), "big")
            first = trace_block * blocks_per_id
            end = min(num_full_blocks, first + blocks_per_id)
            for block in range(index, end):
                append((anchor ^ _offset_mask((block - first) * block_size)).to_bytes(16, "big"))
            parent = block_hashes[-1]
            index = end
        return max(num_full_blocks - start_block, 0)

    def _hash_block(
        self, hashed: tuple[bytes, tuple[int, ...], ExtraKeys], tokens_are_int64: bool = False
    ) -> bytes:
        parent, tokens, extra = hashed
        if self.identity and extra is None and (tokens_are_int64 or _all_int64(tokens)):
            return _plain_block_identity(parent, tokens)
        # vLLM's hash tells a bool or a huge int from an int64 token; so does this one.
        return self._hash(hashed)

    def extend(
        self,
        block_hashes: list[bytes],
        token_ids: Sequence[int],
        keys: HashKeys = NO_HASH_KEYS,
        start: int = 0,
    ) -> int:
        """Append hashes of every newly full block of the tokens `token_ids` holds from position
        `start` on (the blocks before `start` are hashed already); return how many were added."""
        block_size = self.block_size
        start_block = len(block_hashes)
        if start > start_block * block_size:
            raise ValueError(f"tokens from {start} on cannot extend {start_block} block hashes")
        num_full_blocks = (start + len(token_ids)) // block_size
        parent = block_hashes[-1] if block_hashes else self.none_hash
        hash_block = self._hash_block
        plain = keys.is_empty
        memo = self._memo if self.memo_size else None
        # An int64 array holds nothing but int64 tokens: no per-token check for the identity.
        tokens_are_int64 = isinstance(token_ids, array) and token_ids.typecode == "q"
        for index in range(start_block, num_full_blocks):
            begin = index * block_size
            end = begin + block_size
            extra = None if plain else keys.for_block(index, begin, end)
            hashed = (parent, tuple(token_ids[begin - start : end - start]), extra)
            if memo is None:
                parent = hash_block(hashed, tokens_are_int64)
            else:
                cached = memo.get(hashed)
                if cached is None:
                    cached = hash_block(hashed, tokens_are_int64)
                    if len(memo) >= self.memo_size:
                        memo.clear()
                    memo[hashed] = cached
                parent = cached
            block_hashes.append(parent)
        return num_full_blocks - start_block


def num_shared_full_blocks(
    tokens: Sequence[int], other_tokens: Sequence[int], block_size: int
) -> int:
    """How many leading full blocks two token lists have in common.

    Whole ranges are compared at once (a binary search when they differ), so a shared prefix of
    n blocks costs a few C-level comparisons instead of n block-sized ones.
    """
    num_equal = 0
    num_candidates = min(len(tokens), len(other_tokens)) // block_size
    if tokens[: num_candidates * block_size] == other_tokens[: num_candidates * block_size]:
        return num_candidates
    # Invariant: the first num_equal blocks are equal; the first num_candidates are not.
    while num_candidates - num_equal > 1:
        middle = (num_equal + num_candidates) // 2
        start, end = num_equal * block_size, middle * block_size
        if tokens[start:end] == other_tokens[start:end]:
            num_equal = middle
        else:
            num_candidates = middle
    return num_equal
