"""Formatting as small edits: the line diff's hunks, applied, give the new text exactly, for any
two texts (hypothesis), and on a 20,000-line spec the formatter's edits replace only the lines
that change, found without a quadratic diff."""

from __future__ import annotations

from itertools import pairwise

from harnessc.compiler.lsp.edits import Hunk, line_hunks, split_lines
from harnessc.compiler.lsp.positions import line_starts
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from hypothesis import given, settings
from hypothesis import strategies as st


def applied(old: list[str], new: list[str], hunks: list[Hunk]) -> list[str]:
    out: list[str] = []
    at = 0
    for hunk in hunks:
        assert hunk.old_start >= at, "hunks in order, none overlapping"
        out += old[at : hunk.old_start] + new[hunk.new_start : hunk.new_end]
        at = hunk.old_end
    return out + old[at:]


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "}\n", "\n", "x"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(old=lines, new=lines)
def test_hunks_applied_give_the_new_lines(old: list[str], new: list[str]) -> None:
    hunks = line_hunks(old, new)
    assert applied(old, new, hunks) == new
    for hunk, after in pairwise(hunks):
        assert hunk.old_end < after.old_start or hunk.new_end < after.new_start


@settings(max_examples=200, deadline=None)
@given(old=lines, edits=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["q\n", ""]))))
def test_a_few_changed_lines_give_a_few_small_hunks(
    old: list[str], edits: list[tuple[int, str]]
) -> None:
    new = list(old)
    for at, line in edits:
        if at < len(new):
            new[at : at + 1] = [line] if line else []
    hunks = line_hunks(old, new)
    assert applied(old, new, hunks) == new
    assert sum(h.old_end - h.old_start for h in hunks) <= max(len(old), 1)


def test_text_split_into_lines_with_their_breaks() -> None:
    text = "a\r\nb\rc\n\nd"
    assert split_lines(text, line_starts(text)) == ["a\r\n", "b\r", "c\n", "\n", "d"]
    assert split_lines("a\n", line_starts("a\n")) == ["a\n"]
    assert split_lines("", line_starts("")) == []


def test_the_edits_of_a_20000_line_spec_are_its_changed_lines() -> None:
    text = 'harness big { version "1.0.0" }\n' + "".join(
        f'tool t{i}.run {{\n  summary   "Run {i}."\n  use_when "Now."\n  effects read\n}}\n'
        for i in range(4000)
    )
    formatted = format_source(Source("big.harness", text)).text
    assert formatted is not None
    old = split_lines(text, line_starts(text))
    new = split_lines(formatted, line_starts(formatted))
    assert len(old) > 20_000
    hunks = line_hunks(old, new)
    assert applied(old, new, hunks) == new
    # the header and each summary replaced, a blank line inserted between tools: no line that
    # stays the same is replaced
    assert sum(h.old_end - h.old_start for h in hunks) == 1 + 4000
    assert sum(h.new_end - h.new_start for h in hunks) == 4 + 4000 + 3999
