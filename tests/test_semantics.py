"""Every condition operator the grammar accepts has every part of its meaning, in one table.

The operators come from the grammar's `compare_op` rule, read from `dsl/harness.lark`, so an
operator added there fails here until the table (runtime/model/semantics.py), the model, the z3
encoding, the compiled conditions and the language reference all know it.
"""

from __future__ import annotations

import doctest
import re
import typing as t
from pathlib import Path as FilePath
from types import SimpleNamespace
from typing import Any

import pytest
from harnessc.compiler.analysis import smt
from harnessc.runtime.judge import conditions
from harnessc.runtime.judge.conditions import Scope, compile_conditions, evaluate
from harnessc.runtime.model import (
    Compare,
    EnumMember,
    ListValue,
    Literal,
    Path,
    RecordValue,
    semantics,
)
from harnessc.runtime.model.semantics import OPERATORS
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples

ROOT = FilePath(__file__).resolve().parent.parent


def grammar_operators() -> list[str]:
    text = (ROOT / "dsl" / "harness.lark").read_text(encoding="utf-8")
    rule = re.search(r"^!?compare_op:(.*?)(?=^\S|^\s*$)", text, re.M | re.S)
    assert rule is not None, "the grammar has no rule `compare_op`"
    return re.findall(r'"([^"]+)"', rule.group(1))


GRAMMAR_OPS = grammar_operators()


def test_the_grammar_has_operators() -> None:
    assert len(GRAMMAR_OPS) >= 11
    assert len(set(GRAMMAR_OPS)) == len(GRAMMAR_OPS)


def test_the_table_has_exactly_the_grammars_operators() -> None:
    assert list(OPERATORS) == GRAMMAR_OPS


def test_the_models_compare_op_is_the_tables() -> None:
    annotation = Compare.model_fields["op"].annotation
    assert list(t.get_args(annotation)) == list(OPERATORS)


@pytest.mark.parametrize("op", GRAMMAR_OPS)
def test_every_operator_is_complete(op: str) -> None:
    entry = OPERATORS[op]
    assert entry.spelling == op
    typing = entry.typing
    assert typing.family in t.get_args(semantics.Family)
    if typing.family in ("order", "text"):
        assert typing.left and typing.help
    if typing.family == "text":
        assert typing.right and typing.wanted
    if typing.family == "has":
        assert typing.help
    assert callable(entry.helper) and callable(entry.evaluate) and callable(entry.concrete)
    assert getattr(semantics, entry.runtime_name) is entry.helper
    assert entry.runtime_name in semantics.__all__
    # compiled conditions call it by its name in their namespace
    assert conditions.helpers()[entry.helper_name] is entry.helper
    assert entry.smt
    if entry.mirror is not None:
        assert OPERATORS[entry.mirror].mirror == op
    if typing.family in ("equality", "order"):
        assert entry.relation is not None


@pytest.mark.parametrize("op", GRAMMAR_OPS)
def test_the_smt_encoding_handles_every_operator(op: str) -> None:
    assert OPERATORS[op].smt in smt.ENCODINGS


def test_the_smt_encoding_has_no_key_the_table_lacks() -> None:
    assert set(smt.ENCODINGS) == {o.smt for o in OPERATORS.values()}


# text operators whose z3 encoding is more than one relation of z3's string theory: a regular
# expression (`matches`) and containment by whole path segments (`within`), written in smt.py
ENCODED_BY_HAND = {"matches", "within"}
TEXT_OPS = [op for op in GRAMMAR_OPS if OPERATORS[op].family == "text"]


@pytest.mark.parametrize("op", TEXT_OPS)
def test_the_help_for_a_refused_text_operand_names_every_text_operator(op: str) -> None:
    assert f"`{op}`" in OPERATORS[op].typing.help


@pytest.mark.parametrize("op", TEXT_OPS)
def test_a_text_operator_has_its_z3_relation(op: str) -> None:
    assert (OPERATORS[op].smt_text is None) == (op in ENCODED_BY_HAND)


@pytest.mark.parametrize("op", [op for op in TEXT_OPS if op not in ENCODED_BY_HAND])
@settings(max_examples=examples(60), deadline=None)
@given(left=st.text("ab/", max_size=4), right=st.text("ab/", max_size=3))
def test_the_z3_relation_of_a_text_operator_is_its_meaning(op: str, left: str, right: str) -> None:
    z3 = pytest.importorskip("z3")
    entry = OPERATORS[op]
    assert entry.smt_text is not None
    term = z3.simplify(entry.smt_text(z3, z3.StringVal(left), z3.StringVal(right)))
    assert z3.is_true(term) == entry.concrete(left, right, "number") == entry.helper(left, right)


@pytest.mark.parametrize("op", GRAMMAR_OPS)
def test_the_language_reference_documents_every_operator(op: str) -> None:
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    assert f"`{op}`" in text or f"`{op} " in text


