"""What one request did with the CPU tier, for the recency refresh when it finishes (§13.4)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RequestAccess:
    """Keys one request stored, loaded or re-offered, with their positions in that request.

    `rank` is the LRU policy's request rank, handed out on the request's first recorded key.
    """

    seen: list[bytes] = field(default_factory=list)
    positions: dict[bytes, int] = field(default_factory=dict)
    inserted: set[bytes] = field(default_factory=set)
    reused: set[bytes] = field(default_factory=set)
    store_missed: set[bytes] = field(default_factory=set)
    rank: int | None = None

    def in_prefix_order(self) -> list[bytes]:
        """The seen keys head first (by chunk position; a stable sort keeps ties in seen order)."""
        return sorted(self.seen, key=self.positions.__getitem__)
