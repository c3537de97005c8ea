"""Block hashing (spec §3): NONE_HASH, chained block hashes, extra keys, algorithms, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.kvcache import (
    HASH_ALGOS,
    NO_HASH_KEYS,
    BlockHasher,
    CacheRequest,
    HashKeys,
    MultiModalItem,
    none_hash,
)
from sim.kvcache.hashing import num_shared_full_blocks
from sim.replay.cache_replay import replay_cache

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity" / "golden"
PROMPT_1000_1031 = list(range(1000, 1032))


def block_hashes(algo: str, token_ids: list[int], keys: HashKeys = NO_HASH_KEYS) -> list[str]:
    """Hex hashes of every full 16-token block of `token_ids` (NONE_HASH unseeded)."""
    hashes: list[bytes] = []
    BlockHasher(algo, 16).extend(hashes, token_ids, keys)
    return [block_hash.hex() for block_hash in hashes]


def golden_arrive_hashes(scenario: str, request_id: str) -> list[str]:
    """The block hashes real vLLM printed when `request_id` arrived in a golden scenario."""
    path = next(GOLDEN_DIR.glob(f"{scenario}_*.out.jsonl"))
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line["op"] == "arrive" and line["id"] == request_id:
            return line["block_hashes"]
    raise AssertionError(f"{path.name} has no arrive of {request_id}")


@pytest.mark.parametrize(
    ("algo", "seed", "expected"),
    [
        ("sha256", None, "066b1e8987e027138e98701c46128929378935f9b6cd1549105ae6b4f0d71198"),
        ("sha256", "0", "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c"),
        ("sha256_cbor", None, "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"),
    ],
)
def test_none_hash_matches_the_verified_values(algo, seed, expected):
    """spec §3.2: NONE_HASH for sha256 unseeded, PYTHONHASHSEED=0, and sha256_cbor unseeded."""
    assert none_hash(algo, seed).hex() == expected


def test_blocks_0_and_1_of_tokens_1000_to_1031_match_vllm():
    """spec §3.2: sha256, no extra keys, the two blocks of tokens 1000..1031."""
    assert block_hashes("sha256", PROMPT_1000_1031) == [
        "9d9c413731095d0ee811a14814414907cafccd751ce2052f659e8e1f547aeb68",
        "6eab5151ee783ec014728198ae09f5b0c20f18673ff098bcec4f29beb1e71e61",
    ]


@pytest.mark.parametrize(
    ("scenario", "algo", "keys"),
    [
        ("s14", "sha256", HashKeys(cache_salt="tenant-1")),
        ("s15", "sha256", HashKeys(lora_name="sql", lora_path="/adapters/sql-v1")),
        ("s25", "sha256_cbor", HashKeys(lora_name="n", lora_path="/p", cache_salt="s1")),
    ],
)
def test_hashes_with_salt_and_lora_match_vllm(scenario, algo, keys):
    """Request A of s14/s15/s25 (48 tokens 1000..1047 with salt and/or LoRA) hashes as in golden."""
    assert block_hashes(algo, list(range(1000, 1048)), keys) == golden_arrive_hashes(scenario, "A")


def test_extra_keys_order_is_lora_mm_salt_embeds():
    """Block 0 carries all four tagged keys in that order; block 1 the same without the salt,
    with the image's offset relative to block 1 (negative: it started in block 0)."""
    embeds = bytes(range(256)) * 2  # 2 bytes per token, 256 tokens
    keys = HashKeys(
        lora_name="n",
        lora_path="/p",
        cache_salt="s1",
        mm_items=(MultiModalItem("img", offset=4, length=20),),
        prompt_embeds=embeds,
        prompt_embeds_bytes_per_token=2,
    )
    block_0 = keys.for_block(0, 0, 16)
    block_1 = keys.for_block(1, 16, 32)
    assert [key[0] for key in block_0] == ["lora", "mm", "cache_salt", "prompt_embeds"]
    assert block_0[:3] == (("lora", "n", "/p"), ("mm", "img", 4), ("cache_salt", "s1"))
    assert block_0[3] == ("prompt_embeds", hashlib.sha256(embeds[0:32]).hexdigest())
    assert block_1 == (
        ("lora", "n", "/p"),
        ("mm", "img", -12),
        ("prompt_embeds", hashlib.sha256(embeds[32:64]).hexdigest()),
    )
    assert [key[0] for key in keys.for_block(2, 32, 48)] == ["lora", "prompt_embeds"]


