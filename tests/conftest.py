"""Shared test setup: the golden-file switch and paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# harnessc's caches (parser tables, check results, analysis) go to a folder of this run, never
# the user's ~/.cache; subprocesses the tests start inherit it
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="harnessc-test-cache-")

# No wall-clock limit on a property's example either: on a loaded machine an example that takes
# 250 ms is not a bug (a test that must scale says so by counting operations, tests/counting.py)
settings.register_profile("harnessc", deadline=None)
# CI (.ci/run) draws the same examples on every run, so a red CI is a regression and never the
# luck of a draw; runs elsewhere draw afresh each time and explore further
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
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


def update_goldens() -> bool:
    return os.environ.get("HARNESSC_UPDATE_GOLDENS") == "1"


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the repository root, so that diagnostics show repository-relative paths."""
    monkeypatch.chdir(ROOT)
    return ROOT
