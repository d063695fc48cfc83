"""Check and lint results kept between runs: an unchanged spec is answered without compiling.

`harnessc check` and `harnessc lint` are run again and again on the same files (by pre-commit,
by an editor on save, by a script in CI); each run pays for Python's start-up, the parser, the
models and the policy analysis before it can say "no errors". A result is therefore stored under
a key made of everything that decides it besides the files' contents:

- the command and its options (lint's selected and ignored codes, and the pyproject.toml they
  came from);
- the files named, the working directory (diagnostics name files relative to it), the
  `HARNESSC_*` environment variables (such as the analysis's budget) and the Python
  version;
- the compiler itself: the size and modification time of every file of the harnessc packages
  and of the libraries whose answers it reports (lark, pydantic, networkx, z3), so a new version
  of any of them, or an edit to the compiler in a development checkout, misses.

The entry records every file the run read, in order, with the SHA-256 of its bytes or the code
of the problem that made it unusable (dsl/files.py `recording_reads`): the roots, every module
they import and the standard library modules. (A result with an import that cannot be loaded is
not stored: it depends on a file that is not there.) A lookup reads them all again; one
difference, and the run compiles as if there were no entry. What the entry stores is the
diagnostics with the text of every source they point into, so they print exactly as the
run that found them printed them.

The folder is `cache_folder()/results` (dsl/files.py: `$HARNESSC_CACHE_DIR`, else
`$XDG_CACHE_HOME/harnessc`, else `~/.cache/harnessc`), one small JSON file per key; it is safe to
delete, and holds at most `MAX_ENTRIES` entries (the oldest go first). A damaged, unreadable or
unwritable entry is a miss, never an error. `--no-cache`, or `HARNESSC_NO_CACHE=1` in the
environment, skips it. This module imports nothing heavy: a hit costs the files' reads and
hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harnessc.dsl.diagnostics import Diagnostic, Label, Severity, Suppressed, SuppressionKind
from harnessc.dsl.files import FileState, cache_folder, read_source, recording_reads
from harnessc.dsl.source import Source, Span

from harnessc import __version__

__all__ = ["Cached", "ResultCache", "compiler_fingerprint"]

FORMAT = 2
"""The entries' layout; a change to it misses every older entry."""
_PACKAGES = ("harnessc", "harnessc.dsl", "harnessc.compiler", "harnessc.runtime", "harnessc.stdlib")
_LIBRARIES = ("lark", "pydantic", "pydantic_core", "networkx", "z3")
_CODE_SUFFIXES = (".py", ".lark", ".harness", ".j2", ".json", ".toml")
MAX_ENTRIES = 1000
_NOT_DECIDING = frozenset({"HARNESSC_NO_CACHE", "HARNESSC_TIMEOUT"})
"""Switches that decide no result: whether to use the cache, and the wall-clock limit of a
command (a command that runs out of it stores nothing)."""
NOT_STORED = frozenset({"H203"})
"""A result holding one of these is never stored. H203 (an import that cannot be loaded) depends
on files the run never read: the one that is missing, and the folder listing its "did you mean"
hint draws on. (L006, a question not decided within its budget, is stored like any finding:
the budget is counted in z3's resource units, the same on every machine.)"""


@cache
def compiler_fingerprint() -> str:
    """A hash of the compiler's own files and of the libraries it reports through, by size and
    modification time (a stat each, no reads)."""
    digest = hashlib.sha256(f"{__version__}\0{sys.version}\0".encode())
    folders: list[str] = []
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        folders.extend(spec.submodule_search_locations or () if spec else ())
    for folder in sorted(set(folders)):
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(_CODE_SUFFIXES):
                    _stat_into(digest, os.path.join(root, name))
    for library in _LIBRARIES:
        spec = importlib.util.find_spec(library)
        if spec is not None and spec.origin:
            _stat_into(digest, spec.origin)
    return digest.hexdigest()


def _stat_into(digest: Any, path: str) -> None:
    try:
        info = os.stat(path)
    except OSError:
        return
    digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())


@dataclass(frozen=True)
class Cached:
    """A run's result as it prints: its diagnostics, and the findings an ignore silenced (SARIF
    lists them, marked suppressed)."""

    diagnostics: list[Diagnostic]
    suppressed: list[Suppressed]


