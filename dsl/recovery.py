"""Syntax errors: recover at the next declaration and explain each error in a user's words.

An error is explained, in order of preference, by a known-bad example (a table of snippets, as
Lark's ``match_examples`` does: the parser state and token at the failure identify the
mistake), by a misspelled keyword ("did you mean"), by an unclosed block (naming the innermost
open block and where it was opened), or by what was found and what could come there instead.
After an error the parser starts again at the next line that begins a top-level declaration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from lark.lexer import PatternStr

from . import syntax as s
from .builder import engine, parse_chunk
from .diagnostics import Diagnostic
from .lexer import ParseFailure, Tok
from .source import Source, Span
from .suggest import suggest

MAX_NESTING = 64
MAX_SYNTAX_ERRORS = 50

TOP_LEVEL = [
    "harness",
    "import",
    "connection",
    "runtime",
    "fact",
    "label",
    "tool",
    "extend",
    "surface",
    "policy",
    "risk_table",
    "mcp",
    "skill",
    "agent",
    "workflow",
    "test",
]
DECL_START = re.compile(r"^(?:" + "|".join(TOP_LEVEL) + r")\b", re.M)
_BRACKETS = re.compile(
    r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|#[^\n]*|[\[\](){}]|(?<![.\w])(?:list|map)\s*<|>'
)
_OPEN = {"{": "}", "(": ")", "[": "]"}

# Terminals that are not written literally, in the words a user would use.
_DESCRIBED = {
    "NAME": "a name",
    "DOTTED": "a dotted name",
    "KEY": "a key (`name:`)",
    "STRING": "a string",
    "INT": "an integer",
    "FLOAT": "a number",
    "DURATION": "a duration such as `30s`",
    "GLOB": "a pattern such as `change.*`",
    "MCP_ID": "an MCP id such as `mcp:server:tool:name`",
    "CLASS_SEL": "`pack:NAME` or `kind:NAME`",
}

_BLOCK_WORDS = {
    "harness": "the header",
    "tool": "tool",
    "extend": "`extend` block",
    "operation": "operation",
    "surface": "surface",
    "policy": "policy",
    "risk_table": "risk table",
    "mcp": "MCP server",
    "skill": "skill",
    "subagent": "subagent",
    "agent": "agent",
    "workflow": "workflow",
    "test": "test",
    "step": "step",
    "rank": "`rank` block",
    "input": "`input` schema",
    "output": "`output` schema",
}


def resume_point(starts: list[int], failure: ParseFailure, chunk_start: int) -> int | None:
    """The next top-level declaration after the one that failed."""
    if failure.at_end:
        return None
    pos = failure.pos
    for start in starts:
        if start > chunk_start and (start > pos or (start == pos and _opened_before(failure))):
            return start
    return None


_NAME_TOKENS = ("NAME", "DOTTED", "KEY", "STRING")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEAD_NAME = re.compile(r'\s*("[^"\n]*"|[A-Za-z_][A-Za-z0-9_.]*)')
# a tool written inside an `mcp` or `skill` block: `tool NAME {` or `private tool NAME {`
_INNER_TOOL = re.compile(r'^[ \t]*(?:private[ \t]+)?tool[ \t]+("[^"\n]*"|[A-Za-z_][\w.]*)', re.M)


def broken_declaration(
    source: Source, failure: ParseFailure, resume: int | None
) -> s.Broken | None:
    """The declaration a syntax error broke, skipped up to ``resume`` (None: the end of the
    file): its keyword and name when the parser had read them (``tool orders.lookup { …``),
    else guessed from the skipped text (a misspelt keyword); None for stray punctuation."""
    # the completed declarations head the parser's stack; the broken one starts at its keyword
    stack = failure.value_stack
    first = next((i for i, v in enumerate(stack) if isinstance(v, Tok)), len(stack))
    rest = [v for v in stack[first:] if v is not None]
    end = len(source.text) if resume is None else resume
    kind: str | None = None
    name: str | None = None
    if rest and isinstance(rest[0], Tok) and str(rest[0]) in TOP_LEVEL:
        start = rest[0].start_pos
        kind = str(rest[0])
        name = _written_name(rest[1]) if len(rest) > 1 else None
    else:
        start = failure.token.start_pos if failure.token is not None else failure.pos
        word = _WORD.search(source.text, start, end)
        if word is None:
            return None  # a stray `}` or `;`: it declared nothing
        kind = suggest(word.group(), TOP_LEVEL)
        head = _HEAD_NAME.match(source.text, word.end(), end) if kind is not None else None
        name = head.group(1).strip('"') if head is not None else None
    text = source.text[start:end]
    tools: tuple[str, ...] = ()
    if kind in ("mcp", "skill"):
        tools = tuple(m.group(1).strip('"') for m in _INNER_TOOL.finditer(text, 1))
    span = Span(source, start, start + len(text.rstrip()))
    return s.Broken(kind, name, tools, span=span)


def _written_name(value: object) -> str | None:
    if isinstance(value, Tok) and value.type in _NAME_TOKENS:
        return str(value).strip('"')
    if isinstance(value, s.Str):
        return value.value
    if isinstance(value, s.Name):
        return value.text
    return None


def _opened_before(failure: ParseFailure) -> bool:
    """Whether the failing token came while a declaration was still open."""
    return any(isinstance(v, Tok) for v in failure.value_stack)


def check_nesting(source: Source) -> Diagnostic | None:
    """Brackets, and the angle brackets of `list<…>` and `map<…>` types, nested more than
    `MAX_NESTING` deep: every later stage walks them recursively. A `>` closes an angle bracket
    only while one is open (elsewhere it compares)."""
    depth = 0
    angles = 0
    for m in _BRACKETS.finditer(source.text):
        ch = m.group()
        if ch == ">":
            if angles:
                angles -= 1
                depth = max(0, depth - 1)
            continue
        if ch.endswith("<"):
            angles += 1
        if ch in _OPEN or ch.endswith("<"):
            depth += 1
            if depth > MAX_NESTING:
                span = Span(source, m.start(), m.end())
                return Diagnostic.make(
                    "H108",
                    f"brackets nest more than {MAX_NESTING} levels deep",
                    span,
                    f"level {depth} opens here",
                    help="split the condition or schema into named parts",
                )
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return None


def check_condition_nesting(items: Iterable[object]) -> Diagnostic | None:
    """A condition in `items` (parsed declarations) where `not`s and quantifiers nest
    more than `MAX_NESTING` levels deep: they nest without brackets, so `check_nesting` does not
    see them, and every later stage walks a condition recursively. Found by a walk with a stack
    of its own, so a chain of any length is measured without recursion; only the declarations
    whose text holds more than `MAX_NESTING` of the words are walked (almost always none)."""
    stack: list[tuple[object, int]] = []
    for item in items:
        span: Span = item.span  # type: ignore[attr-defined]
        if _unary_words(span.source.text, span.start, span.end) > MAX_NESTING:
            stack.append((item, 0))
    while stack:
        node, depth = stack.pop()
        if isinstance(node, tuple):
            stack.extend((child, depth) for child in node)
            continue
        if not isinstance(node, s.Node):
            continue
        if isinstance(node, (s.Not, s.Quantified)):
            depth += 1
            if depth > MAX_NESTING:
                word = "not" if isinstance(node, s.Not) else node.quantifier
                return Diagnostic.make(
                    "H108",
                    f"`not`s and quantifiers nest more than {MAX_NESTING} levels deep",
                    Span(node.span.source, node.span.start, node.span.start + len(word)),
                    f"level {depth} starts here",
                    help=(
                        "`not not x` is `x`: drop the doubled `not`s, or split the condition"
                        if word == "not"
                        else "split the condition over several rules"
                    ),
                )
        stack.extend((getattr(node, name), depth) for name in s.child_fields(type(node)))
    return None


def _unary_words(text: str, start: int, end: int) -> int:
    """At least the number of `not`, `all` and `any` words in `text[start:end]` (the words that
    nest a condition without brackets), counted as substrings: a few scans in C, where a
    regular expression over a large spec costs a tenth of its parse."""
    found = text.count("not", start, end) + text.count("any", start, end)
    return found + text.count("all", start, end) - text.count("allow", start, end)


# ---------------------------------------------------------------------------------------------
# Explaining one failure


@dataclass(frozen=True)
class _Example:
    code: str
    message: str
    label: str
    help: str | None
    snippets: tuple[str, ...]


# Known mistakes, each identified by the parser state and the token where its snippets fail.
_EXAMPLES = (
    _Example(
        "H107",
        "`=` is not a comparison",
        "use `==` here",
        "conditions compare with `==`; `=` only binds a workflow step",
        (
            'policy p { allow t when args.a = "x" }',
            'policy p { allow t when actor.role = "x" and args.b == 1 }',
            "tool t { requires workspace.open = true }",
            "workflow w { step a = gate env.x = 1 }",
        ),
    ),
    _Example(
        "H101",
        "arguments are written `name: value`",
        "expected `:` here",
        "write call arguments as `name: value`, separated by `,`",
        ("workflow w { step a = call t(x = 1) }", 'test "t" { call t(x = 1) }'),
    ),
    _Example(
        "H101",
        "a rule's condition starts with `when`",
        "expected `when` before this",
        "write `allow TOOL when CONDITION`",
        ("policy p { allow t args.a == 1 }", "policy p { deny t actor.role == 1 }"),
    ),
    _Example(
        "H101",
        "patterns are separated by `,`",
        "expected `,` before this",
        "write the patterns as a list: `expose a, b`",
        ("surface s { expose a b }", "surface s { hide a b }", "policy p { allow a b }"),
    ),
    _Example(
        "H101",
        "a rule starts with `allow`, `deny` or `ask`",
        "not an effect",
        "write `allow`, `deny` or `ask`, optionally after a label `name:`",
        ("policy p { permit t }", "policy p { label: permit t }"),
    ),
    _Example(
        "H101",
        "`...` ends an open record: it comes after the last field",
        "a field after `...`",
        "move `...` after the record's last field: `{ id: string, ... }`",
        (
            "tool t { output { ..., a: string } }",
            "tool t { output { a: string, ... b: int } }",
            "fact f: { ... a: int }",
        ),
    ),
    _Example(
        "H111",
        "a duration is written without spaces",
        "the unit must follow the number",
        "write durations such as `30s`, `15m`, `1h30m` or `7d`",
        (
            "tool t { timeout 30 }",
            "policy p { ask t { grant once ttl 15 } }",
            "policy p { ask t { expires 15 } }",
        ),
    ),
)


@cache
def _example_table() -> dict[tuple[int, str], _Example]:
    table: dict[tuple[int, str], _Example] = {}
    for example in _EXAMPLES:
        for snippet in example.snippets:
            chunk = parse_chunk(Source("<example>", snippet))
            failure = chunk.failure
            if failure is None or failure.token is None:  # pragma: no cover - table is checked
                raise AssertionError(f"example does not fail at a token: {snippet!r}")
            table.setdefault((failure.state_stack[-1], failure.token.type), example)
    return table


def explain(source: Source, failure: ParseFailure) -> Diagnostic:
    """One diagnostic for one parse failure, in the user's words."""
    text = source.text
    token = failure.token
    open_block = _innermost_open(failure)
    if failure.at_end:
        last = len(text.rstrip())
        end = Span(source, last, last)
        return _unclosed(source, failure, open_block, end, at_end=True)
    if token is None:
        return _bad_character(source, failure.pos)
    span = Span(source, token.start_pos, token.end_pos)
    if open_block is not None and token.type.lower() in TOP_LEVEL and _at_line_start(text, token):
        return _unclosed(source, failure, open_block, span, at_end=False)
    window = _window_mistake(source, failure, token, span)
    if window is not None:
        return window
    example = _example_table().get((failure.state_stack[-1], token.type))
    if example is not None:
        return Diagnostic.make(
            example.code, example.message, span, example.label, help=example.help
        )
    found = _describe_token(token)
    where = f" in {_block_name(failure, open_block)}" if open_block is not None else ""
    keyword = _near_keyword(str(token), failure.expected) if token.type == "NAME" else None
    if keyword is not None:
        return Diagnostic.make(
            "H106",
            f"unknown keyword `{token}`{where}",
            span,
            "not a keyword here",
            help=f"did you mean `{keyword}`?",
        )
    expected = _describe_expected(failure.expected)
    return Diagnostic.make(
        "H101",
        f"unexpected {found}{where}",
        span,
        f"expected {expected}",
    )


# a unit people write for a window, and how many of the language's units it is
_UNITS = {
    "y": (365, "d"),
    "yr": (365, "d"),
    "yrs": (365, "d"),
    "year": (365, "d"),
    "years": (365, "d"),
    "mo": (30, "d"),
    "month": (30, "d"),
    "months": (30, "d"),
    "w": (7, "d"),
    "wk": (7, "d"),
    "wks": (7, "d"),
    "week": (7, "d"),
    "weeks": (7, "d"),
    "day": (1, "d"),
    "days": (1, "d"),
    "hr": (1, "h"),
    "hrs": (1, "h"),
    "hour": (1, "h"),
    "hours": (1, "h"),
    "min": (1, "m"),
    "mins": (1, "m"),
    "minute": (1, "m"),
    "minutes": (1, "m"),
    "sec": (1, "s"),
    "secs": (1, "s"),
    "second": (1, "s"),
    "seconds": (1, "s"),
}


def _window_mistake(
    source: Source, failure: ParseFailure, token: Tok, span: Span
) -> Diagnostic | None:
    """Two mistakes in a history term's window: written after the call (`count(t) within 24h >
    3`: the window goes inside), or in a unit the language does not have (`within 1y`)."""
    stack = failure.value_stack
    if len(stack) < 3 or not (isinstance(stack[-2], Tok) and stack[-2] == "within"):
        return None
    call, within, amount = stack[-3], stack[-2], stack[-1]
    if isinstance(call, s.FuncCall) and isinstance(amount, s.Duration | s.Int | s.Float):
        text = source.text
        head = text[call.span.start : call.span.end].rstrip()
        written = text[within.start_pos : amount.span.end]
        inside = f"{head[:-1].rstrip()} {written})" if head.endswith(")") else None
        return Diagnostic.make(
            "H101",
            f"the window of `{call.name.text}(…)` goes inside the call",
            Span(source, within.start_pos, amount.span.end),
            "outside the call",
            help=f"write `{inside}`" if inside else "write the window inside the parentheses",
        )
    if (
        token.type == "NAME"
        and isinstance(amount, Tok)
        and amount.type in ("INT", "FLOAT")
        and token.start_pos - amount.end_pos <= 1
    ):
        unit = str(token)
        found = _UNITS.get(unit.lower())
        number = str(amount)
        hint = "write `30s`, `15m`, `24h` or `7d`"
        if found is not None and amount.type == "INT":
            hint = f"write `{int(number) * found[0]}{found[1]}`"
        return Diagnostic.make(
            "H111",
            f"`{unit}` is not a unit of a window",
            Span(source, amount.start_pos, token.end_pos),
            "not a duration",
            help=f"a window is a duration in `ms`, `s`, `m`, `h` or `d`, written without "
            f"spaces: {hint}",
        )
    return None


def _at_line_start(text: str, token: Tok) -> bool:
    line_start = text.rfind("\n", 0, token.start_pos) + 1
    return token.start_pos == line_start


def _innermost_open(failure: ParseFailure) -> tuple[int, Tok] | None:
    """The last bracket still open on the parser's stack, with its index."""
    stack: list[tuple[int, Tok]] = []
    for index, value in enumerate(failure.value_stack):
        if isinstance(value, Tok):
            if value in _OPEN:
                stack.append((index, value))
            elif value in (")", "]", "}") and stack:
                stack.pop()
    return stack[-1] if stack else None


def _block_name(failure: ParseFailure, open_block: tuple[int, Tok] | None) -> str:
    """Name an open bracket by what stands before it on the parser's stack: "tool `x`"."""
    if open_block is None:
        return "the file"
    index, bracket = open_block
    if bracket == "[":
        return "this list"
    before = failure.value_stack[max(0, index - 4) : index]
    if bracket == "(":
        callee = before[-1] if before else None
        if isinstance(callee, Tok) and callee.type in ("NAME", "DOTTED", "MCP_ID"):
            return f"the arguments of `{callee}`"
        return "these parentheses"
    for offset in range(len(before) - 1, -1, -1):
        value = before[offset]
        if str(value) == "tool" and offset > 0 and str(before[offset - 1]) == "extend":
            return "this `extend` block"
        if isinstance(value, Tok) and str(value) in _BLOCK_WORDS:
            word = _BLOCK_WORDS[str(value)]
            name = before[offset + 1] if offset + 1 < len(before) else None
            if isinstance(name, Tok) and name.type in ("NAME", "DOTTED", "STRING"):
                return f"{word} `{str(name).strip(chr(34))}`"
            if isinstance(name, s.Str):
                return f"{word} `{name.value}`"
            return word if word.startswith("`") or word.startswith("the") else f"this {word}"
    return "this block"


def _unclosed(source: Source, failure: ParseFailure, open_block, span: Span, *, at_end: bool):
    if open_block is None:
        return Diagnostic.make("H101", "unexpected end of file", span, "the file ends here")
    _index, bracket = open_block
    close = _OPEN[str(bracket)]
    name = _block_name(failure, open_block)
    opened = Span(source, bracket.start_pos, bracket.end_pos)
    where = "the file ends" if at_end else "a new declaration begins"
    secondary = [(span, f"{where} here")]
    if bracket == "{":
        inner = _misclosed(source.text, bracket.start_pos, span.start)
        if inner is not None:
            # the block left open is an inner one: its `}` went to the block around it
            inner_open, inner_close = inner
            inner_name = _block_name_in_text(source.text, inner_open)
            secondary.insert(
                0,
                (
                    Span(source, inner_close, inner_close + 1),
                    f"this `}}` closes {inner_name}, but is indented as the end of {name}",
                ),
            )
            opened = Span(source, inner_open, inner_open + 1)
            name = inner_name
    return Diagnostic.make(
        "H102",
        f"{name} is never closed",
        opened,
        f"this `{bracket}` has no matching `{close}`",
        secondary=secondary,
        help=f"add `{close}` where {name} ends",
    )


def _misclosed(text: str, outer: int, end: int) -> tuple[int, int] | None:
    """Inside a `{` block never closed (at `outer`), the first inner `{` whose `}` stands at the
    start of a line indented as the outer block's line, less than the inner block's own line:
    that `}` was meant for the outer block, so the inner one is the block left open."""
    outer_indent = _indent(text, outer)
    stack: list[int] = []
    for m in _BRACKETS.finditer(text, outer + 1, end):
        if m.group() == "{":
            stack.append(m.start())
        elif m.group() == "}" and stack:
            inner = stack.pop()
            line_start = text.rfind("\n", 0, m.start()) + 1
            at_line_start = not text[line_start : m.start()].strip()
            if at_line_start and _indent(text, m.start()) == outer_indent < _indent(text, inner):
                return inner, m.start()
    return None


def _indent(text: str, pos: int) -> int:
    """The indentation of the line that holds `pos`."""
    line_start = text.rfind("\n", 0, pos) + 1
    line = text[line_start:pos]
    return len(line) - len(line.lstrip(" \t"))


def _block_name_in_text(text: str, brace: int) -> str:
    """Name a `{` by the words before it on its line (`input {` → "`input` schema")."""
    line_start = text.rfind("\n", 0, brace) + 1
    words = re.findall(r'"[^"\n]*"|[A-Za-z_][A-Za-z0-9_.]*', text[line_start:brace])
    for i, word in enumerate(words):
        if word in _BLOCK_WORDS:
            kind = _BLOCK_WORDS[word]
            if kind.startswith("`") or kind.startswith("the"):
                return kind
            return f"{kind} `{words[i + 1].strip(chr(34))}`" if i + 1 < len(words) else kind
    return "the block opened here"


def _bad_character(source: Source, pos: int) -> Diagnostic:
    text = source.text
    ch = text[pos]
    if ch == '"':
        line_end = text.find("\n", pos)
        line_end = len(text) if line_end == -1 else line_end
        return Diagnostic.make(
            "H103",
            "unterminated string",
            Span(source, pos, line_end),
            'this string has no closing `"` on its line',
            help="close the string on the same line; join long text with adjacent strings: "
            '`"first part " "second part"`',
        )
    two = text[pos : pos + 2]
    hints = {
        "&&": "write `and`",
        "||": "write `or`",
        "!": "write `not`, or `!=` to compare",
        "'": 'strings use double quotes: `"…"`',
        "&": "write `and`",
        "|": "write `or`",
    }
    hint = hints.get(two) or hints.get(ch)
    shown = ch if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}"
    length = 2 if two in ("&&", "||") else 1
    return Diagnostic.make(
        "H104",
        f"unexpected character `{shown}`",
        Span(source, pos, pos + length),
        "no token starts with this character",
        help=hint,
    )


def _describe_token(token: Tok) -> str:
    kind = token.type
    if kind == "STRING":
        return f"string `{token}`"
    return f"`{token}`"


@cache
def _terminal_words() -> dict[str, str]:
    words = {}
    for name, pattern in engine().terminal_patterns.items():
        if isinstance(pattern, PatternStr):
            words[name] = f"`{pattern.value}`"
    words.update(_DESCRIBED)
    return words


def _describe_expected(expected: frozenset[str]) -> str:
    words = _terminal_words()
    literal = sorted(words[t] for t in expected if t in words and t not in _DESCRIBED)
    described = sorted(words[t] for t in expected if t in _DESCRIBED)
    items = described + literal
    if not items:
        return "the end of the file"
    if len(items) > 8:
        items = [*items[:7], f"{len(items) - 7} more"]
    if len(items) == 1:
        return items[0]
    return "one of " + ", ".join(items)


def _near_keyword(word: str, expected: frozenset[str]) -> str | None:
    words = _terminal_words()
    keywords = sorted(
        keyword
        for keyword in (words[t].strip("`") for t in expected if t in words and t not in _DESCRIBED)
        if keyword.replace("_", "").isalpha()
    )
    return suggest(word, keywords)
