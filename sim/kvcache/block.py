"""A physical KV block and the intrusive free queue that orders eviction (spec §2.1, §2.3)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class KVBlock:
    """One physical block: its id, holders, and its cache key while it is in the prefix cache."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "num_tokens", "prev_free", "next_free")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        # Set only while the block is in the prefix cache; num_tokens = prefix tokens it covers.
        self.block_hash: bytes | None = None
        self.num_tokens = 0
        self.prev_free: KVBlock | None = None
        self.next_free: KVBlock | None = None

    def __repr__(self) -> str:
        hashed = self.block_hash.hex()[:8] if self.block_hash else None
        return f"KVBlock(id={self.block_id}, ref={self.ref_cnt}, hash={hashed})"


class FreeBlockQueue:
    """Doubly linked list of free blocks; front = next to hand out (and evict). All ops O(1)."""

    __slots__ = ("_head", "_tail", "num_free_blocks")

    def __init__(self, blocks: Iterable[KVBlock]) -> None:
        self._head = KVBlock(-1)
        self._tail = KVBlock(-1)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        self.append_n(blocks)

    def popleft(self) -> KVBlock:
        """Take the front block."""
        block = self._head.next_free
        if block is self._tail or block is None:
            raise IndexError("no free blocks")
        self._unlink(block)
        return block

    def popleft_n(self, count: int) -> list[KVBlock]:
        """Take `count` blocks from the front, in order."""
        if count > self.num_free_blocks:
            raise IndexError(f"asked for {count} blocks, {self.num_free_blocks} free")
        taken = []
        block = self._head.next_free
        for _ in range(count):
            # Linked blocks always have neighbours; the sentinels end the walk.
            assert block is not None
            taken.append(block)
            following = block.next_free
            block.prev_free = block.next_free = None
            block = following
        assert block is not None
        self._head.next_free = block
        block.prev_free = self._head
        self.num_free_blocks -= count
        return taken

    def remove(self, block: KVBlock) -> None:
        """Unlink a block from anywhere in the queue (a cache hit on a free block)."""
        self._unlink(block)

    def append_n(self, blocks: Iterable[KVBlock]) -> None:
        """Put blocks at the back, keeping their order (the last one is the most recent)."""
        last = self._tail.prev_free
        assert last is not None
        count = 0
        for block in blocks:
            last.next_free = block
            block.prev_free = last
            last = block
            count += 1
        last.next_free = self._tail
        self._tail.prev_free = last
        self.num_free_blocks += count

    def prepend_n(self, blocks: list[KVBlock]) -> None:
        """Put blocks at the front so that blocks[0] becomes the new front."""
        if not blocks:
            return
        first = self._head.next_free
        assert first is not None
        previous = self._head
        for block in blocks:
            previous.next_free = block
            block.prev_free = previous
            previous = block
        previous.next_free = first
        first.prev_free = previous
        self.num_free_blocks += len(blocks)

    def _unlink(self, block: KVBlock) -> None:
        previous, following = block.prev_free, block.next_free
        if previous is None or following is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        previous.next_free = following
        following.prev_free = previous
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def __iter__(self) -> Iterator[KVBlock]:
        block = self._head.next_free
        while block is not self._tail:
            assert block is not None
            yield block
            block = block.next_free

    def __len__(self) -> int:
        return self.num_free_blocks