class ResultCache:
    """The entry of one run: `lookup` before compiling, `store` after."""

    def __init__(self, command: str, files: Sequence[str], options: Iterable[str] = ()) -> None:
        switches = sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith("HARNESSC_") and name not in _NOT_DECIDING
        )
        cwd, fingerprint = os.getcwd(), compiler_fingerprint()
        key = json.dumps([FORMAT, command, list(options), list(files), cwd, switches, fingerprint])
        self.path = cache_folder() / "results" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    @staticmethod
    def enabled(no_cache: bool = False) -> bool:
        return not no_cache and os.environ.get("HARNESSC_NO_CACHE", "") in ("", "0")

    def lookup(self) -> Cached | None:
        """The stored result, if there is one and every file it read is as it was."""
        try:
            entry = json.loads(self.path.read_text(encoding="utf-8"))
            if entry["format"] != FORMAT:
                return None
            reads = [(str(path), str(state)) for path, state in entry["reads"]]
            if _states([path for path, _ in reads]) != reads:
                return None
            sources = [Source(str(path), str(text)) for path, text in entry["sources"]]
            diagnostics = [_diagnostic(d, sources) for d in entry["diagnostics"]]
            suppressed = [
                Suppressed(_diagnostic(d, sources), SuppressionKind(kind), str(why))
                for d, kind, why in entry["suppressed"]
            ]
            return Cached(diagnostics, suppressed)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def store(self, reads: Sequence[FileState], result: Cached) -> None:
        """Keep a result; quietly does nothing when the folder cannot be written."""
        silenced = [s.diagnostic for s in result.suppressed]
        if any(d.code in NOT_STORED for d in result.diagnostics):
            return
        sources: dict[int, int] = {}
        texts: list[list[str]] = []
        for d in [*result.diagnostics, *silenced]:
            for label in d.labels:
                source = label.span.source
                if id(source) not in sources:
                    sources[id(source)] = len(texts)
                    texts.append([source.path, source.text])
        entry = {
            "format": FORMAT,
            "reads": [list(read) for read in reads],
            "sources": texts,
            "diagnostics": [_record(d, sources) for d in result.diagnostics],
            "suppressed": [
                [_record(s.diagnostic, sources), s.kind.value, s.justification]
                for s in result.suppressed
            ],
        }
        import tempfile  # a run answered from its entry, or with none kept, writes nothing

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # written whole, then renamed: a reader never sees half an entry
            with tempfile.NamedTemporaryFile(
                "w", dir=self.path.parent, suffix=".tmp", delete=False, encoding="utf-8"
            ) as out:
                json.dump(entry, out, ensure_ascii=False, separators=(",", ":"))
            os.replace(out.name, self.path)
            _prune(self.path.parent)
        except OSError:
            return


def _prune(folder: Path) -> None:
    """Keep the newest `MAX_ENTRIES` entries (a development checkout makes new keys at every
    edit of the compiler)."""
    entries = list(os.scandir(folder))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for entry in entries[: len(entries) - MAX_ENTRIES // 2]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def _states(paths: Sequence[str]) -> list[FileState]:
    """The state of each file now, read the way a run reads it."""
    with recording_reads() as reads:
        for path in paths:
            read_source(path, path)
    return reads


def _record(d: Diagnostic, sources: dict[int, int]) -> dict[str, Any]:
    return {
        "code": d.code,
        "message": d.message,
        "severity": d.severity.value,
        "labels": [
            [
                sources[id(label.span.source)],
                label.span.start,
                label.span.end,
                label.message,
                label.primary,
            ]
            for label in d.labels
        ],
        "notes": list(d.notes),
        "help": d.help,
        "path": d.path,
    }


def _diagnostic(d: dict[str, Any], sources: list[Source]) -> Diagnostic:
    labels = tuple(
        Label(Span(sources[index], int(start), int(end)), str(message), bool(primary))
        for index, start, end, message, primary in d["labels"]
    )
    return Diagnostic(
        code=str(d["code"]),
        message=str(d["message"]),
        severity=Severity(d["severity"]),
        labels=labels,
        notes=tuple(str(n) for n in d["notes"]),
        help=None if d["help"] is None else str(d["help"]),
        path=None if d["path"] is None else str(d["path"]),
    )
