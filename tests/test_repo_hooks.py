"""The repository's own .pre-commit-config.yaml: valid, offline, and every hook resolves.

Every hook is local and runs from the venv, so nothing here needs the network (the hooks that
other projects install from .pre-commit-hooks.yaml are exercised in tests/test_precommit.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
VENV_BIN = ".venv/bin/"


def _config() -> dict:
    return yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))


def _hooks() -> dict[str, dict]:
    return {hook["id"]: hook for repo in _config()["repos"] for hook in repo["hooks"]}


def _pre_commit(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    if not PRE_COMMIT.exists():
        pytest.skip("needs `pre-commit` in the venv (the dev extra)")
    environ = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1", **env}
    return subprocess.run(
        [str(PRE_COMMIT), *args], cwd=ROOT, env=environ, capture_output=True, text=True
    )


def test_the_config_is_valid(tmp_path: Path) -> None:
    done = _pre_commit("validate-config", ".pre-commit-config.yaml", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_hook_is_local_and_runs_from_the_venv() -> None:
    assert [repo["repo"] for repo in _config()["repos"]] == ["local"]
    assert {"ruff", "ruff-format", "mypy", "import-contracts"} <= set(_hooks())
    for hook_id, hook in _hooks().items():
        program = hook["entry"].split()[0]
        assert program.startswith(VENV_BIN), hook_id
        if (ROOT / ".venv").is_dir():
            assert (ROOT / program).is_file(), f"{hook_id}: {program} is not installed"


def test_the_harnessc_hooks_are_the_published_ones_over_examples_and_stdlib() -> None:
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hooks = _hooks()
    for published in manifest:
        ours = hooks[published["id"]]
        assert ours["entry"] == VENV_BIN + published["entry"]
        assert ours["name"] == published["name"]
        assert ours["files"] == r"^(examples|stdlib)/.*\.harness$"


def test_the_hooks_pass_on_the_repository(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists() or not (ROOT / ".venv").is_dir():
        pytest.skip("needs git, a checkout and its venv")
    files = ["stdlib/risk.harness", "examples/remediation/scanner.harness", "tests/conftest.py"]
    # the hooks that rewrite files, and mypy (the whole tree, slow), are left to commit time
    skip = "mypy,ruff-format,harnessc-fmt"
    done = _pre_commit("run", "--color", "never", "--files", *files, tmp_path=tmp_path, SKIP=skip)
    assert done.returncode == 0, done.stdout + done.stderr
    for hook in ("ruff check", "import contracts", "harnessc check", "harnessc lint"):
        assert any(
            line.startswith(hook) and line.endswith("Passed") for line in done.stdout.splitlines()
        ), done.stdout
