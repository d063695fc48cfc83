"""Files named together: each is the root of its own build unless another named file's build
loads it; `--one-build` makes them one program; the report merges every build's findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check_each, lint_each, load_file
from harnessc.compiler.roots import file_roots

from .test_lint import RULES

TOOL = """tool orders.lookup {
  summary "SUMMARY"
  use_when "A customer asks about an order."
  effects read
  risk low
  input { id: string }
}
"""
POLICY = """policy support {
  default deny
  allow TOOL when actor.role == "agent"
}
"""


def spec(summary: str, allowed: str = "orders.lookup") -> str:
    """A spec declaring `orders.lookup` and a policy allowing `allowed`."""
    return TOOL.replace("SUMMARY", summary) + "\n" + POLICY.replace("TOOL", allowed)


def user(imported: str, allowed: str = "orders.lookup") -> str:
    """A spec that imports the tools it allows."""
    return f'import "./{imported}"\n\n' + POLICY.replace("TOOL", allowed)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_independent_specs_declaring_one_tool_id_pass_together(here: Path, capsys) -> None:
    write(here, "a.harness", spec("Look up an order."))
    write(here, "b.harness", spec("Find an order by its id."))
    for command in ("check", "lint"):
        assert main([command, "a.harness", "b.harness"]) == 0
        assert "2 files" in capsys.readouterr().err
    result = check_each(["a.harness", "b.harness"])
    assert [b.files[0].source.path for b in result.builds if b.files[0].source] == [
        "a.harness",
        "b.harness",
    ]


def test_one_build_restores_the_shared_program(here: Path, capsys) -> None:
    write(here, "a.harness", spec("Look up an order."))
    write(here, "b.harness", spec("Find an order by its id."))
    for command in ("check", "lint"):
        assert main([command, "--one-build", "a.harness", "b.harness"]) == 1
        err = capsys.readouterr().err
        assert "error[H202]: tool `orders.lookup` is declared twice in this build" in err
        assert err.count("error[H202]") == 1


def test_a_spec_and_the_module_it_imports_are_one_build(here: Path, capsys) -> None:
    write(here, "lib.harness", TOOL.replace("SUMMARY", "Look up an order."))
    write(here, "main.harness", user("lib.harness"))
    for named in (["lib.harness", "main.harness"], ["main.harness", "lib.harness"]):
        assert file_roots(named, load_file) == ["main.harness"]
        result = check_each(named)
        assert len(result.builds) == 1 and result.ok
        assert main(["check", *named]) == 0
        assert capsys.readouterr().err == "checked 2 files: no errors\n"


def test_a_file_named_twice_is_checked_once(here: Path) -> None:
    write(here, "a.harness", spec("Look up an order.", allowed="orders.lokup"))
    result = check_each(["a.harness", "./a.harness", str(here / "a.harness")])
    assert len(result.builds) == 1 and result.named == ["a.harness"]
    assert [d.code for d in result.diagnostics] == ["H201"]


def test_files_importing_each_other_are_one_build_rooted_at_the_first(here: Path) -> None:
    write(here, "a.harness", 'import "./b.harness"\n\n' + TOOL.replace("SUMMARY", "Look up."))
    write(here, "b.harness", 'import "./a.harness"\n\n' + POLICY.replace("TOOL", "orders.lookup"))
    assert file_roots(["b.harness", "a.harness"], load_file) == ["b.harness"]
    assert file_roots(["a.harness", "b.harness"], load_file) == ["a.harness"]
    result = check_each(["a.harness", "b.harness"])
    assert len(result.builds) == 1
    assert [d.code for d in result.diagnostics].count("H204") == 1
    # a third file loading the cycle roots the one build
    write(here, "c.harness", 'import "./a.harness"\n')
    assert file_roots(["a.harness", "b.harness", "c.harness"], load_file) == ["c.harness"]


def test_a_mistake_in_one_of_two_files_is_reported_once_at_its_file(here: Path, capsys) -> None:
    write(here, "a.harness", spec("Look up an order."))
    write(here, "b.harness", spec("Find an order by its id.", allowed="orders.lokup"))
    for command in ("check", "lint"):
        assert main([command, "--format", "json", "a.harness", "b.harness"]) == 1
        [found] = json.loads(capsys.readouterr().out)
        assert (found["code"], found["file"]) == ("H201", "b.harness")
        assert found["labels"][0]["text"] == "orders.lokup"
        assert main([command, "a.harness", "b.harness"]) == 1
        err = capsys.readouterr().err
        assert err.count("error[H201]") == 1 and "--> b.harness:" in err


def test_a_module_several_roots_import_is_reported_once(here: Path, capsys) -> None:
    # the shared module allows a tool it does not declare: every build that loads it says so
    write(here, "lib.harness", spec("Look up an order.", allowed="x"))
    write(here, "a.harness", user("lib.harness"))
    write(here, "b.harness", user("lib.harness").replace("support", "desk"))
    write(here, "z.harness", spec("Another.", allowed="orders.nope"))
    result = check_each(["z.harness", "b.harness", "a.harness"])
    assert len(result.builds) == 3
    assert [(d.code, d.file) for d in result.diagnostics] == [
        ("H201", "lib.harness"),
        ("H201", "z.harness"),
    ]
    assert main(["check", "--format", "sarif", "z.harness", "b.harness", "a.harness"]) == 1
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert uris == ["lib.harness", "z.harness"]


def test_the_exit_code_is_the_worst_of_the_builds(here: Path, capsys) -> None:
    write(here, "a.harness", spec("Look up an order.", allowed="orders.lokup"))
    assert main(["check", "a.harness", "missing.harness"]) == 2
    err = capsys.readouterr().err
    assert "error[H201]" in err and "missing.harness" in err
    write(here, "w.harness", RULES["L012"].bad)
    write(here, "ok.harness", RULES["L012"].good)
    assert main(["lint", "--strict", "ok.harness", "w.harness"]) == 1
    assert main(["lint", "ok.harness", "w.harness"]) == 0


def test_lint_merges_warnings_of_every_build(here: Path) -> None:
    write(here, "w1.harness", RULES["L012"].bad)
    write(here, "w2.harness", RULES["L012"].bad)
    result = lint_each(["w1.harness", "w2.harness"])
    assert [(d.code, d.file) for d in result.diagnostics] == [
        ("L012", "w1.harness"),
        ("L012", "w2.harness"),
    ]


def test_each_build_reads_the_configuration_above_its_root(here: Path, capsys) -> None:
    quiet, loud = here / "quiet", here / "loud"
    quiet.mkdir()
    loud.mkdir()
    (quiet / "pyproject.toml").write_text('[tool.harnessc]\nignore = ["L012"]\n', "utf-8")
    (loud / "pyproject.toml").write_text("[tool.harnessc]\n", "utf-8")
    write(quiet, "w.harness", RULES["L012"].bad)
    write(loud, "w.harness", RULES["L012"].bad)
    assert main(["lint", "--strict", "quiet/w.harness"]) == 0
    capsys.readouterr()
    for named in (["quiet/w.harness", "loud/w.harness"], ["loud/w.harness", "quiet/w.harness"]):
        assert main(["lint", "--strict", "--format", "json", *named]) == 1
        [found] = json.loads(capsys.readouterr().out)
        assert (found["code"], found["file"]) == ("L012", "loud/w.harness")
    # one build reads the configuration above the first file named
    assert main(["lint", "--strict", "--one-build", "quiet/w.harness", "loud/w.harness"]) == 1
    assert "H202" in capsys.readouterr().err


def test_test_runs_each_named_file_once_with_its_own_tests(here: Path, capsys) -> None:
    tested = spec("Look up an order.") + (
        '\ntest "agents look orders up" {\n'
        '  call orders.lookup(id: "o-1")\n'
        '  as actor { role: "agent" }\n'
        "  expect allow\n"
        "}\n"
    )
    write(here, "a.harness", tested)
    write(here, "b.harness", tested.replace("Look up an order.", "Find an order."))
    assert main(["test", "a.harness", "./a.harness", "b.harness"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASSED a.harness::agents look orders up") == 1
    assert out.count("PASSED b.harness::agents look orders up") == 1
