"""vLLM v1's block pool: the hash map, the free queue, allocation with eviction (spec §2, §4)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from sim.kvcache.block import FreeBlockQueue, KVBlock
from sim.kvcache.observer import BLOCK_CLEARED, BLOCK_EVICTED, BLOCK_STORED, CacheObserver

# Every block is a Python object (~132 bytes with its list slot): 30M blocks are ~4 GiB, about a
# sixth of this project's 24 GiB machines. More is refused up front instead of swapping.
MAX_NUM_GPU_BLOCKS = 30_000_000
BYTES_PER_BLOCK = 132


def pool_size_problem(num_gpu_blocks: int) -> str:
    """Why a pool of `num_gpu_blocks` cannot be built (with its memory estimate)."""
    return (
        f"num_gpu_blocks must be in 2..{MAX_NUM_GPU_BLOCKS:,} (one is the null block), got "
        f"{num_gpu_blocks:,}, which would need about "
        f"{num_gpu_blocks * BYTES_PER_BLOCK / 1024**3:.1f} GiB of memory to simulate"
    )


def pool_capacity_tokens(num_gpu_blocks: int, block_size: int) -> int:
    """The most tokens one sequence can hold in a pool of `num_gpu_blocks`: every block but the
    null block full."""
    return (num_gpu_blocks - 1) * block_size


class BlockPool:
    """All physical blocks; block 0 is the null block, so `num_gpu_blocks - 1` are usable."""

    __slots__ = (
        "num_gpu_blocks",
        "enable_caching",
        "observer",
        "blocks",
        "null_block",
        "free_block_queue",
        "cached_blocks",
        "num_evictions",
        "num_stored",
        "num_cached_free",
    )

    def __init__(
        self,
        num_gpu_blocks: int,
        *,
        enable_caching: bool = True,
        observer: CacheObserver | None = None,
    ) -> None:
        if not 2 <= num_gpu_blocks <= MAX_NUM_GPU_BLOCKS:
            raise ValueError(pool_size_problem(num_gpu_blocks))
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.observer = observer
        self.blocks = [KVBlock(block_id) for block_id in range(num_gpu_blocks)]
        self.free_block_queue = FreeBlockQueue(self.blocks)
        # vLLM takes the first free block as the null block; it never returns to the queue.
        self.null_block = self.free_block_queue.popleft()
        # Several blocks may carry one hash (no de-duplication); a dict keeps insertion order
        # so lookup returns the oldest copy still cached.
        self.cached_blocks: dict[bytes, KVBlock | dict[int, KVBlock]] = {}
        self.num_evictions = 0
        self.num_stored = 0
        self.num_cached_free = 0  # free-queue blocks that still carry a hash (evictable)

    @property
    def num_usable_blocks(self) -> int:
        """Blocks a request can hold: all but the null block."""
        return self.num_gpu_blocks - 1

    @property
    def num_free_blocks(self) -> int:
        """Free-queue length; cached blocks nobody holds count as free."""
        return self.free_block_queue.num_free_blocks

    @property
    def usage(self) -> float:
        """vllm:kv_cache_usage_perc: 1 - free / usable."""
        return 1.0 - self.free_block_queue.num_free_blocks / (self.num_gpu_blocks - 1)

    @property
    def num_cached_hashes(self) -> int:
        """Distinct hashes in the prefix cache."""
        return len(self.cached_blocks)

    def ref_cnt(self, block_id: int) -> int:
        """How many requests hold the block."""
        return self.blocks[block_id].ref_cnt

    def free_queue_entries(self) -> list[tuple[int, bytes | None]]:
        """(block id, cache hash or None) of each free block, front (next evicted) first."""
        return [(block.block_id, block.block_hash) for block in self.free_block_queue]

    @property
    def cached_free_usage(self) -> float:
        """Free blocks that still hold a cached prefix, as a fraction of the usable blocks."""
        return self.num_cached_free / (self.num_gpu_blocks - 1)

    def get_cached_block(self, block_hash: bytes) -> KVBlock | None:
        """The oldest cached block carrying `block_hash`, whether held or free."""
        entry = self.cached_blocks.get(block_hash)
        return entry if entry is None else _oldest(entry)

    def get_cached_prefix(self, block_hashes: Sequence[bytes]) -> list[KVBlock]:
        """`get_cached_block` of each hash in order, up to the first one not cached."""
        # The lookups run in C (map); a prefix ends at its first miss, found by list.index.
        entries = list(map(self.cached_blocks.get, block_hashes))
        if None in entries:
            del entries[entries.index(None) :]
        return list(map(_oldest, cast("list[KVBlock | dict[int, KVBlock]]", entries)))

    def cache_full_blocks(
        self,
        blocks: Sequence[KVBlock],
        block_hashes: Sequence[bytes],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        now: float = 0.0,
    ) -> None:
        """Register blocks[num_cached_blocks:num_full_blocks] under their hashes (no dedup)."""
        observer = self.observer
        cached_blocks = self.cached_blocks
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block is self.null_block:
                continue
            block_hash = block_hashes[index]
            block.block_hash = block_hash
            block.num_tokens = (index + 1) * block_size
            entry = cached_blocks.get(block_hash)
            if entry is None:
                cached_blocks[block_hash] = block
            elif isinstance(entry, KVBlock):
                if entry is block:
                    continue
                cached_blocks[block_hash] = {entry.block_id: entry, block.block_id: block}
            elif block.block_id in entry:
                continue
            else:
                entry[block.block_id] = block
            self.num_stored += 1
            if observer is not None:
                observer.on_block_event(
                    BLOCK_STORED, block_hash, block.block_id, block.num_tokens, now
                )

    def get_new_blocks(self, num_blocks: int, now: float = 0.0) -> list[KVBlock]:
        """Pop blocks from the free-queue front, evicting any cached ones; each gets ref_cnt 1."""
        blocks = self.free_block_queue.popleft_n(num_blocks)
        for block in blocks:
            if block.block_hash is not None:
                self._evict(block, block.block_hash, now)
            block.ref_cnt = 1
        return blocks

    def _evict(self, block: KVBlock, block_hash: bytes, now: float) -> None:
        entry = self.cached_blocks[block_hash]
        if isinstance(entry, KVBlock):
            del self.cached_blocks[block_hash]
        else:
            del entry[block.block_id]
            if not entry:
                del self.cached_blocks[block_hash]
        block.block_hash = None
        self.num_evictions += 1
        self.num_cached_free -= 1  # only free blocks are evicted
        if self.observer is not None:
            self.observer.on_block_event(
                BLOCK_EVICTED, block_hash, block.block_id, block.num_tokens, now
            )

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """Take hit blocks: a free one leaves the free queue (cannot be evicted); ref_cnt += 1."""
        remove = self.free_block_queue.remove
        null_block = self.null_block
        num_taken = 0
        for block in blocks:
            if block.ref_cnt == 0 and block is not null_block:
                remove(block)
                num_taken += 1  # a hit block carries a hash
            block.ref_cnt += 1
        self.num_cached_free -= num_taken

    def free_blocks(self, ordered_blocks: Iterable[KVBlock]) -> None:
        """Release blocks in order: unhashed ones to the queue front, cached ones to the back."""
        unhashed: list[KVBlock] = []
        hashed: list[KVBlock] = []
        caching = self.enable_caching
        null_block = self.null_block
        for block in ordered_blocks:
            if block is null_block:
                continue
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if caching and block.block_hash is not None:
                    hashed.append(block)
                else:
                    unhashed.append(block)
        self.free_block_queue.prepend_n(unhashed)
        self.free_block_queue.append_n(hashed)
        self.num_cached_free += len(hashed)

    def reset_prefix_cache(self, now: float = 0.0) -> bool:
        """Drop every cached hash; refused (False) while any request holds a block."""
        if self.free_block_queue.num_free_blocks != self.num_gpu_blocks - 1:
            return False
        observer = self.observer
        for block in self.blocks:
            if block.block_hash is not None:
                if observer is not None:
                    observer.on_block_event(
                        BLOCK_CLEARED, block.block_hash, block.block_id, block.num_tokens, now
                    )
                block.block_hash = None
        self.cached_blocks.clear()
        self.num_cached_free = 0
        return True


def _oldest(entry: KVBlock | dict[int, KVBlock]) -> KVBlock:
    """A cache entry's block: the only one, or the first cached of several with one hash."""
    return entry if isinstance(entry, KVBlock) else next(iter(entry.values()))
