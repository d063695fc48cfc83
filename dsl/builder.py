"""Build a syntax tree from `.harness` text inline in the LALR parse: one callback a rule.

``parse_chunk`` parses from a position up to the first syntax error; ``parse_source`` in
``dsl/parser.py`` drives it over a whole source, recovering at the next declaration after an error.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import re
import threading
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Tree

from . import syntax as s
from .diagnostics import Diagnostic
from .files import MAX_CONDITION_NODES, MAX_EXPRESSION_NODES, MAX_RULES, cache_folder
from .lexer import Engine, ParseFailure, Tok
from .source import Source, Span

GRAMMAR_FILE = "harness.lark"

_VALUE_TOKENS = {"NAME", "DOTTED", "MCP_ID", "KEY"}
QUOTED_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_INT = 2**63 - 1
"""Integers, and durations in milliseconds, are 64-bit: what the model's JSON, the runtime and
the policy engines all hold exactly."""
_SHOWN_DIGITS = 24
# `mcp:*`, `mcp:SERVER:*`, `mcp:SERVER:tool:NAME`, `mcp:SERVER:tool:PREFIX*`
_MCP_PATTERN = re.compile(r"mcp:(?:\*|[A-Za-z0-9_-]+:(?:\*|tool:[A-Za-z0-9_./-]*\*?))")


def grammar_text() -> str:
    return resources.files("harnessc.dsl").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")


class Budget:
    """What a parse has built so far against a spec's limits (dsl/files.py)."""

    __slots__ = ("nodes", "rules")

    def __init__(self) -> None:
        self.rules = 0
        self.nodes = 0


