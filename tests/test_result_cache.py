"""The result cache of check and lint (compiler/result_cache.py): an unchanged spec is answered
from the stored result, byte for byte as the run that found it printed it; any change to a file
the run read, to the options or to the compiler is a miss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harnessc.compiler import pipeline, result_cache
from harnessc.compiler.cli import main

MAIN = """\
harness w { version "1" }
import "./lib.harness" as lib
tool a.run {
  summary "Run the thing."
  effects read
  input { target: string }
}
policy p {
  default deny
  allow a.run when args.target == "x"
  allow lib.x
}
"""
LIB = 'tool lib.x {\n  summary "Do x."\n  effects read\n}\n'
TYPO = MAIN.replace('args.target == "x"', "args.targt == 1")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESSC_NO_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.harness").write_text(MAIN, encoding="utf-8")
    (tmp_path / "lib.harness").write_text(LIB, encoding="utf-8")
    return tmp_path


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One entry per compile (check and lint both run the pipeline's stages once; a cache hit
    runs none)."""
    runs: list[str] = []
    stages = pipeline._stages

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        runs.append("compile")
        return stages(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_stages", counted)
    return runs


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_unchanged_spec_is_answered_from_the_cache_exactly_as_it_was_found(
    folder: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "main.harness").write_text(TYPO, encoding="utf-8")
    for fmt in ("human", "json", "sarif"):
        first = run(["check", "--format", fmt, "main.harness"], capsys)
        second = run(["check", "--format", fmt, "main.harness"], capsys)
        assert first[0] == 1 and "H327" in first[1] + first[2]
        assert second == first
    # one compile for the three formats: the format is how a result prints, not what it is
    assert compiles == ["compile"]


def test_a_change_to_any_file_the_run_read_is_a_miss(
    folder: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    (folder / "lib.harness").write_text(LIB.replace("effects read", "effects red"), "utf-8")
    code, _, err = run(["check", "main.harness"], capsys)
    assert code == 1 and "lib.harness:3" in err
    (folder / "lib.harness").unlink()
    assert run(["check", "main.harness"], capsys)[0] == 1
    # a result with an import that cannot be loaded is not stored: it depends on a file that
    # is not there (and on the folder's listing, for its hint)
    missing = run(["check", "main.harness"], capsys)
    assert missing[0] == 1 and "H203" in missing[2]
    (folder / "lib.harness").write_text(LIB, encoding="utf-8")
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    assert compiles == ["compile"] * 5


def test_options_the_working_folder_and_the_command_are_part_of_the_key(
    folder: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, warned = run(["lint", "main.harness"], capsys)
    assert code == 0 and "note[L014]" in warned
    assert run(["lint", "--ignore", "L014", "-q", "main.harness"], capsys)[1:] == ("", "")
    assert run(["lint", "main.harness"], capsys)[2] == warned
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    os.chdir(folder.parent)
    code, _, err = run(["lint", f"{folder.name}/main.harness"], capsys)
    assert f"{folder.name}/main.harness" in err or f"{folder.name}/lib.harness" in err
    assert compiles == ["compile"] * 4


def test_the_harnessc_environment_is_part_of_the_key_and_old_entries_are_pruned(
    folder: Path,
    compiles: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(["check", "main.harness"], capsys)
    monkeypatch.setenv("HARNESSC_SOME_SWITCH", "1")
    run(["check", "main.harness"], capsys)
    run(["check", "main.harness"], capsys)
    assert compiles == ["compile"] * 2
    monkeypatch.setattr(result_cache, "MAX_ENTRIES", 4)
    for n in range(6):
        monkeypatch.setenv("HARNESSC_SOME_SWITCH", str(n + 2))
        run(["check", "main.harness"], capsys)
    assert len(list((folder / "cache" / "harnessc" / "results").iterdir())) <= 4


def test_no_cache_and_the_environment_switch_compile_every_time(
    folder: Path,
    compiles: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(["check", "main.harness"], capsys)
    run(["check", "--no-cache", "main.harness"], capsys)
    monkeypatch.setenv("HARNESSC_NO_CACHE", "1")
    run(["check", "main.harness"], capsys)
    assert compiles == ["compile"] * 3


def test_a_damaged_entry_or_an_unwritable_folder_is_a_miss_never_an_error(
    folder: Path,
    compiles: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    (entry,) = (folder / "cache" / "harnessc" / "results").iterdir()
    for damage in ("{not json", json.dumps({"format": 1, "reads": [["x"]]}), ""):
        entry.write_text(damage, encoding="utf-8")
        assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    blocker = folder / "blocker"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    assert run(["check", "-q", "main.harness"], capsys) == (0, "", "")
    assert compiles == ["compile"] * 6


def test_the_fingerprint_follows_the_libraries_the_compiler_reports_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = tmp_path / "fingerprinted_library.py"
    library.write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(result_cache, "_LIBRARIES", ("fingerprinted_library",))
    result_cache.compiler_fingerprint.cache_clear()
    try:
        before = result_cache.compiler_fingerprint()
        library.write_text("VERSION = 22\n")
        result_cache.compiler_fingerprint.cache_clear()
        assert result_cache.compiler_fingerprint() != before
    finally:
        result_cache.compiler_fingerprint.cache_clear()


def test_a_hit_starts_without_the_parser_the_models_or_the_solver(folder: Path) -> None:
    probe = (
        "import sys\n"
        "from harnessc.compiler.cli import main\n"
        "code = main(['check', '-q', 'main.harness'])\n"
        "heavy = sorted({'lark', 'pydantic', 'z3', 'networkx', 'numpy', 'jinja2'}"
        " & set(sys.modules))\n"
        "print(code, heavy)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
        ).stdout
        for _ in range(2)
    ]
    assert runs[0].startswith("0 ") and "lark" in runs[0]
    assert runs[1] == "0 []\n"


def test_a_hit_keeps_the_silenced_findings_sarif_lists(
    folder: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = LIB.replace("tool lib.x {", "tool lib.x {  # harnessc: ignore[L014] internal")
    (folder / "lib.harness").write_text(text, encoding="utf-8")
    first = run(["lint", "--format", "sarif", "main.harness"], capsys)
    second = run(["lint", "--format", "sarif", "main.harness"], capsys)
    assert second == first and compiles == ["compile"]
    results = json.loads(second[1])["runs"][0]["results"]
    silenced = [r for r in results if r.get("suppressions")]
    assert [r["ruleId"] for r in silenced] == ["L014"]
    assert silenced[0]["suppressions"][0] == {"kind": "inSource", "justification": "internal"}
