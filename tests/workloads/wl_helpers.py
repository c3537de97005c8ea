"""Test helpers: vLLM-style chained block hashes computed independently of the code under test."""

from __future__ import annotations

import hashlib


def chained_block_hashes(tokens: list[int], block_size: int) -> list[bytes]:
    """One digest per full block; each depends on its parent, so a change alters all later ones."""
    hashes: list[bytes] = []
    parent = b""
    for start in range(0, len(tokens) - block_size + 1, block_size):
        block = ",".join(map(str, tokens[start : start + block_size])).encode()
        parent = hashlib.sha256(parent + b"|" + block).digest()
        hashes.append(parent)
    return hashes


def num_shared_blocks(first: list[int], second: list[int], block_size: int) -> int:
    """How many leading full blocks two token lists share (a prefix-cache hit in blocks)."""
    shared = 0
    for a, b in zip(
        chained_block_hashes(first, block_size),
        chained_block_hashes(second, block_size),
        strict=False,
    ):
        if a != b:
            break
        shared += 1
    return shared
