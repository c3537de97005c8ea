"""How far the CPU tier extends a request's GPU prefix hit (spec §13.7.1)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sim.kvcache.offload.tier import CpuOffloadTier, Lookup


def external_hit_tokens(
    tier: CpuOffloadTier,
    chunk_keys: Sequence[bytes],
    local_hit_tokens: int,
    num_tokens: int,
    tokens_per_chunk: int,
    keys_being_loaded: Collection[bytes] = (),
) -> int | None:
    """Tokens the tier adds after the GPU hit (0 if none), or None: defer the request.

    The tier only continues the GPU prefix, whole chunks only, and may reach `num_tokens`
    (the GPU stops at `num_tokens - 1`). A chunk still being stored, or being loaded by
    another request, anywhere in the hit defers the request instead.
    """
    start = local_hit_tokens // tokens_per_chunk
    limit = min(num_tokens, len(chunk_keys) * tokens_per_chunk)
    if limit - local_hit_tokens < tokens_per_chunk:
        return 0
    run = 0
    pending = False
    for key in chunk_keys[start:]:
        found = tier.lookup(key)
        if found is Lookup.MISS:
            break
        pending = pending or found is Lookup.HIT_PENDING
        run += 1
    if pending:
        return None
    hit_end = min(limit, (start + run) * tokens_per_chunk)
    external = hit_end - local_hit_tokens
    if external < tokens_per_chunk:
        return 0
    end_chunk = -(-hit_end // tokens_per_chunk)
    if any(key in keys_being_loaded for key in chunk_keys[start:end_chunk]):
        return None
    return external
