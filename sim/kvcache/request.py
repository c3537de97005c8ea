"""The part of a request the KV cache sees: its tokens, block hashes and progress."""

from __future__ import annotations

import enum
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from sim.kvcache.hashing import (
    NO_HASH_KEYS,
    Hasher,
    HashKeys,
    TraceBlocks,
    num_shared_full_blocks,
)


class RequestStatus(enum.Enum):
    """vLLM's request states that matter to the cache and scheduler."""

    WAITING = "WAITING"
    RUNNING = "RUNNING"
    PREEMPTED = "PREEMPTED"
    # Admitted with a CPU-tier hit whose async load is still in flight (spec §13.7.2).
    WAITING_FOR_REMOTE_KVS = "WAITING_FOR_REMOTE_KVS"
    FINISHED_STOPPED = "FINISHED_STOPPED"
    FINISHED_LENGTH_CAPPED = "FINISHED_LENGTH_CAPPED"
    FINISHED_ABORTED = "FINISHED_ABORTED"

    is_finished: bool  # True for every FINISHED_* state

    def __init__(self, value: str) -> None:
        # A member attribute, not a property: the Python scheduler reads it per request per step.
        self.is_finished = value.startswith("FINISHED")


# A new request's status, read once: an enum member's class attribute read is slow in 3.11.
_WAITING = RequestStatus.WAITING


@dataclass(slots=True, frozen=True)
class SymbolicPrompt:
    """A prompt of trace blocks whose full blocks before `num_symbolic_tokens` are identified
    from the block ids (Hasher.extend_trace_blocks); only the tokens from there on are made,
    `tail` (int64 bytes), for the block that outputs complete."""

    blocks: TraceBlocks
    num_symbolic_tokens: int
    tail: bytes


def symbolic_prompt(
    blocks: TraceBlocks | None, hasher: Hasher, keys: HashKeys
) -> SymbolicPrompt | None:
    """The prompt `blocks` as `hasher` identifies it without its tokens, or None where its blocks
    need their tokens (vLLM's digests, extra keys, blocks across trace blocks) or it has none."""
    if blocks is None or not hasher.identifies_trace_blocks(blocks.trace_block_size, keys):
        return None
    num_symbolic_tokens = blocks.num_tokens // hasher.block_size * hasher.block_size
    return SymbolicPrompt(blocks, num_symbolic_tokens, blocks.token_bytes(num_symbolic_tokens))