class LimitCrossed(Exception):
    """A limit of a spec crossed while parsing: the parse stops at once."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


_LIMIT_HELP = {
    "H010": "split the policies into specs checked and built on their own, or merge rules that "
    "differ only in a value into one rule over a list (`args.x in [...]`)",
    "H011": "split the spec into specs checked and built on their own; a long chain of "
    "`or`s over constants is one `in [...]` test",
    "H012": "split the condition over several rules; a long chain of comparisons with "
    "constants is one `in [...]` test",
}


def too_many(code: str, message: str, span: Span | None, label: str = "") -> Diagnostic:
    """H010, H011, H012: a limit of a spec crossed at `span` (None: by the build as a whole,
    named by its path)."""
    return Diagnostic.make(code, message, span, label, help=_LIMIT_HELP[code])


class _Builder:
    """Lark callbacks, one per rule or alias: children in, syntax node out.

    Every token is kept (``keep_all_tokens``), so callbacks see keywords and punctuation; they
    read what they need and drop the rest. ``source`` is set for each parse.
    """

    def __init__(self) -> None:
        self.source: Source = Source("<none>", "")
        self.diagnostics: list[Diagnostic] = []
        self.comments: list[Tok] = []
        self.budget = Budget()

    def _expr(self, node: Any) -> Any:
        """Count an expression node against the spec's limit; stop the parse past it."""
        budget = self.budget
        budget.nodes += 1
        if budget.nodes > MAX_EXPRESSION_NODES:
            span = node.span
            raise LimitCrossed(
                too_many(
                    "H011",
                    f"the spec has more than {MAX_EXPRESSION_NODES:,} expression nodes",
                    Span(span.source, span.start, min(span.end, span.start + 1)),
                    f"expression node {budget.nodes:,} starts here",
                )
            )
        return node

    def _condition(self, cond: Any) -> Any:
        """Refuse a condition of more than `MAX_CONDITION_NODES` expression nodes. Only one
        whose text is that long can be (every node takes at least a character) is counted: a
        walk over a few conditions, at most, of a whole spec."""
        span = getattr(cond, "span", None)
        if span is None or span.end - span.start <= MAX_CONDITION_NODES:
            return cond
        size = s.expression_size(cond)
        if size > MAX_CONDITION_NODES:
            raise LimitCrossed(
                too_many(
                    "H012",
                    f"a condition has more than {MAX_CONDITION_NODES:,} expression nodes",
                    Span(span.source, span.start, min(span.end, span.start + 1)),
                    f"this condition has {size:,}",
                )
            )
        return cond

    def on_comment(self, tok: Tok) -> None:
        self.comments.append(tok)

    # -- helpers ---------------------------------------------------------------------------

    def _tok_span(self, tok: Tok) -> Span:
        return Span(self.source, tok.start_pos, tok.end_pos)

    def _span(self, children: list[Any]) -> Span:
        first = children[0]
        if first is None:
            first = next(c for c in children if c is not None)
        last = children[-1]
        if last is None:
            last = next(c for c in reversed(children) if c is not None)
        return Span(self.source, _start(first), _end(last))

    def _name(self, tok: Tok) -> s.Name:
        return s.Name(str(tok), span=self._tok_span(tok))

    def _value(self, child: Any) -> Any:
        """Turn a token that carries a value into a node; None for keywords and punctuation."""
        if not isinstance(child, Tok):
            return child
        kind = child.type
        if kind in _VALUE_TOKENS:
            return self._name(child)
        if kind == "INT":
            return self._int(child, self._tok_span(child))
        if kind == "FLOAT":
            return self._float(child, self._tok_span(child))
        if kind == "DURATION":
            return self._duration(child)
        return None

    def _int(self, tok: Tok, span: Span) -> s.Int:
        text = str(tok)
        # INVARIANT: the length test comes first, so a number of any length is never converted
        if len(text.lstrip("-").lstrip("0")) > len(str(MAX_INT)) or abs(int(text)) > MAX_INT:
            self._too_large(span, "integer", f"integers are 64-bit: at most `{MAX_INT}`")
            return self._expr(s.Int(0, span=span))
        return self._expr(s.Int(int(text), span=span))

    def _float(self, tok: Tok, span: Span) -> s.Float:
        if math.isinf(float(str(tok))):
            self._too_large(span, "number", "numbers are 64-bit floating point: at most `1.7e308`")
        return self._expr(s.Float(str(tok), span=span))

    def _too_large(self, span: Span, what: str, help: str) -> None:
        text = span.text
        shown = text if len(text) <= _SHOWN_DIGITS else f"{text[: _SHOWN_DIGITS - 4]}…{text[-3:]}"
        self.diagnostics.append(
            Diagnostic.make(
                "H111", f"the {what} `{shown}` is too large", span, "out of range", help=help
            )
        )

    def _duration(self, tok: Tok) -> s.Duration:
        node = self._expr(s.Duration(str(tok), span=self._tok_span(tok)))
        units = s.DURATION_PART.findall(str(tok))
        sizes = [s.DURATION_UNITS[unit] for _number, unit in units]
        digits = max(len(number.lstrip("0")) for number, _unit in units)
        if digits > len(str(MAX_INT)) or s.duration_ms(str(tok)) > MAX_INT:
            self._too_large(
                node.span,
                "duration",
                f"durations are 64-bit: at most `{MAX_INT}ms` (292 million years)",
            )
            return node
        if any(a <= b for a, b in itertools.pairwise(sizes)):
            self.diagnostics.append(
                Diagnostic.make(
                    "H111",
                    f"the units of duration `{tok}` are out of order",
                    node.span,
                    "each unit must be smaller than the one before it",
                    help="write compound durations from the largest unit down, such as `1h30m`",
                )
            )
        return node

    def _check_pattern(self, tok: Tok, span: Span, *, allow_glob: bool) -> None:
        text = str(tok)
        problem = None
        if "*" in text and (not allow_glob or text.count("*") > 1 or not text.endswith("*")):
            problem = (
                "`*` may appear only once, at the end of a pattern"
                if allow_glob
                else "a call names one tool: patterns are not allowed here"
            )
        elif tok.type == "MCP_ID" and not _MCP_PATTERN.fullmatch(text):
            problem = "an MCP tool id has the form `mcp:<server>:tool:<name>`"
        if problem is not None:
            self.diagnostics.append(
                Diagnostic.make(
                    "H110",
                    f"malformed pattern `{text}`",
                    span,
                    problem,
                    help="write `change.*`, `mcp:scanner:*` or `mcp:scanner:tool:scan`",
                )
            )

    def _values(self, children: list[Any]) -> tuple[Any, ...]:
        out = []
        for child in children:
            if child is None:
                continue
            value = self._value(child)
            if value is not None:
                out.append(value)
        return tuple(out)

    @staticmethod
    def _nodes(children: list[Any]) -> tuple[Any, ...]:
        return tuple(c for c in children if c is not None and not isinstance(c, Tok))

    def _block(self, children: list[Any], cls: type, name_index: int = 1) -> Any:
        return cls(
            self._name(children[name_index]),
            self._nodes(children[name_index + 1 :]),
            span=self._span(children),
        )

    # -- module, header, imports, facts ----------------------------------------------------

    def start(self, c):
        return s.Module(tuple(c), span=Span(self.source, 0, len(self.source.text)))

    def partial_items(self, value_stack: list[Any]) -> list[Any]:
        """The declarations completed before a syntax error, from the parser's value stack."""
        items: list[Any] = []
        for value in value_stack:
            if isinstance(value, Tree) and value.data.startswith("__start_star"):
                items.extend(value.children)
            elif isinstance(value, _DECLARATIONS):
                items.append(value)
            else:
                break
        return items

    def header(self, c):
        return self._block(c, s.Header)

    def attr(self, c):
        return s.Attr(str(c[0]), self._values(c[1:]), span=self._span(c))

    def import_(self, c):
        target = c[1]
        alias = self._name(c[3]) if len(c) > 3 else None
        if isinstance(target, s.Str):
            return s.Import(target.value, True, alias, span=self._span(c), target_span=target.span)
        return s.Import(
            str(target), False, alias, span=self._span(c), target_span=self._tok_span(target)
        )

    def connection(self, c):
        return s.Connection(self._name(c[1]), c[2] if len(c) > 2 else None, span=self._span(c))

    def runtime_(self, c):
        return s.Runtime(self._name(c[1]), c[2] if len(c) > 2 else None, span=self._span(c))

    def fact(self, c):
        description = c[4] if len(c) > 4 else None
        return s.Fact(self._name(c[1]), c[3], description, span=self._span(c))

    def label(self, c):
        return s.Label(self._name(c[1]), c[2] if len(c) > 2 else None, span=self._span(c))

    # -- tools and schemas -----------------------------------------------------------------

    def tool(self, c):
        name_tok = c[1]
        quoted = name_tok.type == "STRING"
        text = self._decode(name_tok) if quoted else str(name_tok)
        name = s.Name(text, span=self._tok_span(name_tok))
        if quoted and not QUOTED_NAME.fullmatch(text):
            self.diagnostics.append(
                Diagnostic.make(
                    "H114",
                    f"`{text}` is not a valid tool name",
                    name.span,
                    "only letters, digits and `_ - . /` are allowed",
                    help="MCP tool names may contain `-`, `.` and `/`, but no spaces",
                )
            )
        return s.Tool(name, self._nodes(c[2:]), quoted, span=self._span(c))

    def tool_name(self, c):
        return c[0]

    def extend(self, c):
        names = []
        items = []
        for child in c[2:]:
            if isinstance(child, Tok):
                if child.type in ("NAME", "DOTTED", "MCP_ID"):
                    names.append(self._call_target(child))
            elif child is not None:
                items.append(child)
        return s.Extend(tuple(names), tuple(items), span=self._span(c))

    def requires(self, c):
        return s.Requires(self._condition(c[1]), span=self._span(c))

    def on_success(self, c):
        rest = list(c[1:])
        when = rest.pop(0).value if isinstance(rest[0], _CallPart) else None
        op, target, fact = str(rest[0]), rest[1], rest[3]
        key = rest[4].value if len(rest) > 4 and isinstance(rest[4], _CallPart) else None
        var = item = None
        if isinstance(target, _CallPart):  # `each x in LIST[: ITEM]`
            var, value, item = target.value
        else:
            value = self._path(target)
        return s.OnSuccess(value, self._name(fact), op, var, item, when, key, span=self._span(c))

    def fact_key(self, c):
        return _CallPart("key", self._path(c[1]), self._span(c))

    def index(self, c):
        return self._expr(s.Index(c[0], c[2], span=self._span(c)))

    def on_success_when(self, c):
        return _CallPart("when", self._condition(c[1]), self._span(c))

    def on_success_each(self, c):
        item = self._path(c[5]) if len(c) > 5 else None
        return _CallPart("each", (self._name(c[1]), self._path(c[3]), item), self._span(c))

    def _path(self, tok: Tok) -> s.Path:
        return self._expr(s.Path(str(tok), span=self._tok_span(tok)))

    def schema_attr(self, c):
        body = c[1]
        if isinstance(body, s.TypeRef):
            # `output TYPE`: a plain record type is the usual `output { … }`
            if body.name == "object" and not body.optional:
                body = s.Schema(body.fields, span=body.span, rest=body.rest)
            else:
                shell = s.Schema((), span=body.span)
                return s.SchemaAttr(str(c[0]), shell, span=self._span(c), type=body)
        return s.SchemaAttr(str(c[0]), body, span=self._span(c))

    def operation(self, c):
        return self._block(c, s.Operation)

    def schema(self, c):
        nodes = self._nodes(c)
        rest = next((x for x in nodes if isinstance(x, s.Rest)), None)
        fields = tuple(x for x in nodes if not isinstance(x, s.Rest))
        return s.Schema(fields, span=self._span(c), rest=rest)

    def rest(self, c):
        return s.Rest(span=self._span(c))

    def union(self, c):
        return s.TypeRef("union", self._nodes(c), span=self._span(c))

    def field(self, c):
        return s.Field(self._name(c[0]), c[2], self._nodes(c[3:]), span=self._span(c))

    def field_note(self, c):
        return s.Field(self._name(c[0]), None, self._nodes(c[2:]), span=self._span(c))

    def type(self, c):
        core = c[0]
        if len(c) > 1:
            return replace(core, optional=True, span=self._span(c))
        return core

    def type_name(self, c):
        node = s.TypeRef(str(c[0]), span=self._span(c))
        if node.name == "object":
            # `{ … }` is the object type; the word would read as an object with no fields
            self.diagnostics.append(
                Diagnostic.make(
                    "H301",
                    "unknown type `object`",
                    node.span,
                    "not a type name",
                    help="write the object's fields inline: `{ name: string, count: int }`",
                )
            )
        return node

    def type_list(self, c):
        return s.TypeRef("list", (c[2],), span=self._span(c))

    def type_map(self, c):
        return s.TypeRef("map", (c[2],), span=self._span(c))

    def type_enum(self, c):
        return s.TypeRef("enum", values=self._nodes(c), span=self._span(c))

    def type_object(self, c):
        return s.TypeRef("object", fields=c[0].fields, span=self._span(c), rest=c[0].rest)

    def constraint(self, c):
        value = self._values(c[1:])
        return s.Constraint(str(c[0]), value[0] if value else None, span=self._span(c))

    # -- surfaces --------------------------------------------------------------------------

    def surface(self, c):
        return self._block(c, s.Surface)

    def pattern(self, c):
        span = self._span(c)
        if c[0].type in ("GLOB", "MCP_ID"):
            self._check_pattern(c[0], span, allow_glob=True)
        return s.Pattern(str(c[0]), span=span)

    def expose(self, c):
        return s.Expose(self._nodes(c), span=self._span(c))

    def hide(self, c):
        return s.Hide(self._nodes(c), span=self._span(c))

    def rank(self, c):
        return s.Rank(self._nodes(c), span=self._span(c))

    # -- policies --------------------------------------------------------------------------

    def policy(self, c):
        return self._block(c, s.Policy)

    def effect(self, c):
        return c[0]

    default_effect = risk_effect = expect_effect = effect

    def default(self, c):
        target = c[1]
        options = c[2] if len(c) > 2 else None
        if target.type in ("ALLOW", "DENY", "ASK"):
            return s.Default(str(target), None, options, span=self._span(c))
        return s.Default(None, self._name(target), options, span=self._span(c))

    def include(self, c):
        return s.Include(self._name(c[1]), span=self._span(c))

    def rule(self, c):
        budget = self.budget
        budget.rules += 1
        if budget.rules > MAX_RULES:
            start = c[0].start_pos
            raise LimitCrossed(
                too_many(
                    "H010",
                    f"the spec has more than {MAX_RULES:,} rules",
                    Span(self.source, start, start + len(str(c[0]))),
                    f"rule {budget.rules:,} starts here",
                )
            )
        label = None
        i = 0
        if c[0].type == "KEY":
            label = self._name(c[0])
            i = 2
        effect_tok = c[i]
        selectors = []
        when = None
        options = None
        j = i + 1
        while j < len(c):
            child = c[j]
            if isinstance(child, Tok):
                if child.type == "WHEN":
                    when = self._condition(c[j + 1])
                    j += 2
                    continue
            elif isinstance(child, tuple):
                options = child
            elif child is not None:
                selectors.append(child)
            j += 1
        return s.Rule(
            label,
            str(effect_tok),
            tuple(selectors),
            when,
            options,
            span=self._span(c),
            effect_span=self._tok_span(effect_tok),
        )

    def risk_selector(self, c):
        return s.RiskSelector(str(c[1]), self._name(c[2]), span=self._span(c))

    def effects_selector(self, c):
        return s.EffectsSelector(self._name(c[2]), span=self._span(c))

    def options(self, c):
        block = _Options(self._nodes(c))
        block.span = self._span(c)  # from `{` to `}`: the rule's span ends at the brace
        return block

    def approver(self, c):
        return s.Approver(str(c[1]), c[2], span=self._span(c))

    def grant(self, c):
        scope, selector, when = c[1]
        return s.Grant(scope, self._value(c[3]), selector, when, span=self._span(c))

    def grant_scope(self, c):
        selector = c[1] if len(c) > 1 else None
        when = self._condition(c[3]) if len(c) > 3 else None
        return (str(c[0]), selector, when)

    def risk_table(self, c):
        return s.RiskTable(self._name(c[1]), self._nodes(c[2:]), span=self._span(c))

    def risk_entry(self, c):
        options = c[2] if len(c) > 2 else None
        return s.RiskEntry(self._name(c[0]), str(c[1]), options, span=self._span(c))

    # -- conditions and values -------------------------------------------------------------

    def or_(self, c):
        return self._expr(s.Or(self._nodes(c), span=self._span(c)))

    def and_(self, c):
        return self._expr(s.And(self._nodes(c), span=self._span(c)))

    def not_(self, c):
        return self._expr(s.Not(c[1], span=self._span(c)))

    def paren(self, c):
        return c[1]

    def compare(self, c):
        return self._expr(s.Compare(c[0], str(c[1]), c[2], span=self._span(c)))

    def compare_op(self, c):
        return c[0]

    def int_(self, c):
        return self._int(c[0], self._span(c))

    def float_(self, c):
        return self._float(c[0], self._span(c))

    def duration(self, c):
        return self._duration(c[0])

    def true(self, c):
        return self._expr(s.Bool(True, span=self._span(c)))

    def false(self, c):
        return self._expr(s.Bool(False, span=self._span(c)))

    def path(self, c):
        return self._expr(s.Path(str(c[0]), span=self._span(c)))

    def provenance(self, c):
        only = isinstance(c[-1], Tok) and c[-1].type == "ONLY"
        if isinstance(c[2], s.FuncCall):
            call = c[2]
            return self._expr(
                s.Provenance(c[0], call.name, None, only, call=call, span=self._span(c))
            )
        if str(c[2]) == "label" and len(c) > 3 + only:
            source = self._name(c[2])
            return self._expr(
                s.Provenance(c[0], source, self._name(c[3]), only, span=self._span(c))
            )
        return self._expr(s.Provenance(c[0], self._name(c[2]), None, only, span=self._span(c)))

    def quantified(self, c):
        return self._expr(s.Quantified(str(c[0]), self._name(c[1]), c[3], c[5], span=self._span(c)))

    def func_call(self, c):
        args = []
        of = ()
        window = None
        when = None
        for child in c[2:-1]:
            if isinstance(child, _CallPart):
                if child.kind == "of":
                    of = child.value
                elif child.kind == "within":
                    window = child.value
                else:
                    when = child.value
            elif child is not None and not isinstance(child, Tok):
                args.append(child)
        return self._expr(
            s.FuncCall(self._name(c[0]), tuple(args), of, window, when, span=self._span(c))
        )

    def from_call(self, c):
        return self.func_call(c)

    def call_pattern(self, c):
        return self.pattern(c)

    def call_of(self, c):
        return _CallPart("of", self._nodes(c[1:]), self._span(c))

    def call_within(self, c):
        return _CallPart("within", self._value(c[1]), self._span(c))

    def call_when(self, c):
        return _CallPart("when", c[1], self._span(c))

    def list_(self, c):
        return self._expr(s.ListLit(self._nodes(c), span=self._span(c)))

    def record(self, c):
        return self._expr(s.Record(self._nodes(c), span=self._span(c)))

    def entry(self, c):
        return self._expr(s.Entry(self._name(c[0]), c[2], span=self._span(c)))

    def string(self, c):
        return s.Str(tuple(self._decode(tok) for tok in c), span=self._span(c))

    def _decode(self, tok: Tok) -> str:
        try:
            value = json.loads(tok)
        except ValueError:
            self.diagnostics.append(_bad_escape(self._tok_span(tok)))
            return str(tok)[1:-1]
        if not isinstance(value, str):  # pragma: no cover - the token is always a JSON string
            return str(tok)[1:-1]
        if _SURROGATE.search(value):
            # `\ud800` alone is valid JSON but no character: it could not be written as UTF-8
            self.diagnostics.append(
                Diagnostic.make(
                    "H105",
                    "invalid escape in string",
                    self._tok_span(tok),
                    "half of a surrogate pair, not a character",
                    help=r"write the character itself, or both halves: `\ud83d\ude00`",
                )
            )
            return _SURROGATE.sub("\ufffd", value)
        return value

    # -- MCP, skills, agents ---------------------------------------------------------------

    def mcp(self, c):
        return self._block(c, s.Mcp)

    def skill(self, c):
        return self._block(c, s.Skill)

    def private_tool(self, c):
        return s.PrivateTool(c[1], span=self._span(c))

    def subagent(self, c):
        return self._block(c, s.Subagent)

    def agent(self, c):
        return self._block(c, s.Agent)

    # -- workflows -------------------------------------------------------------------------

    def workflow(self, c):
        return self._block(c, s.Workflow)

    def step(self, c):
        after: tuple[s.Name, ...] = ()
        when = None
        compensation = False
        options = None
        seen: dict[str, _Tail] = {}
        for tail in c[4:]:
            kind, value = tail
            if kind in seen and kind != "after":
                word = {"when": "`when`", "block": "option block", "compensation": "`compensation`"}
                self.diagnostics.append(
                    Diagnostic.make(
                        "H113",
                        f"step `{c[1]}` has a second {word[kind]}",
                        tail.span,
                        "repeated here",
                        secondary=[(seen[kind].span, "first here")],
                        help="combine conditions with `and`, and options into one block",
                    )
                )
            seen.setdefault(kind, tail)
            if kind == "after":
                after = after + value
            elif kind == "when":
                when = value
            elif kind == "compensation":
                compensation = True
            else:
                options = value
        return s.Step(
            self._name(c[1]), c[3], after, when, compensation, options, span=self._span(c)
        )

    def _call_target(self, tok: Tok) -> s.Name:
        name = self._name(tok)
        if tok.type == "MCP_ID":
            self._check_pattern(tok, name.span, allow_glob=False)
        return name

    def call_action(self, c):
        return s.CallAction(self._call_target(c[1]), self._nodes(c[2:]), span=self._span(c))

    def delegate_action(self, c):
        return s.DelegateAction(self._name(c[1]), c[2], span=self._span(c))

    def decide_action(self, c):
        return s.DecideAction(c[1], span=self._span(c))

    def gate_action(self, c):
        return s.GateAction(self._condition(c[1]), span=self._span(c))

    def after(self, c):
        return _Tail("after", self._values(c[1:]), self._span(c))

    def when(self, c):
        return _Tail("when", self._condition(c[1]), self._span(c))

    def compensation(self, c):
        return _Tail("compensation", True, self._span(c))

    def step_block(self, c):
        return _Tail("block", self._nodes(c), self._span(c))

    def arg(self, c):
        return s.Arg(self._name(c[0]), c[2], span=self._span(c))

    def by(self, c):
        return s.By(str(c[1]), c[2], span=self._span(c))

    def timeout(self, c):
        default = self._name(c[3]) if len(c) > 3 else None
        return s.Timeout(self._value(c[1]), default, span=self._span(c))

    def context(self, c):
        return s.Context(self._nodes(c), span=self._span(c))

    def on_failure(self, c):
        return s.OnFailure(self._nodes(c), span=self._span(c))

    def failure_action(self, c):
        kind = str(c[0])
        span = self._span(c)
        if kind == "retry":
            backoff = self._value(c[3]) if len(c) > 3 else None
            return s.FailureAction(kind, count=self._value(c[1]), backoff=backoff, span=span)
        if kind == "compensate":
            return s.FailureAction(kind, target=self._name(c[1]), span=span)
        return s.FailureAction(kind, principal=str(c[1]), who=c[2], span=span)

    # -- tests -----------------------------------------------------------------------------

    def test(self, c):
        return s.Test(c[1], self._nodes(c[2:]), span=self._span(c))

    def test_call(self, c):
        return s.TestCall(self._call_target(c[1]), self._nodes(c[2:]), span=self._span(c))

    def test_record(self, c):
        key = str(c[1]) if str(c[0]) == "as" else str(c[0])
        return s.TestRecord(key, c[-1], span=self._span(c))

    def said(self, c):
        return s.Said(c[1], span=self._span(c))

    def earlier(self, c):
        args = []
        returns = None
        ago = None
        for child in c[2:]:
            if isinstance(child, _CallPart):
                if child.kind == "returns":
                    returns = child.value
                else:
                    ago = child.value
            elif isinstance(child, s.Arg):
                args.append(child)
        return s.Earlier(self._call_target(c[1]), tuple(args), returns, ago, span=self._span(c))

    def earlier_returns(self, c):
        return _CallPart("returns", c[1], self._span(c))

    def earlier_ago(self, c):
        return _CallPart("ago", self._value(c[1]), self._span(c))

    def expect(self, c):
        return s.Expect(str(c[1]), self._nodes(c[2:]), span=self._span(c))


