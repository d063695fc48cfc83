"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit` in a scratch repository.

`pre-commit try-repo REPO HOOK` snapshots REPO (HEAD plus uncommitted changes) into a commit,
writes a one-repo config for it and runs the hook, with a temporary store: every call builds a
new environment (about a minute each here). The fixture does what try-repo does once: it
snapshots the working tree (tracked and untracked files, not ignored ones) into a git repository
and writes the same config, with all three hooks; `pre-commit run HOOK --files …` then installs
harnessc into one environment, cached in a module-scoped PRE_COMMIT_HOME, and reuses it. Building
it pip-installs harnessc and its dependencies from PyPI, so this module needs the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .test_lint import RULES

ROOT = Path(__file__).resolve().parent.parent
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
NETWORK_ERRORS = (
    "Could not find a version that satisfies",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "No matching distribution found",
    "Network is unreachable",
)

pytestmark = pytest.mark.network

HOOK_IDS = ("harnessc-check", "harnessc-lint", "harnessc-fmt")
BROKEN = "tool x {\n"
UNFORMATTED = RULES["L012"].good.replace("  default deny\n", "default   deny\n")


@dataclass
class Hooks:
    snapshot: Path
    ref: str
    env: dict[str, str]
    work: Path

    def run(self, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
        command = [str(PRE_COMMIT), "run", hook, "--verbose", "--color", "never", "--files"]
        command += files
        return subprocess.run(
            command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=900
        )

    def run_staged(self, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
        """Run `hook` as a commit would: on the staged files, which are exactly `files`."""
        git(self.work, self.env, "rm", "-r", "-q", "--cached", ".")
        git(self.work, self.env, "add", ".pre-commit-config.yaml", *files)
        try:
            command = [str(PRE_COMMIT), "run", hook, "--verbose", "--color", "never"]
            return subprocess.run(
                command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=900
            )
        finally:
            git(self.work, self.env, "add", "-A")

    def write(self, name: str, text: str) -> None:
        (self.work / name).write_text(text, encoding="utf-8")
        git(self.work, self.env, "add", name)


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Hooks:
    if not PRE_COMMIT.exists() or shutil.which("git") is None:
        pytest.skip("needs `pre-commit` in the venv (the dev extra) and git")
    base = tmp_path_factory.mktemp("precommit")
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
    snapshot = base / "harnessc"
    listed = git(ROOT, env, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = snapshot / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(snapshot, env, "init", "-q")
    git(snapshot, env, "add", "-A")
    git(snapshot, env, "commit", "-q", "-m", "snapshot")
    ref = git(snapshot, env, "rev-parse", "HEAD")
    work = base / "work"
    work.mkdir()
    git(work, env, "init", "-q")
    hook_ids = "\n".join(f"      - id: {hook}" for hook in HOOK_IDS)
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {snapshot}\n    rev: {ref}\n    hooks:\n{hook_ids}\n",
        encoding="utf-8",
    )
    git(work, env, "add", ".pre-commit-config.yaml")
    result = Hooks(snapshot, ref, env, work)
    # build the environment once, on a clean spec; a failed build fails the module loudly
    result.write("first.harness", RULES["L012"].good)
    first = result.run("harnessc-check", "first.harness")
    output = first.stdout + first.stderr
    if first.returncode != 0 and any(e in output for e in NETWORK_ERRORS):
        pytest.skip(f"pre-commit could not install harnessc from PyPI:\n{output[-2000:]}")
    assert first.returncode == 0, output
    return result


def test_check_hook_fails_on_a_broken_spec_and_passes_once_fixed(hooks: Hooks) -> None:
    hooks.write("check.harness", BROKEN)
    failed = hooks.run("harnessc-check", "check.harness")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "error[H102]" in failed.stdout
    hooks.write("check.harness", RULES["L012"].good)
    passed = hooks.run("harnessc-check", "check.harness")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_lint_hook_fails_on_a_warning_and_passes_once_fixed(hooks: Hooks) -> None:
    hooks.write("lint.harness", RULES["L012"].bad)
    failed = hooks.run("harnessc-lint", "lint.harness")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "warning[L012]: `release#1` allows `*`" in failed.stdout
    hooks.write("lint.harness", RULES["L012"].good)
    passed = hooks.run("harnessc-lint", "lint.harness")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_fmt_hook_rewrites_and_then_passes(hooks: Hooks) -> None:
    hooks.write("fmt.harness", UNFORMATTED)
    changed = hooks.run("harnessc-fmt", "fmt.harness")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "reformatted fmt.harness" in changed.stdout
    assert (hooks.work / "fmt.harness").read_text(encoding="utf-8") == RULES["L012"].good
    hooks.write("fmt.harness", RULES["L012"].good)
    again = hooks.run("harnessc-fmt", "fmt.harness")
    assert again.returncode == 0, again.stdout + again.stderr


def test_the_manifest_declares_the_three_hooks_for_harness_files() -> None:
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert [hook["id"] for hook in manifest] == list(HOOK_IDS)
    for hook in manifest:
        assert hook["language"] == "python" and hook["files"] == r"\.harness$"
    entries = {hook["id"]: hook["entry"] for hook in manifest}
    assert entries["harnessc-lint"].split()[:3] == ["harnessc", "lint", "--strict"]
    assert entries["harnessc-fmt"].split() == ["harnessc", "fmt"]


def test_each_staged_spec_is_judged_alone_whatever_is_staged_with_it(hooks: Hooks) -> None:
    # two independent specs that declare the same tool ids: one build would report H202
    (hooks.work / "roots").mkdir(exist_ok=True)
    a, b, broken = "roots/a.harness", "roots/b.harness", "roots/broken.harness"
    hooks.write(a, RULES["L012"].good)
    hooks.write(b, RULES["L012"].good.replace("Read a scan report.", "Read what a scan found."))
    groupings = [(a, b), (b, a), (a,), (b,)]
    for hook in HOOK_IDS:
        for files in groupings:
            for done in (hooks.run(hook, *files), hooks.run_staged(hook, *files)):
                output = done.stdout + done.stderr
                assert done.returncode == 0, f"{hook} {files}:\n{output}"
                assert "H202" not in output
    hooks.write(broken, BROKEN)
    try:
        for hook in HOOK_IDS:
            for files in [(a, b, broken), (broken,), (a, broken), (broken, b)]:
                for done in (hooks.run(hook, *files), hooks.run_staged(hook, *files)):
                    output = done.stdout + done.stderr
                    assert done.returncode == 1, f"{hook} {files}:\n{output}"
                    assert output.count("error[H102]") == 1, output
                    assert "--> roots/broken.harness:" in output
    finally:
        git(hooks.work, hooks.env, "rm", "-q", "-f", broken)
