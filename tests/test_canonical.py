"""Canonical JSON (RFC 8785) and the input hash: what a grant's exact-invocation match relies on."""

from __future__ import annotations

import doctest
import json
import struct
from types import MappingProxyType
from typing import Any

import pytest
from harnessc.runtime.model import canonical
from harnessc.runtime.model.canonical import (
    MAX_SAFE_INTEGER,
    CanonicalError,
    Execution,
    canonical_json,
    canonicalize_text,
    format_number,
    input_hash,
    parse_json,
)
from hypothesis import given
from hypothesis import strategies as st

# RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript forms.
RFC_NUMBERS = {
    0x0000000000000000: "0",
    0x8000000000000000: "0",
    0x0000000000000001: "5e-324",
    0x8000000000000001: "-5e-324",
    0x7FEFFFFFFFFFFFFF: "1.7976931348623157e+308",
    0xFFEFFFFFFFFFFFFF: "-1.7976931348623157e+308",
    0x4340000000000000: "9007199254740992",
    0xC340000000000000: "-9007199254740992",
    0x4430000000000000: "295147905179352830000",
    0x44B52D02C7E14AF5: "9.999999999999997e+22",
    0x44B52D02C7E14AF6: "1e+23",
    0x44B52D02C7E14AF7: "1.0000000000000001e+23",
    0x444B1AE4D6E2EF4E: "999999999999999700000",
    0x444B1AE4D6E2EF4F: "999999999999999900000",
    0x444B1AE4D6E2EF50: "1e+21",
    0x3EB0C6F7A0B5ED8C: "9.999999999999997e-7",
    0x3EB0C6F7A0B5ED8D: "0.000001",
    0x41B3DE4355555553: "333333333.3333332",
    0x41B3DE4355555554: "333333333.33333325",
    0x41B3DE4355555555: "333333333.3333333",
    0x41B3DE4355555556: "333333333.3333334",
    0x41B3DE4355555557: "333333333.33333343",
    0xBECBF647612F3696: "-0.0000033333333333333333",
    0x43143FF3C1CB0959: "1424953923781206.2",
}


@pytest.mark.parametrize(("bits", "expected"), sorted(RFC_NUMBERS.items()))
def test_numbers_are_written_as_ecmascript_writes_them(bits: int, expected: str) -> None:
    value = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    assert format_number(value) == expected
    assert canonical_json(value) == expected


def test_the_rfc_example_object() -> None:
    text = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    assert canonicalize_text(text) == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_keys_are_sorted_by_utf16_code_units_not_code_points() -> None:
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    text = canonical_json(dict.fromkeys(keys, 0))
    order = list(json.loads(text))
    # the emoji (surrogates D83D DE00) sorts before U+FB33, although its code point is higher
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_no_whitespace_and_non_ascii_kept() -> None:
    assert canonical_json({"a": [1, {"b": "ü😀"}], "c": None}) == '{"a":[1,{"b":"ü😀"}],"c":null}'
    assert canonical_json("\x7f\u2028") == '"\x7f\u2028"'  # JCS escapes only C0, `"` and `\`
    assert canonical_json("\x1f\x08") == '"\\u001f\\b"'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "`nan` is not a JSON number at `$`"),
        ({"a": [1, float("inf")]}, "`inf` is not a JSON number at `$.a[1]`"),
        ({1: "x"}, "object key `1` is not a string at `$`"),
        ({"n": 2**53}, "integer outside ±(2**53 - 1) cannot be told apart"),
        ({"s": {1, 2}}, "a value of type `set` is not JSON at `$.s`"),
        ("\ud800", "a string contains a lone surrogate"),
    ],
)
def test_what_json_cannot_say_is_refused(value: Any, message: str) -> None:
    with pytest.raises(CanonicalError) as err:
        canonical_json(value)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "a": 2}', "duplicate key `a`"),
        ("[NaN]", "`NaN` is not a JSON number"),
        ("[1e400]", "`1e400` is beyond the largest JSON number"),
        ("[" + "1" * 400 + "]", "an integer of 400 digits is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "it nests too deeply"),
        ("{", "not JSON"),
    ],
)
def test_text_that_is_not_canonicalizable_is_refused(text: str, message: str) -> None:
    with pytest.raises(CanonicalError, match=message):
        canonicalize_text(text)


