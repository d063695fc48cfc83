"""mypy checks the code as installed: a `harnessc.*` import resolves to its module (through
build/package, scripts/package_tree.py), so the seam between the compiler and the runtime is
typed; and the runtime and compiler/lower are checked with every check of `--strict`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import mypy.main

from .conftest import ROOT

PROBE = """\
from harnessc.runtime import model as m
from harnessc.compiler.lower import lower_program

reveal_type(m.risk_rank)
reveal_type(lower_program)


def level(word: str) -> m.Risk:
    return word  # a plain string where the runtime's model wants a Literal
"""


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "package_tree.py")], check=True)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_mypy_resolves_harnessc_imports_and_checks_the_seam(tmp_path: Path) -> None:
    # mypy on this one file still reads the runtime's and the compiler's modules it imports:
    # were they unresolved (Any), the revealed types would be Any and the return no error
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    out = _mypy("--no-error-summary", str(probe))
    # (by the file's name: mypy may replay a cached result under the path it was first given)
    said = [line.split(": ", 1) for line in out.stdout.splitlines()]
    lines = [part[1] for part in said if Path(part[0]).name.startswith("probe.py:")]
    assert lines == [
        'note: Revealed type is "def (level: str) -> int"',
        'note: Revealed type is "def (resolution: harnessc.compiler.resolve.Resolution) -> '
        'harnessc.compiler.lower.core.Lowered"',
        'error: Incompatible return value type (got "str", expected '
        "\"Literal['low', 'medium', 'high', 'critical']\")  [return-value]",
    ], out.stdout + out.stderr


def test_the_strict_override_holds_every_check_of_strict() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    [strict] = [o for o in config["overrides"] if "harnessc.runtime.*" in o["module"]]
    assert strict["module"] == ["harnessc.runtime.*", "harnessc.compiler.lower.*"]
    checks = {k: v for k, v in strict.items() if k != "module"}
    given = {(k[3:], not v) if k.startswith("no_") else (k, v) for k, v in checks.items()}
    given |= {(k, v) for k, v in config.items() if k == "warn_redundant_casts"}  # global only
    _, _, assignments = mypy.main.define_options()
    assert set(assignments) <= given
