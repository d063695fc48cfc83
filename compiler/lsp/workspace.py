"""The open documents and their checks: each open file is the root of its own build, checked as
`harnessc lint` checks it (its configuration, its `# harnessc: ignore[…]` comments), with the
editor's unsaved text served through the pipeline's loader hook (`pipeline.Load`).

A check re-reads nothing that has not changed: every file read is parsed once per version of
its text (an open document's) or per size and modification time (a file on disk, the standard
library), and the policy analysis reads its answers back from its cache on disk.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.files import decode_source, rooted_at
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source

from ..config import ConfigError, LintConfig, load_config
from ..pipeline import CheckResult, LoadedFile, lint, load_file
from ..resolve import Module


@dataclass
class Build:
    """One open document checked as a root: what it reported and what it loaded."""

    path: str
    """The document's real path."""
    version: int | None
    text: str
    result: CheckResult
    module_paths: dict[int, str] = field(default_factory=dict)
    """id(source) → the real path of each module of the build (the standard library's too)."""
    config_problem: str | None = None

    @property
    def loads(self) -> set[str]:
        """The real paths of every file the build read."""
        return set(self.module_paths.values())

    def file_of(self, diagnostic: Diagnostic) -> str | None:
        """The real path of the file a diagnostic is about."""
        primary = diagnostic.primary
        if primary is not None:
            source = primary.span.source
            return self.module_paths.get(id(source)) or os.path.realpath(source.path)
        return os.path.realpath(diagnostic.path) if diagnostic.path else None

    def own(self) -> list[Diagnostic]:
        """The diagnostics about the document itself (an imported file's are its own)."""
        return [d for d in self.result.diagnostics if self.file_of(d) == self.path]

    def by_file(self) -> dict[str, list[Diagnostic]]:
        """The diagnostics about each file of the build other than the document itself and the
        standard library's, by real path."""
        std = {
            self.module_paths.get(id(m.source))
            for m in (self.result.resolution.modules if self.result.resolution else ())
            if m.is_std
        }
        found: dict[str, list[Diagnostic]] = {}
        for diagnostic in self.result.diagnostics:
            path = self.file_of(diagnostic)
            if path is not None and path != self.path and path not in std:
                found.setdefault(path, []).append(diagnostic)
        return found

    def module(self, path: str) -> Module | None:
        resolution = self.result.resolution
        if resolution is None:
            return None
        for module in resolution.modules:
            if module.source is not None and self.module_paths.get(id(module.source)) == path:
                return module
        return None

    def path_of(self, source: Source) -> str:
        return self.module_paths.get(id(source)) or os.path.realpath(source.path)


class Workspace:
    """Open documents by real path, the parses kept between checks, and the last build of each
    open document. `check` may run on a worker thread while the editor edits: it reads a
    snapshot of the texts taken when it starts."""

    def __init__(self) -> None:
        self.texts: dict[str, tuple[int | None, str]] = {}
        self.builds: dict[str, Build] = {}
        self.modelled: dict[str, Build] = {}
        """The last build of each open document that had a model (no errors): completion reads
        tools and their arguments from it while the document is half typed."""
        self._parsed: dict[tuple[str, str | None], tuple[object, LoadedFile]] = {}
        self._lock = threading.Lock()
        self.root: str | None = None
        """The project root given by `harnessc lsp --root`: checks run on a worker thread,
        which does not inherit the command's context."""

    # -- documents -----------------------------------------------------------------------------

    def open(self, path: str, version: int | None, text: str) -> None:
        with self._lock:
            self.texts[path] = (version, text)

    def close(self, path: str) -> None:
        with self._lock:
            self.texts.pop(path, None)
            self.builds.pop(path, None)
            self.modelled.pop(path, None)

    def importers(self, path: str) -> list[str]:
        """The open documents whose last build loaded `path` (itself first): the roots to check
        again when it changes."""
        with self._lock:
            others = [p for p, b in self.builds.items() if p != path and path in b.loads]
            return [path, *(p for p in others if p in self.texts)]

    # -- checking ------------------------------------------------------------------------------

    def check(self, path: str) -> Build | None:
        """Check an open document as the root of its build (None once it is closed)."""
        with self._lock:
            if path not in self.texts:
                return None
            texts = dict(self.texts)
        build = self._build(path, texts)
        with self._lock:
            if path in self.texts:
                self.builds[path] = build
                if build.result.model is not None:
                    self.modelled[path] = build
        return build

    def check_closed(self, path: str) -> Build | None:
        """Check a file that is not open, as written on disk, as the root of a build of its
        own (kept nowhere: a rename reads the references in it); None when it cannot be read."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        with self._lock:
            texts = dict(self.texts)
        texts.setdefault(path, (None, text))
        return self._build(path, texts)

    def _build(self, path: str, texts: dict[str, tuple[int | None, str]]) -> Build:
        version, text = texts[path]
        config, problem = _config(path)

        def load(file: str | Path, shown: str | None = None) -> LoadedFile:
            return self._load(texts, file, shown)

        with rooted_at(self.root):
            result = lint([path], config, load)
        modules = result.resolution.modules if result.resolution is not None else []
        build = Build(
            path,
            version,
            text,
            result,
            {id(m.source): os.path.realpath(m.path) for m in modules if m.source is not None},
            problem,
        )
        for loaded in result.files:  # a root that could not be parsed has no module
            if loaded.source is not None:
                build.module_paths.setdefault(id(loaded.source), path)
        return build

    def _load(
        self, texts: dict[str, tuple[int | None, str]], path: str | Path, shown: str | None
    ) -> LoadedFile:
        key = os.path.realpath(path)
        opened = texts.get(key)
        stamp: object
        if opened is not None:
            stamp = ("open", opened[1])
        else:
            try:
                info = os.stat(key)
            except OSError:
                return load_file(path, shown)  # the pipeline's own diagnostic for it
            stamp = ("disk", info.st_size, info.st_mtime_ns)
        cached = self._parsed.get((key, shown))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if opened is not None:
            source, problems = decode_source(
                opened[1].encode("utf-8", "surrogatepass"), shown or key
            )
            if source is None:
                loaded = LoadedFile(Path(path), None, None, tuple(problems))
            else:
                parsed = parse_source(source)
                loaded = LoadedFile(Path(path), source, parsed.module, parsed.diagnostics)
        else:
            loaded = load_file(path, shown)
        self._parsed[(key, shown)] = (stamp, loaded)
        return loaded


def _config(path: str) -> tuple[LintConfig, str | None]:
    """The lint configuration of a file (the nearest pyproject.toml), or the defaults and why."""
    try:
        return load_config([path]), None
    except ConfigError as error:
        return LintConfig(), str(error)
