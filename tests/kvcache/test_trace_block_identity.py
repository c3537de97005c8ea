"""Trace prompts held as block ids (sim.kvcache.hashing.extend_trace_blocks): where the block
identity stands in for hashes, an engine block inside trace block b at offset k is identified
from (the identity before b, namespace, b, k) and its tokens are never made.

Random traces whose requests share prefixes of block ids, fork, repeat ids at other positions
and end in partial blocks (hypothesis): two engine blocks get equal identities from the ids
exactly when they get equal identities from their synthesised tokens, the Python and the
compiled hasher give the same bytes, and a request built from the ids holds the same tail
tokens and hashes its output-filled blocks as the token-built request decides. A known value
pins the definition.
"""

from __future__ import annotations

import struct
from array import array

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kvcache import (
    NO_HASH_KEYS,
    BlockHasher,
    CacheRequest,
    HashKeys,
    SymbolicPrompt,
    none_hash,
    symbolic_prompt,
)
from sim.native.manager import NativeBlockHasher
from workloads.api import SyntheticTokens
from workloads.synthetic_tokens import TracePrompt, namespace_key

TOKENS = SyntheticTokens()


@st.composite
def traces(draw: st.DrawFn) -> tuple[int, int, list[TracePrompt]]:
    """(engine block size, trace block size, up to six prompts of two namespaces): each prompt
    an earlier one's leading block ids plus new ids from a small set (so ids repeat at other
    positions), of any length its ids cover, the last block often partial."""
    block_size = draw(st.sampled_from([1, 2, 4, 8]))
    trace_block_size = block_size * draw(st.integers(1, 4))
    prompts: list[TracePrompt] = []
    for _ in range(draw(st.integers(1, 6))):
        ids: list[int] = []
        namespace = draw(st.sampled_from(["ns-a", "ns-b"]))
        if prompts:
            source = draw(st.sampled_from(prompts))
            namespace = source.namespace
            ids = source.block_ids[: draw(st.integers(0, len(source.block_ids)))]
        ids = ids + draw(st.lists(st.sampled_from([0, 1, 7, 2**64 - 1]), max_size=5))
        if not ids:
            continue
        last_block = draw(st.integers(1, trace_block_size))
        num_tokens = (len(ids) - 1) * trace_block_size + last_block
        prompts.append(TracePrompt(namespace, ids, trace_block_size, num_tokens, TOKENS))
    return block_size, trace_block_size, prompts


def trace_identities(hasher: BlockHasher | NativeBlockHasher, prompt: TracePrompt) -> list[bytes]:
    hashes: list[bytes] = []
    hasher.extend_trace_blocks(
        hashes, prompt.namespace_key, prompt.block_ids, prompt.trace_block_size, prompt.num_tokens
    )
    return hashes


@settings(max_examples=300, deadline=None)
@given(trace=traces())
def test_block_ids_identify_blocks_exactly_as_their_tokens_do(
    trace: tuple[int, int, list[TracePrompt]],
) -> None:
    block_size, _, prompts = trace
    python = BlockHasher("sha256", block_size, identity=True)
    native = NativeBlockHasher("sha256", block_size, identity=True)
    by_tokens: list[bytes] = []
    by_ids: list[bytes] = []
    for prompt in prompts:
        token_hashes: list[bytes] = []
        python.extend(token_hashes, array("q", prompt.token_array().tobytes()))
        id_hashes = trace_identities(python, prompt)
        assert trace_identities(native, prompt) == id_hashes
        assert len(id_hashes) == len(token_hashes) == prompt.num_tokens // block_size
        by_tokens += token_hashes
        by_ids += id_hashes
    for first in range(len(by_ids)):
        for second in range(len(by_ids)):
            assert (by_ids[first] == by_ids[second]) == (by_tokens[first] == by_tokens[second])


def xor(first: bytes, second: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(first, second, strict=True))


def test_an_engine_block_is_its_trace_blocks_anchor_xor_its_offsets_mask() -> None:
    """Block size 4, trace blocks of 8 tokens [9, 5] of namespace "ns": trace block 9's anchor
    is XXH3-128 of NONE_HASH, the namespace key, 9 and a zero byte; its blocks at offsets 0 and 4
    are the anchor XOR the masks of 0 and 4 (XXH3-128 of the offset and a one byte); trace block
    5's anchor follows its parent, block 1. Asked from block 3 on (blocks 0..2 given), the
    hasher starts from block 1, the identity before trace block 5, and gives block 3 alone."""
    root = none_hash("sha256", identity=True)
    key = namespace_key("ns")

    def mask(offset: int) -> bytes:
        return xxhash.xxh3_128_digest(struct.pack("<Q", offset) + b"\1")

    anchor_9 = xxhash.xxh3_128_digest(root + struct.pack("<QQ", key, 9) + b"\0")
    block_0, block_1 = xor(anchor_9, mask(0)), xor(anchor_9, mask(4))
    anchor_5 = xxhash.xxh3_128_digest(block_1 + struct.pack("<QQ", key, 5) + b"\0")
    blocks = [block_0, block_1, xor(anchor_5, mask(0)), xor(anchor_5, mask(4))]
    for hasher in (BlockHasher, NativeBlockHasher):
        identity = hasher("sha256", 4, identity=True)
        hashes: list[bytes] = []
        assert identity.extend_trace_blocks(hashes, key, [9, 5], 8, 16) == 4
        assert hashes == blocks
        resumed = blocks[:3]
        assert identity.extend_trace_blocks(resumed, key, [9, 5], 8, 16) == 1
        assert resumed == blocks


