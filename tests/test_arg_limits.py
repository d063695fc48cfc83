"""A call's arguments past their limits (normalize.MAX_ARGS_BYTES, MAX_ARGS_ITEMS,
MAX_ARGS_DEPTH) are refused with `args-too-large` where the limit is crossed, before the rest is
visited, and the refusal never quotes the data; everything under them is a call as before.
The times are measured in bench/arg_limits.py, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, PendingCall, Refusal
from harnessc.runtime.judge.normalize import (
    MAX_ARGS_BYTES,
    MAX_ARGS_DEPTH,
    MAX_ARGS_ITEMS,
    REFUSAL_CODES,
    Validator,
    freeze,
)
from harnessc.runtime.model import Field, Schema, Spec, Type

SPEC = """
harness limits { version "1.0.0" }
tool t.put {
  summary "Put things."
  effects write
  input {
    items: list<string>?
    nums: list<int>?
    tags: map<string>?
    ops: list<{ id: string, meta: map<string>? }>?
  }
}
tool t.note {
  summary "Write a note."
  effects write
  input { text: string }
}
policy p { default deny  allow t.* }
surface s { expose t.* }
agent a { surface s; policy p }
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    path = tmp_path_factory.mktemp("limits") / "limits.harness"
    path.write_text(SPEC, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    return result.model


def put(spec: Spec, args: Any, tool: str = "t.put") -> PendingCall | Refusal:
    t = spec.tools[tool]
    return freeze(t, Validator(t.input), "c-1", args)


def too_large(result: PendingCall | Refusal, path: str, what: str) -> Refusal:
    assert isinstance(result, Refusal), result
    assert result.code == "args-too-large" and result.code in REFUSAL_CODES
    assert result.path == path, result.path
    assert what in result.message, result.message
    assert len(result.message) < 200 and not result.errors
    return result


def test_a_million_element_list_is_refused(spec: Spec) -> None:
    too_large(put(spec, {"items": ["x"] * 1_000_000}), "$.items", f"{MAX_ARGS_ITEMS:,} entries")


def test_entries_are_counted_across_lists_objects_and_the_arguments(spec: Spec) -> None:
    # the arguments' own two fields count: 2 + 59,998 + 40,000 is the limit
    under = {"items": ["x"] * 59_998, "nums": [1] * 40_000}
    assert isinstance(put(spec, under), PendingCall)
    over = {"items": ["x"] * 59_998, "nums": [1] * 40_001}
    too_large(put(spec, over), "$.nums", "entries")
    ops = [{"id": "a"}] * 50_000  # each op is an entry, and its field another
    too_large(put(spec, {"ops": ops}), "$.ops", "entries")


def test_text_past_a_mebibyte_is_refused_on_the_flat_path_too(spec: Spec) -> None:
    at = put(spec, {"text": "x" * MAX_ARGS_BYTES}, "t.note")
    assert isinstance(at, PendingCall)
    too_large(put(spec, {"text": "x" * (MAX_ARGS_BYTES + 1)}, "t.note"), "$.text", "characters")
    too_large(put(spec, {"text": "x" * 100_000_000}, "t.note"), "$.text", "characters")


def test_text_is_counted_across_strings_and_map_keys(spec: Spec) -> None:
    block = "y" * 1_000
    too_large(put(spec, {"items": [block] * 1_100}), "$.items", "characters")
    keys = {f"{i:08d}" + block: "v" for i in range(1_100)}
    too_large(put(spec, {"tags": keys}), "$.tags", "characters")
    assert isinstance(put(spec, {"items": [block] * 1_000}), PendingCall)


def test_a_refusal_names_the_argument_never_a_key_below_it(spec: Spec) -> None:
    secret_key = "sk-live-4f9a-do-not-log"
    ops = [{"id": "a", "meta": {secret_key: "v" * (MAX_ARGS_BYTES + 1)}}]
    refused = too_large(put(spec, {"ops": ops}), "$.ops", "characters")
    assert secret_key not in json.dumps(refused.to_dict())


def test_nesting_past_the_limit_is_refused(spec: Spec) -> None:
    """A spec nests at most 64 brackets deep (H108): deeper schemas are built here."""

    def nested(lists: int) -> PendingCall | Refusal:
        kind, value = Type(name="string"), "x"
        for _ in range(lists):
            kind, value = Type(name="list", item=kind), [value]
        schema = Schema(fields=(Field(name="v", type=kind),))
        tool = spec.tools["t.note"].model_copy(update={"input": schema})
        return freeze(tool, Validator(schema), "c-1", {"v": value})

    # the arguments' object is the first level
    assert isinstance(nested(MAX_ARGS_DEPTH - 1), PendingCall)
    too_large(nested(MAX_ARGS_DEPTH), "$.v", f"nested more than {MAX_ARGS_DEPTH} deep")
    too_large(nested(MAX_ARGS_DEPTH + 50), "$.v", "nested")


def test_an_executor_output_is_not_held_to_the_arguments_limits(spec: Spec) -> None:
    validator = Validator(spec.tools["t.put"].input)
    out, errors = validator.run({"items": ["x"] * (MAX_ARGS_ITEMS + 1)})
    assert not errors and len(out["items"]) == MAX_ARGS_ITEMS + 1


def test_the_refusal_is_recorded_small(spec: Spec, tmp_path: Path) -> None:
    h = Harness(spec)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize("t.put", "c-1", {"items": ["x"] * 1_000_000, "tags": {"k": "v"}})
    too_large(refused, "$.items", "entries")
    events = [e for e in h.store.read(s.id) if e.type == "call.refused"]
    assert len(events) == 1 and len(json.dumps(events[0].payload)) < 1_000
