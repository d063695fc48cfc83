"""Example strings for patterns: read off the pattern first, z3 only for what the walk cannot do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harnessc.compiler.analysis import examples
from harnessc.compiler.analysis.examples import MAX_EXAMPLE_LENGTH, NoExampleError, string_example

ROOT = Path(__file__).resolve().parents[1]
_PATTERN = re.compile(r'\bpattern ("(?:[^"\\\n]|\\.)*")')


def _repository_patterns() -> list[str]:
    found = set()
    for folder in ("examples", "stdlib"):
        for path in (ROOT / folder).rglob("*.harness"):
            found |= {json.loads(m.group(1)) for m in _PATTERN.finditer(path.read_text())}
    return sorted(found)


@pytest.fixture
def no_z3(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pattern: str, low: int, high: int | None) -> str:
        raise AssertionError(f"z3 was asked for `{pattern}` [{low}, {high}]")

    examples.forget_examples()
    monkeypatch.setattr(examples, "_z3_example", refuse)


def test_the_repository_has_patterns_to_check() -> None:
    assert "^[0-9a-f]{64}$" in _repository_patterns()


@pytest.mark.parametrize("pattern", _repository_patterns())
def test_every_pattern_of_the_examples_and_stdlib_is_walked_without_z3(no_z3, pattern) -> None:
    # z3's string solver gave up on `^[0-9a-f]{64}$` after seconds; the walk answers at once
    assert re.search(pattern, string_example(pattern, 0, None))


@pytest.mark.parametrize(
    ("pattern", "low", "high", "expected"),
    [
        # a brace that starts no repeat is a literal: the fuzzer's mutant kept z3 busy for 4 s,
        # then the analysis used `x`, which does not match
        (
            "^[A-Za-z0-9_-]{99999999999999999999h99999999999999999999m,}$",
            0,
            None,
            "a{99999999999999999999h99999999999999999999m,}",
        ),
        ("^chg-[0-9]+$", 0, None, "chg-0"),
        ("[^/]+/[^/]+", 0, None, "a/a"),
        ("^[^a]{3}$", 0, None, "bbb"),
        (r"^\W\S\D$", 0, None, " aa"),
        ("^[_x]$", 0, None, "x"),
        (r"^(?:[^\x00-\x7f]|b)$", 0, None, "b"),
        ("^[a-z]+$", 5, None, "aaaaa"),
        ("^(CVE|GHSA)-[A-Za-z0-9-]+$", 12, None, "CVE-aaaaaaaa"),
        ("^ab?$", 2, 2, "ab"),
        ("x", 4, None, "xaaa"),
        ("x$", 4, None, "aaax"),
    ],
)
def test_the_walk_makes_short_readable_examples(no_z3, pattern, low, high, expected) -> None:
    assert string_example(pattern, low, high) == expected


@pytest.mark.parametrize("pattern", ["a{4294967294}", "^[^a]{4000000000}$", "^(ab){60000}$"])
def test_an_example_longer_than_the_limit_is_refused_not_built(pattern) -> None:
    examples.forget_examples()
    with pytest.raises(NoExampleError):
        string_example(pattern, 0, None)
    with pytest.raises(NoExampleError, match=f"longer than {MAX_EXAMPLE_LENGTH}"):
        examples._walk_example(pattern, 0, None)


def test_z3_answers_what_the_walk_cannot_and_python_checks_it() -> None:
    examples.forget_examples()
    # `^x$` cannot grow to 3 characters: z3 finds none either, so there is no example
    with pytest.raises(NoExampleError):
        string_example("^x$", 3, None)
    # a class with no printable character: z3 gives up within its budget
    with pytest.raises(NoExampleError):
        string_example(r"[^\x00-\x7f]", 0, None)


def test_z3_runs_under_a_resource_limit_not_a_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    settings: list[tuple[str, object]] = []
    real = examples.z3.Solver

    def recording() -> object:
        solver = real()
        original = solver.set

        def set_(*args: object, **kwargs: object) -> None:
            settings.append(args)  # type: ignore[arg-type]
            original(*args, **kwargs)

        solver.set = set_  # type: ignore[method-assign]
        return solver

    monkeypatch.setattr(examples.z3, "Solver", recording)
    examples.forget_examples()
    with pytest.raises(NoExampleError):
        string_example("^x$", 3, None)
    assert settings == [("rlimit", examples.Z3_RLIMIT)]