_DECLARATIONS = (
    s.Header,
    s.Import,
    s.Connection,
    s.Runtime,
    s.Fact,
    s.Label,
    s.Tool,
    s.Extend,
    s.Surface,
    s.Policy,
    s.RiskTable,
    s.Mcp,
    s.Skill,
    s.Agent,
    s.Workflow,
    s.Test,
)


class _Options(tuple):
    """An option block `{ … }` while it travels up to its rule (a tuple, but marked)."""

    span: Span


@dataclass(frozen=True, slots=True)
class _Tail:
    kind: str
    value: Any
    span: Span

    def __iter__(self):
        return iter((self.kind, self.value))


@dataclass(frozen=True, slots=True)
class _CallPart:
    """A call's `of`, `within` or `when` part, or an earlier call's `returns` or `ago`, while it
    travels up to its node."""

    kind: str
    value: Any
    span: Span


def _start(node: Any) -> int:
    if isinstance(node, Tok):
        return node.start_pos or 0
    if isinstance(node, _Options | _CallPart):
        return node.span.start
    if isinstance(node, tuple):
        return _start(node[0]) if node else 0
    return node.span.start


def _end(node: Any) -> int:
    if isinstance(node, Tok):
        return node.end_pos or 0
    if isinstance(node, _Options | _CallPart):
        return node.span.end
    if isinstance(node, tuple):
        return _end(node[-1]) if node else 0
    return node.span.end


