"""Which tests wait on something: threads, processes, servers, browsers or clocks.

Their outcome can depend on how fast the machine is right now, so they form the subset that
`scripts/flake.sh --subset` runs under load again and again. A test module joins it by what its
source (or a helper module of tests/ that it imports) uses: nobody has to remember to mark it.
A test can also join explicitly with `@pytest.mark.timing`.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# what waiting looks like in a test: sleeping, threads and processes left running, events and
# futures, a deadline (`timeout=`), servers, browsers, reading the clock. A subprocess run to its
# end with no deadline is not a wait.
WAITS = re.compile(
    r"\bsleep\(|\bthreading\b|\bThread\(|\bThreadPoolExecutor\b|\bmultiprocessing\b|\bPopen\b"
    r"|\.wait\(|\beventually\(|\bwait_for\w*\(|\btimeout=|\buvicorn\b|\bplaywright\b"
    r"|\basyncio\b|\btime\.monotonic\b|\btime\.time\(|\bperf_counter\b|\bos\.kill\b|\bsignal\.SIG"
)


_COMMENT = re.compile(r"^\s*#.*$", re.MULTILINE)
_NOT_HELPERS = {"conftest", "timing"}  # pytest's set-up and this module are no test's waits


@functools.cache
def _imports(path: Path) -> tuple[Path, ...]:
    """The helper modules of tests/ (not test modules) that a module imports (`from .x import
    …`, `from tests.x import …`, `from . import x`)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return ()
    found: list[Path] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        names: list[str] = []
        if node.level == 1 and node.module:
            names = [node.module.split(".")[0]]
        elif node.level == 1:
            names = [alias.name for alias in node.names]
        elif node.module and node.module.startswith("tests."):
            names = [node.module.split(".")[1]]
        for name in names:
            candidate = TESTS / f"{name}.py"
            # a helper module (not another test module, whose helpers are plain functions)
            if candidate.is_file() and not name.startswith("test_") and name not in _NOT_HELPERS:
                found.append(candidate)
    return tuple(found)


@functools.cache
def waits(path: Path, _seen: frozenset[Path] = frozenset()) -> bool:
    """Whether the module at `path`, or a helper of tests/ it imports, waits on something."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    if WAITS.search(_COMMENT.sub("", text)):
        return True
    seen = _seen | {path}
    return any(waits(helper, seen) for helper in _imports(path) if helper not in seen)


THROUGH_BENCH = frozenset({"test_at_most_once.py"})
"""Modules that wait through a bench they run (outside tests/, so not read for waits):
`test_at_most_once.py` runs bench/at_most_once.py's worker processes and kills them."""


def subset() -> list[Path]:
    """The test modules that wait on something, in name order."""
    return [p for p in sorted(TESTS.glob("test_*.py")) if waits(p) or p.name in THROUGH_BENCH]


if __name__ == "__main__":  # scripts/flake.sh --list
    for module in subset():
        print(module.relative_to(TESTS.parent))
