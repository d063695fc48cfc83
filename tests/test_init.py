"""`harnessc init`: what it writes checks, lints, tests and formats clean, its pre-commit hooks
are the project's own and run, and it never overwrites a file unless told to."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from harnessc.compiler.cli import main
from harnessc.compiler.init import EXAMPLES, STARTER_NAME, planned_files

from .conftest import ROOT

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")


def _init(tmp_path: Path, *argv: str) -> tuple[int, Path]:
    folder = tmp_path / "specs"
    return main(["init", str(folder), *argv]), folder


def _root(example: str | None) -> str:
    return STARTER_NAME if example is None else EXAMPLES[example].root


@pytest.mark.parametrize("example", [None, "remediation", "workspace"])
def test_what_init_writes_checks_lints_tests_and_formats_clean(
    tmp_path: Path, example: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, folder = _init(tmp_path, *(["--example", example] if example else []))
    assert code == 0
    written = sorted(p.name for p in folder.iterdir())
    assert {".pre-commit-config.yaml", "README.md", _root(example)} <= set(written)
    out = capsys.readouterr().out
    assert f"wrote {folder / _root(example)}" in out
    root = str(folder / _root(example))
    specs = [str(p) for p in sorted(folder.glob("*.harness"))]
    assert main(["check", "--quiet", root]) == 0
    assert main(["lint", "--strict", "--quiet", root]) == 0
    assert main(["test", root]) == 0
    assert "0 failed" in capsys.readouterr().out
    assert main(["fmt", "--check", *specs]) == 0


def test_the_starter_has_each_piece_the_readme_promises(tmp_path: Path) -> None:
    from harnessc.compiler.pipeline import check

    path = tmp_path / STARTER_NAME
    path.write_text(planned_files(None)[STARTER_NAME], encoding="utf-8")
    spec = check([str(path)]).model
    assert spec is not None
    effects = {rule.effect for p in spec.policies.values() for rule in p.rules}
    assert effects == {"allow", "ask", "deny"}
    assert spec.tools and spec.surfaces and spec.agents and len(spec.tests) == 3


def test_an_existing_file_is_never_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "README.md").write_text("ours\n", encoding="utf-8")
    assert main(["init", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "`README.md` already exists" in err and "--force" in err
    assert (folder / "README.md").read_text(encoding="utf-8") == "ours\n"
    assert not (folder / STARTER_NAME).exists(), "nothing is written when one file exists"

    assert main(["init", str(folder), "--force"]) == 0
    assert (folder / "README.md").read_text(encoding="utf-8") != "ours\n"
    assert (folder / STARTER_NAME).exists()


def test_init_into_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("x\n", encoding="utf-8")
    assert main(["init", str(target)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    # a folder that cannot be made: the system's reason, in words
    assert main(["init", str(target / "starter")]) == 2
    err = capsys.readouterr().err
    assert err == f"harnessc init: cannot write in `{target / 'starter'}`: not a directory\n"


def test_an_unknown_example_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["init", "x", "--example", "payments"])
    assert exit_.value.code == 2
    assert "invalid choice: 'payments'" in capsys.readouterr().err


def test_the_pre_commit_hooks_are_the_projects_own() -> None:
    """The hooks `init` writes run what .pre-commit-hooks.yaml's hooks run."""
    ours = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    written = yaml.safe_load(planned_files(None)[".pre-commit-config.yaml"])
    (repo,) = written["repos"]
    assert repo["repo"] == "local"
    hooks = {h["id"]: h for h in repo["hooks"]}
    assert hooks.keys() == ours.keys()
    for hook_id, hook in hooks.items():
        assert hook["entry"] == ours[hook_id]["entry"]
        assert hook["files"] == ours[hook_id]["files"]


@pytest.mark.skipif(not PRE_COMMIT.exists() or shutil.which("git") is None, reason="pre-commit")
def test_the_written_hooks_run_under_pre_commit(tmp_path: Path) -> None:
    """`pre-commit run` in the new folder (made a git repository) passes, then fails once a spec
    is broken: the hooks need no network (`repo: local`, the `harnessc` on PATH)."""
    code, folder = _init(tmp_path)
    assert code == 0
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
    }

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=300
        )

    assert run("git", "init", "-q").returncode == 0
    assert run("git", "add", "-A").returncode == 0
    passed = run(str(PRE_COMMIT), "run", "--all-files")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    (folder / STARTER_NAME).write_text("tool x {\n", encoding="utf-8")
    failed = run(str(PRE_COMMIT), "run", "--all-files")
    assert failed.returncode == 1
    assert "H1" in failed.stdout


def test_a_wheel_ships_the_examples_init_copies() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    assert config["setuptools"]["package-dir"]["harnessc.examples"] == "examples"
    data = config["setuptools"]["package-data"]["harnessc.examples"]
    for example in EXAMPLES.values():
        root = Path("examples") / example.folder / example.root
        assert (ROOT / root).is_file()
        assert any(root.relative_to("examples").match(pattern) for pattern in data)


def test_the_readme_documents_the_hooks_init_writes() -> None:
    """README.md's pre-commit block is the one `init` writes, and nothing points at a repository
    or a `rev` that does not exist."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load(planned_files(None)[".pre-commit-config.yaml"])
    for doc in (readme, (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")):
        assert "github.com/harnessc" not in doc
        assert "rev: v" not in doc
