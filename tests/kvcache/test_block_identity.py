"""The block identity (sim.kvcache.hashing): where no hash is shown, it stands in for vLLM's
chained digests and must tell blocks apart exactly as they do.

Random token streams that share prefixes, fork, repeat blocks at other positions and carry
extra keys (hypothesis): two blocks get equal identities exactly when they get equal digests,
under every algorithm. Known values pin the definition (XXH3-128 of the parent's bytes and the
tokens as little-endian int64), and the choice is made by whether hashes are shown.
"""

from __future__ import annotations

import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kvcache import (
    HASH_ALGOS,
    NO_HASH_KEYS,
    BlockHasher,
    HashKeys,
    block_identity_wanted,
    none_hash,
)
from sim.kvcache.hashing import get_hash_function

KEYS = [NO_HASH_KEYS, HashKeys(cache_salt="a"), HashKeys(lora_name="x", lora_path="/x")]


@st.composite
def forked_streams(draw: st.DrawFn) -> list[tuple[list[int], HashKeys]]:
    """Up to six token streams over a 3-token vocabulary (so blocks repeat), each one a prefix of
    an earlier stream plus new tokens, some with extra keys."""
    streams: list[tuple[list[int], HashKeys]] = []
    for _ in range(draw(st.integers(1, 6))):
        base: list[int] = []
        if streams:
            source = draw(st.sampled_from(streams))[0]
            base = source[: draw(st.integers(0, len(source)))]
        tail = draw(st.lists(st.integers(0, 2), max_size=24))
        streams.append((base + tail, draw(st.sampled_from(KEYS))))
    return streams


@settings(max_examples=300, deadline=None)
@given(algo=st.sampled_from(HASH_ALGOS), block_size=st.integers(1, 4), streams=forked_streams())
def test_identities_are_equal_exactly_when_digests_are(
    algo: str, block_size: int, streams: list[tuple[list[int], HashKeys]]
) -> None:
    digest_hasher = BlockHasher(algo, block_size)
    identity_hasher = BlockHasher(algo, block_size, identity=True)
    digests: list[bytes] = []
    identities: list[bytes] = []
    for tokens, keys in streams:
        digest_hasher.extend(stream_digests := [], tokens, keys)
        identity_hasher.extend(stream_identities := [], tokens, keys)
        digests += stream_digests
        identities += stream_identities
    assert len(digests) == len(identities)
    for first in range(len(digests)):
        for second in range(len(digests)):
            same_digest = digests[first] == digests[second]
            assert same_digest == (identities[first] == identities[second])


def test_identity_is_xxh3_128_of_the_parent_and_the_int64_tokens() -> None:
    """Block 0 of tokens 1000..1015 and block 1 of 1016..1031, block size 16, no seed."""
    root = xxhash.xxh3_128_digest(b"vllm-none-hash")
    assert none_hash("sha256", identity=True) == root
    block_0 = xxhash.xxh3_128_digest(
        root + b"".join(t.to_bytes(8, "little") for t in range(1000, 1016))
    )
    block_1 = xxhash.xxh3_128_digest(
        block_0 + b"".join(t.to_bytes(8, "little") for t in range(1016, 1032))
    )
    hashes: list[bytes] = []
    BlockHasher("sha256", 16, identity=True).extend(hashes, list(range(1000, 1032)))
    assert hashes == [block_0, block_1]
    assert len(block_0) == 16


def test_blocks_with_extra_keys_keep_vllms_hash_over_the_identity_parent() -> None:
    """A salted block 0 is vLLM's sha256 of (identity NONE_HASH, tokens, (("cache_salt", s),))."""
    keys = HashKeys(cache_salt="s")
    hashes: list[bytes] = []
    BlockHasher("sha256", 2, identity=True).extend(hashes, [1, 2, 3, 4], keys)
    root = none_hash("sha256", identity=True)
    expected_0 = get_hash_function("sha256")((root, (1, 2), (("cache_salt", "s"),)))
    assert hashes[0] == expected_0 and len(hashes[0]) == 32
    assert len(hashes[1]) == 16  # block 1 carries no key: an identity again


def test_a_digest_hasher_and_an_identity_hasher_do_not_hash_alike() -> None:
    assert not BlockHasher("sha256", 16).hashes_like(BlockHasher("sha256", 16, identity=True))
    assert BlockHasher("xxhash", 16, identity=True).hashes_like(
        BlockHasher("xxhash", 16, identity=True)
    )


def test_the_identity_is_used_only_where_no_hash_is_shown() -> None:
    assert block_identity_wanted(hashes_shown=False)
    assert not block_identity_wanted(hashes_shown=True)
