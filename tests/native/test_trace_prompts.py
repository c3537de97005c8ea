"""The compiled scheduler identifies a trace prompt's blocks from its block ids itself.

A request made from trace block ids (SymbolicPrompt) reaches the compiled scheduler holding only
the tokens past its symbolic part and no Python block hashes; the C++ request state computes the
identities. Run to the end beside the reference Scheduler on the Python cache core, each request
must end with the same tokens, hit and block hashes, and the Python hashes must never have been
made during the compiled run (unless something read them before, as a prefix-aware router does:
then the scheduler keeps them up to date).
"""

from __future__ import annotations

from array import array
from dataclasses import replace

import pytest

from sim.kvcache import NO_HASH_KEYS, BlockHasher, symbolic_prompt
from sim.native import NativeBlockHasher
from sim.sched import NativeScheduler, Request, Scheduler, SchedulerConfig
from workloads.synthetic_tokens import SyntheticTokens, TracePrompt

TOKENS = SyntheticTokens()
# Block 16, trace blocks of 32: 40-token prompts are 2 identified blocks and an 8-token tail.
CONFIG = SchedulerConfig(num_gpu_blocks=64, block_size=16, block_identity=True)
OUTPUTS = [7, 8, 9] * 6  # 18 outputs: the tail block fills after 8, another block after 24


def trace_request(
    request_id: str, block_ids: list[int], hasher: BlockHasher | NativeBlockHasher, now: float
) -> Request:
    prompt = symbolic_prompt(TracePrompt("ns", block_ids, 32, 40, TOKENS), hasher, NO_HASH_KEYS)
    assert prompt is not None and prompt.num_symbolic_tokens == 32
    return Request(request_id, prompt, OUTPUTS, hasher, arrival_at=now)


def run(scheduler: Scheduler | NativeScheduler, *, read_hashes: bool) -> dict[str, Request]:
    """Request a ([3, 4]) first, b ([3, 5]) once a has finished; sync steps, time = step."""
    requests: dict[str, Request] = {}
    now = 0.0
    for request_id, block_ids in (("a", [3, 4]), ("b", [3, 5])):
        request = trace_request(request_id, block_ids, scheduler.hasher, now)
        if read_hashes:
            assert len(request.block_hashes) == 2
        requests[request_id] = request
        scheduler.add_request(request)
        while scheduler.has_unfinished_requests:
            now += 1.0
            output = scheduler.schedule(now)
            if isinstance(scheduler, NativeScheduler) and not read_hashes:
                assert request._block_hashes is None  # never made in Python
            scheduler.update_from_output(output, now)  # type: ignore[arg-type]
    return requests


@pytest.mark.parametrize("read_hashes", [False, True])
def test_a_trace_request_runs_as_on_the_reference(read_hashes: bool) -> None:
    reference = run(Scheduler(replace(CONFIG, core="python")), read_hashes=False)
    compiled = run(NativeScheduler(CONFIG), read_hashes=read_hashes)
    for request_id in ("a", "b"):
        expected, got = reference[request_id], compiled[request_id]
        assert (got.num_tokens, got.num_output_tokens, got.num_symbolic_tokens) == (58, 18, 32)
        # Only the 8-token tail and the 18 outputs are held: no zeros for the symbolic part.
        assert got.all_token_ids == expected.all_token_ids
        assert len(got.all_token_ids) == 26
        assert got.status == expected.status
        assert got.num_cached_tokens == expected.num_cached_tokens
        # 58 tokens: 3 full blocks, the last of the 8 tail tokens and 8 outputs.
        assert len(got.block_hashes) == 3
        assert got.block_hashes == expected.block_hashes
    # b shares trace block 3 (block 0 and 1) with a; its tail comes from trace block 5.
    assert compiled["b"].num_cached_tokens == 32
    assert compiled["a"].block_hashes[:2] == compiled["b"].block_hashes[:2]
    assert compiled["a"].block_hashes[2] != compiled["b"].block_hashes[2]


def test_the_compiled_identities_are_the_python_ones() -> None:
    """After a and b ran on the compiled scheduler (identities computed in C++), a new request
    of a's blocks whose hashes Python made hits both identified blocks (32 tokens, the most a
    40-token prompt can hit) in the compiled cache."""
    scheduler = NativeScheduler(CONFIG)
    run(scheduler, read_hashes=False)
    probe = trace_request("c", [3, 4], scheduler.hasher, 0.0)
    assert len(probe.block_hashes) == 2  # made by Python
    assert scheduler.kv_cache_manager.get_computed_blocks(probe)[1] == 32


@pytest.mark.parametrize("hasher_type", [BlockHasher, NativeBlockHasher])
def test_extend_from_a_later_position_hashes_as_from_the_start(
    hasher_type: type[BlockHasher] | type[NativeBlockHasher],
) -> None:
    """Tokens 32.. of a 70-token run extend the first two hashes of the whole run into its
    four; tokens that start after a block without a hash are refused."""
    hasher = hasher_type("sha256", 16, identity=True)
    tokens = array("q", range(70))
    whole: list[bytes] = []
    assert hasher.extend(whole, tokens) == 4
    later = whole[:2]
    assert hasher.extend(later, tokens[32:], NO_HASH_KEYS, 32) == 2
    assert later == whole
    listed = whole[:2]
    assert hasher.extend(listed, list(range(32, 70)), NO_HASH_KEYS, 32) == 2
    assert listed == whole
    with pytest.raises(ValueError):
        hasher.extend(whole[:1], tokens[32:], NO_HASH_KEYS, 32)
