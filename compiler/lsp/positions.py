"""Offsets in a source ↔ the protocol's line/character positions, in the negotiated encoding."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from harnessc.dsl.source import Source, Span
from lsprotocol import types as lsp


class Positions:
    """Counts a line's characters as the client does: UTF-16 code units by default, or UTF-8
    bytes or code points when the client chose them (`positionEncoding`)."""

    def __init__(self, encoding: str = "utf-16") -> None:
        self.encoding = encoding

    def units(self, text: str) -> int:
        if self.encoding == "utf-32":
            return len(text)
        if self.encoding == "utf-8":
            return len(text.encode("utf-8"))
        return len(text.encode("utf-16-le")) // 2

    def position(self, source: Source, offset: int) -> lsp.Position:
        line, column = source.location(min(max(offset, 0), len(source.text)))
        start = source.line_starts()[line - 1]
        return lsp.Position(line - 1, self.units(source.text[start : start + column - 1]))

    def range(self, span: Span) -> lsp.Range:
        return lsp.Range(
            self.position(span.source, span.start), self.position(span.source, span.end)
        )

    def offset(self, source: Source, position: lsp.Position) -> int:
        """The offset of a client position; past a line's end is its end, past the file its end."""
        starts = source.line_starts()
        if position.line >= len(starts):
            return len(source.text)
        start = starts[position.line]
        line = source.line_text(position.line + 1)
        counted = 0
        for index, char in enumerate(line):
            if counted >= position.character:
                return start + index
            counted += self.units(char)
        return start + len(line)


def uri_to_path(uri: str) -> str | None:
    """The file a `file:` URI names (real path), None for other schemes (an unsaved buffer)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return os.path.realpath(unquote(parsed.path))


def path_to_uri(path: str) -> str:
    return Path(path).absolute().as_uri()
