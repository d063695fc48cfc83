"""The analysis cache: each partition's answers (partition.py) by a hash of what decides them.

Entries live in `analysis` in harnessc's cache folder (`dsl/files.py`), one JSON file each, named
by the SHA-256 of the partition's key together with harnessc's version, the z3-solver version
and a digest of the analysis's own source (so a changed encoding never reads an old answer).
The folder is safe to delete. Nothing here may break a check: an entry that cannot be read or
parsed is a miss, and one that cannot be written is only not kept. A question z3 gave up on
within its budget of resource units (budget.py) is an answer like another, the same on every
machine: kept, under a key that holds the budget (`budget_key`), so that a larger budget asks
again. Only an answer cut short by the clock, which no run of the analysis sets, is not kept.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from functools import cache
from pathlib import Path

from harnessc.dsl.files import cache_folder
from harnessc.runtime.model import semantics

from harnessc import __version__

from .partition import Answers, answers_from_json, answers_to_json

__all__ = ["AnalysisCache", "installed_version"]

_SOURCES = (
    Path(__file__).parent,  # the analysis
    Path(semantics.__file__),  # the operators and selectors
)


def installed_version(package: str) -> str:
    """The installed version of a distribution, or "unknown".

    Read from the name of its `NAME-VERSION.dist-info` folder on the import path, as installers
    name it (`z3_solver-4.15.4.0.dist-info`): `importlib.metadata` would answer the same, but
    importing it (the email package, zipfile, csv) costs a check whose answers are cached more
    than the rest of the analysis. A distribution installed otherwise is asked through it.
    """
    prefix = re.sub(r"[-_.]+", "_", package).lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a missing folder, an import hook
            continue
        for name in names:
            if name.endswith(".dist-info") and name.lower().startswith(prefix):
                return name[len(prefix) : -len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


@cache
def _salt() -> str:
    """What every entry's hash includes: the versions, and the analysis's source text."""
    solver = installed_version("z3-solver")
    digest = hashlib.sha256(f"harnessc {__version__}\nz3-solver {solver}\n".encode())
    for root in _SOURCES:
        files = sorted(root.glob("*.py")) if root.is_dir() else [root]
        for path in files:
            try:
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
            except OSError:
                digest.update(path.name.encode() + b"\0?")
    return digest.hexdigest()


def _analysis_folder() -> Path | None:
    folder = cache_folder() / "analysis"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


class AnalysisCache:
    """Answers by partition key, in memory for one run and on disk between runs."""

    def __init__(self, on_disk: bool = True) -> None:
        self.folder = _analysis_folder() if on_disk else None
        self.memory: dict[str, Answers] = {}
        self.texts: dict[str, str] = {}
        self.hits = 0

    @staticmethod
    def digest(key: str) -> str:
        return hashlib.sha256(f"{_salt()}\n{key}".encode()).hexdigest()

    def get(self, key: str) -> Answers | None:
        digest = self.digest(key)
        found = self.memory.get(digest)
        if found is not None or self.folder is None:
            return found
        try:
            text = Path(self.folder, digest[:2], digest + ".json").read_text(encoding="utf-8")
            found = answers_from_json(text)
        except (OSError, UnicodeError, ValueError, KeyError, TypeError, AttributeError):
            return None
        self.memory[digest] = found
        self.hits += 1
        return found

    def put(self, key: str, answers: Answers) -> Answers:
        """Keep the answers; returns them as a hit would read them back."""
        digest = self.digest(key)
        text = answers_to_json(answers)
        answers = answers_from_json(text)
        self.memory[digest] = answers
        if self.folder is not None and not answers.out_of_time:
            self._write(Path(self.folder, digest[:2]), digest + ".json", text)
        return answers

    def read(self, key: str) -> str | None:
        """Text kept by `write` under this key (another analysis's answers, as its own JSON),
        or None."""
        digest = self.digest(key)
        found = self.texts.get(digest)
        if found is not None or self.folder is None:
            return found
        try:
            found = Path(self.folder, digest[:2], digest + ".json").read_text(encoding="utf-8")
        except (OSError, UnicodeError):
            return None
        self.texts[digest] = found
        return found

    def write(self, key: str, text: str, keep: bool = True) -> None:
        """Keep the text in memory, and on disk when `keep` (not for answers cut short by the
        clock)."""
        digest = self.digest(key)
        self.texts[digest] = text
        if self.folder is not None and keep:
            self._write(Path(self.folder, digest[:2]), digest + ".json", text)

    @staticmethod
    def _write(folder: Path, name: str, text: str) -> None:
        import tempfile  # a run whose answers are all cached writes none

        # written aside and renamed: a reader never sees half an entry
        try:
            folder.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, folder / name)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass
