"""Read spec files: every way a file can be unusable becomes a diagnostic, never a traceback."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from .diagnostics import Diagnostic, clipped, os_reason
from .source import Source, Span

MAX_FILE_BYTES = 8 * 1024 * 1024

FileState = tuple[str, str]
"""A file as a run saw it: its absolute path and the SHA-256 of its bytes, or the code of the
diagnostic that made it unusable (H001 missing, H002 not a file, H005 too large, H007
unreadable)."""

_READS: ContextVar[list[FileState] | None] = ContextVar("harnessc_reads", default=None)


@contextmanager
def recording_reads() -> Iterator[list[FileState]]:
    """Record the state of every file `read_source` reads until the block ends, in order.

    What a run read decides what it reports, so a cached result is valid exactly while every
    file it read is in the same state (compiler/result_cache.py)."""
    reads: list[FileState] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


_Named = TypeVar("_Named", bound=str | os.PathLike[str])


def named_once(paths: Sequence[_Named]) -> list[_Named]:
    """The files named, in command-line order, each once however it is spelt."""
    seen: dict[str, _Named] = {}
    for path in paths:
        spelt: str | os.PathLike[str] = path
        seen.setdefault(os.path.realpath(spelt), path)
    return list(seen.values())


def cache_folder() -> Path:
    """harnessc's cache folder: `$HARNESSC_CACHE_DIR`, else `$XDG_CACHE_HOME/harnessc`, else
    `~/.cache/harnessc`. It holds the parser's tables, stored check results, the analysis's
    results and tool embeddings; everything in it is rebuilt when missing or damaged, so it is
    safe to delete."""
    own = os.environ.get("HARNESSC_CACHE_DIR")
    if own:
        return Path(own)
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "harnessc"


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as diagnostics show it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return rel if not rel.startswith("..") else str(p)


def read_source(
    path: str | os.PathLike[str], shown_as: str | None = None
) -> tuple[Source | None, list[Diagnostic]]:
    """Read one `.harness` file as UTF-8 text.

    Returns the source, or None and an H0xx diagnostic (missing, a directory, unreadable, too
    large, not UTF-8, NUL bytes).
    """
    shown = shown_as or display_path(path)
    data, problems = _read_bytes(path, shown)
    reads = _READS.get()
    if reads is not None:
        state = hashlib.sha256(data).hexdigest() if data is not None else problems[0].code
        reads.append((os.path.abspath(path), state))
    if data is None:
        return None, problems
    return decode_source(data, shown)


def _read_bytes(path: str | os.PathLike[str], shown: str) -> tuple[bytes | None, list[Diagnostic]]:
    p = Path(path)
    try:
        if p.is_dir():
            return None, [
                Diagnostic.make(
                    "H002",
                    f"`{shown}` is a directory, not a file",
                    None,
                    path=shown,
                    help="pass the `.harness` files themselves",
                )
            ]
        if not p.exists():
            return None, [Diagnostic.make("H001", f"no such file `{shown}`", None, path=shown)]
        if not p.is_file():
            return None, [
                Diagnostic.make("H002", f"`{shown}` is not a regular file", None, path=shown)
            ]
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            return None, [
                Diagnostic.make(
                    "H005",
                    f"`{shown}` is {size / 1048576:.1f} MiB, over the 8 MiB limit",
                    None,
                    path=shown,
                    help="split the spec into modules joined by `import`",
                )
            ]
        data = p.read_bytes()
    except OSError as error:
        message = f"cannot read `{clipped(shown)}`: {os_reason(error)}"
        return None, [Diagnostic.make("H007", message, None, path=shown)]
    return data, []


def decode_source(data: bytes, shown: str) -> tuple[Source | None, list[Diagnostic]]:
    """Decode bytes as a source, reporting invalid UTF-8 and NUL bytes at their position."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[: error.start].decode("utf-8", errors="replace")
        rest = data[error.start :].decode("utf-8", errors="replace")
        source = Source(shown, good + rest)
        span = Span(source, len(good), len(good) + 1)
        return None, [
            Diagnostic.make(
                "H003",
                f"`{shown}` is not valid UTF-8",
                span,
                f"byte 0x{data[error.start]:02x} at offset {error.start}",
                help="re-save the file as UTF-8",
            )
        ]
    if text.startswith("\ufeff"):
        text = text[1:]
    nul = text.find("\x00")
    if nul != -1:
        source = Source(shown, text.replace("\x00", " "))
        return None, [
            Diagnostic.make(
                "H004",
                f"`{shown}` contains a NUL byte",
                Span(source, nul, nul + 1),
                "NUL byte here",
                help="spec files are plain text; is this the right file?",
            )
        ]
    return Source(shown, text), []
