"""Completion from the text before the cursor and the document's last build: the keywords the
grammar accepts at the cursor, tool ids in selectors, `call`s and `extend tool`, argument names
and enum values in conditions and `call` arguments, facts, roots and functions (with their
form) in conditions, approver roles already used."""

from __future__ import annotations

import re

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import engine, parse_chunk
from harnessc.dsl.lexer import ParseFailure
from harnessc.dsl.recovery import DECL_START
from harnessc.dsl.source import Source
from harnessc.runtime import model as m
from lsprotocol import types as lsp

from ..resolve import BUILTIN_ROOTS
from ..resolve_session import FUNCTIONS
from .outline import walk
from .signatures import FORMS
from .workspace import Build

CK = lsp.CompletionItemKind
_NOT_A_TOKEN = "\x01"
"""Appended to the text before the cursor: the parser stops there and says what it expected."""
_RULE_HEAD = re.compile(r"^\s*(?:\w+\s*:\s*)?(?:allow|ask|deny)\b")
_SELECTING = re.compile(
    r"(?:^\s*(?:\w+\s*:\s*)?(?:allow|ask|deny)|^\s*(?:expose|hide|extend\s+tool)|\bcall|\bearlier)"
    r"\s+(?:[\w.:*-]+\s*,\s*)*[\w.:*-]*$"
)
_CALL_ARGS = re.compile(r"\b(?:call|earlier)\s+([\w.:-]+)\s*\(([^)]*)$")
_ARG_VALUE = re.compile(r"(?:^|,)\s*(\w+)\s*:\s*\"?[\w-]*$")
_ARGS_FIELD = re.compile(r"\bargs\.(\w+)\s*(?:==|!=|in\s*\[[^\]]*)\s*\"?[\w-]*$")
_ARGS_DOT = re.compile(r"\bargs\.\w*$")
_ROLE = re.compile(r"\b(?:approver|by|escalate)\s+role\s+\"[^\"]*$")
_CONDITION = re.compile(r"\b(?:when|and|or|not|requires)\s+[\w.]*$")
_WORD = re.compile(r"[A-Za-z_]\w*$")
_SOURCE = re.compile(r"\b(?:when|and|or|not|requires|:)\s.*\S\s+from\s+\w*$")
"""After `from` in a condition (not `on_success remove … from FACT`): where a value came from."""
_SOURCES = (
    ("user", "the user said it"),
    ("trusted", "a trusted result, a fact, or the spec's default held it"),
    ("untrusted", "content written by others held it"),
    ("nowhere", "it appeared in no source: the model made it up or rewrote it"),
    ("label", "`label NAME`: a result carrying that data label held it"),
)
_CALL_REACH = 2000
"""How far before the cursor a `call` whose arguments are being typed is looked for."""


def complete(
    build: Build | None, model: m.Spec | None, text: str, offset: int
) -> list[lsp.CompletionItem]:
    """The completions at `offset`: names from `build` (the document's last check), tools and
    their arguments from `model` (its last check without errors)."""
    line = text[text.rfind("\n", 0, offset) + 1 : offset]
    if _in_comment(line):
        return []  # space triggers completion: a comment being typed gets no keywords
    if _ROLE.search(line):
        return [lsp.CompletionItem(r, kind=CK.Value) for r in sorted(roles(build))]
    call = _CALL_ARGS.search(text, max(0, offset - _CALL_REACH), offset)  # arguments may span lines
    if call is not None:
        tool = model.tools.get(call.group(1)) if model is not None else None
        value = _ARG_VALUE.search(call.group(2))
        if value is not None:
            return _enum_items(tool, value.group(1))
        return [
            lsp.CompletionItem(f.name, kind=CK.Field, insert_text=f"{f.name}: ")
            for f in (tool.input.fields if tool else ())
        ]
    if _SELECTING.search(line):
        return _tool_items(build, model)
    field = _ARGS_FIELD.search(line)
    if field is not None:
        return [i for t in _selected(model, line) for i in _enum_items(t, field.group(1))]
    if _ARGS_DOT.search(line):
        names = sorted({f.name for t in _selected(model, line) for f in t.input.fields})
        return [lsp.CompletionItem(n, kind=CK.Field) for n in names]
    if _SOURCE.search(line) and "on_success" not in line:
        return _source_items()
    typed = _WORD.search(line)
    keywords = [
        lsp.CompletionItem(w, kind=CK.Keyword)
        for w in keywords_at(text, offset - (len(typed.group()) if typed else 0))
    ]
    if _CONDITION.search(line):
        return _condition_items(build) + keywords
    return keywords


