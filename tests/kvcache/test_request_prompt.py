"""How a CacheRequest holds its prompt: a copy, or the caller's new array when it owns it;
and which request states count as finished."""

from __future__ import annotations

from array import array

from sim.kvcache import BlockHasher, CacheRequest, RequestStatus


def test_a_request_copies_its_prompt_unless_it_owns_the_array() -> None:
    # 40 tokens, block size 16: the owned array becomes the request's tokens (outputs are
    # appended to it), the other stays as the caller left it; both hash the same 2 blocks.
    hasher = BlockHasher("sha256", 16)
    shared = array("q", range(40))
    owned = array("q", range(40))

    copying = CacheRequest("copy", shared, hasher)
    owning = CacheRequest("own", owned, hasher, owns_prompt=True)
    copying.append_output_token_ids([7] * 8)
    owning.append_output_token_ids([7] * 8)

    assert copying.all_token_ids is not shared and len(shared) == 40
    assert owning.all_token_ids is owned and len(owned) == 48
    assert owning.block_hashes == copying.block_hashes
    assert (len(owning.block_hashes), owning.num_output_tokens, owning.num_tokens) == (3, 8, 48)


def test_an_owned_prompt_that_is_not_an_int64_array_is_still_copied() -> None:
    # A list (or an array of another type) cannot be kept as the int64 token array.
    hasher = BlockHasher("sha256", 16)
    prompt = [1, 2, 3]
    request = CacheRequest("r", prompt, hasher, owns_prompt=True)
    assert request.all_token_ids == array("q", [1, 2, 3])
    assert request.all_token_ids.typecode == "q"


def test_only_the_finished_states_are_finished() -> None:
    finished = {status.name for status in RequestStatus if status.is_finished}
    assert finished == {"FINISHED_STOPPED", "FINISHED_LENGTH_CAPPED", "FINISHED_ABORTED"}
    assert len(RequestStatus) == 7
