"""Workspace symbols: the declarations of every spec of the project, found by name.

The project's specs are the documents open in the editor (as the editor has them), the files
their builds load (imports), and every `.harness` file under the workspace's folders (hidden
folders, virtual environments and build output left out). A file on disk is parsed once per
change of its size or modification time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from harnessc.dsl import syntax as s
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from lsprotocol import types as lsp

from . import outline
from .positions import Positions, path_to_uri

__all__ = ["MAX_FILES", "SymbolIndex"]

MAX_FILES = 5000
"""The most spec files read under the workspace's folders (a huge tree is cut, not walked)."""
_SKIPPED = frozenset({"build", "dist", "node_modules", "__pycache__", "site-packages"})


class SymbolIndex:
    """Parsed modules of the files on disk, by path, with the size and time they were read at."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[int, int], s.Module]] = {}
        self._targets: dict[str, tuple[tuple[int, int], frozenset[str]]] = {}

    def find(
        self,
        query: str,
        folders: Iterable[str],
        open_texts: Mapping[str, str],
        loaded: Iterable[str],
        positions: Positions,
    ) -> list[lsp.WorkspaceSymbol]:
        """Every declaration whose name matches `query`, in the open documents (their text in
        the editor), the files `loaded` by their builds, and the specs under `folders`."""
        paths = dict.fromkeys(sorted(open_texts))
        paths.update(dict.fromkeys(sorted(loaded)))
        paths.update(dict.fromkeys(_spec_files(folders)))
        found: list[lsp.WorkspaceSymbol] = []
        for path in paths:
            text = open_texts.get(path)
            module = (
                parse_source(Source(path, text)).module if text is not None else self._disk(path)
            )
            if module is not None:
                found.extend(outline.workspace_symbols(module, path_to_uri(path), positions, query))
        return found

    def importers(self, folders: Iterable[str], path: str) -> list[str]:
        """The specs under `folders` that import `path` (a real path), directly or through
        others, sorted: their builds read it."""
        imports = {}
        for spec in _spec_files(folders):
            real = os.path.realpath(spec)
            imports[real] = self._imports(real)
        reached = {path}
        grew = True
        while grew:
            grew = False
            for spec, targets in imports.items():
                if spec not in reached and targets & reached:
                    reached.add(spec)
                    grew = True
        return sorted(reached - {path})

    def _imports(self, path: str) -> frozenset[str]:
        """The real paths of the files a spec on disk imports, read again only when its size
        or modification time changes; a spec that names no `.harness` file is not parsed."""
        try:
            stat = os.stat(path)
        except OSError:
            return frozenset()
        stamp = (stat.st_size, stat.st_mtime_ns)
        known = self._targets.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            named = '.harness"' in Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            named = False
        module = self._disk(path) if named else None
        targets = frozenset(
            os.path.realpath(os.path.join(os.path.dirname(path), item.target))
            for item in (module.items if module is not None else ())
            if isinstance(item, s.Import) and item.is_file and "\x00" not in item.target
        )
        self._targets[path] = (stamp, targets)
        return targets

    def _disk(self, path: str) -> s.Module | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        stamp = (stat.st_size, stat.st_mtime_ns)
        known = self._parsed.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        module = parse_source(Source(path, text)).module
        self._parsed[path] = (stamp, module)
        return module


def _spec_files(folders: Iterable[str]) -> list[str]:
    """The `.harness` files under `folders`, sorted, at most `MAX_FILES`."""
    out: list[str] = []
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".") and d not in _SKIPPED and not d.endswith(".egg-info")
            )
            for name in sorted(files):
                if name.endswith(".harness"):
                    out.append(os.path.join(root, name))
                    if len(out) >= MAX_FILES:
                        return out
    return out
