"""Executor-side file access confined to a root: where symbolic links are resolved or refused.

A policy compares paths as text (`within`, `startswith` on a `path` argument, after
normalization): `/repo/link/secret` is within `/repo` even when `/repo/link` leads to `/etc`,
because the compiler cannot know the file system a call runs on. The executor that opens the file
can, and these two helpers are how it does:

- `resolve_within(root, path)`: the real path, every link resolved, or `PathEscapeError` when it
  leaves `root`. A check: a link swapped in between it and the open is not seen.
- `open_within(root, path, mode)`: opens the file walking from `root` one component at a time,
  each opened relative to the last with no link followed (`O_NOFOLLOW`), so no link, swapped in
  at any moment, is ever followed; a link anywhere on the way is refused, even one that stays
  inside. POSIX only (it needs `dir_fd` and `O_NOFOLLOW`).

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "notes.txt").write_text("hello")
>>> resolve_within(root, "notes.txt") == (root / "notes.txt").resolve()
True
>>> with open_within(root, root / "notes.txt") as f:
...     f.read()
'hello'
>>> resolve_within(root, "../etc/passwd")
Traceback (most recent call last):
...
harnessc.runtime.session.files.PathEscapeError: `../etc/passwd` leaves its root: `..` goes above it
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Any

from ..model.semantics import normalize_path

__all__ = ["PathEscapeError", "open_within", "resolve_within"]

_MODES = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


class PathEscapeError(ValueError):
    """A path that leaves its root (by `..`, by a symbolic link, or by being elsewhere)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"`{path}` leaves its root: {reason}")
        self.path, self.reason = path, reason


def _inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> list[str]:
    """The components of `path` below `root`, by text alone: `path` is relative to `root`, or
    absolute and then under the root's own absolute path."""
    text = os.fspath(path)
    normal = normalize_path(text)
    if normal is None:
        raise PathEscapeError(text, "`..` goes above it")
    if normal.startswith("/"):
        base = normalize_path(os.fspath(Path(root).absolute()))
        assert base is not None
        if normal != base and not normal.startswith(base.rstrip("/") + "/"):
            raise PathEscapeError(text, f"it is not under `{base}`")
        normal = normal[len(base) :]
    return [part for part in normal.split("/") if part not in ("", ".")]


def resolve_within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """The real path of `path` under `root` with every symbolic link resolved (also those of a
    file not yet created: its existing folders are resolved), or `PathEscapeError` when the
    result is not `root` itself or inside it. `root` must exist.

    A check, not a lock: a link made between this and the open is not seen; `open_within`
    closes that gap."""
    real_root = Path(root).resolve(strict=True)
    parts = _inside(root, path)
    real = real_root.joinpath(*parts).resolve(strict=False)
    if real != real_root and real_root not in real.parents:
        raise PathEscapeError(os.fspath(path), f"it resolves to `{real}`, outside `{real_root}`")
    return real


def open_within(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    mode: str = "r",
    *,
    encoding: str | None = None,
) -> IO[Any]:
    """Open `path` under `root` as `open()` would (`mode`: r, w, a or x, with b for bytes),
    following no symbolic link on the way: each folder is opened relative to the one before it
    with `O_NOFOLLOW`, and so is the file. A link anywhere on the way raises `PathEscapeError`;
    other failures (a missing file) raise the usual `OSError`."""
    text = os.fspath(path)
    binary = "b" in mode
    kind = mode.replace("b", "")
    if kind not in _MODES:
        raise ValueError(f"mode {mode!r}: expected r, w, a or x, with b for bytes")
    parts = _inside(root, path)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the root itself is a folder", text)
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(folder, part):
                    raise PathEscapeError(text, f"`{part}` is a symbolic link") from None
                raise
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], _MODES[kind] | nofollow, 0o666, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP or _is_link(folder, parts[-1]):
                raise PathEscapeError(text, f"`{parts[-1]}` is a symbolic link") from None
            raise
    finally:
        os.close(folder)
    return os.fdopen(fd, kind + ("b" if binary else ""), encoding=None if binary else encoding)


def _is_link(folder: int, name: str) -> bool:
    try:
        os.readlink(name, dir_fd=folder)
    except OSError:
        return False
    return True
