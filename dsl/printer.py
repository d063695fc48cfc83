"""Print syntax trees as canonical `.harness` text: the engine of `harnessc fmt`.

The canonical style. Every choice depends only on the tree, on where its comments sit and on
where the source had blank lines, so formatting is idempotent and never changes the tree.

- Two spaces per block level; `{` ends the line that opens a block and `}` closes it on a line
  of its own; no `;`; one declaration, attribute, field, rule, step or test item per line.
  Empty blocks print `{}`.
- One blank line between top-level declarations, except that consecutive one-line declarations
  (`import`, `connection`, `runtime`, `fact`) stay together unless the source separated them.
  Inside a block, one blank line is kept where the source had at least one (never after `{`).
- Lines aim at 100 columns. A construct that does not fit breaks at its natural points:
  adjacent string parts go one per continuation line, one level deeper; lists of names and
  patterns (`expose`, `packs`, `delegate`, `after`, …) fill each line and continue one level
  deeper; a rule's `when` moves to a continuation line two levels deeper (so it stands apart from
  the rule's options); a condition that still does not fit puts each `or` operand (then each
  `and` operand) on its own line; call arguments, list items and enum values go one per line
  with a trailing comma; records and object types go one entry per line without commas.
  A step keeps its tails (`after`, `when`, `compensation`) on its first line when it fits, on
  continuation lines two levels deeper when only its action fits, and otherwise breaks the
  call's arguments and keeps the tails after the closing `)`. Continuation lines of a `gate`
  condition, a `delegate` goal, a `decide` question and a test's name are two levels deeper.
- Option blocks (rule and `default` options, risk table entries, `operation`, step blocks,
  `rank`, `subagent`) print on one line as `{ a; b }` exactly when they hold at most two items,
  each a simple attribute (no nested block: not a schema, operation or tool), no comment is
  attached inside, and the whole line fits in 100 columns. An `input`/`output` schema prints
  as `{ name: type }` under the same rule with one field. Object types and records print inline
  (`{ a: int, b: string }`) whenever they fit and hold no comment. Other blocks never do.
- Conditions get the fewest parentheses that keep the tree: `not` binds tighter than `and`,
  `and` tighter than `or`; an `and` inside an `and` (an `or` inside an `or`) keeps its
  parentheses, because the parser keeps that nesting as written.
- Strings print with JSON escapes, non-ASCII characters as themselves; adjacent string parts
  stay as written. Comma lists print with `, `; `effects` names with spaces.
- Comments are never lost. A comment on a line of its own leads the next item of its block, or
  stays at the end of the block when no item follows; a comment after an item on the same line
  trails it, and one after the `{` that opens a block stays on the line of the `{` (so a
  `# harnessc: ignore[…]` there keeps silencing that line), two spaces after it (trailing
  comments of consecutive lines at one indentation start in one column, two spaces after the
  longest of those lines); a comment inside a construct that cannot hold it (a condition, call
  arguments, a block header) moves to a line of its own before that construct's item. A
  comment's trailing whitespace is dropped.

`format_source` proves each result: it parses the output again and refuses (H901) unless the
tree and the comments are unchanged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import syntax as s
from .diagnostics import Diagnostic
from .layout import (
    EMPTY,
    HARD,
    INDENT,
    LINE,
    SOFT,
    Choice,
    Doc,
    Fill,
    Flat,
    IfBreak,
    Part,
    Renderer,
    Text,
    Trailing,
    cat,
    group,
    join,
    nest,
)
from .parser import parse_source
from .source import Source

# ---------------------------------------------------------------------------------------------
# Comments: attached to the items (units) of blocks by position, then printed with them.


@dataclass
class _Note:
    leading: list[tuple[s.Comment, bool]] = field(default_factory=list)  # (comment, blank before)
    inner: list[s.Comment] = field(default_factory=list)  # moved out of the item's inside
    trailing: s.Comment | None = None
    blank: bool = False  # a blank line between the item and what precedes it

    @property
    def empty(self) -> bool:
        return not (self.leading or self.inner or self.trailing)


_NO_NOTE = _Note()
_BLANK_LINE = re.compile(r"\n[ \t\r\f;]*\n")


class _Comments:
    """Where each comment of a module goes, and where the source had blank lines."""

    def __init__(self, module: s.Module) -> None:
        self.source = module.span.source
        self.text = self.source.text
        self.notes: dict[int, _Note] = {}
        self.ends: dict[int, list[tuple[s.Comment, bool]]] = {}
        self.openers: dict[int, s.Comment] = {}  # a comment on the line of a block's `{`
        comments = sorted(module.comments, key=lambda c: c.span.start)
        self.comment_starts = {c.span.end: c.span.start for c in comments}  # by end offset
        self._attach(module, module.items, comments, 0)

    def note(self, node: Any) -> _Note:
        return self.notes.get(id(node), _NO_NOTE)

    def end(self, container: Any) -> list[tuple[s.Comment, bool]]:
        return self.ends.get(id(container), [])

    def opener(self, container: Any) -> s.Comment | None:
        return self.openers.get(id(container))

    # -- positions -------------------------------------------------------------------------

    def _line(self, offset: int) -> int:
        return self.source.location(max(offset, 0))[0]

    def _blank(self, start: int, end: int) -> bool:
        return start < end and _BLANK_LINE.search(self.text, start, end) is not None

    def _open_brace_before(self, pos: int) -> int | None:
        """The offset of the `{` when it is the last token before `pos` (a comment's start)."""
        i = pos  # the end of what is looked at
        while i > 0:
            if i in self.comment_starts:
                i = self.comment_starts[i]
                continue
            ch = self.text[i - 1]
            if not (ch.isspace() or ch == ";"):
                return i - 1 if ch == "{" else None
            i -= 1
        return None

    def extent(self, node: Any) -> tuple[int, int]:
        """Start and end offsets of a unit (a block's span includes its closing `}`)."""
        span = node.span
        return span.start, max(span.start, span.end)

    def _attach(
        self, container: Any, units: Sequence[Any], comments: list[s.Comment], start: int
    ) -> None:
        """Attach the comments of one block (`start` is where the block opens)."""
        extents = [self.extent(u) for u in units]
        inner: dict[int, list[s.Comment]] = {}
        leading: dict[int, list[s.Comment]] = {}
        ends: list[s.Comment] = []
        i = 0
        for comment in comments:
            pos = comment.span.start
            while i < len(units) and extents[i][1] <= pos:
                i += 1
            if i < len(units) and extents[i][0] <= pos:
                inner.setdefault(i, []).append(comment)
                continue
            if i > 0 and self._line(extents[i - 1][1] - 1) == self._line(pos):
                self._note(units[i - 1]).trailing = comment
            elif i < len(units):
                leading.setdefault(i, []).append(comment)
            else:
                ends.append(comment)

        anchor = start
        for index, unit in enumerate(units):
            for comment in leading.get(index, ()):
                blank = self._blank(anchor, comment.span.start)
                self._note(unit).leading.append((comment, blank))
                anchor = comment.span.end
            if self._blank(anchor, extents[index][0]):
                self._note(unit).blank = True
            self._attach_inside(unit, inner.get(index, []))
            anchor = extents[index][1]
        for comment in ends:
            blank = self._blank(anchor, comment.span.start)
            self.ends.setdefault(id(container), []).append((comment, blank))
            anchor = comment.span.end

    def _attach_inside(self, unit: Any, comments: list[s.Comment]) -> None:
        block = _block_of(unit)
        if block is None:
            if comments:
                self._note(unit).inner.extend(comments)
            return
        container, children = block
        first = self.extent(children[0])[0] if children else None
        inside: list[s.Comment] = []
        for comment in comments:
            pos = comment.span.start
            brace = None if first is not None and pos >= first else self._open_brace_before(pos)
            if brace is not None and not inside and self._line(brace) == self._line(pos):
                # stays on the line of the `{`: a `# harnessc: ignore[…]` there keeps its line
                self.openers[id(container)] = comment
            elif (first is not None and pos >= first) or brace is not None:
                inside.append(comment)
            else:
                self._note(unit).inner.append(comment)
        self._attach(container, children, inside, unit.span.start)

    def _note(self, node: Any) -> _Note:
        note = self.notes.get(id(node))
        if note is None:
            note = self.notes[id(node)] = _Note()
        return note


def _record_items(record: s.Schema | s.TypeRef) -> tuple[Any, ...]:
    """A record's units: its fields, and the `...` that ends an open one."""
    return (*record.fields, record.rest) if record.rest is not None else record.fields


def _object_type(t: s.TypeRef) -> s.TypeRef | None:
    if t.name == "object":
        return t
    for arg in t.args:
        found = _object_type(arg)
        if found is not None:
            return found
    return None


def _block_of(node: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """The block whose items are units of their own: (the node that keys it, its items)."""
    if isinstance(
        node,
        s.Header
        | s.Tool
        | s.Extend
        | s.Operation
        | s.Surface
        | s.Rank
        | s.Policy
        | s.Mcp
        | s.Skill
        | s.Subagent
        | s.Agent
        | s.Workflow
        | s.Test,
    ):
        return node, node.items
    if isinstance(node, s.RiskTable):
        return node, node.entries
    if isinstance(node, s.PrivateTool):
        return node.tool, node.tool.items
    if isinstance(node, s.SchemaAttr):
        if node.type is not None:
            obj = _object_type(node.type)
            return (obj, _record_items(obj)) if obj is not None else None
        return node.schema, _record_items(node.schema)
    if isinstance(node, s.Field | s.Fact):
        obj = _object_type(node.type) if node.type is not None else None
        return (obj, _record_items(obj)) if obj is not None else None
    if isinstance(node, s.Rule | s.Default | s.RiskEntry | s.Step):
        return (node, node.options) if node.options is not None else None
    if isinstance(node, s.TestRecord):
        return node.record, node.record.entries
    if isinstance(node, s.Entry) and isinstance(node.value, s.Record):
        return node.value, node.value.entries
    return None


# ---------------------------------------------------------------------------------------------
# The printer: one doc per node


_COMMA_LISTS = {"packs", "tags", "labels", "options", "delegate", "tools", "skills"}
_ONE_LINE_DECLS = (s.Import, s.Connection, s.Runtime, s.Fact, s.Label)
_SIMPLE_OPTIONS = (
    s.Attr,
    s.Approver,
    s.Grant,
    s.Requires,
    s.OnSuccess,
    s.By,
    s.Timeout,
    s.Context,
    s.OnFailure,
)
_MAX_INLINE_OPTIONS = 2
_HEADER_INDENT = 2 * INDENT  # continuation lines of a header that opens a block


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _inline_options(items: Sequence[Any]) -> bool:
    return len(items) <= _MAX_INLINE_OPTIONS and all(
        isinstance(item, _SIMPLE_OPTIONS) for item in items
    )


class _Printer:
    def __init__(self, module: s.Module) -> None:
        self.module = module
        self.comments = _Comments(module)

    # -- blocks and comments ---------------------------------------------------------------

    def print_module(self) -> str:
        lines: list[tuple[bool, Doc]] = []
        previous: Any = None
        for item in self.module.items:
            first = len(lines)
            lines.extend(self._unit_lines(item, self._decl(item)))
            if previous is not None and not (
                isinstance(previous, _ONE_LINE_DECLS) and isinstance(item, _ONE_LINE_DECLS)
            ):
                lines[first] = (True, lines[first][1])
            previous = item
        lines.extend((blank, self._comment(c)) for c, blank in self.comments.end(self.module))
        if not lines:
            return ""
        parts: list[Part] = []
        for i, (blank, doc) in enumerate(lines):
            if i:
                parts.append(HARD)
                if blank:
                    parts.append(HARD)
            parts.append(doc)
        return Renderer().render(cat(*parts)) + "\n"

    @staticmethod
    def _comment(comment: s.Comment) -> Doc:
        return Text(comment.text.rstrip(), 0)

    def _unit_lines(self, unit: Any, doc: Doc) -> list[tuple[bool, Doc]]:
        """A unit's lines: its leading comments, then itself with its trailing comment."""
        note = self.comments.note(unit)
        lines = [(blank, self._comment(c)) for c, blank in note.leading]
        blank = note.blank
        for comment in note.inner:
            lines.append((blank, self._comment(comment)))
            blank = False
        if note.trailing is not None:
            doc = cat(doc, Trailing(note.trailing.text.rstrip()))
        lines.append((blank, doc))
        return lines

    def _has_comments(self, container: Any, items: Sequence[Any]) -> bool:
        if self.comments.end(container) or self.comments.opener(container) is not None:
            return True
        return any(
            not self.comments.note(item).empty or self._nested_comments(item) for item in items
        )

    def _nested_comments(self, item: Any) -> bool:
        block = _block_of(item)
        return block is not None and self._has_comments(*block)

    def _block(
        self, container: Any, items: Sequence[Any], doc_of: Any, *, inline: bool, sep: str = ";"
    ) -> Doc:
        ends = self.comments.end(container)
        opener = self.comments.opener(container)
        if not items and not ends and opener is None:
            return cat("{}")
        if inline and not self._has_comments(container, items):
            docs = [doc_of(item) for item in items]
            return group(
                "{",
                nest(INDENT, LINE, *join([IfBreak(EMPTY, cat(sep)), LINE], docs)),
                LINE,
                "}",
            )
        lines: list[tuple[bool, Doc]] = []
        for item in items:
            lines.extend(self._unit_lines(item, doc_of(item)))
        lines.extend((blank, self._comment(c)) for c, blank in ends)
        body: list[Part] = []
        for i, (blank, doc) in enumerate(lines):
            body.append(HARD)
            if blank and i:
                body.append(HARD)
            body.append(doc)
        brace = cat("{", Trailing(opener.text.rstrip())) if opener is not None else cat("{")
        return cat(brace, nest(INDENT, *body), HARD, "}")

    def _items(self, node: Any) -> Doc:
        return self._block(node, node.items, self._item, inline=False)

    def _options(self, node: Any) -> Doc:
        return self._block(node, node.options, self._item, inline=_inline_options(node.options))

    # -- declarations ----------------------------------------------------------------------

    def _decl(self, node: Any) -> Doc:
        if isinstance(node, s.Header):
            return cat("harness ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Import):
            target = _quote(node.target) if node.is_file else node.target
            alias = f" as {node.alias.text}" if node.alias is not None else None
            return cat("import ", target, alias)
        if isinstance(node, s.Connection | s.Runtime):
            keyword = "connection" if isinstance(node, s.Connection) else "runtime"
            return self._described(f"{keyword} {node.name.text}", node.description)
        if isinstance(node, s.Fact):
            head = cat("fact ", node.name.text, ": ", self._type(node.type))
            return self._described(head, node.description)
        if isinstance(node, s.Label):
            return self._described(f"label {node.name.text}", node.description)
        if isinstance(node, s.Tool):
            return self._tool(node)
        if isinstance(node, s.Extend):
            names = nest(INDENT, Fill(tuple(n.text for n in node.tools)))
            return cat("extend tool ", names, " ", self._items(node))
        if isinstance(node, s.Surface):
            return cat("surface ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Policy):
            return cat("policy ", node.name.text, " ", self._items(node))
        if isinstance(node, s.RiskTable):
            block = self._block(node, node.entries, self._item, inline=False)
            return cat("risk_table ", node.name.text, " ", block)
        if isinstance(node, s.Mcp):
            return cat("mcp ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Skill):
            return cat("skill ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Agent):
            return cat("agent ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Workflow):
            return cat("workflow ", node.name.text, " ", self._items(node))
        if isinstance(node, s.Test):
            name = nest(INDENT, self._str(node.name))  # continuation parts stand apart
            return cat("test ", name, " ", self._items(node))
        raise TypeError(f"not a declaration: {type(node).__name__}")

    def _described(self, head: Part, description: s.Str | None) -> Doc:
        if description is None:
            return cat(head)
        return cat(head, " ", self._str(description))

    def _tool(self, node: s.Tool) -> Doc:
        name = _quote(node.name.text) if node.quoted else node.name.text
        return cat("tool ", name, " ", self._items(node))

    # -- block items -----------------------------------------------------------------------

    def _item(self, node: Any) -> Doc:
        if isinstance(node, s.Attr):
            return self._attr(node)
        if isinstance(node, s.SchemaAttr):
            if node.type is not None:
                return cat(node.key, " ", self._type(node.type))
            schema = node.schema
            inline = len(schema.fields) <= 1
            return cat(node.key, " ", self._fields_block(schema, inline))
        if isinstance(node, s.Requires):
            return cat("requires ", self._cond(node.cond))
        if isinstance(node, s.OnSuccess):
            when = cat("when ", self._cond(node.when), " ") if node.when is not None else ""
            value = node.value.text
            if node.var is not None:
                item = f": {node.item.text}" if node.item is not None else ""
                value = f"each {node.var.text} in {value}{item}"
            into = " to " if node.op == "add" else " from "
            key = f"[{node.key.text}]" if node.key is not None else ""
            return cat("on_success ", when, node.op, " ", value, into, node.fact.text, key)
        if isinstance(node, s.Operation):
            block = self._block(node, node.items, self._item, inline=_inline_options(node.items))
            return cat("operation ", node.name.text, " ", block)
        if isinstance(node, s.Tool):
            return self._tool(node)
        if isinstance(node, s.PrivateTool):
            return cat("private ", self._tool(node.tool))
        if isinstance(node, s.Subagent):
            block = self._block(node, node.items, self._item, inline=_inline_options(node.items))
            return cat("subagent ", node.name.text, " ", block)
        if isinstance(node, s.Expose | s.Hide):
            keyword = "expose" if isinstance(node, s.Expose) else "hide"
            return cat(keyword, " ", nest(INDENT, Fill(tuple(p.text for p in node.patterns))))
        if isinstance(node, s.Rank):
            block = self._block(node, node.items, self._item, inline=_inline_options(node.items))
            return cat("rank ", block)
        if isinstance(node, s.Default):
            target = node.effect if node.effect is not None else _name(node.table)
            if node.options is None:
                return cat("default ", target)
            return cat("default ", target, " ", self._options(node))
        if isinstance(node, s.Include):
            return cat("include ", node.policy.text)
        if isinstance(node, s.Rule):
            return self._rule(node)
        if isinstance(node, s.RiskEntry):
            head = f"{node.level.text} {node.effect}"
            if node.options is None:
                return cat(head)
            return cat(head, " ", self._options(node))
        if isinstance(node, s.Approver):
            return cat("approver ", node.kind, " ", self._str(node.value))
        if isinstance(node, s.Grant):
            return self._grant(node)
        if isinstance(node, s.Step):
            return self._step(node)
        if isinstance(node, s.By):
            return cat("by ", node.kind, " ", self._str(node.value))
        if isinstance(node, s.Timeout):
            default = f" default {node.default.text}" if node.default is not None else None
            return cat("timeout ", node.duration.text, default)
        if isinstance(node, s.Context):
            values = [self._value(v) for v in node.values]
            return cat("context ", group(nest(INDENT, *join([",", LINE], values))))
        if isinstance(node, s.OnFailure):
            actions = [self._failure(a) for a in node.actions]
            rest = [cat(LINE, "then ", a) for a in actions[1:]]
            return cat("on_failure ", group(actions[0], nest(INDENT, *rest)))
        if isinstance(node, s.TestCall):
            return cat("call ", node.tool.text, self._args(node.args))
        if isinstance(node, s.TestRecord):
            key = "as actor" if node.key == "actor" else node.key
            return cat(key, " ", self._record(node.record))
        if isinstance(node, s.Said):
            return cat("said ", nest(INDENT, self._str(node.text)))
        if isinstance(node, s.Earlier):
            returns = cat(" returns ", self._value(node.returns)) if node.returns else None
            ago = f" ago {node.ago.text}" if node.ago is not None else None
            return cat("earlier ", node.tool.text, self._args(node.args), returns, ago)
        if isinstance(node, s.Expect):
            details = [cat(" ", self._item(d)) for d in node.details]
            return cat("expect ", node.effect, *details)
        if isinstance(node, s.Field):
            return self._field(node)
        if isinstance(node, s.Entry):
            return self._entry(node)
        raise TypeError(f"not a block item: {type(node).__name__}")

    def _attr(self, node: s.Attr) -> Doc:
        key, values = node.key, node.values
        if key == "legacy":
            return cat("legacy", *(f" replaced_by {_name(v)}" for v in values))
        if key == "dynamic":
            return cat("dynamic provided_by ", *(_name(v) for v in values))
        if key == "recall":
            mode = f"recall {_name(values[0])}"
            return cat(mode, *(f" top {_name(v)}" for v in values[1:]))
        if key in _COMMA_LISTS:
            return cat(key, " ", nest(INDENT, Fill(tuple(_name(v) for v in values))))
        parts: list[Part] = [key]
        for value in values:
            parts.extend((" ", self._value(value)))
        return cat(*parts)

    def _rule(self, node: s.Rule) -> Doc:
        head = f"{node.label.text}: {node.effect} " if node.label else f"{node.effect} "
        selectors = Fill(tuple(_selector(sel) for sel in node.selectors))
        when = None
        if node.when is not None:
            when = nest(_HEADER_INDENT, LINE, "when ", self._cond(node.when))
        header = group(head, nest(_HEADER_INDENT, selectors), when)
        if node.options is None:
            return header
        return cat(header, " ", self._options(node))

    def _grant(self, node: s.Grant) -> Doc:
        parts: list[Part] = ["grant ", node.scope]
        if node.selector is not None:
            parts.append(f" {node.selector.text}")
        if node.when is not None:
            parts.extend((" when ", self._cond(node.when)))
        parts.append(f" ttl {node.ttl.text}")
        return cat(*parts)

    def _failure(self, node: s.FailureAction) -> Doc:
        if node.kind == "retry":
            backoff = f" backoff {node.backoff.text}" if node.backoff is not None else None
            return cat("retry ", _name(node.count), backoff)
        if node.kind == "compensate":
            return cat("compensate ", _name(node.target))
        assert node.who is not None
        return cat("escalate ", str(node.principal), " ", self._str(node.who))

    def _step(self, node: s.Step) -> Doc:
        head = f"step {node.name.text} = "
        action = node.action
        if isinstance(action, s.CallAction):
            action_doc = cat("call ", action.tool.text, self._args(action.args))
        # Other actions continue two levels deeper, apart from the step's block; a call's broken
        # arguments go one level deeper and its `)` closes them at the step's level.
        elif isinstance(action, s.DelegateAction):
            goal = nest(INDENT, self._str(action.goal))
            action_doc = cat("delegate ", action.agent.text, " ", goal)
        elif isinstance(action, s.DecideAction):
            action_doc = cat("decide ", nest(INDENT, self._str(action.question)))
        else:
            action_doc = cat("gate ", nest(INDENT, self._cond(action.cond)))
        tails: list[Doc] = []
        if node.after:
            tails.append(cat("after ", nest(INDENT, Fill(tuple(n.text for n in node.after)))))
        if node.when is not None:
            tails.append(cat("when ", self._cond(node.when)))
        if node.compensation:
            tails.append(cat("compensation"))
        if not tails:
            header = cat(head, action_doc)
        else:
            options: list[Doc] = [
                Flat(cat(head, action_doc, *(cat(" ", t) for t in tails))),
                cat(
                    head,
                    Flat(action_doc),
                    nest(_HEADER_INDENT, *(cat(HARD, t) for t in tails)),
                ),
            ]
            if isinstance(action, s.CallAction) and action.args:
                options.append(cat(head, action_doc, *(cat(" ", t) for t in tails)))
            else:
                options.append(
                    cat(head, action_doc, nest(_HEADER_INDENT, *(cat(HARD, t) for t in tails)))
                )
            header = Choice(tuple(options))
        if node.options is None:
            return header
        return cat(header, " ", self._options(node))

    def _args(self, args: Sequence[s.Arg]) -> Doc:
        if not args:
            return cat("()")
        docs = [cat(arg.name.text, ": ", self._value(arg.value)) for arg in args]
        return group(
            "(",
            nest(INDENT, SOFT, *join([",", LINE], docs)),
            IfBreak(cat(","), EMPTY),
            SOFT,
            ")",
        )

    # -- schemas ---------------------------------------------------------------------------

    def _fields_block(self, record: s.Schema | s.TypeRef, inline: bool) -> Doc:
        """A record's block: its fields, and `...` last when it is open."""
        items = _record_items(record)
        return self._block(record, items, self._record_item, inline=inline, sep=",")

    def _record_item(self, node: Any) -> Doc:
        return cat("...") if isinstance(node, s.Rest) else self._field(node)

    def _field(self, node: s.Field) -> Doc:
        parts: list[Part] = [node.name.text, ":"]
        if node.type is not None:
            parts.extend((" ", self._type(node.type)))
        for constraint in node.constraints:
            parts.append(f" {constraint.kind}")
            if constraint.value is not None:
                parts.extend((" ", self._value(constraint.value)))
        return cat(*parts)

    def _type(self, t: s.TypeRef) -> Doc:
        mark = "?" if t.optional else None
        if t.name in ("list", "map") and len(t.args) == 1:
            return cat(t.name, "<", self._type(t.args[0]), ">", mark)
        if t.name == "enum" and t.values:
            values = [self._str(v) for v in t.values]
            return cat(
                group(
                    "enum(",
                    nest(INDENT, SOFT, *join([",", LINE], values)),
                    IfBreak(cat(","), EMPTY),
                    SOFT,
                    ")",
                ),
                mark,
            )
        if t.name == "object":
            return cat(self._fields_block(t, True), mark)
        if t.name == "union":
            return cat(*join([" | "], [self._type(a) for a in t.args]), mark)
        return cat(t.name, mark)

    # -- conditions and values -------------------------------------------------------------

    def _cond(self, c: Any) -> Doc:
        if isinstance(c, s.Or | s.And):
            word = "or " if isinstance(c, s.Or) else "and "
            items = [self._operand_cond(item, c) for item in c.items]
            rest = [cat(LINE, word, item) for item in items[1:]]
            return group(items[0], nest(INDENT, *rest))
        if isinstance(c, s.Not):
            return cat("not ", self._operand_cond(c.item, c))
        if isinstance(c, s.Compare):
            return cat(self._value(c.left), f" {c.op} ", self._value(c.right))
        if isinstance(c, s.Provenance):
            label = f" {c.label.text}" if c.label is not None else None
            only = " only" if c.only else None
            source = self._value(c.call) if c.call is not None else cat(c.source.text)
            return cat(self._value(c.value), " from ", source, label, only)
        if isinstance(c, s.Quantified):
            head = f"{c.quantifier} {c.var.text} in "
            body = self._cond(c.body)
            if isinstance(c.body, s.Or | s.And):
                body = cat("(", body, ")")
            return group(head, self._value(c.over), ":", nest(INDENT, LINE, body))
        return self._value(c)

    def _operand_cond(self, child: Any, parent: Any) -> Doc:
        # `not` takes a `not` or an atom; `and` takes those; `or` takes an `and` too. A same-kind
        # child came from parentheses (the parser flattens chains), so it keeps them.
        if isinstance(child, s.Or) or (isinstance(child, s.And) and not isinstance(parent, s.Or)):
            return cat("(", self._cond(child), ")")
        return self._cond(child)

    def _value(self, v: Any) -> Doc:
        if isinstance(v, s.Str):
            return self._str(v)
        if isinstance(v, s.Name | s.Path | s.Pattern | s.Float | s.Duration):
            return cat(v.text)
        if isinstance(v, s.Int):
            return cat(str(v.value))
        if isinstance(v, s.Bool):
            return cat("true" if v.value else "false")
        if isinstance(v, s.Index):
            return cat(self._value(v.of), "[", self._value(v.key), "]")
        if isinstance(v, s.FuncCall):
            if not v.args:
                return cat(v.name.text, "()")
            args = [self._value(a) for a in v.args]
            tail: list[Part] = []
            if v.of:
                patterns = [cat(p.text) for p in v.of]
                tail.append(cat(LINE, "of ", *join([",", LINE], patterns)))
            if v.window is not None:
                tail.append(cat(LINE, "within ", self._value(v.window)))
            if v.when is not None:
                tail.append(cat(LINE, "when ", self._cond(v.when)))
            return group(
                v.name.text, "(", nest(INDENT, SOFT, *join([",", LINE], args), *tail), SOFT, ")"
            )
        if isinstance(v, s.ListLit):
            if not v.items:
                return cat("[]")
            items = [self._value(item) for item in v.items]
            return group(
                "[",
                nest(INDENT, SOFT, *join([",", LINE], items)),
                IfBreak(cat(","), EMPTY),
                SOFT,
                "]",
            )
        if isinstance(v, s.Record):
            return self._record(v)
        raise TypeError(f"not a value: {type(v).__name__}")

    def _record(self, record: s.Record) -> Doc:
        return self._block(record, record.entries, self._entry, inline=True, sep=",")

    def _entry(self, entry: s.Entry) -> Doc:
        return cat(entry.key.text, ": ", self._value(entry.value))

    def _str(self, v: s.Str) -> Doc:
        parts = [_quote(p) for p in v.parts] or ['""']
        if len(parts) == 1:
            return cat(parts[0])
        return group(parts[0], nest(INDENT, *(cat(LINE, p) for p in parts[1:])))


def _name(v: Any) -> str:
    if isinstance(v, s.Int):
        return str(v.value)
    return str(v.text)


def _selector(sel: Any) -> str:
    if isinstance(sel, s.RiskSelector):
        return f"risk {sel.op} {sel.level.text}"
    if isinstance(sel, s.EffectsSelector):
        return f"effects has {sel.effect.text}"
    return str(sel.text)


# ---------------------------------------------------------------------------------------------
# Entry points


def format_module(module: s.Module) -> str:
    """The canonical text of a module, its comments included.

    >>> from harnessc.dsl.parser import parse_source
    >>> from harnessc.dsl.source import Source
    >>> print(format_module(parse_source(Source("a.harness", "agent a{policy p;}")).module), end="")
    agent a {
      policy p
    }
    """
    return _Printer(module).print_module()


@dataclass(frozen=True, slots=True)
class FormatResult:
    """The formatted text (None when the source does not parse or formatting was refused)."""

    text: str | None
    changed: bool
    diagnostics: tuple[Diagnostic, ...] = ()


def comment_texts(module: s.Module) -> Counter[str]:
    """The multiset of a module's comments, as the formatter keeps them."""
    return Counter(c.text.rstrip() for c in module.comments)


def format_source(source: Source) -> FormatResult:
    """Parse, format, and prove the result: it must parse to an equal tree with the same comments.

    >>> from harnessc.dsl.source import Source
    >>> result = format_source(Source("a.harness", "connection  github"))
    >>> result.text, result.changed
    ('connection github\\n', True)
    """
    parsed = parse_source(source)
    if not parsed.ok:
        return FormatResult(None, False, parsed.diagnostics)
    try:
        text = format_module(parsed.module)
    except Exception as error:  # a crash here is our bug: report it, never a traceback
        return FormatResult(None, False, (*parsed.diagnostics, _crashed(source, error)))
    again = parse_source(Source(source.path, text))
    if (
        not again.ok
        or again.module != parsed.module
        or comment_texts(again.module) != comment_texts(parsed.module)
    ):
        return FormatResult(None, False, (*parsed.diagnostics, _changed(source, parsed, again)))
    return FormatResult(text, text != source.text, parsed.diagnostics)


_REPORT = "please report this with the file; until it is fixed, leave the file as it is"


def _changed(source: Source, before: Any, after: Any) -> Diagnostic:
    span = None
    what = "comments"
    if not after.ok:
        what = "syntax"
    else:
        old, new = before.module.items, after.module.items
        for i, item in enumerate(old):
            if i >= len(new) or new[i] != item:
                span = item.span
                what = "declaration"
                break
        else:
            if len(new) != len(old):
                what = "declarations"
    return Diagnostic.make(
        "H901",
        f"the formatter changed the meaning of `{source.path}`; this is a bug in harnessc",
        span,
        "formatting changes this declaration" if span is not None else "",
        notes=(f"the formatted text differs from the original in its {what}",),
        help=_REPORT,
        path=source.path,
    )


def _crashed(source: Source, error: Exception) -> Diagnostic:
    return Diagnostic.make(
        "H901",
        f"the formatter failed on `{source.path}`; this is a bug in harnessc",
        None,
        notes=(f"internal error: {type(error).__name__}: {error}",),
        help=_REPORT,
        path=source.path,
    )
