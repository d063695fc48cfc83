"""L026: a path compared as text, where `..` and repeated slashes walk around the comparison."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime import model as m

from .framework import LintContext, lint_rule

__all__ = ["field_at", "nodes_of", "path_like", "rule_conditions", "type_at"]

TEXT_OPERATORS = frozenset({"startswith", "endswith", "==", "!="})
"""The comparisons that read a `string` as text (`within` on a `string` is normalized too)."""

_FILES = """\
tool files.read {
  summary "Read a file of the repository."
  use_when "Looking at a file's content."
  effects read
  risk low
  input { file: %s }
}
"""


def path_like(text: str) -> bool:
    """Whether a literal looks like a file path: absolute, relative to `.`, `..` or `~`, or
    stepping up with `/../` somewhere inside."""
    return text.startswith(("/", "./", "../", "~/")) or "/../" in text


def type_at(tool: m.Tool, parts: tuple[str, ...]) -> m.Type | None:
    """The type of `args.A.B…` in a tool's input, or None when it has no such field."""
    found = field_at(tool, parts)
    return found.type if found is not None else None


def field_at(tool: m.Tool, parts: tuple[str, ...]) -> m.Field | None:
    """The field `args.A.B…` of a tool's input, or None when it has no such field."""
    fields = tool.input.fields
    found: m.Field | None = None
    for part in parts:
        found = next((f for f in fields if f.name == part), None)
        if found is None:
            return None
        fields = found.type.fields
    return found


def rule_conditions(ctx: LintContext) -> Iterator[tuple[m.Rule, list[m.Tool], object]]:
    """Every rule's condition and its grants' conditions as written, with the tools the rule
    selects."""
    for rule, node in ctx.rules():
        if node is None:
            continue
        tools = [t for selector in rule.selectors for t in ctx.selected_tools(selector)]
        whens = [node.when, *(getattr(option, "when", None) for option in node.options or ())]
        for when in whens:
            if when is not None:
                yield rule, tools, when


def nodes_of(condition: object) -> Iterator[s.Node]:
    """Every syntax node inside a condition (itself included)."""
    stack = [condition]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
        elif isinstance(item, s.Node):
            yield item
            stack.extend(getattr(item, name) for name in s.child_fields(type(item)))


def _compares(condition: object) -> Iterator[s.Compare]:
    return (n for n in nodes_of(condition) if isinstance(n, s.Compare))


@lint_rule(
    "L026",
    bad=_FILES % "string"
    + """
policy repo {
  default deny
  secrets: deny files.read when args.file startswith "/repo/secret" {
    reason "the secrets stay in the repository"
  }
  reads: allow files.read
}
""",
    good=_FILES % "path"
    + """
policy repo {
  default deny
  secrets: deny files.read when args.file within "/repo/secret" {
    reason "the secrets stay in the repository"
  }
  reads: allow files.read
}
""",
)
def path_compared_as_text(ctx: LintContext) -> Iterator[Diagnostic]:
    for _rule, tools, condition in rule_conditions(ctx):
        for compare in _compares(condition):
            found = _text_comparison(compare)
            if found is None:
                continue
            argument, literal = found
            texts = [
                t.id
                for t in tools
                if (kind := type_at(t, argument.parts[1:])) is not None and kind.name == "string"
            ]
            if not texts:
                continue
            shown = ", ".join(f"`{i}`" for i in sorted(set(texts))[:3])
            yield Diagnostic.make(
                "L026",
                f"`{argument.text}` is a `string`: `{compare.op}` compares it with the path "
                f"`{literal.value}` as text",
                compare.span,
                "compared as text",
                notes=[
                    f"`{argument.text}` is a `string` in {shown}: `..` and repeated slashes "
                    "name the same file in another text (`/a/b/../c` is `/a/c`)"
                ],
                help=f"declare `{argument.parts[-1]}` as `path` (normalized before any "
                "condition reads it) and compare with `within`",
            )


def _text_comparison(compare: s.Compare) -> tuple[s.Path, s.Str] | None:
    """`args.X OP "LITERAL"` (either way round) with a text operator and a path-like literal."""
    if compare.op not in TEXT_OPERATORS:
        return None
    for argument, literal in ((compare.left, compare.right), (compare.right, compare.left)):
        if (
            isinstance(argument, s.Path)
            and isinstance(literal, s.Str)
            and argument.parts[0] == "args"
            and len(argument.parts) > 1
            and path_like(literal.value)
        ):
            return argument, literal
    return None