def test_no_extra_keys_hash_as_none_not_an_empty_tuple():
    """A block without extra keys is hashed with None (HashKeys().for_block gives None)."""
    assert HashKeys().for_block(0, 0, 16) is None
    assert HashKeys(cache_salt="s").for_block(1, 16, 32) is None


def test_empty_salt_hashes_exactly_like_no_salt():
    """cache_salt "" is falsy, so it adds no key (spec §3.4, s14d)."""
    assert HashKeys(cache_salt="").is_empty
    assert block_hashes("sha256", PROMPT_1000_1031, HashKeys(cache_salt="")) == block_hashes(
        "sha256", PROMPT_1000_1031
    )


def test_lora_id_is_not_hashed_but_name_and_path_are(tmp_path):
    """Through the replay (where a LoRA carries an id): ids 1 and 7 with the same name and path
    give identical hashes; another path gives different ones."""
    prompt = list(range(1000, 1032))
    loras = {
        "one": {"name": "sql", "id": 1, "path": "/v1"},
        "seven": {"name": "sql", "id": 7, "path": "/v1"},
        "v2": {"name": "sql", "id": 1, "path": "/v2"},
    }
    arrivals = [
        {"op": "arrive", "id": request_id, "prompt": prompt, "lora": lora}
        for request_id, lora in loras.items()
    ]
    script = tmp_path / "lora.jsonl"
    script.write_text("".join(json.dumps(op) + "\n" for op in arrivals))
    hashes = {
        replayed.line["id"]: replayed.line["block_hashes"]
        for replayed in replay_cache(script)
        if replayed.op is not None
    }
    assert hashes["one"] == hashes["seven"]
    assert not set(hashes["one"]) & set(hashes["v2"])


@pytest.mark.parametrize(
    ("algo", "digest_size"),
    [("sha256", 32), ("sha256_cbor", 32), ("xxhash", 16), ("xxhash_cbor", 16)],
)
def test_digest_sizes(algo, digest_size):
    """sha256 variants give 32-byte digests, xxhash variants 16 (xxh3_128)."""
    assert len(none_hash(algo)) == digest_size
    digests = [bytes.fromhex(h) for h in block_hashes(algo, PROMPT_1000_1031)]
    assert [len(digest) for digest in digests] == [digest_size, digest_size]


def test_unknown_algo_is_rejected_naming_the_allowed_ones():
    """An unknown hash_algo raises ValueError listing the four names."""
    with pytest.raises(ValueError, match="sha256, sha256_cbor, xxhash, xxhash_cbor"):
        BlockHasher("md5", 16)


_CHILD_SCRIPT = """
import json, sys
from sim.kvcache import HASH_ALGOS, BlockHasher, HashKeys
keys = HashKeys(lora_name="sql", lora_path="/p", cache_salt="tenant-1")
out = {}
for algo in HASH_ALGOS:
    hashes = []
    BlockHasher(algo, 16).extend(hashes, list(range(1000, 1048)), keys)
    out[algo] = [h.hex() for h in hashes]
json.dump(out, sys.stdout)
"""


@pytest.mark.parametrize("pythonhashseed", ["12345", "random"])
def test_hashes_are_identical_in_a_process_with_another_pythonhashseed(pythonhashseed):
    """Every algorithm (xxhash too: its NONE_HASH seed is fixed here) gives the same hashes in a
    child process whose str hashing is randomised differently."""
    keys = HashKeys(lora_name="sql", lora_path="/p", cache_salt="tenant-1")
    here = {algo: block_hashes(algo, list(range(1000, 1048)), keys) for algo in HASH_ALGOS}
    env = dict(os.environ, PYTHONHASHSEED=pythonhashseed)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(child.stdout) == here


def naive_shared_full_blocks(tokens: list[int], other: list[int], block_size: int) -> int:
    """Block-by-block comparison: what num_shared_full_blocks must equal."""
    count = 0
    while (count + 1) * block_size <= min(len(tokens), len(other)):
        block = slice(count * block_size, (count + 1) * block_size)
        if tokens[block] != other[block]:
            break
        count += 1
    return count


