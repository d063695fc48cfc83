"""A spec's limits (dsl/files.py): rules, expression nodes, one condition's nodes.

Each is refused with its diagnostic where it is crossed, while the file is parsed, before any
later stage runs; the times are measured in bench/limits.py, never asserted here. Most tests
lower a limit so that their specs stay small; one crosses the real limit of a condition, as the
20,000 `and`s that were still being checked after two minutes did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harnessc.compiler.pipeline import check
from harnessc.dsl import builder, files
from harnessc.dsl import syntax as s
from harnessc.dsl.parser import parse_source
from harnessc.dsl.render_formats import render
from harnessc.dsl.source import Source

from .conftest import ROOT

TOOL = (
    'tool t {\n  summary "T."\n  use_when "T."\n  effects read\n  risk low\n  input { n: int }\n}\n'
)
HEAD_LINES = TOOL.count("\n") + 2  # the tool, `policy p {`, `default deny`


def policy(rules: list[str]) -> str:
    return TOOL + "policy p {\n  default deny\n" + "".join(f"  {r}\n" for r in rules) + "}\n"


def write(tmp_path: Path, text: str, name: str = "spec.harness") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def codes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in result.diagnostics]


def at(result) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    primary = result.diagnostics[0].primary
    assert primary is not None
    return primary.span.source.location(primary.span.start)


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 rules, 300 expression nodes, 50 in a condition: the same code paths, small specs."""
    for module in ("harnessc.dsl.builder", "harnessc.compiler.modules"):
        monkeypatch.setattr(f"{module}.MAX_RULES", 100, raising=False)
        monkeypatch.setattr(f"{module}.MAX_EXPRESSION_NODES", 300, raising=False)
    monkeypatch.setattr("harnessc.dsl.builder.MAX_CONDITION_NODES", 50)


def test_the_limits_are_as_documented() -> None:
    assert (files.MAX_RULES, files.MAX_EXPRESSION_NODES, files.MAX_CONDITION_NODES) == (
        50_000,
        100_000,
        10_000,
    )
    assert builder.MAX_RULES == files.MAX_RULES
    docs = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    for figure in ("50,000 rules", "100,000 expression nodes", "10,000 expression nodes"):
        assert figure in docs


def test_a_rule_of_20000_ands_is_refused_at_its_condition(tmp_path: Path) -> None:
    condition = " and ".join(f"args.n != {i}" for i in range(20_000))
    result = check([write(tmp_path, policy([f"allow t when {condition}"]))])
    assert codes(result) == ["H012"], render(result.diagnostics, "plain")
    assert at(result) == (HEAD_LINES + 1, len("  allow t when ") + 1)
    diagnostic = result.diagnostics[0]
    assert "more than 10,000 expression nodes" in diagnostic.message
    assert diagnostic.help and "in [...]" in diagnostic.help
    assert "60,001" in diagnostic.primary.message  # type: ignore[union-attr]


def test_rules_past_the_limit_are_refused_at_the_first_one_past(
    tmp_path: Path, small_limits: None
) -> None:
    under = check([write(tmp_path, policy([f"r{i}: allow t" for i in range(100)]))])
    assert under.ok, render(under.diagnostics, "plain")
    over = check([write(tmp_path, policy([f"r{i}: allow t" for i in range(150)]))])
    assert codes(over) == ["H010"], render(over.diagnostics, "plain")
    assert at(over) == (HEAD_LINES + 101, 3)
    assert "more than 100 rules" in over.diagnostics[0].message


def test_expression_nodes_past_the_limit_are_refused_where_they_cross(
    tmp_path: Path, small_limits: None
) -> None:
    # three nodes a rule (the comparison, `args.n`, the number)
    rules = [f"allow t when args.n == {i}" for i in range(100)]
    assert check([write(tmp_path, policy(rules))]).ok
    over = check([write(tmp_path, policy([*rules, "allow t when args.n == 100"]))])
    assert codes(over) == ["H011"], render(over.diagnostics, "plain")
    # the 301st node is the first built of rule 101: `args.n`
    assert at(over) == (HEAD_LINES + 101, len("  allow t when ") + 1)


def test_the_limits_hold_for_a_spec_and_its_imports(tmp_path: Path, small_limits: None) -> None:
    for part in ("a", "b"):
        rules = "".join(f"  {part}{i}: allow t{part}\n" for i in range(60))
        tool = TOOL.replace("tool t ", f"tool t{part} ")
        write(tmp_path, f"{tool}policy p{part} {{\n  default deny\n{rules}}}\n", f"{part}.harness")
    alone = check([tmp_path / "a.harness"])
    assert alone.ok, render(alone.diagnostics, "plain")
    main = write(tmp_path, 'import "./a.harness"\nimport "./b.harness"\n', "main.harness")
    result = check([main])
    assert codes(result) == ["H010"], render(result.diagnostics, "plain")
    assert at(result) == (2, 8)  # the import that brings the spec past the limit
    assert "brings it to 120" in result.diagnostics[0].message


def test_a_grant_or_requires_condition_is_limited_too(tmp_path: Path, small_limits: None) -> None:
    long = " or ".join(f"args.n == {i}" for i in range(20))
    text = TOOL.replace("risk low\n", f"risk low\n  requires {long}\n")
    result = check([write(tmp_path, text)])
    assert codes(result) == ["H012"], render(result.diagnostics, "plain")


def test_parsing_counts_the_nodes_the_documented_walk_counts() -> None:
    """The parser counts expression nodes as it builds them; `expression_size` is what the
    docs define: they agree on the example specs."""
    for spec in sorted((ROOT / "examples").glob("*/*.harness")):
        module = parse_source(Source(spec.name, spec.read_text(encoding="utf-8"))).module
        rules = sum(
            isinstance(rule, s.Rule)
            for item in module.items
            if isinstance(item, s.Policy)
            for rule in item.items
        )
        assert module.sizes == (rules, s.expression_size(module.items)), spec.name


@pytest.mark.parametrize("kind", ["list", "map"])
def test_types_nested_past_the_limit_are_refused_not_an_internal_error(
    tmp_path: Path, kind: str
) -> None:
    """`list<list<…>>` 3,000 deep reached the recursive stages: a RecursionError (H901)."""
    deep = f"{kind}<" * 3_000 + "string" + ">" * 3_000
    result = check([write(tmp_path, TOOL.replace("n: int", f"n: {deep}"))])
    assert codes(result) == ["H108"], render(result.diagnostics, "plain")
    assert "level 65 opens here" in render(result.diagnostics, "plain")


def test_a_comparison_is_no_angle_bracket(tmp_path: Path) -> None:
    """`>` closes a type's angle bracket only while one is open; `args.list < 1` opens none."""
    comparisons = " and ".join(f"args.n > {i}" for i in range(70))
    text = policy([f"allow t when ((({comparisons})))"])
    assert check([write(tmp_path, text)]).ok
