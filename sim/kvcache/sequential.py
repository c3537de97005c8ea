"""One request alone in a sync engine: the cache-only way to replay a request stream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.kvcache.interface import CacheManager
from sim.kvcache.request import CacheRequest, RequestStatus


@dataclass(slots=True)
class AloneRun:
    """What running a request alone did."""

    admitted: bool
    num_hit_tokens: int
    num_new_tokens: int  # prefill tokens computed (or that would have been)
    new_block_ids: list[int]  # blocks the prefill took
    block_ids_at_finish: list[int]
    # The output whose decode step found no free block (the request stays running), or None.
    failed_at_output: int | None = None


def run_alone(
    manager: CacheManager,
    request: CacheRequest,
    output_token_ids: Sequence[int],
    *,
    full_sequence_must_fit: bool = True,
    has_running_requests: bool = False,
    finish: bool = True,
    stop_when_full: bool = False,
) -> AloneRun:
    """Prefill the whole prompt, decode every output but the last, then finish (free).

    The decode steps of a request alone take their blocks in one call: with nobody else
    allocating in between, the blocks popped, evicted and cached are the same, in the same
    order, as one step at a time. A refused admission changes nothing (admitted False).
    A decode step that finds no free block raises ValueError, or with `stop_when_full`
    leaves the request running after the outputs so far (`failed_at_output`).
    """
    hit_blocks, num_hit_tokens = manager.get_computed_blocks(request)
    num_new_tokens = request.num_tokens - request.num_computed_tokens - num_hit_tokens
    new_blocks = manager.allocate_slots(
        request,
        num_new_tokens,
        num_hit_tokens,
        hit_blocks,
        full_sequence_must_fit=full_sequence_must_fit,
        has_running_requests=has_running_requests,
    )
    if new_blocks is None:
        return AloneRun(False, num_hit_tokens, num_new_tokens, [], [])
    manager.record_prefix_cache_stats(request, num_hit_tokens)
    request.status = RequestStatus.RUNNING
    request.num_computed_tokens = num_hit_tokens + num_new_tokens
    num_decode_steps = max(len(output_token_ids) - 1, 0)
    num_slots = min(request.num_computed_tokens + num_decode_steps, manager.max_model_len)
    if manager.num_blocks_to_allocate(request.request_id, num_slots, ()) > manager.num_free_blocks:
        if not stop_when_full:
            raise ValueError(f"request {request.request_id!r} outgrew the KV cache while alone")
        # Step by step up to the decode that does not fit, as the engine would run it.
        for index, token_id in enumerate(output_token_ids[:-1]):
            request.append_output_token_ids((token_id,))
            if manager.allocate_slots(request, 1) is None:
                return AloneRun(
                    True,
                    num_hit_tokens,
                    num_new_tokens,
                    manager.block_ids(new_blocks),
                    [],
                    failed_at_output=index,
                )
            request.num_computed_tokens += 1
        raise AssertionError("the decode steps fit one by one but not together")
    if output_token_ids:
        request.append_output_token_ids(output_token_ids)
        if num_decode_steps:
            manager.allocate_slots(request, num_decode_steps)
        request.num_computed_tokens += num_decode_steps
    block_ids_at_finish = manager.get_block_ids(request.request_id)
    if finish:
        manager.free(request)
        request.status = RequestStatus.FINISHED_STOPPED
    return AloneRun(
        True,
        num_hit_tokens,
        num_new_tokens,
        manager.block_ids(new_blocks),
        block_ids_at_finish,
    )
