"""The compiled hasher gives every block the bytes vLLM's serialise-then-digest gives.

Random blocks (hypothesis) of ints across every pickle and CBOR integer width, both digest
sizes as parents, every block size from 1: serialised bytes equal pickle.dumps / cbor2.dumps,
the portable SHA-256 equals hashlib, and chained hashes equal the reference BlockHasher's for
all four algorithms and their block identities, with and without extra keys, seeds and
incremental extension.
"""

from __future__ import annotations

import hashlib
import pickle

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kvcache import HASH_ALGOS, NO_HASH_KEYS, BlockHasher, HashKeys, MultiModalItem
from sim.native import NativeBlockHasher
from sim.native._core import serialise_block, sha256_portable

# Edges of pickle's BININT1/BININT2/BININT/LONG1 and CBOR's 1/2/4/8-byte heads, signed.
EDGE_INTS = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**40, 2**63 - 1]
TOKENS = st.one_of(
    st.integers(0, 200_000),
    st.sampled_from(EDGE_INTS + [-value for value in EDGE_INTS] + [-(2**63)]),
    st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=300, deadline=None)
@given(parent=st.binary(min_size=16, max_size=32), tokens=st.lists(TOKENS, max_size=40))
def test_serialised_block_equals_pickle_and_cbor(parent: bytes, tokens: list[int]) -> None:
    block = (parent, tuple(tokens), None)
    assert serialise_block("pickle", parent, tokens) == pickle.dumps(block, protocol=5)
    assert serialise_block("cbor", parent, tokens) == cbor2.dumps(block, canonical=True)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_portable_sha256_equals_hashlib(data: bytes) -> None:
    assert sha256_portable(data) == hashlib.sha256(data).digest()


def test_portable_sha256_known_digest() -> None:
    """FIPS 180-4's "abc" example."""
    assert sha256_portable(b"abc").hex() == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


KEYS = st.sampled_from(
    [
        NO_HASH_KEYS,
        HashKeys(cache_salt="tenant-a"),
        HashKeys(lora_name="adapter", lora_path="/x"),
        HashKeys(mm_items=(MultiModalItem("img", 3, 5),)),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    algo=st.sampled_from(HASH_ALGOS),
    identity=st.booleans(),
    block_size=st.integers(1, 20),
    seed=st.sampled_from([None, "0", "seed-b"]),
    tokens=st.lists(TOKENS, max_size=120),
    split=st.integers(0, 120),
    keys=KEYS,
)
def test_chained_hashes_equal_the_reference(
    algo: str,
    identity: bool,
    block_size: int,
    seed: str | None,
    tokens: list[int],
    split: int,
    keys: HashKeys,
) -> None:
    """Hashing in two steps (prompt, then outputs) as requests do gives the reference's list."""
    expected: list[bytes] = []
    reference = BlockHasher(algo, block_size, seed, identity=identity)
    reference.extend(expected, tokens, keys)
    native = NativeBlockHasher(algo, block_size, seed, identity=identity)
    assert native.none_hash == reference.none_hash
    assert native.hashes_like(reference) and reference.hashes_like(native)
    hashes: list[bytes] = []
    added = native.extend(hashes, tokens[:split], keys)
    added += native.extend(hashes, tokens, keys)
    assert hashes == expected
    assert added == len(tokens) // block_size


@pytest.mark.parametrize("identity", [False, True])
def test_non_int_and_huge_tokens_fall_back_to_the_reference(identity: bool) -> None:
    """bool tokens pickle differently from ints and 2**70 does not fit int64: same bytes."""
    tokens = [True, 2, 3, 2**70, 5, 6, 7, 8]
    expected: list[bytes] = []
    BlockHasher("sha256", 4, identity=identity).extend(expected, tokens)
    hashes: list[bytes] = []
    NativeBlockHasher("sha256", 4, identity=identity).extend(hashes, tokens, NO_HASH_KEYS)
    assert hashes == expected and len(hashes) == 2
