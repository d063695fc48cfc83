"""Golden diagnostics: every case under tests/diagnostics/cases renders exactly as recorded.

A case is `CODE-slug.harness` (or a folder `CODE-slug/` whose entry is `main.harness`), and its
expected output is `CODE-slug.diagnostics` beside it: `harnessc check --format plain` (`harnessc
lint` for a lint rule's code) run from the repository root. `pytest --update-goldens` rewrites
the expected files.

A spec under tests/diagnostics/combined holds several mistakes at once: `harnessc check` reports
every one of them, each once, in one run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harnessc.compiler.lints import RULES
from harnessc.compiler.pipeline import build, check, lint
from harnessc.dsl.codes import CODES
from harnessc.dsl.render_formats import render

from .conftest import ROOT, update_goldens
from .test_lint import CASE_ENVIRONMENT

CASES = ROOT / "tests" / "diagnostics" / "cases"
COMBINED = ROOT / "tests" / "diagnostics" / "combined"
_CASE_NAME = re.compile(r"^([HL][0-9]{3})-([a-z0-9-]+)")


def _cases() -> list[tuple[str, Path, Path]]:
    found = []
    for path in sorted(CASES.iterdir()):
        if path.suffix == ".harness":
            found.append((path.stem, path, path.with_suffix(".diagnostics")))
        elif path.is_dir() and (path / "main.harness").exists():
            found.append((path.name, path / "main.harness", CASES / f"{path.name}.diagnostics"))
    return found


@pytest.mark.parametrize(("name", "entry", "expected"), _cases(), ids=lambda v: str(v))
def test_case_renders_as_recorded(
    name: str,
    entry: Path,
    expected: Path,
    in_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, value in CASE_ENVIRONMENT.get(name[:4], {}).items():
        monkeypatch.setenv(variable, value)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no answer of another budget
    # a lint rule's code is reported by `harnessc lint` (check + lints), the others by `check`
    run = lint if name[:4] in RULES else check
    if name.startswith("H5"):  # build codes: `harnessc build --check`, which writes nothing
        result = build([entry.relative_to(ROOT)], ROOT / "build", check=True, embed=False).check
    else:
        result = run([entry.relative_to(ROOT)])
    rendered = render(result.diagnostics, "plain", limit=None) + "\n"
    code = _CASE_NAME.match(name)
    assert code, f"case name {name!r} must start with CODE-slug"
    assert any(d.code == code.group(1) for d in result.diagnostics), (
        f"{name} does not trigger {code.group(1)}:\n{rendered}"
    )
    assert CODES[code.group(1)].slug == code.group(2), f"{name}: slug does not match the registry"
    if update_goldens():
        expected.write_text(rendered, encoding="utf-8")
    assert expected.exists(), f"no golden {expected.name}; run pytest --update-goldens"
    assert rendered == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("entry", sorted(COMBINED.glob("*.harness")), ids=lambda p: p.stem)
def test_combined_case_renders_as_recorded(entry: Path, in_root: Path) -> None:
    result = check([entry.relative_to(ROOT)])
    rendered = render(result.diagnostics, "plain", limit=None) + "\n"
    expected = entry.with_suffix(".diagnostics")
    if update_goldens():
        expected.write_text(rendered, encoding="utf-8")
    assert expected.exists(), f"no golden {expected.name}; run pytest --update-goldens"
    assert rendered == expected.read_text(encoding="utf-8")


def test_every_source_code_has_a_case() -> None:
    """Every code has a fixture, but for file codes (H0, tested in test_bad_input.py) and the
    internal error (H9, tested in test_cli.py)."""
    covered = {_CASE_NAME.match(name).group(1) for name, _, _ in _cases()}  # type: ignore[union-attr]
    assert RULES  # the lint rules have registered their codes
    wanted = {code for code in CODES if code[:2] not in ("H0", "H9")}
    assert sorted(wanted - covered) == []