def test_the_largest_safe_integers_are_accepted() -> None:
    assert canonical_json([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == (
        "[9007199254740991,-9007199254740991]"
    )


def test_module_examples_run() -> None:
    assert doctest.testmod(canonical).failed == 0


# ---------------------------------------------------------------------------------------------
# Properties

keys = st.text(max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(keys, json_values, max_size=5)


def reorder(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: reorder(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [reorder(v, rnd) for v in value]
    return value


def swap_number_forms(value: Any) -> Any:
    """1 ↔ 1.0: the same JSON number written the other way."""
    if isinstance(value, dict):
        return {k: swap_number_forms(v) for k, v in value.items()}
    if isinstance(value, list):
        return [swap_number_forms(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


@given(json_values, st.randoms(use_true_random=False))
def test_canonical_form_ignores_key_order(value: Any, rnd: Any) -> None:
    assert canonical_json(reorder(value, rnd)) == canonical_json(value)


@given(
    json_values,
    st.sampled_from([None, 0, 2, "\t"]),
    st.booleans(),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :  ")]),
)
def test_canonical_form_ignores_whitespace_and_escaping(
    value: Any, indent: Any, ascii_only: bool, separators: tuple[str, str]
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only, separators=separators)
    assert canonicalize_text(text) == canonical_json(value)


@given(json_values)
def test_equivalent_numbers_have_one_form(value: Any) -> None:
    assert canonical_json(swap_number_forms(value)) == canonical_json(value)


@given(json_values)
def test_canonical_text_means_the_same_value_and_is_a_fixed_point(value: Any) -> None:
    text = canonical_json(value)
    # equality of the parsed value makes the mapping injective: different values, different text
    assert parse_json(text) == value
    assert canonicalize_text(text) == text


# ---------------------------------------------------------------------------------------------
# input_hash

BASE_EXECUTION = {
    "command": ["deploy", "--now"],
    "cwd": "/repo",
    "env": {"STAGE": "prod"},
    "timeout_ms": 30000,
    "target": "payments",
}


def test_input_hash_is_sha256_of_the_documented_document() -> None:
    args = {"service": "api", "retries": 2}
    expected = canonical.sha256_hex(
        {"tool": "deploy", "version": 3, "args": args, "execution": BASE_EXECUTION}
    )
    assert input_hash("deploy", 3, args, BASE_EXECUTION) == expected
    assert len(expected) == 64


def test_absent_execution_fields_are_left_out() -> None:
    assert input_hash("t", 1, {}, None) == input_hash("t", 1, {}, {"cwd": None})
    assert input_hash("t", 1, {}, Execution()) == input_hash("t", 1, {}, {})
    assert input_hash("t", 1, {}, Execution(**BASE_EXECUTION)) == input_hash(
        "t", 1, {}, BASE_EXECUTION
    )


def test_an_unknown_execution_parameter_is_refused() -> None:
    with pytest.raises(CanonicalError, match="unknown execution parameter `timeout`"):
        input_hash("t", 1, {}, {"timeout": 5})


@pytest.mark.parametrize(
    "change",
    [
        {"command": ["deploy"]},
        {"cwd": "/repo/sub"},
        {"env": {"STAGE": "dev"}},
        {"env": {"STAGE": "prod", "DEBUG": "1"}},
        {"timeout_ms": 30001},
        {"target": "ledger"},
        {"target": None},
    ],
)
def test_input_hash_changes_with_every_execution_parameter(change: dict[str, Any]) -> None:
    args = {"service": "api"}
    before = input_hash("deploy", 3, args, BASE_EXECUTION)
    assert input_hash("deploy", 3, args, {**BASE_EXECUTION, **change}) != before


def test_input_hash_changes_with_tool_and_version() -> None:
    h = input_hash("deploy", 3, {}, None)
    assert input_hash("deploy", 4, {}, None) != h
    assert input_hash("deploy2", 3, {}, None) != h


@given(json_objects, keys, json_values, st.randoms(use_true_random=False))
def test_input_hash_changes_with_any_argument_and_not_with_its_spelling(
    args: dict[str, Any], key: str, new: Any, rnd: Any
) -> None:
    h = input_hash("t", 1, args, BASE_EXECUTION)
    assert input_hash("t", 1, swap_number_forms(reorder(args, rnd)), BASE_EXECUTION) == h
    changed = {**args, key: new}
    same = key in args and canonical_json(args[key]) == canonical_json(new)
    assert (input_hash("t", 1, changed, BASE_EXECUTION) == h) == same


def read_only(value: Any) -> Any:
    """The same JSON value with every object a read-only mapping (written by the reference
    writer, where plain dicts take the C encoder)."""
    if isinstance(value, dict):
        return MappingProxyType({k: read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return [read_only(v) for v in value]
    return value


@given(json_values)
def test_a_read_only_mapping_has_the_same_canonical_form(value: Any) -> None:
    assert canonical_json(read_only(value)) == canonical_json(value)


@given(json_objects, st.sampled_from([None, "/repo", "/tmp"]))
def test_input_hash_is_the_same_for_a_read_only_mapping(args: dict[str, Any], cwd: Any) -> None:
    execution = Execution(cwd=cwd, command=("make", "test"), timeout_ms=5)
    assert input_hash("t", 3, args, execution) == input_hash("t", 3, read_only(args), execution)


def test_a_reused_execution_hashes_like_a_fresh_one() -> None:
    execution = Execution(cwd="/repo", timeout_ms=30000)
    first = input_hash("t", 1, {}, execution)
    assert input_hash("t", 1, {}, execution) == first
    assert input_hash("t", 1, {}, Execution(cwd="/repo", timeout_ms=30000)) == first
    assert execution == Execution(cwd="/repo", timeout_ms=30000)


def test_a_changed_environment_changes_the_hash_of_the_same_execution() -> None:
    env = {"STAGE": "dev"}
    execution = Execution(cwd="/repo", env=env)
    before = input_hash("t", 1, {}, execution)
    env["STAGE"] = "prod"
    assert input_hash("t", 1, {}, execution) != before
