"""Print-then-parse is the identity: random valid trees survive the formatter, and so do comments.

The trees come from tests/strategies.py. Each property runs a fixed, derandomized budget of
examples so that the file stays deterministic and runs in about ten seconds.
"""

from __future__ import annotations

import itertools

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import debug_tokens
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import comment_texts, format_module, format_source
from harnessc.dsl.source import Source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import strategies
from .budget import examples

_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def _parse(text: str) -> s.Module:
    result = parse_source(Source("t.harness", text))
    assert result.ok, (text, result.diagnostics)
    return result.module


def _check_formats(text: str, module: s.Module) -> None:
    """`text` formats to a tree equal to `module`, keeps its comments, and is then stable."""
    result = format_source(Source("t.harness", text))
    assert result.text is not None, (text, result.diagnostics)
    formatted = _parse(result.text)
    assert formatted == module, (text, result.text)
    assert comment_texts(formatted) == comment_texts(_parse(text))
    again = format_source(Source("t.harness", result.text))
    assert again.text == result.text, (text, result.text)
    assert not again.changed


@settings(max_examples=examples(700), **_SETTINGS)
@given(strategies.modules)
def test_printing_then_parsing_gives_the_same_tree(module: s.Module) -> None:
    text = format_module(module)
    parsed = _parse(text)
    assert parsed == module, text
    assert format_module(parsed) == text


@settings(max_examples=examples(150), **_SETTINGS)
@given(strategies.modules, st.data())
def test_comments_and_blank_lines_between_lines_survive(
    module: s.Module, data: st.DataObject
) -> None:
    lines = []
    for i, line in enumerate(format_module(module).split("\n")):
        kind = data.draw(st.sampled_from(("", "", "", "trailing", "own", "both", "blank")))
        if kind in ("own", "both"):
            lines.append(f"# own {i}")
        if kind == "blank":
            lines.append("")
        lines.append(line + (f"  # trailing {i}" if kind in ("trailing", "both") else ""))
    _check_formats("\n".join(lines), module)


@settings(max_examples=examples(150), **_SETTINGS)
@given(strategies.modules, st.data())
def test_comments_between_any_two_tokens_survive(module: s.Module, data: st.DataObject) -> None:
    """A comment (and its line break) wherever a line break may go: inside conditions, call
    arguments, block headers, empty blocks. Not between a key and its `:`, which must touch."""
    text = format_module(module)
    tokens = [t for t in debug_tokens(Source("t.harness", text)) if not t.startswith("#")]
    gaps = [a.end_pos for a, b in itertools.pairwise(tokens) if b != ":"]
    chosen = data.draw(st.lists(st.sampled_from([*gaps, len(text)]), max_size=6, unique=True))
    for i, pos in enumerate(sorted(chosen, reverse=True)):
        text = f"{text[:pos]} # c{i}\n{text[pos:]}"
    _check_formats(text, module)
