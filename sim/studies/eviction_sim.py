"""A block cache with the pool's capacity semantics and a pluggable eviction policy.

Requests run one at a time (cache-only replay). Each one looks up its longest cached prefix
(capped at num_tokens - 1, counted in tokens as vLLM counts it), pins the hit copies, takes
new blocks for the rest of its sequence (unhashed free blocks first, then evicting a free
cached copy chosen by the policy), registers its full blocks as new copies (no de-duplication,
as in vLLM), and finally frees everything tail first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.studies.eviction_policies import POLICY_CLASSES, CopyStore
from sim.studies.eviction_trace import BlockTrace


@dataclass(slots=True)
class PolicyOutcome:
    """Counters of one policy over a stream; queries and hits in tokens, like vLLM's."""

    queries: int = 0
    hits: int = 0
    prefill_tokens_computed: int = 0
    num_evictions: int = 0


def simulate_policy(
    traces: Sequence[BlockTrace], policy_name: str, *, num_usable_blocks: int, block_size: int
) -> PolicyOutcome:
    """Replay `traces` through a pool of `num_usable_blocks` blocks evicting by `policy_name`."""
    store = CopyStore()
    policy = POLICY_CLASSES[policy_name](store, traces)
    copy_key, copy_position, copies_by_key = (
        store.copy_key,
        store.copy_position,
        store.copies_by_key,
    )
    outcome = PolicyOutcome()
    num_unhashed_free = num_usable_blocks
    for request_index, trace in enumerate(traces):
        keys = trace.block_keys
        num_hit = 0
        if trace.reads_prefix_cache:
            num_lookup = trace.num_lookup_blocks
            while num_hit < num_lookup and keys[num_hit] in copies_by_key:
                num_hit += 1
            outcome.queries += trace.num_prompt_tokens
            outcome.hits += num_hit * block_size
        outcome.prefill_tokens_computed += trace.num_prompt_tokens - num_hit * block_size
        held = [copies_by_key[keys[position]][0] for position in range(num_hit)]
        policy.admit(request_index, held)

        num_new = trace.num_blocks - num_hit
        num_evict = num_new - min(num_unhashed_free, num_new)
        num_unhashed_free -= num_new - num_evict
        for _ in range(num_evict):
            victim = policy.evict()
            victim_key = copy_key[victim]
            copies = copies_by_key[victim_key]
            copies.remove(victim)
            if not copies:
                del copies_by_key[victim_key]
        outcome.num_evictions += num_evict

        for position in range(num_hit, len(keys)):
            copy = len(copy_key)
            key = keys[position]
            copy_key.append(key)
            copy_position.append(position)
            same_key = copies_by_key.get(key)
            if same_key is None:
                copies_by_key[key] = [copy]
            else:
                same_key.append(copy)
            held.append(copy)
        held.reverse()
        policy.release(request_index, held)
        num_unhashed_free += trace.num_blocks - len(keys)
    return outcome
