"""Example values from schemas: a minimal valid value of a type, a valid input of a tool."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from harnessc.runtime.judge.normalize import Validator
from harnessc.runtime.model import (
    Field,
    Schema,
    Type,
)

from ...analysis.examples import NoExampleError, string_example

__all__ = ["example_input", "example_value", "schema_errors"]

# ---------------------------------------------------------------------------------------------
# Example values from schemas


def example_value(field: Field | None, type_: Type) -> Any:
    """A value of `type_` meeting the field's constraints (its default when it has one)."""
    if field is not None and field.default is not None:
        return copy.deepcopy(field.default)
    name = type_.name
    low = field.min if field is not None and field.min is not None else None
    high = field.max if field is not None and field.max is not None else None
    pattern = field.pattern if field is not None else None
    if name in ("string", "path", "url"):
        if pattern is None and name == "path":
            return "/workspace/example.txt"
        if pattern is None and name == "url":
            return "https://example.com/"
        return string_example(pattern, int(low or 0), None if high is None else int(high))
    if name == "duration":
        return "1m"
    if name in ("int", "float"):
        value = low if low is not None else (0 if high is None or high >= 0 else high)
        return int(value) if name == "int" else float(value)
    if name == "bool":
        return False
    if name == "enum":
        if not type_.values:
            raise NoExampleError("the enum has no value")
        return type_.values[0]
    if name == "list":
        assert type_.item is not None
        return [example_value(None, type_.item) for _ in range(int(low or 0))]
    if name == "map":
        return {}
    if name == "any":
        return {}  # any JSON value: the smallest record
    if name == "union":
        return example_value(field, type_.options[0])
    return example_input(type_.fields)


def example_input(fields: Sequence[Field]) -> dict[str, Any]:
    """The smallest valid object: every required field, nothing else."""
    return {f.name: example_value(f, f.type) for f in fields if f.required}


def schema_errors(schema: Schema | None, value: Any) -> list[tuple[str, str]]:
    return Validator(schema).errors(value)
