"""The `timing` subset (tests/timing.py) that `scripts/flake.sh --subset` runs under load: a
test module that waits on anything joins it by what it uses, so a new one cannot be forgotten."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT
from .timing import subset, waits


def module(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "import threading\n",
        "import time\ndef test_x():\n    time.sleep(0.1)\n",
        "def test_x(proc):\n    proc.wait(timeout=5)\n",
        "def test_x(run):\n    run(['x'], timeout=60)\n",
        "from playwright import sync_api\n",
        "import asyncio\n",
        "def test_x(h):\n    eventually(lambda: h.done, 'the run ending')\n",
        "import os, signal\ndef test_x(pid):\n    os.kill(pid, signal.SIGKILL)\n",
    ],
)
def test_a_module_that_waits_joins_the_subset(tmp_path: Path, text: str) -> None:
    assert waits(module(tmp_path, "test_waits", text))


@pytest.mark.parametrize(
    "text",
    [
        "def test_x():\n    assert ', '.join(['a']) == 'a'\n",
        "SPEC = 'tool t { timeout 20s }'\n",
        "import subprocess\ndef test_x():\n    subprocess.run(['true'], check=True)\n",
        "# time.sleep(1) in a comment is no wait\n",
    ],
)
def test_a_module_that_does_not_wait_stays_out(tmp_path: Path, text: str) -> None:
    assert not waits(module(tmp_path, "test_plain", text))


def test_a_helper_that_waits_brings_its_importers_in(tmp_path: Path) -> None:
    # waits() follows the helper modules of tests/ it imports; a copy in tests/'s folder layout
    helper = module(tmp_path, "servers", "import threading\n")
    user = module(tmp_path, "test_user", "from .servers import start\n")
    from . import timing

    original = timing.TESTS
    timing.TESTS = tmp_path
    try:
        timing.waits.cache_clear()
        timing._imports.cache_clear()
        assert waits(helper) and waits(user)
    finally:
        timing.TESTS = original
        timing.waits.cache_clear()
        timing._imports.cache_clear()


def test_the_subset_holds_the_modules_that_wait_on_servers_and_threads() -> None:
    names = {p.name for p in subset()}
    assert {"test_mcp_live.py", "test_console.py", "test_workflows.py", "test_lsp.py"} <= names
    assert "test_parser.py" not in names and "test_printer.py" not in names


def test_flake_sh_lists_the_subset() -> None:
    listed = subprocess.run(
        ["bash", "scripts/flake.sh", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert listed == [str(p.relative_to(ROOT)) for p in subset()]


def test_the_waiting_tests_carry_the_timing_mark(request: pytest.FixtureRequest) -> None:
    # this module names the waits it recognises (`threading`, `timeout=`…), so by the rule it
    # joins the subset itself: the conftest hook gave this very test the mark
    assert waits(Path(__file__))
    assert request.node.get_closest_marker("timing") is not None
