"""A spec reads files only inside its project root and the standard library (H009).

Specs are checked in CI on pull requests, so a spec is untrusted input: an import that leaves
the project (`..`, an absolute path, a link) is refused without the file being read, and no
output of any command shows what the file holds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check
from harnessc.dsl.render_formats import render

from .conftest import ROOT

MARKER = "SECRET_MARKER_7f3a"
TOOL = (
    'tool t {\n  summary "T."\n  use_when "T."\n  effects read\n  risk low\n'
    "  input { p: string }\n}\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp/secret.txt` (a marker line, as /etc/passwd's first line is echoed) outside the
    project `tmp/proj` (its `harness.toml`), and `tmp/shared.harness`, a harmless spec outside
    it; the working directory is the project's."""
    (tmp_path / "secret.txt").write_text(f"{MARKER} root:x:0:0\n", encoding="utf-8")
    (tmp_path / "shared.harness").write_text(TOOL, encoding="utf-8")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "harness.toml").write_text("", encoding="utf-8")
    monkeypatch.chdir(proj)
    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "cache"))
    return proj


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def escapes(proj: Path) -> dict[str, str]:
    """Every way an import may name the secret: `..`, as deep as /etc/passwd's, absolute."""
    secret = proj.parent / "secret.txt"
    deep = "../" * (len(proj.parts) + 3) + str(secret).lstrip("/")
    return {"dotdot": "../secret.txt", "deep": deep, "absolute": str(secret)}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("how", ["dotdot", "deep", "absolute"])
