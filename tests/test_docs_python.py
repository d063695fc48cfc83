"""Every `python` block of the docs, the README and the examples' READMEs is code a reader can
copy: it runs against the real package (CONTRIBUTING.md, "Code in Markdown").

The blocks of one page run in order, in one process and one namespace, as a reader pastes them
one after the other into one session, from a folder that holds what the page tells the reader to
have: the repository's `examples/`, and the remediation example built as the runtime guide
builds it (`harnessc build examples/remediation/remediation.harness -o build`, so the package
is `build/remediation/`).

A block that cannot run on its own says so with one word after `python` in its fence, and the
test holds it to that word:

- ```` ```python partial ```` — a fragment: it needs what the reader has and the page does not
  (a model provider's client, a live MCP server, another process, a spec of their own); it
  must still compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.cli import main

from .conftest import ROOT
from .test_markdown_specs import SpecBlock, fenced_blocks

MARKERS = {"partial": "a fragment that needs what the page does not give; it must compile"}
PAGES = sorted(
    [
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "README.md",
        *(ROOT / "examples").glob("*/README.md"),
    ]
)


def _blocks() -> dict[str, list[SpecBlock]]:
    found = {}
    for page in PAGES:
        blocks = fenced_blocks(page.read_text(encoding="utf-8"), "python")
        if blocks:
            found[page.relative_to(ROOT).as_posix()] = blocks
    return found


BLOCKS = _blocks()
EACH = [
    pytest.param(doc, block, id=f"{doc}:{block.line}")
    for doc, blocks in BLOCKS.items()
    for block in blocks
]
RUNNING = sorted(doc for doc, blocks in BLOCKS.items() if any(not b.markers for b in blocks))

_DRIVER = """\
import json, sys
namespace = {"__name__": "__main__"}
for name, code in json.load(sys.stdin):
    exec(compile(code, name, "exec"), namespace)
"""


def test_there_are_python_blocks_and_most_of_the_runtime_guide_runs() -> None:
    assert "docs/runtime.md" in RUNNING
    runtime = BLOCKS["docs/runtime.md"]
    assert sum(not b.markers for b in runtime) >= 4


@pytest.mark.parametrize(("doc", "block"), EACH)
def test_each_python_block_is_marked_as_it_is_and_compiles(doc: str, block: SpecBlock) -> None:
    unknown = set(block.markers) - MARKERS.keys()
    assert not unknown, f"{doc}:{block.line}: unknown marker {sorted(unknown)}; use {MARKERS}"
    compile(block.body, f"{doc}:{block.line}", "exec")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The remediation example built as the runtime guide builds it (without embeddings: they need
    the `embed` extra and change nothing the blocks show)."""
    out = tmp_path_factory.mktemp("built") / "build"
    spec = ROOT / "examples" / "remediation" / "remediation.harness"
    assert main(["build", str(spec), "-o", str(out), "--no-embed", "-q"]) == 0
    return out


def _folder(tmp_path: Path, built: Path) -> Path:
    """A reader's folder: the repository's examples and the build."""
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    (tmp_path / "build").symlink_to(built, target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize("doc", RUNNING)
def test_the_whole_python_blocks_of_each_page_run_in_order(
    doc: str, built: Path, tmp_path: Path
) -> None:
    blocks: list[Any] = [(f"{doc}:{b.line}", b.body) for b in BLOCKS[doc] if not b.markers]
    env = dict(os.environ)
    env.pop("HARNESSC_LOG_KEY", None)
    env.pop("HARNESSC_LOG_KEY_FILE", None)
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        input=json.dumps(blocks),
        cwd=_folder(tmp_path, built),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, f"{doc}: a block fails:\n{done.stderr[-4000:]}"


def test_a_block_that_does_not_run_is_caught(built: Path, tmp_path: Path) -> None:
    """The check can fail: the runtime guide's first example as it once was, loading a file
    the build does not write."""
    code = 'from harnessc.runtime import Harness\nHarness.from_json("build/spec.json")\n'
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        input=json.dumps([["docs/runtime.md:9", code]]),
        cwd=_folder(tmp_path, built),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "docs/runtime.md:9" in done.stderr
