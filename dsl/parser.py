"""Parse a source into a module: the parser's rules chunk by chunk, recovery after each error.

``parse_source`` never raises for bad input: it returns the module it could build and the
diagnostics for everything it could not, recovering at the next declaration after an error.
The module records each declaration it skipped (``Module.broken``), so the compiler can check
the others without reporting a name the skipped one would have declared as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import syntax as s
from .builder import Budget, chunk_tokens, engine, parse_chunk
from .diagnostics import Diagnostic
from .lexer import Tok
from .recovery import (
    DECL_START,
    MAX_SYNTAX_ERRORS,
    broken_declaration,
    check_condition_nesting,
    check_nesting,
    explain,
    resume_point,
)
from .source import Source, Span


@dataclass(frozen=True, slots=True)
class ParseResult:
    """A module (possibly partial, when there were errors) and the diagnostics of parsing."""

    module: s.Module
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


def parse_source(source: Source) -> ParseResult:
    """Parse a source into a module; never raises for bad input.

    >>> from harnessc.dsl.source import Source
    >>> result = parse_source(Source("a.harness", 'connection github "GitHub"'))
    >>> result.module.items[0].name.text
    'github'
    """
    text = source.text
    empty_span = Span(source, 0, len(text))
    deep = check_nesting(source)
    if deep is not None:
        everything = (s.Broken(None, None, span=empty_span),)
        return ParseResult(s.Module((), broken=everything, span=empty_span), (deep,))
    items: list[object] = []
    comments: list[Tok] = []
    diagnostics: list[Diagnostic] = []
    broken: list[s.Broken] = []
    starts = [m.start() for m in DECL_START.finditer(text)]
    budget = Budget()
    pos = 0
    while True:
        chunk = parse_chunk(source, pos, budget)
        if chunk.limit is not None:
            # past a limit nothing more is read or checked: the whole file is set aside
            everything = (s.Broken(None, None, span=empty_span),)
            return ParseResult(s.Module((), broken=everything, span=empty_span), (chunk.limit,))
        items.extend(chunk.items)
        comments.extend(chunk.comments)
        diagnostics.extend(chunk.diagnostics)
        failure = chunk.failure
        if failure is None:
            break
        diagnostics.append(explain(source, failure))
        resume = resume_point(starts, failure, pos)
        if len(diagnostics) >= MAX_SYNTAX_ERRORS:
            resume = None  # the rest of the file goes unread: it may declare anything
            broken.append(s.Broken(None, None, span=Span(source, failure.pos, len(text))))
        skipped = broken_declaration(source, failure, resume)
        if skipped is not None:
            broken.append(skipped)
        if resume is None:
            break
        pos = resume
    if not diagnostics and not items:
        diagnostics.append(
            Diagnostic.make(
                "H006",
                f"`{source.path}` declares nothing",
                None,
                path=source.path,
                help="add a declaration, or remove the file from the build",
            )
        )
    deep = check_condition_nesting(items)
    if deep is not None:
        everything = (s.Broken(None, None, span=empty_span),)
        return ParseResult(s.Module((), broken=everything, span=empty_span), (deep,))
    module = s.Module(
        tuple(items),  # type: ignore[arg-type]
        tuple(s.Comment(str(t), span=Span(source, t.start_pos, t.end_pos)) for t in comments),
        tuple(broken),
        (budget.rules, budget.nodes),
        span=empty_span,
    )
    return ParseResult(module, tuple(diagnostics))


def source_tokens(source: Source) -> list[Tok]:
    """Every token of a source and its comments, in order, as the parser types them; after a
    syntax error the parse resumes where `parse_source` resumes (the next declaration), and the
    text in between, which no rule reads, is lexed with every terminal allowed."""
    text = source.text
    starts = [m.start() for m in DECL_START.finditer(text)]
    found: list[Tok] = []
    pos = 0
    while pos < len(text):
        tokens, failure = chunk_tokens(source, pos)
        if failure is None:
            found.extend(tokens)
            break
        found.extend(t for t in tokens if t.start_pos < failure.pos)  # the failing token too
        resume = resume_point(starts, failure, pos)
        end = resume if resume is not None else len(text)
        found.extend(engine().lex_loose(text, failure.pos, end))
        if resume is None:
            break
        pos = resume
    return found