def test_an_import_out_of_the_project_is_refused_and_never_shown(
    project: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = escapes(project)[how]
    write(project / "main.harness", f'import "{target}"\n{TOOL}')
    write(project / "build.harness", f'harness b {{ version "1" }}\nimport "{target}"\n{TOOL}')
    test = f'import "{target}"\n{TOOL}policy p {{\n  default deny\n  allow t\n}}\n'
    write(
        project / "spec_test.harness", test + 'test "x" {\n  call t { p: "a" }\n  expect allow\n}\n'
    )
    outputs = {}
    for argv in (
        ("check", "--no-cache", "main.harness"),
        ("check", "--no-cache", "--format", "json", "main.harness"),
        ("check", "--no-cache", "--format", "sarif", "main.harness"),
        ("lint", "--no-cache", "main.harness"),
        ("build", "build.harness", "-o", str(project / "out"), "--no-embed"),
        ("test", "spec_test.harness"),
        ("debug", "model", "main.harness"),
    ):
        code, output = run(capsys, *argv)
        outputs[argv[0]] = output
        assert MARKER not in output, argv
        assert "H009" in output, (argv, output)
        assert code != 0, argv
    assert "outside the project root" in outputs["check"]


def test_the_language_server_refuses_it_too(project: Path) -> None:
    from harnessc.compiler.lsp.workspace import Workspace

    specs = Workspace()
    path = str((project / "main.harness").resolve())
    text = f'import "{escapes(project)["dotdot"]}"\n{TOOL}'
    specs.open(path, 1, text)
    build = specs.check(path)
    assert build is not None
    shown = render(build.result.diagnostics, "plain", limit=None)
    assert [d.code for d in build.result.diagnostics] == ["H009"], shown
    assert MARKER not in shown


def test_a_link_out_of_the_project_is_refused_as_an_import_and_as_a_named_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = project.parent / "elsewhere"
    outside.mkdir()
    (outside / "x.harness").write_text(TOOL, encoding="utf-8")
    (project / "lib").symlink_to(outside, target_is_directory=True)
    (project / "evil.harness").symlink_to(project.parent / "secret.txt")
    write(project / "main.harness", 'import "./lib/x.harness"\npolicy p {\n  allow t\n}\n')
    code, output = run(capsys, "check", "--no-cache", "main.harness")
    assert code == 1 and "`lib/x.harness` is outside the project root" in output, output
    for argv in (
        ("check", "--no-cache", "evil.harness"),
        ("lint", "--no-cache", "evil.harness"),
        ("fmt", "--check", "evil.harness"),
        ("debug", "tokens", "evil.harness"),
        ("test", "evil.harness"),
    ):
        code, output = run(capsys, *argv)
        assert MARKER not in output, argv
        assert "H009" in output, (argv, output)


def test_a_link_inside_the_project_is_followed(project: Path) -> None:
    write(project / "real" / "x.harness", TOOL)
    (project / "lib").symlink_to(project / "real", target_is_directory=True)
    write(project / "main.harness", 'import "./lib/x.harness"\npolicy p {\n  allow t\n}\n')
    result = check([project / "main.harness"])
    assert result.ok, render(result.diagnostics, "plain")


def test_root_widens_or_narrows_the_project(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / "main.harness", 'import "../shared.harness"\npolicy p {\n  allow t\n}\n')
    code, output = run(capsys, "check", "main.harness")
    assert code == 1 and "H009" in output
    # the stored result of the run above must not answer for another root
    code, output = run(capsys, "check", "--root", "..", "main.harness")
    assert code == 0, output
    write(project / "sub" / "a.harness", 'import "../main.harness"\n')
    code, output = run(capsys, "check", "--root", "sub", "sub/a.harness")
    assert code == 1 and "`main.harness` is outside the project root `sub`" in output, output
    code, output = run(capsys, "check", "--root", "nowhere", "main.harness")
    assert code == 2 and "not a folder" in output


def test_the_nearest_marker_above_the_spec_is_its_root(tmp_path: Path) -> None:
    from harnessc.dsl.files import project_root, rooted_at

    write(tmp_path / "pyproject.toml", "")
    spec = write(tmp_path / "a" / "b" / "s.harness", TOOL)
    assert project_root(spec) == tmp_path
    write(tmp_path / "a" / "harness.toml", "")
    assert project_root(spec) == tmp_path / "a"
    with rooted_at(tmp_path / "a" / "b"):
        assert project_root(spec) == tmp_path / "a" / "b"


def test_without_a_marker_the_root_is_the_spec_folder(tmp_path: Path) -> None:
    if any((p / m).exists() for p in tmp_path.parents for m in ("pyproject.toml", "harness.toml")):
        pytest.skip("a folder above the temporary folder marks a project")
    write(tmp_path / "shared.harness", TOOL)
    spec = write(tmp_path / "dir" / "main.harness", 'import "../shared.harness"\n')
    assert [d.code for d in check([spec]).diagnostics] == ["H009"]


def test_standard_library_imports_still_work(project: Path) -> None:
    spec = write(
        project / "main.harness",
        f"import std.risk\n{TOOL}policy p {{\n  default deny\n  include risk.default\n}}\n",
    )
    result = check([spec])
    assert not [d for d in result.diagnostics if d.code in ("H009", "H203")], render(
        result.diagnostics, "plain"
    )


def test_the_examples_still_check() -> None:
    for spec in sorted((ROOT / "examples").glob("*/*.harness")):
        result = check([spec])
        assert result.ok, render(result.diagnostics, "plain")


def test_a_missing_file_outside_is_refused_before_it_is_looked_at(project: Path) -> None:
    # not `no file`: whether a file exists outside the project is not told either
    write(project / "main.harness", 'import "../../nothing/here.harness"\n')
    assert [d.code for d in check([project / "main.harness"]).diagnostics] == ["H009"]


def test_a_relative_root_is_taken_from_the_working_directory(project: Path) -> None:
    from harnessc.dsl.files import project_root, rooted_at

    with rooted_at(".."):
        assert project_root("main.harness") == Path(os.path.abspath(".."))


def test_the_console_spec_is_confined_and_never_shown(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`console --spec` (and `replay`, `why`) compile their spec through `load_spec`."""
    from harnessc.compiler.review.replay import load_spec

    write(project / "main.harness", f'import "{escapes(project)["dotdot"]}"\n{TOOL}')
    (project / "model.json").symlink_to(project.parent / "secret.txt")
    write(project.parent / "inside.json", f"{MARKER}\n")
    for spec in ("main.harness", "model.json", "../inside.json"):
        with rooted_at_parent(project, spec):
            assert load_spec(spec, nothing="the console was not started") is None
        output = "".join(capsys.readouterr())
        assert MARKER not in output, (spec, output)
        assert "the console was not started" in output or "not a compiled spec" in output


def rooted_at_parent(project: Path, spec: str):  # type: ignore[no-untyped-def]
    """`../inside.json` is inside a root one folder up: a file that is not a spec is refused
    without its text being shown, wherever it is."""
    from contextlib import nullcontext

    from harnessc.dsl.files import rooted_at

    return rooted_at(project.parent) if spec.startswith("..") else nullcontext()


def test_the_language_server_takes_a_root(project: Path) -> None:
    """`harnessc lsp --root DIR`: checks run on a worker thread, which is given the root."""
    import threading

    from harnessc.compiler.lsp.workspace import Workspace

    specs = Workspace()
    specs.root = str(project.parent)
    path = str((project / "main.harness").resolve())
    specs.open(path, 1, 'import "../shared.harness"\npolicy p {\n  allow t\n}\n')
    builds = []
    worker = threading.Thread(target=lambda: builds.append(specs.check(path)))
    worker.start()
    worker.join()
    assert builds[0] is not None
    assert builds[0].result.ok, render(builds[0].result.diagnostics, "plain")
