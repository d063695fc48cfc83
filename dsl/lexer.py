"""The LALR engine: a contextual lexer and the parse loop, over Lark's compiled tables.

Lark compiles the grammar (terminals, LALR table, rule callbacks that build our nodes); this
module runs it. Lark's own loop spends most of a parse in per-token bookkeeping, so lexing and
parsing run here in one loop with the same choices Lark would make:

- per parser state, one regex with a named group per acceptable terminal, in Lark's order
  (priority, then width, then length, then name);
- a NAME is retyped to a keyword only where the parser state accepts that keyword — Lark's rule
  for keywords and names that share a priority — so keywords are reserved only where needed;
- whitespace and comments are skipped with one regex; comments go to a callback (for `fmt`).

Errors raise :class:`ParseFailure`, carrying the parser's stacks so that the caller can say
what was expected and which block is still open.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lark import Lark
from lark.lexer import PatternStr, TerminalDef
from lark.parsers.lalr_analysis import Shift

_SKIP = re.compile(r"(?:[ \t\f\r\n]+|#[^\n]*)+")
_COMMENT = re.compile(r"#[^\n]*")


class Tok(str):
    """A token: its text, its terminal type and its offsets."""

    __slots__ = ("end_pos", "start_pos", "type")

    type: str
    start_pos: int
    end_pos: int

    def __repr__(self) -> str:
        return f"Tok({self.type}, {str.__repr__(self)}, {self.start_pos})"


def make_token(kind: str, value: str, start: int, end: int) -> Tok:
    tok = Tok(value)
    tok.type = kind
    tok.start_pos = start
    tok.end_pos = end
    return tok


@dataclass
class ParseFailure(Exception):
    """The parser met something it cannot continue with.

    ``token`` is None for a character that starts no token and for the end of the text
    (``at_end``); ``expected`` holds terminal names acceptable in the state.
    """

    pos: int
    token: Tok | None
    expected: frozenset[str]
    state_stack: list[int] = field(repr=False)
    value_stack: list[Any] = field(repr=False)
    at_end: bool = False


def _order(t: TerminalDef) -> tuple:
    return (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)


class _StateScanner:
    """The master regex for one set of acceptable terminals, and its keyword table."""

    __slots__ = ("keywords", "match", "name_ok")

    def __init__(
        self,
        accepts: frozenset[str],
        regex_terms: list[TerminalDef],
        punct_terms: list[TerminalDef],
        keyword_types: dict[str, str],
    ) -> None:
        self.keywords = {v: t for v, t in keyword_types.items() if t in accepts}
        self.name_ok = "NAME" in accepts
        chosen = [t for t in regex_terms if t.name in accepts]
        if self.keywords and not self.name_ok:
            chosen.append(next(t for t in regex_terms if t.name == "NAME"))
        chosen += [t for t in punct_terms if t.name in accepts]
        chosen.sort(key=_order)
        parts = [f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in chosen]
        self.match = re.compile("|".join(parts) or r"(?!)").match


class Engine:
    """Runs a Lark LALR grammar compiled with an inline transformer."""

    def __init__(self, lark: Lark, start: str = "start") -> None:
        terminals: list[TerminalDef] = list(lark.terminals)
        ignore = set(lark.lexer_conf.ignore)  # also on a parser loaded from its cache
        name_re = re.compile(next(t for t in terminals if t.name == "NAME").pattern.to_regexp())
        self.regex_terms = [
            t for t in terminals if not isinstance(t.pattern, PatternStr) and t.name not in ignore
        ]
        self.keyword_types: dict[str, str] = {}
        self.punct_terms: list[TerminalDef] = []
        for t in terminals:
            if isinstance(t.pattern, PatternStr):
                if name_re.fullmatch(t.pattern.value):
                    self.keyword_types[t.pattern.value] = t.name
                else:
                    self.punct_terms.append(t)
        self.terminal_patterns = {t.name: t.pattern for t in terminals}
        parser = lark.parser.parser
        table = parser._parse_table
        self.states: dict[int, dict[str, tuple]] = table.states
        self.start_state = table.start_states[start]
        self.end_state = table.end_states[start]
        callbacks = parser.parser.callbacks
        # INVARIANT: the per-token loop never hashes a grammar rule: each action is either
        # (True, next_state) for a shift or (False, (size, rule_name, callback)) for a reduce.
        reductions = {}
        for state in self.states.values():
            for action, rule in state.values():
                if action is not Shift and rule not in reductions:
                    reductions[rule] = (len(rule.expansion), rule.origin.name, callbacks[rule])
        self.actions: dict[int, dict[str, tuple[bool, Any]]] = {
            idx: {
                key: (True, arg) if action is Shift else (False, reductions[arg])
                for key, (action, arg) in table.items()
            }
            for idx, table in self.states.items()
        }
        self.state_accepts = {
            idx: frozenset(k for k in table if k.isupper()) for idx, table in self.states.items()
        }
        self.all_terms = frozenset(t.name for t in terminals if t.name not in ignore)
        self._scanners: dict[frozenset[str], _StateScanner] = {}

    def scanner_for(self, accepts: frozenset[str]) -> _StateScanner:
        scanner = self._scanners.get(accepts)
        if scanner is None:
            scanner = _StateScanner(accepts, self.regex_terms, self.punct_terms, self.keyword_types)
            self._scanners[accepts] = scanner
        return scanner

    def lex_any(self, text: str, pos: int) -> Tok | None:
        """The token at ``pos`` with every terminal allowed (for error messages)."""
        root = self.scanner_for(self.all_terms)
        m = root.match(text, pos)
        if m is None:
            return None
        kind = m.lastgroup or ""
        if kind == "NAME":
            kind = root.keywords.get(m.group(), kind)
        return make_token(kind, m.group(), pos, m.end())

    def lex_loose(self, text: str, pos: int, end: int) -> list[Tok]:
        """The tokens and comments of ``text[pos:end]`` with every terminal allowed (text no
        parser state reads, after a syntax error); a character that starts none is passed
        over."""
        found: list[Tok] = []
        while pos < end:
            skipped = _SKIP.match(text, pos, end)
            if skipped is not None:
                for c in _COMMENT.finditer(text, pos, skipped.end()):
                    found.append(make_token("COMMENT", c.group(), c.start(), c.end()))
                pos = skipped.end()
                if pos >= end:
                    break
            token = self.lex_any(text, pos)
            if token is None or token.end_pos > end:
                pos += 1
                continue
            found.append(token)
            pos = token.end_pos
        return found

    def parse(
        self,
        text: str,
        on_comment: Callable[[Tok], None] | None = None,
        on_token: Callable[[Tok], None] | None = None,
        pos: int = 0,
    ) -> Any:
        """Parse ``text`` from offset ``pos`` to its end; offsets in tokens are into ``text``."""
        actions = self.actions
        state_accepts = self.state_accepts
        scanners = self._scanners
        skip = _SKIP.match
        state_stack = [self.start_state]
        value_stack: list[Any] = []
        end = len(text)
        while True:
            m = skip(text, pos)
            if m is not None:
                skipped_end = m.end()
                if on_comment is not None and "#" in text[pos:skipped_end]:
                    for c in _COMMENT.finditer(text, pos, skipped_end):
                        on_comment(make_token("COMMENT", c.group(), c.start(), c.end()))
                pos = skipped_end
            if pos >= end:
                break
            accepts = state_accepts[state_stack[-1]]
            scanner = scanners.get(accepts) or self.scanner_for(accepts)
            m = scanner.match(text, pos)
            kind = m.lastgroup if m is not None else None
            if kind == "NAME":
                keyword = scanner.keywords.get(m.group())  # type: ignore[union-attr]
                if keyword is not None:
                    kind = keyword
                elif not scanner.name_ok:
                    kind = None
            if kind is None or m is None:
                raise ParseFailure(pos, self.lex_any(text, pos), accepts, state_stack, value_stack)
            new_pos = m.end()
            token = Tok(m.group())
            token.type = kind
            token.start_pos = pos
            token.end_pos = new_pos
            if on_token is not None:
                on_token(token)
            while True:
                entry = actions[state_stack[-1]].get(kind)
                if entry is None:
                    expected = state_accepts[state_stack[-1]]
                    raise ParseFailure(pos, token, expected, state_stack, value_stack)
                shift, arg = entry
                if shift:
                    state_stack.append(arg)
                    value_stack.append(token)
                    break
                size, origin, callback = arg
                if size:
                    children = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
                else:
                    children = []
                value_stack.append(callback(children))
                state_stack.append(actions[state_stack[-1]][origin][1])
            pos = new_pos
        end_state = self.end_state
        while True:
            entry = actions[state_stack[-1]].get("$END")
            if entry is None:
                expected = state_accepts[state_stack[-1]]
                raise ParseFailure(end, None, expected, state_stack, value_stack, at_end=True)
            size, origin, callback = entry[1]
            if size:
                children = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                children = []
            value_stack.append(callback(children))
            state_stack.append(actions[state_stack[-1]][origin][1])
            if state_stack[-1] == end_state:
                return value_stack[-1]
