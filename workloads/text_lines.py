"""Reading a line-oriented file without trusting it: no line may be longer than MAX_LINE_BYTES,
so an endless line (say /dev/zero) is refused instead of filling memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from workloads.errors import WorkloadError

# Far above any real line (a 16M-token prompt's hash ids as JSON are about 0.3 MiB).
MAX_LINE_BYTES = 64 * 2**20


class LineSource(Protocol):
    """A binary file, plain or gzipped: what bounded_lines reads."""

    def readline(self, size: int = -1, /) -> bytes: ...


def bounded_lines(handle: LineSource, source: str) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, raw line with its line break) of `handle`, each at most
    MAX_LINE_BYTES long; a longer one raises WorkloadError at its line."""
    line_number = 0
    while raw := handle.readline(MAX_LINE_BYTES + 1):
        line_number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise WorkloadError(
                f"line longer than {MAX_LINE_BYTES // 2**20} MiB; is this the right file?",
                source=source,
                line=line_number,
            )
        yield line_number, raw
