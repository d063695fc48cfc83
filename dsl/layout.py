"""Lay out documents in 100 columns: a small Wadler-style document algebra and its renderer.

A group prints flat (its lines as spaces) when it fits in the rest of the line, else broken (its
lines as newlines); inner groups decide again. The formatter (`dsl/printer.py`) builds documents
from syntax trees; nothing here knows the language.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

WIDTH = 100
INDENT = 2


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    width: int  # a comment counts 0: it may overhang the line


@dataclass(frozen=True, slots=True)
class Trailing:
    """A comment after the code of a line; trailing comments of neighbouring lines align."""

    text: str


@dataclass(frozen=True, slots=True)
class Line:
    flat: str  # what the line prints when its group is flat: " " or ""
    hard: bool = False


@dataclass(frozen=True, slots=True)
class Concat:
    parts: tuple[Doc, ...]


@dataclass(frozen=True, slots=True)
class Nest:
    indent: int
    doc: Doc


@dataclass(frozen=True, slots=True)
class Group:
    doc: Doc
    broken: bool  # contains a hard line, so it can never be flat


@dataclass(frozen=True, slots=True)
class Flat:
    """A doc printed flat whatever its width."""

    doc: Doc


@dataclass(frozen=True, slots=True)
class IfBreak:
    broken: Doc
    flat: Doc


@dataclass(frozen=True, slots=True)
class Fill:
    """Words joined by `, `; a line breaks after a comma only where the next word does not fit."""

    items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Choice:
    """Layouts tried in order: the first whose lines all fit wins; the last one always does."""

    options: tuple[Doc, ...]


Doc = Text | Trailing | Line | Concat | Nest | Group | Flat | IfBreak | Fill | Choice
Part = Doc | str | None

LINE = Line(" ")
SOFT = Line("")
HARD = Line("", hard=True)
EMPTY = Concat(())


def cat(*parts: Part) -> Doc:
    docs = tuple(Text(p, len(p)) if isinstance(p, str) else p for p in parts if p is not None)
    return docs[0] if len(docs) == 1 else Concat(docs)


def nest(indent: int, *parts: Part) -> Doc:
    return Nest(indent, cat(*parts))


def group(*parts: Part) -> Doc:
    doc = cat(*parts)
    return Group(doc, is_hard(doc))


def join(sep: Sequence[Part], docs: Iterable[Part]) -> list[Part]:
    out: list[Part] = []
    for i, doc in enumerate(docs):
        if i:
            out.extend(sep)
        out.append(doc)
    return out


def is_hard(doc: Doc) -> bool:
    if isinstance(doc, Line):
        return doc.hard
    if isinstance(doc, Concat):
        return any(is_hard(p) for p in doc.parts)
    if isinstance(doc, Nest | Flat):
        return is_hard(doc.doc)
    if isinstance(doc, Group):
        return doc.broken
    if isinstance(doc, IfBreak):
        return is_hard(doc.broken)
    if isinstance(doc, Choice):
        return any(is_hard(o) for o in doc.options)
    return False


_FLAT, _BREAK = 0, 1
_Cmd = tuple[int, int, Doc]  # indentation, mode, doc


class Renderer:
    def __init__(self, width: int = WIDTH) -> None:
        self.width = width

    def render(self, doc: Doc) -> str:
        out: list[str | Trailing] = []
        self._run(doc, 0, 0, out, ())
        lines: list[list[Any]] = [["", None]]
        for piece in out:
            if isinstance(piece, Trailing):
                lines[-1][1] = piece.text
                continue
            first, *rest = piece.split("\n")
            lines[-1][0] += first
            lines.extend([line, None] for line in rest)
        return "\n".join(align_trailing(lines))

    def _run(
        self,
        doc: Doc,
        indent: int,
        col: int,
        out: list[str | Trailing],
        rests: tuple[list[_Cmd], ...],
    ) -> int:
        """Print `doc` into `out` from column `col`; `rests` is what follows it, innermost first."""
        stack: list[_Cmd] = [(indent, _BREAK, doc)]
        while stack:
            ind, mode, d = stack.pop()
            if isinstance(d, Text):
                out.append(d.text)
                col += len(d.text)
            elif isinstance(d, Trailing):
                out.append(d)
            elif isinstance(d, Concat):
                stack.extend((ind, mode, p) for p in reversed(d.parts))
            elif isinstance(d, Nest):
                stack.append((ind + d.indent, mode, d.doc))
            elif isinstance(d, Group):
                flat = mode == _FLAT or (
                    not d.broken
                    and self._width_to_break((ind, _FLAT, d.doc), (stack, *rests))
                    <= self.width - col
                )
                stack.append((ind, _FLAT if flat else _BREAK, d.doc))
            elif isinstance(d, Flat):
                stack.append((ind, _FLAT, d.doc))
            elif isinstance(d, Line):
                if mode == _FLAT and not d.hard:
                    out.append(d.flat)
                    col += len(d.flat)
                else:
                    out.append("\n" + " " * ind)
                    col = ind
            elif isinstance(d, IfBreak):
                stack.append((ind, mode, d.broken if mode == _BREAK else d.flat))
            elif isinstance(d, Fill):
                col = self._fill(d, ind, mode, col, out, (stack, *rests))
            elif isinstance(d, Choice):
                if mode == _FLAT:
                    stack.append((ind, mode, d.options[0]))
                    continue
                for option in d.options[:-1]:
                    trial: list[str | Trailing] = []
                    end = self._run(option, ind, col, trial, (stack, *rests))
                    lines = "".join(p for p in trial if isinstance(p, str)).split("\n")
                    widths = [col + len(lines[0]), *(len(line) for line in lines[1:])]
                    widths[-1] = end + self._width_to_break(None, (stack, *rests))
                    if max(widths) <= self.width:
                        out.extend(trial)
                        col = end
                        break
                else:
                    stack.append((ind, mode, d.options[-1]))
        return col

    def _fill(
        self,
        d: Fill,
        ind: int,
        mode: int,
        col: int,
        out: list[str | Trailing],
        rests: tuple[list[_Cmd], ...],
    ) -> int:
        for i, item in enumerate(d.items):
            if i == 0:
                out.append(item)
                col += len(item)
                continue
            out.append(",")
            col += 1
            last = i == len(d.items) - 1
            need = 1 + len(item) + (self._width_to_break(None, rests) if last else 1)
            if mode == _FLAT or col + need <= self.width:
                out.append(" " + item)
                col += 1 + len(item)
            else:
                out.append("\n" + " " * ind + item)
                col = ind + len(item)
        return col

    def _width_to_break(self, first: _Cmd | None, rests: tuple[list[_Cmd], ...]) -> int:
        """The width printed before the next possible line break, `first` printed first."""
        limit = self.width + 1
        width = 0
        local: list[_Cmd] = [first] if first else []
        pending: Iterator[_Cmd] = (cmd for rest in rests for cmd in reversed(rest))
        while width < limit:
            if not local:
                nxt = next(pending, None)
                if nxt is None:
                    return width
                local.append(nxt)
                continue
            ind, mode, d = local.pop()
            if isinstance(d, Text):
                width += d.width
            elif isinstance(d, Concat):
                local.extend((ind, mode, p) for p in reversed(d.parts))
            elif isinstance(d, Nest):
                local.append((ind, mode, d.doc))
            elif isinstance(d, Group):
                local.append((ind, _BREAK if d.broken else mode, d.doc))
            elif isinstance(d, Flat):
                local.append((ind, _FLAT, d.doc))
            elif isinstance(d, Line):
                if mode == _BREAK or d.hard:
                    return width
                width += len(d.flat)
            elif isinstance(d, IfBreak):
                local.append((ind, mode, d.broken if mode == _BREAK else d.flat))
            elif isinstance(d, Fill):
                if mode == _BREAK:
                    return width + len(d.items[0])
                width += sum(len(item) for item in d.items) + 2 * (len(d.items) - 1)
            elif isinstance(d, Choice):
                local.append((ind, mode, d.options[0]))
        return width


def align_trailing(lines: list[list[Any]]) -> Iterator[str]:
    """Lines without trailing spaces; trailing comments of consecutive lines at one indentation
    start in one column, two spaces after the longest code among them."""
    i = 0
    while i < len(lines):
        code, comment = lines[i]
        code = code.rstrip()
        if comment is None:
            yield code
            i += 1
            continue
        indent = len(code) - len(code.lstrip())
        j = i + 1
        while j < len(lines) and lines[j][1] is not None:
            other = lines[j][0].rstrip()
            if len(other) - len(other.lstrip()) != indent:
                break
            j += 1
        column = max(len(line[0].rstrip()) for line in lines[i:j]) + 2
        for line_code, line_comment in lines[i:j]:
            yield line_code.rstrip().ljust(column) + line_comment
        i = j
