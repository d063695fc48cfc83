"""A seeded mutation fuzzer: mutants of every spec in the repository through the compiler's stages.

Mutant `i` of seed `s` is made by `random.Random(f"{s}:{i}")` alone, so it is reproduced by its
seed and index whatever ran before it and on whichever worker. Each mutant goes through the
entry points the command line uses (`pipeline.load_file`, `pipeline.lint` — which runs every
`check` stage first —, the diagnostic renderers, `format_source`, `pipeline.build`) and each
outcome is classified: a traceback (any exception or warning escaping a stage), an internal
error (an H9xx diagnostic), a hang (a stage over its limit of CPU time, or of ten times as
much wall time) or an unstable format
(formatting the formatted text changes it, or the formatted text parses to a different tree).

`bench/fuzz.py` runs many mutants on worker processes; `tests/fuzz/test_fuzz.py` runs a slice
of them and the regression corpus (`tests/fuzz/corpus/`) in the test suite.
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harnessc.compiler import pipeline
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import comment_texts, format_source
from harnessc.dsl.render_formats import render
from harnessc.dsl.source import Source

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
MUTANT_NAME = "mutant.harness"
KINDS = ("traceback", "internal", "hang", "unstable-fmt")

# ---------------------------------------------------------------------------------------------
# Seeds: the specs the mutants start from


@dataclass(frozen=True)
class Seed:
    """One spec to mutate; `folder` holds the files its relative imports name (None: none)."""

    name: str
    data: bytes
    folder: Path | None


_DOC_BLOCK = re.compile(r"^```harness\n(.*?)^```", re.M | re.S)


def seeds(root: Path = ROOT) -> list[Seed]:
    """Every `.harness` file in the repository, every `harness` block of the docs, and the
    regression corpus; sorted by name, so a seed's index means the same on every machine."""
    found: list[Seed] = []
    for folder in ("examples", "stdlib", "tests"):
        for path in (root / folder).rglob("*.harness"):
            name = path.relative_to(root).as_posix()
            found.append(Seed(name, path.read_bytes(), path.parent))
    for doc in [root / "README.md", *(root / "docs").rglob("*.md")]:
        text = doc.read_text(encoding="utf-8")
        for number, match in enumerate(_DOC_BLOCK.finditer(text)):
            name = f"{doc.relative_to(root).as_posix()}#{number}"
            found.append(Seed(name, match.group(1).encode("utf-8"), None))
    return sorted(found, key=lambda seed: seed.name)


# ---------------------------------------------------------------------------------------------
# Mutations: each takes the generator and the bytes, and returns new bytes


_TOKEN = re.compile(
    rb'"(?:[^"\\\n]|\\.)*"?|#[^\n]*|[A-Za-z_][\w.]*|\d[\w.]*|[ \t]+|\r?\n|[^\s\w]', re.S
)
_NAME = re.compile(rb"[A-Za-z_][\w.]*")
_NUMBER = re.compile(rb"\d[\w.]*")
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_UNICODE = [
    "\u0301",  # a combining mark
    "\u202e",  # right-to-left override
    "\u200f",  # right-to-left mark
    "\u200b",  # zero-width space
    "\u2028",  # line separator
    "\x85",  # next line
    "\x0c",  # form feed
    "\x0b",  # vertical tab
    "\x00",
    "\ufeff",  # a BOM anywhere
    "\ufffd",
    "\U0001f600",
    "İ",  # changes length when lowercased
    "ß",
    "ﬁ",
    "é",
    "\t",
    "\r",
    "\\ud800",  # a lone surrogate, escaped
    "\\udfff\\ud800",
    "\\u0000",
    "\\x",
    "\\",
]
_KEYWORD_LETTERS = "summaryeffectsriktimoupn_."


def _tokens(data: bytes) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _TOKEN.finditer(data) if not m.group().isspace()]


def _pick(rng: random.Random, data: bytes, pattern: re.Pattern[bytes]) -> tuple[int, int] | None:
    spans = [(m.start(), m.end()) for m in pattern.finditer(data)]
    return rng.choice(spans) if spans else None