def _bad_escape(span: Span) -> Diagnostic:
    return Diagnostic.make(
        "H105",
        "invalid escape in string",
        span,
        "not a JSON escape",
        help=r"use JSON escapes such as `\"`, `\\`, `\n` or `\u00e9`",
    )


# ---------------------------------------------------------------------------------------------
# The parser object


@dataclass
class _Parser:
    lark: Lark
    engine: Engine
    builder: _Builder
    lock: threading.Lock


def parser_cache_file() -> str | None:
    """Where the parser's tables are cached between runs: in `cache_folder()`, safe to delete;
    None when that folder cannot be made.

    Lark keys the file by the grammar, the options, its own version and Python's, and builds
    the tables again (rewriting the file) when any of them changed; a file it cannot read or
    write only costs the build. Building the LALR tables and checking the terminals' regular
    expressions for collisions is most of a cold start; reading them back takes milliseconds.
    """
    folder = cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(folder / "parser.lark-cache")


@cache
def _parser() -> _Parser:
    builder = _Builder()
    lark = Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        keep_all_tokens=True,
        maybe_placeholders=True,
        transformer=builder,
        propagate_positions=False,
        cache=parser_cache_file() or False,
    )
    return _Parser(lark, Engine(lark), builder, threading.Lock())


def build_lark(strict: bool = False, **options: Any) -> Lark:
    """A plain Lark parser over the grammar (for tests, `debug tokens` and error matching)."""
    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        keep_all_tokens=True,
        strict=strict,
        **options,
    )


