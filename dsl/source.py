"""Source files and spans: where every piece of syntax came from."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False)
class Source:
    """The text of one `.harness` file and the name it is shown under.

    >>> src = Source("a.harness", "tool x {\\n}\\n")
    >>> src.location(9)
    (2, 1)
    """

    path: str
    text: str
    _line_starts: list[int] = field(default_factory=list, repr=False)

    def line_starts(self) -> list[int]:
        if not self._line_starts:
            starts = [0]
            find = self.text.find
            pos = find("\n")
            while pos != -1:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
            self._line_starts.extend(starts)
        return self._line_starts

    def location(self, offset: int) -> tuple[int, int]:
        """1-based line and column (in characters) of an offset."""
        starts = self.line_starts()
        index = bisect_right(starts, offset) - 1
        return index + 1, offset - starts[index] + 1

    def line_text(self, line: int) -> str:
        starts = self.line_starts()
        if line < 1 or line > len(starts):
            return ""
        start = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[start:end].rstrip("\r")

    @property
    def line_count(self) -> int:
        return len(self.line_starts())


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range of offsets in one source.

    Spans never take part in the equality of syntax nodes: every node declares its
    span with ``compare=False``.
    """

    source: Source
    start: int
    end: int

    @property
    def line(self) -> int:
        return self.source.location(self.start)[0]

    @property
    def column(self) -> int:
        return self.source.location(self.start)[1]

    @property
    def end_line(self) -> int:
        return self.source.location(max(self.start, self.end - 1))[0]

    @property
    def text(self) -> str:
        return self.source.text[self.start : self.end]

    def cover(self, other: Span) -> Span:
        return Span(self.source, min(self.start, other.start), max(self.end, other.end))

    def __str__(self) -> str:
        line, column = self.source.location(self.start)
        return f"{self.source.path}:{line}:{column}"


NO_SOURCE = Source("<none>", "")
NO_SPAN = Span(NO_SOURCE, 0, 0)
