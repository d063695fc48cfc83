"""Shared test setup: the golden-file switch and paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from .timing import waits

ROOT = Path(__file__).resolve().parent.parent

# harnessc's caches (parser tables, check results, analysis) go to a folder of this run, never
# the user's ~/.cache; subprocesses the tests start inherit it. The switches a shell may set
# for harnessc (its cache folder, the analysis's budgets, no stored results) are dropped: the
# suite runs on the defaults, and a test that needs a switch sets it.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="harnessc-test-cache-")
for _switch in (
    "HARNESSC_CACHE_DIR",
    "HARNESSC_NO_CACHE",
    "HARNESSC_TIMEOUT",
    "HARNESSC_QUERY_RLIMIT",
):
    os.environ.pop(_switch, None)

# No wall-clock limit on a property's example either: on a loaded machine an example that takes
# 250 ms is not a bug (a test that must scale says so by counting operations, tests/counting.py)
# Budgets (tests/budget.py scales each property's own `max_examples` alike):
# - harnessc, the local default: half the standard budget, drawn afresh each run (fast, and
#   over many runs it explores further than one large run);
# - ci (.ci/run): the standard budget, and the same examples on every run, so a red CI is a
#   regression and never the luck of a draw;
# - thorough (`pytest --hypothesis-profile=thorough`, before a release): ten times the standard.
settings.register_profile("harnessc", deadline=None, max_examples=50)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True, max_examples=100)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HARNESSC_HYPOTHESIS_PROFILE", "harnessc"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite golden files (diagnostics, formatter output) from the current behaviour",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--update-goldens"):
        os.environ["HARNESSC_UPDATE_GOLDENS"] = "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the tests that wait on threads, processes, servers or clocks (tests/timing.py) carry the
    # `timing` mark: `scripts/flake.sh --subset` runs them under load again and again
    for item in items:
        if waits(Path(item.path)):
            item.add_marker(pytest.mark.timing)


def update_goldens() -> bool:
    return os.environ.get("HARNESSC_UPDATE_GOLDENS") == "1"


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the repository root, so that diagnostics show repository-relative paths."""
    monkeypatch.chdir(ROOT)
    return ROOT
