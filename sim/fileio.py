"""Atomic file writes: a result file is either complete or absent, never half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def _default_file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


# mkstemp creates 0600 files; results should get the permissions a plain open() would give.
_FILE_MODE = _default_file_mode()


@contextlib.contextmanager
def atomic_writer(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temp file beside `path`; on success it replaces `path`, on error it is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(descriptor, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, _FILE_MODE)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_writer(path) as handle:
        handle.write(text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_writer(path, "wb") as handle:
        handle.write(data)
