"""Completion that survives half-typed code: in every example, after every line, half of the
next line is typed on a line of its own; completion at the start of the line after it (a new
item of the block) is what it is without the half-typed line. Half lines that open a bracket
or end so that the next line continues them (`,`, `when`, `==`, `:`) are left out: the next
line is then part of their statement, as the parser reads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from harnessc.compiler.lsp.complete import complete

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.harness"))
CONTINUED = re.compile(
    r"(?:[,(\[{=<>!:]|\b(?:and|or|not|when|in|has|matches|within|of|from|requires))\s*(?:#.*)?$"
)

CONTINUING = re.compile(r"\s*(?:when|and|or|not|[,=<>!])(?:\s|$)")


def labels(text: str, offset: int) -> list[str]:
    return [item.label for item in complete(None, None, text, offset)]


def opens(line: str) -> bool:
    code = re.sub(r'"[^"]*"?|#.*', "", line)
    return any(code.count(a) != code.count(b) for a, b in ("{}", "()", "[]"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_half_typed_line_leaves_completion_in_the_next_item_as_it_was(example: Path) -> None:
    text = example.read_text(encoding="utf-8")
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    probed = 0
    for index in range(1, len(lines) - 1):
        line, before = lines[index], lines[index - 1]
        if not line.strip() or line.lstrip().startswith("#") or not line.startswith(" "):
            continue  # a new item of a block, typed on its own line
        if CONTINUED.search(before) or opens(before) or CONTINUING.match(line):
            continue  # the line continues the one before, or is the first of its block
        half = line[: len(line.rstrip()) // 2]
        if not half.strip() or CONTINUED.search(half) or opens(half):
            continue
        probe = starts[index] + len(line) - len(line.lstrip())
        typed = text[: starts[index]] + half + "\n" + text[starts[index] :]
        expected = labels(text, probe)
        assert labels(typed, probe + len(half) + 1) == expected, (
            f"line {index + 1} with {half.strip()!r} typed before it"
        )
        probed += 1
    assert probed > 0


def test_a_half_typed_rule_leaves_the_next_rules_block_its_options() -> None:
    whole = (
        "tool t {\n"
        '  summary "s"\n'
        '  use_when "u"\n'
        "}\n\n"
        "policy p {\n"
        "  default deny\n"
        "  first: allow t\n"
        "  second: ask t {\n"
        "    \n"
        "  }\n"
        "}\n"
    )
    cursor = whole.index("    \n") + 4
    expected = labels(whole, cursor)
    assert "approver" in expected and "reason" in expected
    for half in ("  first: al", "  first: allow t when args.", "  first: allow t when a =="):
        typed = whole.replace("  first: allow t\n", half + "\n")
        assert labels(typed, cursor + len(half) - len("  first: allow t")) == expected, half
