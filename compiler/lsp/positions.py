"""Offsets in a source ↔ the protocol's line/character positions, in the negotiated encoding.

Lines are the protocol's: they end at `\\n`, `\\r\\n` or a lone `\\r`, and nowhere else (not at
U+2028, a form feed or the other breaks `str.splitlines` knows), so a position means here what it
means in the editor whatever the text holds."""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from functools import lru_cache
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
        """The length of `text` in the client's units; a lone surrogate (which an editor's
        UTF-16 text may hold) counts as one UTF-16 unit, or three UTF-8 bytes."""
        if self.encoding == "utf-32":
            return len(text)
        if self.encoding == "utf-8":
            return len(text.encode("utf-8", "surrogatepass"))
        return len(text.encode("utf-16-le", "surrogatepass")) // 2

    def position(self, source: Source, offset: int) -> lsp.Position:
        offset = min(max(offset, 0), len(source.text))
        starts = line_starts(source.text)
        line = bisect_right(starts, offset) - 1
        return lsp.Position(line, self.units(source.text[starts[line] : offset]))

    def range(self, span: Span) -> lsp.Range:
        return lsp.Range(
            self.position(span.source, span.start), self.position(span.source, span.end)
        )

    def offset(self, source: Source, position: lsp.Position) -> int:
        """The offset of a client position; past a line's end is its end, past the file its end."""
        starts = line_starts(source.text)
        if position.line >= len(starts):
            return len(source.text)
        start = starts[position.line]
        end = starts[position.line + 1] if position.line + 1 < len(starts) else len(source.text)
        line = source.text[start:end].rstrip("\r\n")  # a line holds no break but its last
        counted = 0
        for index, char in enumerate(line):
            if counted >= position.character:
                return start + index
            counted += self.units(char)
        return start + len(line)


_LINE_BREAK = re.compile(r"\r\n?|\n")


@lru_cache(maxsize=8)
def line_starts(text: str) -> tuple[int, ...]:
    """The offset of each line of `text`, lines ended as the protocol ends them (the last few
    texts are kept: a check converts many spans of the same text)."""
    return (0, *(match.end() for match in _LINE_BREAK.finditer(text)))


def uri_to_path(uri: str) -> str | None:
    """The file a `file:` URI names (real path), None for other schemes (an unsaved buffer)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return os.path.realpath(unquote(parsed.path))


def path_to_uri(path: str) -> str:
    return Path(path).absolute().as_uri()
