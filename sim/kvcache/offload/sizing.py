"""Size of vLLM's CPU offload tier: bytes per chunk and number of chunks (spec §13.2)."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30
# mmap.PAGESIZE on x86-64 Linux, which vLLM rounds every chunk up to.
HOST_PAGE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class OffloadSizing:
    """How many chunks `kv_offloading_size` GiB holds and how many tokens that is."""

    chunk_bytes: int
    num_chunks: int
    blocks_per_chunk: int
    block_size: int

    @property
    def tokens_per_chunk(self) -> int:
        """Tokens one chunk covers."""
        return self.block_size * self.blocks_per_chunk

    @property
    def size_tokens(self) -> int:
        """Tokens the whole tier holds (vLLM's `cpu_kv_cache_size_tokens` label)."""
        return self.num_chunks * self.tokens_per_chunk

    @property
    def size_bytes(self) -> int:
        """Bytes the chunks occupy (vLLM's `cpu_kv_cache_size_bytes` label)."""
        return self.num_chunks * self.chunk_bytes


def round_up(value: int, multiple: int) -> int:
    """`value` rounded up to a multiple of `multiple`."""
    return -(-value // multiple) * multiple


def offload_sizing(
    kv_offloading_size_gib: float,
    bytes_per_block_per_worker: int,
    *,
    world_size: int = 1,
    block_size: int = 16,
    blocks_per_chunk: int = 1,
) -> OffloadSizing:
    """Chunks of `kv_offloading_size_gib` (summed over all workers) for one worker's block bytes.

    `bytes_per_block_per_worker` is one GPU block's KV pages on one worker (all layers); every
    worker keeps its shard of each chunk, so a chunk is `world_size` shards, page-rounded.
    """
    if kv_offloading_size_gib < 0:
        raise ValueError(f"kv_offloading_size must be >= 0 GiB, got {kv_offloading_size_gib}")
    if bytes_per_block_per_worker < 1 or world_size < 1 or block_size < 1:
        raise ValueError("bytes per block, world size and block size must be >= 1")
    if blocks_per_chunk < 1:
        raise ValueError(f"blocks_per_chunk must be >= 1, got {blocks_per_chunk}")
    bytes_per_block = bytes_per_block_per_worker * world_size
    chunk_bytes = round_up(bytes_per_block * blocks_per_chunk, HOST_PAGE_BYTES)
    cpu_bytes_to_use = int(kv_offloading_size_gib * GIB)
    return OffloadSizing(
        chunk_bytes=chunk_bytes,
        num_chunks=cpu_bytes_to_use // chunk_bytes,
        blocks_per_chunk=blocks_per_chunk,
        block_size=block_size,
    )