def _in_comment(line: str) -> bool:
    """Whether the end of `line` (the text before the cursor on its line) is inside a comment:
    a `#` outside a string literal before it."""
    quoted = False
    escaped = False
    for char in line:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "#" and not quoted:
            return True
    return False


def keywords_at(text: str, offset: int) -> list[str]:
    """The keywords the grammar accepts at `offset`: the parser is run from the start of the
    declaration around it to `offset`, and each keyword it says it may expect there is tried.
    A line before the cursor's that does not parse (half typed) is set aside, as is the line
    it swallowed the start of (`allow` then, on the next line, `deny`), when neither opens or
    closes a block: what the cursor's block accepts does not depend on them."""
    starts = [m.start() for m in DECL_START.finditer(text, 0, offset)]
    found = _state(text[starts[-1] if starts else 0 : offset])
    if found is None:
        return []  # the text before the cursor does not parse: nothing to say
    prefix, failure = found
    # at the start of a line, a new item of the block is typed: the lines of the items before
    # it are set aside (back to the line that opens the block) when without them the cursor is
    # between items, so that what would continue the line before (`and`, a field's `pattern`)
    # is not offered, nor what a half-typed line (`  risk`) would take; a line ending in `,`,
    # `and`, `==`… is continued, and kept with the lines before it
    line_start = prefix.rfind("\n") + 1
    if line_start > 0 and not prefix[line_start:].strip():
        cut = line_start
        while cut > 0:
            before = prefix.rfind("\n", 0, cut - 1) + 1
            previous = prefix[before:cut]
            if previous.strip() and (not _balanced(previous) or _CONTINUED.search(previous)):
                break
            cut = before
        if cut < line_start:
            alone = _state(prefix[:cut] + prefix[line_start:])
            if alone is not None and {"RBRACE", "$END"} & set(alone[1].expected):
                prefix, failure = alone
    accepted = []
    for word, terminal in sorted(engine().keyword_types.items()):
        if terminal not in failure.expected:
            continue
        # an LALR state may list a token it rejects after reducing: shift it to be sure
        trial = parse_chunk(Source("", f"{prefix}{word} {_NOT_A_TOKEN}")).failure
        if trial is None or trial.pos >= len(prefix) + len(word):
            accepted.append(word)
    return accepted


def _state(prefix: str) -> tuple[str, ParseFailure] | None:
    """Where the parser stops at the end of `prefix` (what it expects there), lines that do
    not parse set aside (`_set_aside`); None when that cannot be done."""
    for _ in range(_MOST_SET_ASIDE + 1):
        failure = parse_chunk(Source("", prefix + _NOT_A_TOKEN)).failure
        if failure is None:
            return None
        if failure.pos >= len(prefix):
            return prefix, failure
        shorter = _set_aside(prefix, failure.pos)
        if shorter is None:
            return None
        prefix = shorter
    return None


_CONTINUED = re.compile(
    r"(?:[,(\[{=<>!:]|\b(?:and|or|not|when|in|has|matches|within|of|from|requires))\s*(?:#.*)?$"
)
"""A line ending so that the next one continues it."""
_MOST_SET_ASIDE = 8
"""The most times lines that do not parse are set aside before the cursor."""
_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|#[^\n]*|[{}()\[\]]')