@dataclass
class Chunk:
    """What one run of the parser from ``pos`` produced: declarations, comments, diagnostics
    found while building nodes (bad string escapes), and the failure that stopped it, if any.
    """

    items: list[Any]
    comments: list[Tok]
    diagnostics: list[Diagnostic]
    failure: ParseFailure | None
    limit: Diagnostic | None = None
    """A limit of the spec crossed (dsl/files.py): the parse stopped there, the rest unread."""


def parse_chunk(source: Source, pos: int = 0, budget: Budget | None = None) -> Chunk:
    """Parse ``source`` from offset ``pos``; never raises for bad input. ``budget``: what the
    chunks before this one built (a spec's limits count over the whole file)."""
    p = _parser()
    limit = None
    with p.lock:
        builder = p.builder
        builder.source = source
        builder.budget = budget if budget is not None else Budget()
        builder.diagnostics = []
        builder.comments = []
        failure = None
        items: list[Any] = []
        # The parse allocates many small objects that all survive it: the cyclic collector
        # would only rescan them (about a sixth of the parse time).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            items = list(p.engine.parse(source.text, builder.on_comment, pos=pos).items)
        except ParseFailure as error:
            failure = error
            items = builder.partial_items(error.value_stack)
        except LimitCrossed as crossed:
            limit = crossed.diagnostic
        finally:
            if gc_was_enabled:
                gc.enable()
            comments, extra = builder.comments, builder.diagnostics
            builder.comments, builder.diagnostics = [], []
    return Chunk(items, comments, extra, failure, limit)


def debug_tokens(source: Source) -> list[Tok]:
    """The tokens the parser reads, in order, up to the first syntax error (`debug tokens`)."""
    return chunk_tokens(source)[0]


def chunk_tokens(source: Source, pos: int = 0) -> tuple[list[Tok], ParseFailure | None]:
    """The tokens (comments too) the parser reads from offset ``pos``, in order, typed as it
    types them (a word is a keyword only where the grammar takes one), up to the first syntax
    error, and that error; a limit of the spec crossed ends them too."""
    tokens: list[Tok] = []
    failure = None
    p = _parser()
    with p.lock:
        p.builder.source = source
        p.builder.budget = Budget()
        try:
            p.engine.parse(source.text, tokens.append, tokens.append, pos=pos)
        except ParseFailure as error:
            failure = error
        except LimitCrossed:
            pass
        finally:
            p.builder.diagnostics, p.builder.comments = [], []
    return sorted(tokens, key=lambda t: t.start_pos), failure


def engine() -> Engine:
    return _parser().engine