def _replace(data: bytes, span: tuple[int, int], new: bytes) -> bytes:
    return data[: span[0]] + new + data[span[1] :]


def flip_byte(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]


def insert_byte(rng: random.Random, data: bytes) -> bytes:
    i = rng.randint(0, len(data))
    return data[:i] + bytes([rng.randrange(256)]) + data[i:]


def delete_token(rng: random.Random, data: bytes) -> bytes:
    tokens = _tokens(data)
    return _replace(data, rng.choice(tokens), b"") if tokens else data


def duplicate_token(rng: random.Random, data: bytes) -> bytes:
    tokens = _tokens(data)
    if not tokens:
        return data
    start, end = rng.choice(tokens)
    return data[:end] + rng.choice([b" ", b""]) + data[start:end] + data[end:]


def swap_tokens(rng: random.Random, data: bytes) -> bytes:
    tokens = _tokens(data)
    if len(tokens) < 2:
        return data
    a, b = sorted(rng.sample(tokens, 2))
    first, second = data[a[0] : a[1]], data[b[0] : b[1]]
    return data[: a[0]] + second + data[a[1] : b[0]] + first + data[b[1] :]


def move_token(rng: random.Random, data: bytes) -> bytes:
    tokens = _tokens(data)
    if not tokens:
        return data
    start, end = rng.choice(tokens)
    piece, rest = data[start:end], data[:start] + data[end:]
    i = rng.randint(0, len(rest))
    return rest[:i] + b" " + piece + b" " + rest[i:]


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randint(0, len(data))]


def insert_unicode(rng: random.Random, data: bytes) -> bytes:
    i = rng.randint(0, len(data))
    return data[:i] + rng.choice(_UNICODE).encode("utf-8") + data[i:]


def line_endings(rng: random.Random, data: bytes) -> bytes:
    ending = rng.choice([b"\r\n", b"\r", b"\n\n", b"\n\r"])
    if rng.random() < 0.5:
        return data.replace(b"\n", ending)
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    lines[i] = lines[i] + ending
    return b"\n".join(lines)


def add_bom(rng: random.Random, data: bytes) -> bytes:
    return b"\xef\xbb\xbf" * rng.randint(1, 2) + data


def deep_nesting(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice([8, 63, 64, 65, 300, 5000])
    open_, close = rng.choice([(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"not (", b")")])
    tokens = _tokens(data)
    if not tokens or rng.random() < 0.3:
        i = rng.randint(0, len(data))
        return data[:i] + open_ * depth + (close * depth if rng.random() < 0.7 else b"") + data[i:]
    start, end = rng.choice(tokens)
    return data[:start] + open_ * depth + data[start:end] + close * depth + data[end:]


def huge_name(rng: random.Random, data: bytes) -> bytes:
    length = rng.choice([256, 1000, 5000, 40_000])
    letters = rng.choice(["abcdefghijklmnopqrstuvwxyz_", _KEYWORD_LETTERS, "a", "a."])
    name = "".join(rng.choice(letters) for _ in range(length)).lstrip(".") or "a"
    if not name[0].isalpha():
        name = "x" + name
    span = _pick(rng, data, _NAME)
    if span is None:
        return data + b"\n" + name.encode()
    return _replace(data, span, name.encode())


def huge_number(rng: random.Random, data: bytes) -> bytes:
    digits = "9" * rng.choice([20, 400, 5000])
    new = rng.choice(
        [
            digits,
            f"-{digits}",
            f"{digits}s",
            f"{digits}d",
            f"{digits}h{digits}m",
            f"1e{digits}",
            f"{digits}.{digits}",
            "0x10",
            "00",
            "1__0",
            "1.",
            ".5",
            "1e",
            "1d1d",
            "0s",
            "-0",
        ]
    )
    span = _pick(rng, data, _NUMBER)
    if span is None:
        return data + b" " + new.encode()
    return _replace(data, span, new.encode())


def long_string(rng: random.Random, data: bytes) -> bytes:
    body = rng.choice(["x", "a b ", "\\n", "é", "\\u00e9", "#"]) * rng.choice([100, 5000, 100_000])
    span = _pick(rng, data, _STRING)
    new = f'"{body}"'.encode()
    if span is None:
        return data + b" " + new
    return _replace(data, span, new)


def mangle_string(rng: random.Random, data: bytes) -> bytes:
    span = _pick(rng, data, _STRING)
    if span is None:
        return insert_unicode(rng, data)
    i = rng.randint(span[0] + 1, max(span[0] + 1, span[1] - 1))
    return data[:i] + rng.choice(_UNICODE).encode("utf-8") + data[i:]


def splice_line(rng: random.Random, data: bytes, others: list[Seed]) -> bytes:
    donor = rng.choice(others).data.split(b"\n")
    line = rng.choice(donor)
    lines = data.split(b"\n")
    lines.insert(rng.randint(0, len(lines)), line)
    return b"\n".join(lines)


def edit_lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    action = rng.choice(["delete", "duplicate", "swap", "indent", "dedent"])
    if action == "delete":
        del lines[i]
    elif action == "duplicate":
        lines.insert(i, lines[i])
    elif action == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif action == "indent":
        lines[i] = rng.choice([b"\t", b"        ", b" "]) + lines[i]
    else:
        lines[i] = lines[i].lstrip()
    return b"\n".join(lines)


MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    f.__name__: f
    for f in (
        flip_byte,
        insert_byte,
        delete_token,
        duplicate_token,
        swap_tokens,
        move_token,
        truncate,
        insert_unicode,
        line_endings,
        add_bom,
        deep_nesting,
        huge_name,
        huge_number,
        long_string,
        mangle_string,
        edit_lines,
    )
}
# how often each is drawn: the structural ones find more than raw bytes do
_WEIGHTS = {"truncate": 1, "add_bom": 1, "line_endings": 2, "huge_name": 2, "long_string": 1}


