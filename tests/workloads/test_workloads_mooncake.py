"""Mooncake replay: input lengths reproduced, and blocks shared exactly where hash_ids are."""

from __future__ import annotations

import hashlib
import json
from itertools import islice

import pytest
from wl_helpers import num_shared_blocks

from workloads.api import SyntheticTokens, read_mooncake
from workloads.synthetic_tokens import TracePrompt
from workloads.traces.blocks import TRACE_BATCH_SIZE

ARXIV = "mooncake/arxiv_mooncake_trace_first1000.jsonl"
ARXIV_NAMESPACE = "arxiv_mooncake_trace_first1000"


def _records(path) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def _shared_tokens(first: dict, second: dict, block_size: int = 512) -> int:
    """Tokens two requests share according to their hash ids alone."""
    shared = 0
    for index, (a, b) in enumerate(zip(first["hash_ids"], second["hash_ids"], strict=False)):
        if a != b:
            break
        length_a = min(block_size, first["input_length"] - index * block_size)
        length_b = min(block_size, second["input_length"] - index * block_size)
        shared += min(length_a, length_b)
        if length_a != length_b:
            break
    return shared


def test_every_request_keeps_its_input_length_output_length_and_arrival(traces_dir) -> None:
    records = _records(traces_dir / ARXIV)
    specs = list(read_mooncake(traces_dir / ARXIV))
    assert len(specs) == 1000
    for record, spec in zip(records, specs, strict=True):
        assert spec.num_prompt_tokens == record["input_length"]
        assert spec.num_output_tokens == record["output_length"]
        assert spec.arrival_at == record["timestamp"] / 1000
        assert [segment.content_id for segment in spec.segments] == [
            f"arxiv_mooncake_trace_first1000#{hash_id}" for hash_id in record["hash_ids"]
        ]
    assert specs[0].request_id == "arxiv_mooncake_trace_first1000-0"


def test_equal_hash_ids_give_equal_blocks_and_different_ids_different_blocks(traces_dir) -> None:
    ids_with_a_full_block = {
        hash_id
        for record in _records(traces_dir / ARXIV)
        for index, hash_id in enumerate(record["hash_ids"])
        if (index + 1) * 512 <= record["input_length"]
    }
    blocks_by_id: dict[str, list[int]] = {}
    for spec in read_mooncake(traces_dir / ARXIV):
        for segment in spec.segments:
            tokens = list(segment.tokens)
            known = blocks_by_id.setdefault(segment.content_id, tokens)
            # A partial last block is a prefix of the same id's full block.
            shorter = min(len(known), len(tokens))
            assert known[:shorter] == tokens[:shorter]
            if len(tokens) > len(known):
                blocks_by_id[segment.content_id] = tokens
    full_blocks = {key: tuple(tokens) for key, tokens in blocks_by_id.items() if len(tokens) == 512}
    assert len(full_blocks) == len(ids_with_a_full_block) == 11_221
    assert len(set(full_blocks.values())) == len(full_blocks)


@pytest.mark.parametrize("engine_block_size", [16, 48])
def test_engine_blocks_shared_are_exactly_those_the_hash_ids_share(
    traces_dir, engine_block_size: int
) -> None:
    records = _records(traces_dir / ARXIV)[:120]
    specs = list(islice(read_mooncake(traces_dir / ARXIV), 120))
    prompts = [spec.prompt_tokens() for spec in specs]
    pairs = [(index, index + 1) for index in range(119)] + [
        (0, index) for index in range(2, 120, 7)
    ]
    num_pairs_sharing = 0
    for a, b in pairs:
        expected = _shared_tokens(records[a], records[b]) // engine_block_size
        assert num_shared_blocks(prompts[a], prompts[b], engine_block_size) == expected
        num_pairs_sharing += expected > 0
    assert num_pairs_sharing > 20


def test_trace_block_size_and_partial_last_block(tmp_path) -> None:
    trace = tmp_path / "tiny.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [7, 8, 9]}\n'
        '{"timestamp": 1500, "input_length": 9, "output_length": 3, "hash_ids": [7, 8, 5]}\n'
    )
    tokens = SyntheticTokens()
    first, second = read_mooncake(trace, trace_block_size=4, tokens=tokens, speedup=2.0)
    assert [len(segment.tokens) for segment in first.segments] == [4, 4, 2]
    assert [len(segment.tokens) for segment in second.segments] == [4, 4, 1]
    assert first.prompt_tokens()[:8] == second.prompt_tokens()[:8]
    assert first.prompt_tokens()[8] != second.prompt_tokens()[8]
    assert first.segments[2].tokens.tolist() == tokens.block_tokens("tiny", 9, 4)[:2].tolist()
    assert (first.arrival_at, second.arrival_at) == (0.0, 0.75)
    assert first.output_tokens != second.output_tokens[:2]


def test_namespaces_keep_traces_apart_and_max_requests_stops_early(traces_dir) -> None:
    default = next(read_mooncake(traces_dir / ARXIV))
    renamed = next(read_mooncake(traces_dir / ARXIV, namespace="other"))
    assert default.num_prompt_tokens == renamed.num_prompt_tokens
    assert default.prompt_tokens()[:512] != renamed.prompt_tokens()[:512]
    assert len(list(read_mooncake(traces_dir / ARXIV, max_requests=5))) == 5


def test_prompt_tokens_are_pinned_and_each_block_is_its_cached_stream(traces_dir) -> None:
    """A prompt's blocks come from one numpy pass; they equal each block's own stream, are
    read-only, and the first 50 arXiv prompts hash to the value the per-block cache gave."""
    tokens = SyntheticTokens()
    digest = hashlib.sha256()
    for spec in islice(read_mooncake(traces_dir / ARXIV), 50):
        digest.update(spec.prompt_token_array().tobytes())
        for segment in spec.segments:
            hash_id = int(segment.content_id.rsplit("#", 1)[1])
            block = tokens.block_tokens(ARXIV_NAMESPACE, hash_id, len(segment.tokens))
            assert segment.tokens.tolist() == block.tolist()
            assert not segment.tokens.flags.writeable
    assert digest.hexdigest() == "f99ff5d158b138811f7828a5254592d03e19d28d7ae5fd066ef27510f0e5aa36"


def test_requests_made_in_batches_hold_the_tokens_each_makes_alone(traces_dir) -> None:
    """The first 300 arXiv requests (batches of 256 and 44): each answer is its own stream
    `<namespace>/output/<index>` and each prompt tail past a 16- or 64-token block is the
    prompt's tokens there, as the request would make them alone."""
    tokens = SyntheticTokens()
    specs = list(read_mooncake(traces_dir / ARXIV, max_requests=300))
    assert len(specs) == 300 > TRACE_BATCH_SIZE
    for index, spec in enumerate(specs):
        answer = tokens.streams([f"{ARXIV_NAMESPACE}/output/{index}"], [spec.num_output_tokens])
        assert spec.output_token_array().tolist() == answer.tolist()
        prompt = spec.trace_prompt()
        alone = TracePrompt(
            prompt.namespace, prompt.block_ids, 512, prompt.num_tokens, tokens
        ).token_array()
        for block_size in (16, 64):
            start = prompt.num_tokens // block_size * block_size
            assert prompt.token_bytes(start) == alone[start:].tobytes()