@given(
    st.lists(st.integers(0, 2), max_size=70),
    st.lists(st.integers(0, 2), max_size=70),
    st.integers(1, 8),
)
def test_shared_full_blocks_equals_a_block_by_block_count(tokens, other, block_size):
    # Tokens from {0, 1, 2} so random lists often share long prefixes.
    assert num_shared_full_blocks(tokens, other, block_size) == naive_shared_full_blocks(
        tokens, other, block_size
    )


def test_shared_full_blocks_of_a_chat_history_and_its_next_turn():
    # Previous turn: 40 tokens (2 full blocks of 16); the next prompt repeats them and adds 30.
    previous = list(range(40))
    assert num_shared_full_blocks(previous + list(range(100, 130)), previous, 16) == 2
    # A change at token 20 leaves only block 0 shared; at token 3, none.
    assert num_shared_full_blocks(previous[:20] + [-1] + previous[21:], previous, 16) == 1
    assert num_shared_full_blocks([0, 1, 2, -1] + previous[4:], previous, 16) == 0


@pytest.mark.parametrize("keys", [NO_HASH_KEYS, HashKeys(lora_name="a", lora_path="/a")])
def test_hashes_lent_by_a_prefix_source_equal_hashing_from_scratch(keys):
    # Turn 2 repeats turn 1's 50 prompt + 14 output tokens (4 full blocks) and adds 40 tokens.
    hasher = BlockHasher("sha256", 16)
    turn_1 = CacheRequest("t1", list(range(50)), hasher, hash_keys=keys)
    turn_1.append_output_token_ids(list(range(500, 514)))
    prompt_2 = [*turn_1.all_token_ids, *range(900, 940)]
    lent = CacheRequest("t2", prompt_2, hasher, hash_keys=keys, prefix_source=turn_1)
    fresh = CacheRequest("t2", prompt_2, BlockHasher("sha256", 16), hash_keys=keys)
    assert len(lent.block_hashes) == 6
    assert lent.block_hashes == fresh.block_hashes
    assert lent.block_hashes[:4] == turn_1.block_hashes


def test_hashes_made_at_the_first_read_cover_outputs_appended_before_it():
    # The hashes are made when first read: turn 2 (64 + 26 tokens) gains 22 outputs first, as the
    # compiled scheduler appends them (tokens only),
    # so its 112 tokens hash as 7 full blocks, the first 4 lent by turn 1 (64 tokens).
    hasher = BlockHasher("sha256", 16)
    turn_1 = CacheRequest("t1", list(range(64)), hasher)
    prompt_2 = [*range(64), *range(900, 926)]
    lent = CacheRequest("t2", prompt_2, hasher, prefix_source=turn_1)
    fresh = CacheRequest("t2", prompt_2, BlockHasher("sha256", 16))
    lent.all_token_ids.extend(range(700, 722))
    fresh.append_output_token_ids(list(range(700, 722)))
    assert len(lent.block_hashes) == 7
    assert lent.block_hashes == fresh.block_hashes
    assert lent.block_hashes[:4] == turn_1.block_hashes


@pytest.mark.parametrize(
    ("source_keys", "source_hasher"),
    [
        (HashKeys(cache_salt="other tenant"), BlockHasher("sha256", 16)),
        (NO_HASH_KEYS, BlockHasher("sha256", 16, hash_seed="another seed")),
        (NO_HASH_KEYS, BlockHasher("sha256_cbor", 16)),
    ],
)
def test_a_source_with_other_keys_or_another_hash_lends_nothing(source_keys, source_hasher):
    # Same tokens, but a salt, a seed or an algorithm that changes every hash: nothing is reused.
    tokens = list(range(64))
    source = CacheRequest("s", tokens, source_hasher, hash_keys=source_keys)
    request = CacheRequest("r", tokens, BlockHasher("sha256", 16), prefix_source=source)
    assert [block_hash.hex() for block_hash in request.block_hashes] == block_hashes(
        "sha256", tokens
    )
    assert not set(request.block_hashes) & set(source.block_hashes)