@dataclass(frozen=True)
class Mutant:
    seed: int
    index: int
    origin: Seed
    steps: tuple[str, ...]
    data: bytes

    @property
    def label(self) -> str:
        return f"seed {self.seed} mutant {self.index} ({self.origin.name}: {', '.join(self.steps)})"


def make_mutant(seed: int, index: int, pool: list[Seed]) -> Mutant:
    """Mutant `index` of `seed`: a function of the two numbers and the pool alone."""
    rng = random.Random(f"{seed}:{index}")
    origin = rng.choice(pool)
    data = origin.data
    names = [*sorted(MUTATIONS), "splice_line"]
    weights = [_WEIGHTS.get(n, 3) for n in names]
    steps = tuple(rng.choices(names, weights, k=rng.choice([1, 1, 2, 3])))
    for step in steps:
        data = splice_line(rng, data, pool) if step == "splice_line" else MUTATIONS[step](rng, data)
    return Mutant(seed, index, origin, steps, data)


# ---------------------------------------------------------------------------------------------
# Running one mutant through the stages


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    stage: str
    detail: str


@dataclass
class Outcome:
    findings: list[Finding] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """CPU seconds per stage."""


class HangError(BaseException):
    """Raised by the watchdog's alarm; a BaseException, so no `except Exception` swallows it."""


def _on_alarm(signum: int, frame: object) -> None:
    raise HangError


# A stage's limit is CPU time (the process's, so z3 working in C counts): on a machine shared
# with other jobs a stage can wait for a core longer than it computes, and waiting is not a
# hang. A stage that neither computes nor ends (blocked on something) is caught by wall time,
# with this much more room.
WALL_FACTOR = 10.0


