"""The parser's tables are cached between runs (`dsl.builder.parser_cache_file`): a cold run
writes the cache, a warm run reads it and parses the same, and a damaged or stale file only
costs a rebuild. Each run is its own process, since a process builds its parser once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

SPEC = ROOT / "examples" / "remediation" / "remediation.harness"
PROGRAM = """
import sys
from harnessc.dsl.builder import parser_cache_file
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import format_module
from harnessc.dsl.source import Source
text = open(sys.argv[1], encoding="utf-8").read()
result = parse_source(Source("spec.harness", text))
print(parser_cache_file())
print(len(result.diagnostics), format_module(result.module))
"""


def _run(cache_home: Path) -> tuple[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(SPEC)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    where, parsed = done.stdout.split("\n", 1)
    return where, parsed


def test_a_warm_run_reads_the_cache_and_parses_the_same(tmp_path: Path) -> None:
    where, cold = _run(tmp_path)
    cache = Path(where)
    assert cache.parent == tmp_path / "harnessc" and cache.stat().st_size > 0
    _, warm = _run(tmp_path)
    assert warm == cold and cold.startswith("0 ")


def test_a_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    where, cold = _run(tmp_path)
    Path(where).write_bytes(b"not a cache\n")
    _, again = _run(tmp_path)
    assert again == cold
    assert Path(where).read_bytes() != b"not a cache\n"  # written again


def test_an_unwritable_cache_folder_only_costs_the_build(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would go", encoding="utf-8")
    where, parsed = _run(blocked)
    assert where == "None" and parsed.startswith("0 ")
