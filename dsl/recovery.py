"""Syntax errors: recover at the next declaration and explain each error in a user's words."""

from __future__ import annotations

from lark.exceptions import UnexpectedInput

from . import syntax as s
from .diagnostics import Diagnostic
from .source import Source, Span


def _comments(source: Source, tokens) -> tuple[s.Comment, ...]:
    return tuple(
        s.Comment(str(tok), span=Span(source, tok.start_pos, tok.end_pos)) for tok in tokens
    )


def parse_with_recovery(source: Source):
    from .parser import ParseResult, parse_text

    try:
        module, comments, extra = parse_text(source)
    except UnexpectedInput as error:
        offset = getattr(error, "pos_in_stream", None) or 0
        span = Span(source, offset, offset + 1)
        diag = Diagnostic.make("H101", "unexpected input", span, "not expected here")
        empty = s.Module((), span=Span(source, 0, len(source.text)))
        return ParseResult(empty, (diag,))
    module = s.Module(module.items, _comments(source, comments), span=module.span)
    return ParseResult(module, tuple(extra))