def _set_aside(prefix: str, pos: int) -> str | None:
    """`prefix` without the line where its parse failed at `pos`, unless that is the cursor's
    line (the last) or it opens or closes a bracket; else without the line before it, which
    took the failing line's start as its own continuation (`  risk` then `  timeout 30s`,
    `  a: allow t when x ==` then `  b: ask t {`). None when neither can be set aside."""
    start = prefix.rfind("\n", 0, pos) + 1
    end = prefix.find("\n", pos)
    if end >= 0 and _balanced(prefix[start : end + 1]):
        return prefix[:start] + prefix[end + 1 :]
    while start > 0:
        before = prefix.rfind("\n", 0, start - 1) + 1
        line = prefix[before:start]
        if line.strip():
            return prefix[:before] + prefix[start:] if _balanced(line) else None
        start = before
    return None


def _balanced(line: str) -> bool:
    """Whether a line opens and closes as many brackets as it closes (strings and comments
    aside)."""
    depth = 0
    for match in _BRACKETS.finditer(line):
        char = match.group()
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
    return depth == 0


def _tool_items(build: Build | None, model: m.Spec | None) -> list[lsp.CompletionItem]:
    resolution = build.result.resolution if build is not None else None
    if resolution is None:
        return []
    items = []
    for tool_id in sorted(resolution.globals.get("tool", {})):
        tool = model.tools.get(tool_id) if model is not None else None
        items.append(
            lsp.CompletionItem(tool_id, kind=CK.Function, detail=tool.summary if tool else None)
        )
    return items


def _selected(model: m.Spec | None, line: str) -> list[m.Tool]:
    """The tools the rule on `line` names by id, else every tool of the model."""
    if model is None:
        return []
    head = _RULE_HEAD.search(line)
    if head is not None:
        named = re.findall(r"[\w.:-]+", line[head.end() :].split(" when ", 1)[0])
        chosen = [model.tools[n] for n in named if n in model.tools]
        if chosen:
            return chosen
    return list(model.tools.values())


def _enum_items(tool: m.Tool | None, name: str) -> list[lsp.CompletionItem]:
    field = tool.input.field(name) if tool is not None else None
    if field is None or field.type.name != "enum":
        return []
    return [
        lsp.CompletionItem(v, kind=CK.EnumMember, insert_text=v, detail=f"{tool.id}: {name}")  # type: ignore[union-attr]
        for v in field.type.values
    ]


def _source_items() -> list[lsp.CompletionItem]:
    """The sources after `from`: the kinds, `label NAME`, and the results of earlier calls."""
    items = [lsp.CompletionItem(w, kind=CK.Keyword, detail=d) for w, d in _SOURCES]
    form = FORMS["result"]
    items.append(
        lsp.CompletionItem(
            "result",
            kind=CK.Function,
            detail=form.label,
            documentation=form.doc,
            insert_text="result(",
        )
    )
    return items


def _condition_items(build: Build | None) -> list[lsp.CompletionItem]:
    items = [lsp.CompletionItem(r, kind=CK.Variable) for r in sorted(BUILTIN_ROOTS)]
    items += [
        lsp.CompletionItem(
            f,
            kind=CK.Function,
            detail=FORMS[f].label,
            documentation=FORMS[f].doc,
            insert_text=f"{f}(",
        )
        for f in sorted(FUNCTIONS)
    ]
    resolution = build.result.resolution if build is not None else None
    if resolution is not None:
        items += [
            lsp.CompletionItem(f, kind=CK.Property, detail="fact")
            for f in sorted(resolution.globals.get("fact", {}))
        ]
    return items


def roles(build: Build | None) -> set[str]:
    """The roles the build's own modules (not the standard library) name as approvers
    (`approver role "…"`, `by role "…"`, `escalate role "…"`)."""
    found: set[str] = set()
    resolution = build.result.resolution if build is not None else None
    for module in resolution.modules if resolution is not None else ():
        if module.is_std:
            continue
        for node in walk(module.syntax.items):
            if isinstance(node, s.Approver | s.By) and node.kind == "role":
                found.add(node.value.value)
            elif isinstance(node, s.FailureAction) and node.principal == "role" and node.who:
                found.add(node.who.value)
    return found
