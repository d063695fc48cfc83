"""Every code lint can print is a code of the one registry (dsl/codes.py), so each command and
format that names codes knows it: `harnessc explain`, `--select`/`--ignore`, `# harnessc:
ignore[…]`, and `lint --format` human, plain, json, sarif and github.

The codes are enumerated from the lint framework (every registered rule) and from the
compiler's sources (every `Lxxx` a stage emits, such as the workflow graph's L101), never from
a hand-written list. Each command runs in a fresh process, as a user runs it: a process that
answers from the result cache never loads the lint rules, which is where a code known only to
the rules went missing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from harnessc.compiler.lints import RULES
from harnessc.dsl.codes import CODES

from .conftest import ROOT
from .test_lint import CASE_ENVIRONMENT

CASES = ROOT / "tests" / "diagnostics" / "cases"
_EMITTED = re.compile(r"\"(L[0-9]{3})\"")


def _emitted_by_the_compiler() -> set[str]:
    """Every `"Lxxx"` literal in the compiler's sources: the codes some stage or rule emits."""
    found: set[str] = set()
    for path in (ROOT / "compiler").rglob("*.py"):
        found.update(_EMITTED.findall(path.read_text(encoding="utf-8")))
    return found


LINT_CODES = sorted(set(RULES) | _emitted_by_the_compiler())


def _case(code: str) -> Path:
    (path,) = CASES.glob(f"{code}-*.harness")
    return path


def _harnessc(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_the_codes_are_found_and_each_is_in_the_registry() -> None:
    assert len(RULES) >= 20 and "L101" in LINT_CODES  # the enumeration sees rules and stages
    assert [code for code in LINT_CODES if code not in CODES] == []
    for code in LINT_CODES:
        assert CODES[code].severity in ("warning", "note"), code
        _case(code)  # each has a spec that triggers it (tests/test_diagnostics_golden.py)
        # and its page (tools/gen_docs.py; tests/test_docs.py keeps them current)
        assert (ROOT / "docs" / "diagnostics" / f"{code}-{CODES[code].slug}.md").is_file(), code


def test_every_lint_code_is_explained_by_a_fresh_process() -> None:
    script = (
        "import sys\n"
        "from harnessc.compiler.cli import main\n"
        "for code in sys.argv[1:]:\n"
        "    assert main(['explain', code]) == 0, code\n"
        "    assert main(['explain', code.lower()]) == 0, code\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *LINT_CODES], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for code in LINT_CODES:
        assert f"{code} {CODES[code].slug} ({CODES[code].severity})" in done.stdout


@pytest.mark.parametrize("flag", ["--select", "--ignore"])
def test_select_and_ignore_accept_every_lint_code(flag: str, tmp_path: Path) -> None:
    clean = tmp_path / "clean.harness"
    clean.write_text(RULES["L012"].good, encoding="utf-8")
    done = _harnessc("lint", flag, ",".join(LINT_CODES), str(clean))
    assert done.returncode == 0, done.stderr
    assert "matches no diagnostic code" not in done.stderr


def test_an_inline_suppression_of_every_lint_code_is_known(tmp_path: Path) -> None:
    """A `# harnessc: ignore[…]` naming every code is not itself reported as naming an
    unknown code."""
    text = RULES["L012"].good.replace(
        "\n  default deny", f"\n  # harnessc: ignore[{', '.join(LINT_CODES)}] known\n  default deny"
    )
    assert text != RULES["L012"].good
    spec = tmp_path / "suppressed.harness"
    spec.write_text(text, encoding="utf-8")
    done = _harnessc("lint", "--format", "json", str(spec))
    assert not any("unknown" in d["message"] for d in json.loads(done.stdout)), done.stdout


def _validate_sarif(log: dict) -> None:
    from .test_sarif_schema import _validate

    _validate(log)


def _each_format(files: list[Path], codes: list[str], env: dict[str, str]) -> None:
    """`lint` over `files` in every format, each a fresh process; the first run fills the
    result cache and the later ones answer from it, as a second CI step would."""
    names = [str(f.relative_to(ROOT)) for f in files]
    for fmt in ("plain", "json", "sarif", "github", "human"):
        done = _harnessc("lint", "--format", fmt, *names, env=env)
        assert "H901" not in done.stdout + done.stderr, f"{fmt}:\n{done.stdout}{done.stderr}"
        assert done.returncode in (0, 1), f"{fmt}:\n{done.stderr}"
        out = done.stdout if fmt in ("json", "sarif", "github") else done.stderr + done.stdout
        if fmt == "json":
            seen = {d["code"] for d in json.loads(out)}
            assert set(codes) <= seen, sorted(set(codes) - seen)
        elif fmt == "sarif":
            log = json.loads(out)
            _validate_sarif(log)
            (run,) = log["runs"]
            rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
            results = {result["ruleId"] for result in run["results"]}
            assert set(codes) <= results, sorted(set(codes) - results)
            for code in codes:
                assert rules[code]["name"] == CODES[code].slug
                assert rules[code]["help"]["text"]
        elif fmt == "github":
            for code in codes:
                assert f"title={code}::" in out, code
        else:  # plain and human show the first diagnostics and count the rest
            assert re.search(r"\d+ (warning|note)", out), out


def test_a_spec_that_triggers_each_lint_code_renders_in_every_format(tmp_path: Path) -> None:
    cache = {"HARNESSC_CACHE_DIR": str(tmp_path / "cache")}
    plain = [code for code in LINT_CODES if code not in CASE_ENVIRONMENT]
    _each_format([_case(code) for code in plain], plain, cache)
    for code, env in CASE_ENVIRONMENT.items():
        _each_format([_case(code)], [code], {**cache, **env})