@contextmanager
def _watchdog(limit: float, wall: float) -> Iterator[None]:
    previous = {sig: signal.signal(sig, _on_alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, limit)
    signal.setitimer(signal.ITIMER_REAL, wall)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _internal(diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> list[str]:
    return [f"{d.code}: {d.message[:300]}" for d in diagnostics if d.code.startswith("H9")]


class Runner:
    """Runs mutants in a scratch folder that mirrors each seed's folder, so relative imports of
    the original find its neighbours (the mutant is written beside them as `mutant.harness`)."""

    def __init__(self, scratch: Path, *, limit: float = 2.0, wall: float | None = None) -> None:
        self.scratch = scratch
        self.limit = limit
        self.wall = limit * WALL_FACTOR if wall is None else wall
        self.mirrored: dict[Path, Path] = {}

    def place(self, origin: Seed, data: bytes) -> Path:
        if origin.folder is None:
            folder = self.scratch / "loose"
            folder.mkdir(parents=True, exist_ok=True)
        else:
            folder = self.mirrored.get(origin.folder) or self._mirror(origin.folder)
        path = folder / MUTANT_NAME
        path.write_bytes(data)
        return path

    def _mirror(self, folder: Path) -> Path:
        target = self.scratch / "mirror" / str(len(self.mirrored))
        target.mkdir(parents=True)
        for path in folder.glob("*.harness"):
            shutil.copyfile(path, target / path.name)
        self.mirrored[folder] = target
        return target

    def run(self, origin: Seed, data: bytes, *, build: bool) -> Outcome:
        path = self.place(origin, data)
        outcome = Outcome()

        def stage(name: str, work: Callable[[], object]) -> object:
            started, cpu = time.perf_counter(), time.process_time()
            try:
                # a warning that reaches the user is a defect too: as in the test suite, an error
                with _watchdog(self.limit, self.wall), warnings.catch_warnings():
                    warnings.simplefilter("error")
                    return work()
            except HangError:
                outcome.findings.append(Finding("hang", name, self._over(started, cpu)))
            except Exception:
                outcome.findings.append(Finding("traceback", name, traceback.format_exc()))
            finally:
                spent = outcome.seconds[name] = time.process_time() - cpu
                waited = time.perf_counter() - started
                # the alarm can land in a finaliser, where Python ignores the exception
                late = spent > self.limit or waited > self.wall
                if late and not any(f.stage == name for f in outcome.findings):
                    outcome.findings.append(Finding("hang", name, self._over(started, cpu)))
            return None

        loaded = stage("parse", lambda: pipeline.load_file(path))
        if isinstance(loaded, pipeline.LoadedFile):
            self._internal(outcome, "parse", loaded.diagnostics)
        linted = stage("lint", lambda: pipeline.lint([path]))
        if isinstance(linted, pipeline.CheckResult):
            self._internal(outcome, "lint", linted.diagnostics)
            stage("render", lambda: [render(linted.diagnostics, f) for f in _FORMATS])
        if isinstance(loaded, pipeline.LoadedFile) and loaded.source is not None:
            source = loaded.source
            stage("fmt", lambda: self._check_format(outcome, source))
        if build and isinstance(linted, pipeline.CheckResult) and linted.ok:
            out = self.scratch / "out"
            built = stage("build", lambda: pipeline.build([path], out, embed=False))
            if isinstance(built, pipeline.BuildResult):
                self._internal(outcome, "build", built.check.diagnostics)
        return outcome

    def _over(self, started: float, cpu: float) -> str:
        spent, waited = time.process_time() - cpu, time.perf_counter() - started
        return (
            f"{spent:.1f} s of CPU time (limit {self.limit:g} s), "
            f"{waited:.1f} s of wall time (limit {self.wall:g} s)"
        )

    def _internal(self, outcome: Outcome, stage: str, diagnostics) -> None:
        for detail in _internal(diagnostics):
            outcome.findings.append(Finding("internal", stage, detail))

    def _check_format(self, outcome: Outcome, source: Source) -> None:
        first = format_source(source)
        self._internal(outcome, "fmt", first.diagnostics)
        if first.text is None:
            return
        again = format_source(Source(source.path, first.text))
        self._internal(outcome, "fmt", again.diagnostics)
        if again.text != first.text:
            outcome.findings.append(Finding("unstable-fmt", "fmt", "a second format changes it"))
            return
        before, after = parse_source(source), parse_source(Source(source.path, first.text))
        if before.module != after.module or comment_texts(before.module) != comment_texts(
            after.module
        ):
            outcome.findings.append(
                Finding("unstable-fmt", "fmt", "the formatted text parses to another tree")
            )


_FORMATS = ("human", "plain", "json", "sarif", "github")