@pytest.mark.parametrize("module", [semantics, conditions])
def test_the_examples_run(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Compiled conditions agree with the interpreter, operator by operator

WORDS = ["", "a", "b", "/repo", "/repo/a", "/repo/../x", "/repository", "low", "high", "15m"]
WORDS += ["1h30m", "^a", "[", "x"]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=3)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(WORDS), inner),
    max_leaves=5,
)
CONSTANTS = st.recursive(
    SCALARS.filter(lambda v: v is not None),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(WORDS), inner),
    max_leaves=5,
)


def literal(value: Any) -> Any:
    if isinstance(value, list):
        return ListValue(items=tuple(literal(i) for i in value))
    if isinstance(value, dict):
        return RecordValue(fields={k: literal(v) for k, v in value.items()})
    kind = {bool: "bool", int: "int", float: "float", str: "string"}[type(value)]
    return Literal(value=value, type=kind)


X = Path(root="args", parts=("x",))
Y = Path(root="args", parts=("y",))
RISK = Path(root="tool", parts=("risk",))


@st.composite
def cases(draw: st.DrawFn, op: str) -> tuple[Compare, dict[str, Any], dict[str, Any]]:
    # most pairs of interest are two words or two numbers: draw those often
    operand = st.sampled_from(WORDS) | st.integers(-3, 3) | VALUES
    args = {"x": draw(operand), "y": draw(operand)}
    tool = {"risk": draw(st.sampled_from(["low", "medium", "high", "critical", "bad", 3]))}
    shape = draw(st.sampled_from(["paths", "right", "left", "risk", "duration", "args"]))
    if shape == "paths":
        left, right = X, Y
    elif shape == "right":
        left, right = X, literal(draw(CONSTANTS))
    elif shape == "left":
        left, right = literal(draw(CONSTANTS)), Y
    elif shape == "risk":
        level = EnumMember(name=draw(st.sampled_from(["low", "high", "bad"])))
        left, right = draw(st.permutations([RISK, level]))
    elif shape == "duration":
        ms = Literal(value=draw(st.integers(0, 10_000_000)), type="duration")
        left, right = draw(st.permutations([X, ms]))
    else:
        left, right = Path(root="args"), literal(draw(st.sampled_from(["x", "y", "z"])))
    return Compare(op=op, left=left, right=right), args, tool  # type: ignore[arg-type]


CALL = SimpleNamespace(
    actor={}, resource={}, task={}, env={}, call={}, connected=frozenset(), running=frozenset()
)


@pytest.mark.parametrize("op", GRAMMAR_OPS)
@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_compiled_conditions_agree_with_the_interpreter(op: str, data: st.DataObject) -> None:
    cond, args, tool = data.draw(cases(op))
    compiled = compile_conditions({"c": cond})["c"]
    expected = evaluate(cond, Scope(args=args, tool=tool))
    assert compiled(CALL, args, tool, {}) is expected, cond


# ---------------------------------------------------------------------------------------------
# Which tools a list of selectors selects: the index agrees with `selects`, tool by tool

_ID_PARTS = st.sampled_from(["ci", "cid", "ci.", "deploy", "run", "a", "a.b", "."])
_TOOL_IDS = st.lists(
    st.lists(_ID_PARTS, min_size=1, max_size=3).map("".join), max_size=12, unique=True
)


def _selectors(ids: list[str]) -> st.SearchStrategy[Any]:
    from harnessc.runtime.model import Selector

    known = st.sampled_from(ids) if ids else st.just("none")
    text = st.one_of(known, _ID_PARTS, st.just(""))
    return st.one_of(
        text.map(lambda v: Selector(kind="id", value=v)),
        text.map(lambda v: Selector(kind="glob", value=v)),
        st.lists(text, max_size=3).map(lambda v: Selector(kind="module", tools=tuple(v))),
        st.sampled_from(["low", "high"]).map(lambda v: Selector(kind="risk", op=">=", value=v)),
        st.sampled_from(["read", "write"]).map(lambda v: Selector(kind="effects", value=v)),
        st.just(Selector(kind="all")),
    )


@settings(max_examples=examples(300), deadline=None)
@given(st.data(), _TOOL_IDS)
def test_selected_ids_are_the_tools_selects_selects(data: st.DataObject, ids: list[str]) -> None:
    from harnessc.runtime.model import Tool

    risks = data.draw(st.lists(st.sampled_from(["low", "high"]), min_size=len(ids)))
    tools = {
        i: Tool(id=i, wire_name=f"w{n}", risk=risk, effects=("read",) if n % 2 else ("write",))
        for n, (i, risk) in enumerate(zip(ids, risks, strict=False))
    }
    selectors = data.draw(st.lists(_selectors(ids), max_size=4))
    expected = {
        i for i, tool in tools.items() if any(semantics.selects(s, tool) for s in selectors)
    }
    assert semantics.selected_ids(selectors, tools) == expected