class CacheRequest:
    """Prompt plus outputs so far, their full-block hashes, and progress.

    `all_token_ids` is an int64 `array('q')`, not a list: no Python int per token, and the
    compiled hasher reads it as one buffer. It holds the tokens from position
    `num_symbolic_tokens` on: a request made from a SymbolicPrompt never holds the tokens of
    the blocks its trace block ids identify (nothing reads tokens of hashed blocks). The
    prompt's block hashes are computed when `block_hashes` is first read; the compiled
    scheduler computes them itself and never reads it. `num_tokens` (prompt plus outputs so
    far, symbolic tokens included) is a plain slot, read on every scheduling decision: whatever
    grows `all_token_ids` sets it too (`append_output_token_ids`, the compiled scheduler's sync).
    """

    __slots__ = (
        "request_id",
        "all_token_ids",
        "num_prompt_tokens",
        "num_tokens",
        "_block_hashes",
        "num_computed_tokens",
        "status",
        "num_preemptions",
        "hash_keys",
        "skip_reading_prefix_cache",
        "num_symbolic_tokens",
        "trace_blocks",
        "_hasher",
        "_prefix_source",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int] | SymbolicPrompt,
        hasher: Hasher,
        hash_keys: HashKeys = NO_HASH_KEYS,
        skip_reading_prefix_cache: bool = False,
        prefix_source: CacheRequest | None = None,
        owns_prompt: bool = False,
    ) -> None:
        """`prefix_source` is an earlier request likely to share a prefix with this one (a
        session's previous turn): the hashes of the full blocks they share are copied, not
        recomputed. The hashes are the same either way. `owns_prompt`: `prompt_token_ids` is
        an array('q') made for this request alone, kept as its tokens rather than copied."""
        self.request_id = request_id
        self.num_computed_tokens = 0
        self.status = _WAITING
        self.num_preemptions = 0
        self.hash_keys = hash_keys
        # vLLM sets this when prompt logprobs are requested: no hit, not counted, still cached.
        self.skip_reading_prefix_cache = skip_reading_prefix_cache
        self._hasher = hasher
        self._block_hashes: list[bytes] | None = None
        if type(prompt_token_ids) is not array and isinstance(prompt_token_ids, SymbolicPrompt):
            self.all_token_ids = array("q")
            self.all_token_ids.frombytes(prompt_token_ids.tail)
            self.num_symbolic_tokens = prompt_token_ids.num_symbolic_tokens
            self.num_prompt_tokens = self.num_tokens = self.num_symbolic_tokens + len(
                self.all_token_ids
            )
            self.trace_blocks: TraceBlocks | None = prompt_token_ids.blocks
            self._prefix_source: CacheRequest | None = None
            return
        # From an array('q') this is one copy of the buffer (no per-token work).
        self.all_token_ids = (
            prompt_token_ids
            if owns_prompt and type(prompt_token_ids) is array and prompt_token_ids.typecode == "q"
            else array("q", prompt_token_ids)
        )
        self.num_symbolic_tokens = 0
        self.num_prompt_tokens = self.num_tokens = len(self.all_token_ids)
        self.trace_blocks = None
        self._prefix_source = prefix_source
        if prefix_source is not None:
            # A source lends to the next turn only: holding its own source too would keep a
            # whole session's prompts alive (its hashes, if ever read, are made from scratch).
            prefix_source._prefix_source = None

    @property
    def block_hashes(self) -> list[bytes]:
        """The hashes of the full blocks so far (of a request made from trace block ids,
        computed at the first read)."""
        block_hashes = self._block_hashes
        if block_hashes is None:
            block_hashes = self._block_hashes = self._identify_blocks()
        return block_hashes

    def _identify_blocks(self) -> list[bytes]:
        blocks = self.trace_blocks
        hasher = self._hasher
        block_hashes: list[bytes] = []
        if blocks is not None:
            hasher.extend_trace_blocks(
                block_hashes,
                blocks.namespace_key,
                blocks.block_ids,
                blocks.trace_block_size,
                self.num_symbolic_tokens,
            )
        else:
            source, self._prefix_source = self._prefix_source, None
            if (
                source is not None
                and not source.num_symbolic_tokens
                and source.hash_keys == self.hash_keys
                and source._hasher.hashes_like(hasher)
            ):
                num_shared = num_shared_full_blocks(
                    self.all_token_ids, source.all_token_ids, hasher.block_size
                )
                block_hashes = source.block_hashes[:num_shared]
        hasher.extend(block_hashes, self.all_token_ids, self.hash_keys, self.num_symbolic_tokens)
        return block_hashes

    @property
    def num_output_tokens(self) -> int:
        """Output tokens appended so far."""
        return self.num_tokens - self.num_prompt_tokens

    def append_output_token_ids(self, token_ids: Sequence[int]) -> int:
        """Append sampled tokens; hash newly full blocks. Returns the number of new hashes."""
        block_hashes = self._block_hashes
        if block_hashes is None:
            block_hashes = self.block_hashes  # made before the tokens grow
        token_ids_so_far = self.all_token_ids
        token_ids_so_far.extend(token_ids)
        start = self.num_symbolic_tokens
        self.num_tokens = num_tokens = start + len(token_ids_so_far)
        hasher = self._hasher
        if num_tokens // hasher.block_size <= len(block_hashes):
            return 0  # no block became full
        return hasher.extend(block_hashes, token_ids_so_far, self.hash_keys, start)