@pytest.mark.parametrize("hasher_type", [BlockHasher, NativeBlockHasher])
def test_only_an_identity_hasher_without_keys_and_with_whole_blocks_takes_block_ids(
    hasher_type: type[BlockHasher] | type[NativeBlockHasher],
) -> None:
    identity = hasher_type("sha256", 16, identity=True)
    assert identity.identifies_trace_blocks(512, NO_HASH_KEYS)
    assert not identity.identifies_trace_blocks(24, NO_HASH_KEYS)  # blocks would straddle two
    assert not identity.identifies_trace_blocks(512, HashKeys(cache_salt="s"))
    digests = hasher_type("sha256", 16)
    assert not digests.identifies_trace_blocks(512, NO_HASH_KEYS)
    with pytest.raises(ValueError):
        digests.extend_trace_blocks([], 1, [1], 512, 512)
    with pytest.raises(ValueError):
        identity.extend_trace_blocks([], 1, [1], 512, 528)  # one block of ids, 33 blocks asked


@pytest.mark.parametrize("hasher_type", [BlockHasher, NativeBlockHasher])
def test_a_request_from_block_ids_holds_its_tail_and_hashes_outputs_as_tokens_decide(
    hasher_type: type[BlockHasher] | type[NativeBlockHasher],
) -> None:
    """Two 40-token prompts of trace blocks [3, 4] (block 16, trace block 32) with the same
    first 8 output tokens: blocks 0..1 come from the ids, block 2 (8 prompt tokens + 8 outputs)
    from tokens; the two requests' blocks are equal one for one, none equal to a token-built
    request's, and a request whose second trace block differs differs in block 2 only."""
    hasher = hasher_type("sha256", 16, identity=True)
    prompt = TracePrompt("ns", [3, 4], 32, 40, TOKENS)
    made = symbolic_prompt(prompt, hasher, NO_HASH_KEYS)
    assert isinstance(made, SymbolicPrompt) and made.num_symbolic_tokens == 32
    outputs = list(range(8))
    requests = [CacheRequest(f"r{i}", made, hasher) for i in range(2)]
    by_tokens = CacheRequest("t", array("q", prompt.token_array().tobytes()), hasher)
    for request in [*requests, by_tokens]:
        assert request.num_tokens == 40
        tail = request.all_token_ids[32 - request.num_symbolic_tokens :]
        assert tail.tolist() == prompt.token_array(32).tolist()
        assert len(request.block_hashes) == 2
        assert request.append_output_token_ids(outputs) == 1
    assert requests[0].block_hashes == requests[1].block_hashes
    assert requests[0].num_symbolic_tokens == 32 and by_tokens.num_symbolic_tokens == 0
    assert len(requests[0].all_token_ids) == 16  # the prompt's 8 tail tokens and 8 outputs
    assert not set(requests[0].block_hashes) & set(by_tokens.block_hashes)
    # Trace block 5 instead of 4 changes the tail only: blocks 0..1 are equal, block 2 is not.
    other = CacheRequest("o", symbolic_prompt(prompt_of([3, 5]), hasher, NO_HASH_KEYS), hasher)
    other.append_output_token_ids(outputs)
    assert other.block_hashes[:2] == requests[0].block_hashes[:2]
    assert other.block_hashes[2] != requests[0].block_hashes[2]


def prompt_of(block_ids: list[int]) -> TracePrompt:
    return TracePrompt("ns", block_ids, 32, 40, TOKENS)


def test_block_ids_are_not_taken_where_tokens_decide() -> None:
    """vLLM's digests, a salted request and blocks that straddle trace blocks need tokens."""
    prompt = prompt_of([3, 4])
    assert symbolic_prompt(None, BlockHasher("sha256", 16, identity=True), NO_HASH_KEYS) is None
    assert symbolic_prompt(prompt, BlockHasher("sha256", 16), NO_HASH_KEYS) is None
    salted = HashKeys(cache_salt="s")
    assert symbolic_prompt(prompt, BlockHasher("sha256", 16, identity=True), salted) is None
    assert symbolic_prompt(prompt, BlockHasher("sha256", 24, identity=True), NO_HASH_KEYS) is None


def test_a_prompt_of_whole_blocks_makes_no_token() -> None:
    """A 64-token prompt of two 32-token trace blocks at block size 16: nothing to make."""
    made = symbolic_prompt(
        TracePrompt("ns", [3, 4], 32, 64, TOKENS),
        BlockHasher("sha256", 16, identity=True),
        NO_HASH_KEYS,
    )
    assert made is not None and (made.num_symbolic_tokens, made.tail) == (64, b"")


def test_a_request_from_block_ids_lends_no_prefix_and_borrows_none() -> None:
    """A session's previous turn lends its hashes by comparing tokens, which a request from
    block ids does not hold: the hashes are computed instead, and equal."""
    hasher = BlockHasher("sha256", 16, identity=True)
    prompt = prompt_of([3, 4])
    symbolic = CacheRequest("s", symbolic_prompt(prompt, hasher, NO_HASH_KEYS), hasher)
    tokens = array("q", prompt.token_array().tobytes())
    borrowing = CacheRequest("b", tokens, hasher, prefix_source=symbolic)
    assert borrowing.block_hashes == CacheRequest("t", tokens, hasher).block_hashes
    assert borrowing.block_hashes != symbolic.block_hashes
