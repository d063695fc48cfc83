"""`pre-commit try-repo` with this repository's hooks, exactly as a user tries them out.

tests/test_precommit.py builds one environment and reuses it through `pre-commit run`; this test
calls the real `pre-commit try-repo REPO harnessc-check --files …` in a scratch git repository,
twice, so each call builds its own environment from the repository (pip-installs harnessc and
its dependencies from PyPI: a minute or two each, and it needs the network).

REPO is a git snapshot of this checkout's working tree (tracked and untracked files, not ignored
ones). `try-repo` on the checkout itself would commit only changes to tracked files, so while new
modules are not yet committed it would install a harnessc without them; the snapshot makes the
test judge the code that is in the tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .test_lint import RULES
from .test_precommit import NETWORK_ERRORS, PRE_COMMIT, git

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.network

BROKEN = "tool x {\n"
FIXED = RULES["L012"].good


def _env(base: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(base / "cache"),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "NO_COLOR": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    return env


def _snapshot(target: Path, env: dict[str, str]) -> None:
    listed = git(ROOT, env, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git(target, env, "init", "-q")
    git(target, env, "add", "-A")
    git(target, env, "commit", "-q", "-m", "snapshot")


def _try_repo(repo: Path, work: Path, env: dict[str, str], name: str) -> tuple[int, str]:
    command = [str(PRE_COMMIT), "try-repo", str(repo), "harnessc-check"]
    command += ["--verbose", "--color", "never", "--files", name]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    output = done.stdout + done.stderr
    if any(e in output for e in NETWORK_ERRORS):
        pytest.fail(
            "pre-commit could not install harnessc and its dependencies from the package "
            f"registry (this test needs network access to PyPI):\n{output[-3000:]}"
        )
    return done.returncode, output


def test_try_repo_check_hook_fails_on_a_broken_spec_and_passes_once_fixed(
    tmp_path: Path,
) -> None:
    assert PRE_COMMIT.exists(), "needs `pre-commit` in the venv: pip install -e '.[dev]'"
    assert shutil.which("git") is not None, "needs git on PATH"
    env = _env(tmp_path)
    repo = tmp_path / "harnessc"
    _snapshot(repo, env)
    work = tmp_path / "work"
    work.mkdir()
    git(work, env, "init", "-q")

    (work / "spec.harness").write_text(BROKEN, encoding="utf-8")
    git(work, env, "add", "spec.harness")
    code, output = _try_repo(repo, work, env, "spec.harness")
    assert code == 1, output
    assert "harnessc check" in output and "Failed" in output, output
    assert "error[H102]" in output, output

    (work / "spec.harness").write_text(FIXED, encoding="utf-8")
    git(work, env, "add", "spec.harness")
    code, output = _try_repo(repo, work, env, "spec.harness")
    assert code == 0, output
    assert "Passed" in output, output
