"""The fuzzer in the test suite: a slice of seeded mutants, the regression corpus, and the
fuzzer's own ability to notice a failure (`bench/fuzz.py` runs the long campaign)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harnessc.compiler import pipeline
from harnessc.dsl import printer

from .fuzzer import CORPUS, Runner, Seed, make_mutant, seeds

SEED = 20_260_101
SLICE = 300
BUILD_EVERY = 30
# generous: a stage takes milliseconds; only a real hang (or a quadratic blow-up) reaches this
LIMIT = 10.0


@pytest.fixture(scope="module")
def pool() -> list[Seed]:
    return seeds()


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path, limit=LIMIT)


def test_the_pool_holds_every_spec_and_doc_block(pool: list[Seed]) -> None:
    names = {seed.name for seed in pool}
    assert "examples/remediation/remediation.harness" in names
    assert any(name.startswith("stdlib/") for name in names)
    assert any(name.startswith("tests/diagnostics/cases/") for name in names)
    assert any(name.startswith("docs/language.md#") for name in names)


def test_a_mutant_is_reproduced_by_its_seed_and_index(pool: list[Seed]) -> None:
    first = [make_mutant(SEED, i, pool).data for i in (7, 3, 7)]
    assert first[0] == first[2] != first[1]


def test_a_slice_of_mutants_runs_clean(pool: list[Seed], runner: Runner) -> None:
    found = []
    for index in range(SLICE):
        mutant = make_mutant(SEED, index, pool)
        outcome = runner.run(mutant.origin, mutant.data, build=index % BUILD_EVERY == 0)
        found += [f"{mutant.label}: {f.kind} in {f.stage}\n{f.detail}" for f in outcome.findings]
    assert not found, "\n".join(found)


def _corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.harness"))


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_the_regression_corpus_runs_clean(path: Path, runner: Runner) -> None:
    outcome = runner.run(Seed(path.name, path.read_bytes(), None), path.read_bytes(), build=True)
    assert not outcome.findings, outcome.findings


def _bad_names(count: int, length: int) -> bytes:
    # each a bad keyword in its own tool, so recovery reaches every one (the parser stops at 50)
    name = ("summaryeffectsriktimoupn" * (length // 24 + 1))[:length]
    return "".join(f'tool t{i} {{\n  {name}{i} "x"\n}}\n' for i in range(count)).encode()


def test_fifty_huge_bad_names_are_reported_without_a_hang(runner: Runner) -> None:
    # 2 MB: before the did-you-mean search was bounded it compared each name with every keyword
    outcome = runner.run(Seed("names", b"", None), _bad_names(50, 40_000), build=False)
    assert not outcome.findings, outcome.findings


# -- the fuzzer notices each kind of failure -------------------------------------------------


def test_an_escaping_exception_is_a_traceback(runner, monkeypatch) -> None:
    def broken(paths, config=None):
        raise KeyError("boom")

    monkeypatch.setattr(pipeline, "lint", broken)
    outcome = runner.run(Seed("c", b"", None), b"connection c\n", build=False)
    assert [(f.kind, f.stage) for f in outcome.findings] == [("traceback", "lint")]
    assert "KeyError: 'boom'" in outcome.findings[0].detail


def test_a_slow_stage_is_a_hang(tmp_path, monkeypatch) -> None:
    def slow(paths, config=None):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pass

    monkeypatch.setattr(pipeline, "lint", slow)
    outcome = Runner(tmp_path, limit=0.2).run(Seed("c", b"", None), b"connection c\n", build=False)
    assert [(f.kind, f.stage) for f in outcome.findings] == [("hang", "lint")]


def test_a_stage_that_waits_without_computing_is_not_a_hang(tmp_path, monkeypatch) -> None:
    # the limit is CPU time: a stage kept off the CPU by other jobs on the machine is not slow
    monkeypatch.setattr(pipeline, "lint", lambda paths, config=None: time.sleep(0.6))
    outcome = Runner(tmp_path, limit=0.2, wall=30).run(
        Seed("c", b"", None), b"connection c\n", build=False
    )
    assert [(f.kind, f.stage) for f in outcome.findings] == []


def test_a_stage_blocked_past_the_wall_limit_is_a_hang(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pipeline, "lint", lambda paths, config=None: time.sleep(30))
    outcome = Runner(tmp_path, limit=5, wall=0.3).run(
        Seed("c", b"", None), b"connection c\n", build=False
    )
    assert [(f.kind, f.stage) for f in outcome.findings] == [("hang", "lint")]


def test_an_internal_error_and_an_unstable_format_are_found(runner, monkeypatch) -> None:
    calls = []
    real = printer.format_module

    def drifting(module):
        calls.append(module)
        return real(module) + "\n" * len(calls)

    monkeypatch.setattr(printer, "format_module", drifting)
    outcome = runner.run(Seed("c", b"", None), b"connection c\n", build=False)
    kinds = {(f.kind, f.stage) for f in outcome.findings}
    assert kinds == {("unstable-fmt", "fmt")}
    monkeypatch.setattr(printer, "format_module", lambda module: "connection d\n")
    outcome = runner.run(Seed("c", b"", None), b"connection c\n", build=False)
    assert {(f.kind, f.stage) for f in outcome.findings} == {("internal", "fmt")}
