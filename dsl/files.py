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
"""The limits of a spec, each refused with a diagnostic as soon as it is crossed (while the
file is read or parsed, before any later stage runs), so that no input can keep the compiler
busy: a file of at most 8 MiB (H005); a spec (a root and its imports) of at most `MAX_RULES`
rules (H010) and `MAX_EXPRESSION_NODES` expression nodes (H011); a condition of at most
`MAX_CONDITION_NODES` (H012); brackets, `not`s and quantifiers nested at most 64 deep
(H108, `recovery.MAX_NESTING`). A call's arguments have limits of their own at run time
(`runtime/judge/normalize.py`, `MAX_ARGS_BYTES`)."""
MAX_RULES = 50_000
MAX_EXPRESSION_NODES = 100_000
"""Operators (`and`, `or`, `not`), comparisons, references (`args.x`), calls, quantifiers,
provenance tests, lists, records and their entries, numbers, durations and booleans; strings
are not counted (every description is one)."""
MAX_CONDITION_NODES = 10_000
"""Expression nodes in one condition: a rule's, a grant's, a `requires`, a step's `when`."""

PROJECT_MARKERS = ("pyproject.toml", "harness.toml")
"""The files that mark a project's root folder: a spec's imports stay inside it."""

_ROOT: ContextVar[Path | None] = ContextVar("harnessc_root", default=None)

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


@contextmanager
def rooted_at(root: str | os.PathLike[str] | None) -> Iterator[None]:
    """Confine every spec read until the block ends to `root` (`--root`), whatever project
    folder each spec is in; None keeps each spec's own project root (`project_root`)."""
    token = _ROOT.set(Path(os.path.abspath(root)) if root is not None else None)
    try:
        yield
    finally:
        _ROOT.reset(token)


def given_root() -> Path | None:
    """The folder `rooted_at` set (`--root`), or None."""
    return _ROOT.get()


def project_root(spec: str | os.PathLike[str]) -> Path:
    """The folder a spec's imports stay inside: the folder given by `--root` (`rooted_at`),
    else the nearest folder at or above the spec's that holds a `pyproject.toml` or a
    `harness.toml`, else the spec's own folder. The spec's folder is taken as named, links not
    followed: a spec that is a link to a file elsewhere is still judged by where it was named.
    """
    given = _ROOT.get()
    if given is not None:
        return given
    folder = Path(os.path.abspath(spec)).parent
    for candidate in (folder, *folder.parents):
        for marker in PROJECT_MARKERS:
            try:
                if (candidate / marker).is_file():
                    return candidate
            except OSError:  # a folder we may not look into marks nothing
                continue
    return folder


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path`, every link in it followed, is `root` or under it (also followed)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    try:
        return os.path.commonpath([real, base]) == base
    except ValueError:  # another drive
        return False


def outside_root(
    shown: str, root: str | os.PathLike[str], span: Span | None = None, label: str | None = None
) -> Diagnostic:
    """H009 for a file outside the project root: names the path, never reads the file."""
    where = display_path(root) or "."
    return Diagnostic.make(
        "H009",
        f"`{clipped(shown)}` is outside the project root `{clipped(where)}`",
        span,
        label or "outside the project",
        path=None if span is not None else shown,
        notes=[
            "a spec reads files only inside its project root (the nearest folder above it with "
            "a `pyproject.toml` or `harness.toml`) and the standard library's `std.*` modules"
        ],
        help="move the file into the project, or name a wider root with `--root`",
    )


def confined(path: str | os.PathLike[str], shown: str | None = None) -> Diagnostic | None:
    """H009 when a spec named on the command line resolves outside its project root (a link
    to a file elsewhere), else None."""
    root = project_root(path)
    if inside(path, root):
        return None
    return outside_root(shown or display_path(path), root)


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
