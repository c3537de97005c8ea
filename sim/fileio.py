"""The one place output is opened, created and replaced.

A result file is either complete or absent, never half-written; every `OSError` while writing
becomes a one-line `InputError` naming the path, what went wrong and what to do; output places
are checked before long work starts; and temporary files or partial directories a killed
process left behind are recognised (nobody holds their lock) and removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sim.errors import InputError

TEMP_SUFFIX = ".tmp"
PARTIAL_SUFFIX = ".partial"

_ADVICE = {
    errno.ENOSPC: "the disk is full; free space or write somewhere else",
    errno.EDQUOT: "the disk quota is used up; free space or write somewhere else",
    errno.EROFS: "the file system is read-only; write somewhere else",
    errno.EACCES: "permission denied; choose a directory you can write",
    errno.EPERM: "permission denied; choose a directory you can write",
    errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
    errno.EISDIR: "it is a directory; name a file inside it instead",
    errno.EEXIST: "something else is in the way; remove it or choose another path",
    errno.ENAMETOOLONG: "the name is too long; choose a shorter path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.EIO: "the device reported an I/O error; check the disk",
}


def output_error(path: Path | str, error: OSError) -> InputError:
    """`error` as the one-line problem with writing `path`, and what to do about it."""
    reason = error.strerror or str(error) or type(error).__name__
    advice = _ADVICE.get(error.errno or 0)
    if advice is None and "No space left" in str(error):  # pyarrow keeps only the text
        advice = _ADVICE[errno.ENOSPC]
    message = f"cannot write: {reason}" + (f"; {advice}" if advice else "")
    return InputError(" ".join(message.split()), source=str(path))


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """Turn an `OSError` raised inside into the one-line `InputError` about `path`."""
    try:
        yield
    except OSError as error:
        raise output_error(path, error) from None


def _umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


# mkstemp and mkdtemp create 0600 files and 0700 folders; results should get the permissions
# a plain open() and mkdir() would give.
_FILE_MODE = 0o666 & ~_umask()
_DIR_MODE = 0o777 & ~_umask()


def make_dirs(directory: Path) -> list[Path]:
    """Create `directory` and missing parents; returns those created, outermost first."""
    check_output_dir(directory)
    missing = [path for path in (directory, *directory.parents) if not path.exists()]
    with writing(directory):
        directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def remove_created(directories: list[Path]) -> None:
    """Remove the `directories` that `make_dirs` created, innermost first, if still empty."""
    for directory in reversed(directories):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(".")


def check_output_dir(
    directory: Path, *, needed_bytes: int = 0, reported: Path | None = None
) -> None:
    """Refuse, before any work, a directory that cannot be made or written, or lacks space;
    the error names `reported` (default: the directory)."""
    reported = directory if reported is None else reported
    existing = _nearest_existing(directory)
    if not existing.is_dir():
        what = "is a file" if existing == reported else f"cannot be made: {existing} is a file"
        raise InputError(f"{what}, not a directory; choose another path", source=str(reported))
    if not _writable(existing):
        code = errno.EROFS if _read_only(existing) else errno.EACCES
        raise output_error(reported, OSError(code, os.strerror(code)))
    if needed_bytes > 0:
        free = shutil.disk_usage(existing).free
        if free < needed_bytes:
            raise InputError(
                f"needs about {_size(needed_bytes)} for its results but only {_size(free)} "
                "is free; free space, write somewhere else, or "
                "simulate less (duration_s, num_arrivals, outputs.events: false)",
                source=str(reported),
            )


def _size(num_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} bytes"


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK | os.X_OK)


def _read_only(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def check_output_file(path: Path) -> None:
    """Refuse, before any work, a file path that is a directory or cannot be written."""
    if path.is_dir():
        raise InputError("is a directory; name a file (e.g. inside it)", source=str(path))
    check_output_dir(path.parent, reported=path)


def _lock(descriptor: int) -> None:
    # Held until the descriptor closes (or the process dies): how leftovers are recognised.
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)


@contextlib.contextmanager
def atomic_writer(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temp file beside `path`; on success it replaces `path`, on error it is removed."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory; name a file (e.g. inside it)", source=str(path))
    make_dirs(path.parent)
    remove_leftovers(path.parent, prefix=f".{path.name}.")  # from a writer killed earlier
    with writing(path):
        descriptor, temp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent
        )
    try:
        _lock(descriptor)
        encoding = None if "b" in mode else "utf-8"
        with writing(path), os.fdopen(descriptor, mode, encoding=encoding) as handle:
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


@contextlib.contextmanager
def partial_dir(final: Path) -> Iterator[Path]:
    """A fresh, locked `.<name>.partial` beside `final`; removed unless renamed into place.

    The caller renames it to `final` when complete (`publish`); on any error or signal it goes.
    A write error inside it names `final`, the directory the user asked for.
    """
    partial = final.parent / f".{final.name}{PARTIAL_SUFFIX}"
    with writing(partial):
        # Made and locked under a name no leftover sweep takes, then renamed: a run starting
        # beside it (a sweep's other worker) never finds it unlocked and removes it.
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        os.chmod(staging, _DIR_MODE)
        descriptor = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _lock(descriptor)
        with writing(partial):
            shutil.rmtree(partial, ignore_errors=True)
            staging.rename(partial)
        yield partial
    except InputError as error:
        shutil.rmtree(partial, ignore_errors=True)
        if error.source is None or not error.source.startswith(str(partial)):
            raise
        raise InputError(error.message, source=str(final)) from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        os.close(descriptor)
        shutil.rmtree(staging, ignore_errors=True)  # only if the rename never happened


def check_replaceable(final: Path, marker: str) -> None:
    """Refuse a `final` directory that a result must not replace: a symbolic link, the working
    directory (or one holding it), or one that is neither empty nor an earlier result (holding
    `marker`), whose contents replacing it would delete."""
    if final.is_symlink():
        raise InputError(
            "is a symbolic link; a result replaces its folder, so name the folder itself",
            source=str(final),
        )
    if not final.is_dir():
        return
    here = Path.cwd().resolve()
    if final.resolve() in (here, *here.parents):
        raise InputError(
            "is the current directory or holds it; a result replaces its folder, so choose a "
            "new folder",
            source=str(final),
        )
    if not (final / marker).is_file() and any(final.iterdir()):
        raise InputError(
            f"holds files but is not an earlier result (no {marker}); a result replaces its "
            "folder, which would delete them, so choose a new or empty folder",
            source=str(final),
        )


def publish(partial: Path, final: Path, marker: str) -> None:
    """Move a complete partial directory into place, replacing an empty or older `final`
    (one holding `marker`; anything else is refused, as `check_replaceable` says)."""
    check_replaceable(final, marker)
    with writing(final):
        if final.exists():
            shutil.rmtree(final)
        partial.rename(final)


def _is_abandoned(path: Path) -> bool:
    """True when no living process holds the lock of this temp file or partial directory."""
    try:
        descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    except OSError:
        return False
    try:
        _lock(descriptor)
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return True


def remove_leftovers(directory: Path, prefix: str = ".") -> list[Path]:
    """Remove the temp files and partial directories in `directory` (named `prefix`...) whose
    writer is dead."""
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        leftover = name.startswith(prefix) and name.endswith((TEMP_SUFFIX, PARTIAL_SUFFIX))
        if not leftover or entry.is_symlink() or not _is_abandoned(entry):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
