"""`harnessc diff`'s sides: files, folders and git revisions, each compiled as `check` would."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harnessc.compiler.review.sources import WORKTREE, SourceError, load_sides

MAIN = """harness demo { version "1" }
import "./tools.harness"
policy main {
  default deny
  allow read_doc
}
"""
TOOLS = """tool read_doc {
  summary "Read a document."
  effects read
  input { name: string }
}
"""
TOOLS_V2 = TOOLS.replace("effects read", "effects read\n  risk medium")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "specs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "specs" / "main.harness").write_text(MAIN)
    (repo / "specs" / "tools.harness").write_text(TOOLS)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    return repo


def risk(result: object) -> str:
    return result.model.tools["read_doc"].risk  # type: ignore[attr-defined]


def test_a_revision_reads_its_imports_from_that_revision_not_the_working_tree(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path)
    (repo / "specs" / "tools.harness").write_text(TOOLS_V2)  # changed, not committed
    sides = load_sides(["HEAD", "specs/main.harness"], repo)
    [pair] = sides.pairs
    assert pair.key == "specs/main.harness"
    assert risk(pair.old) == "low" and risk(pair.new) == "medium"
    assert sides.old.described == "HEAD" and sides.new.described == WORKTREE
    # files are named as `check` names them, so `file:line` points into the checkout
    origin = pair.old.model.tools["read_doc"].origin
    assert origin.file.endswith("specs/tools.harness") and "harnessc-diff" not in origin.file


def test_a_range_compares_two_commits_whatever_the_working_tree_holds(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    (repo / "specs" / "tools.harness").write_text(TOOLS_V2)
    git(repo, "commit", "-qam", "two")
    (repo / "specs" / "tools.harness").write_text("this is not a spec {")
    sides = load_sides(["main~1..main", "specs"], repo)
    [pair] = sides.pairs  # tools.harness is imported by main.harness: one build
    assert risk(pair.old) == "low" and risk(pair.new) == "medium"
    assert (sides.old.described, sides.new.described) == ("main~1", "main")


def test_a_spec_added_by_the_change_is_compared_against_nothing(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    (repo / "specs" / "extra.harness").write_text(TOOLS.replace("read_doc", "write_doc"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "add a spec")
    sides = load_sides(["HEAD~1..HEAD", "specs"], repo)
    by_key = {p.key: p for p in sides.pairs}
    assert set(by_key) == {"specs/main.harness", "specs/extra.harness"}
    assert by_key["specs/extra.harness"].old is None
    assert by_key["specs/extra.harness"].new.ok


def test_a_side_that_does_not_compile_keeps_its_diagnostics(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    (repo / "specs" / "main.harness").write_text(MAIN.replace("read_doc", "read_dco"))
    sides = load_sides(["HEAD", "specs/main.harness"], repo)
    assert not sides.old.failed
    [failed] = sides.new.failed
    assert any(d.code == "H201" for d in failed.diagnostics)


def test_two_folders_pair_their_specs_by_relative_path(tmp_path: Path) -> None:
    for side, tools in (("a", TOOLS), ("b", TOOLS_V2)):
        (tmp_path / side / "specs").mkdir(parents=True)
        (tmp_path / side / "specs" / "main.harness").write_text(MAIN)
        (tmp_path / side / "specs" / "tools.harness").write_text(tools)
    sides = load_sides(["a", "b"], tmp_path)
    [pair] = sides.pairs
    assert pair.key == "specs/main.harness"
    assert risk(pair.old) == "low" and risk(pair.new) == "medium"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope..HEAD", "specs"], "unknown revision `nope`"),
        (["HEAD", "specs/missing.harness"], "no `specs/missing.harness` at `HEAD`"),
        (["HEAD", "specs/main.harness", "--x"], "no `--x`"),
        (["specs/main.harness"], "name what to compare"),
        (["specs", "specs/main.harness"], "compare a file with a file or a folder with a folder"),
        (["HEAD...main", "specs"], "name two revisions as `OLD..NEW`"),
        (["old.harness", "specs/main.harness"], "no such file `old.harness`"),
        (["specs", "specs", "specs"], "name two files or two folders to compare"),
    ],
)
def test_arguments_that_name_nothing_comparable_are_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    repo = repository(tmp_path)
    with pytest.raises(SourceError, match=message.replace("(", r"\(").replace("`", "`")):
        load_sides(args, repo)


def test_a_revision_outside_a_repository_says_so(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not inside a git repository"):
        load_sides(["HEAD", "spec.harness"], tmp_path)


def test_a_folder_without_specs_says_so(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(SourceError, match=r"no `\.harness` files under `a`"):
        load_sides(["a", "b"], tmp_path)


def test_a_file_imported_on_one_side_and_a_root_on_the_other_is_compared_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # files are named relative to the working directory
    # old: main.harness imports tools.harness; new: main.harness no longer does
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "main.harness").write_text(MAIN)
    (tmp_path / "a" / "tools.harness").write_text(TOOLS)
    standalone = MAIN.replace('import "./tools.harness"\n', "").replace("allow read_doc", "deny *")
    (tmp_path / "b" / "main.harness").write_text(standalone)
    (tmp_path / "b" / "tools.harness").write_text(TOOLS)
    sides = load_sides(["a", "b"], tmp_path)
    assert [p.key for p in sides.pairs] == ["main.harness"]
    assert sides.notes == [
        "`b/tools.harness` is a spec of its own on the new side only: on the old side another "
        "spec imports it, and its old version is compared inside that spec's build"
    ]


def test_a_revision_is_confined_to_the_same_project_root_as_the_working_tree(
    tmp_path: Path,
) -> None:
    """The revision's checkout holds its root markers: a spec importing `../lib/…` inside the
    project compiles at the revision as in the working tree; one leaving it does not."""
    repo = tmp_path / "repo"
    (repo / "specs").mkdir(parents=True)
    (repo / "lib").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "harness.toml").write_text("")
    (repo / "lib" / "tools.harness").write_text(TOOLS)
    (repo / "specs" / "main.harness").write_text(MAIN.replace("./tools", "../lib/tools"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    (repo / "lib" / "tools.harness").write_text(TOOLS_V2)
    sides = load_sides(["HEAD", "specs/main.harness"], repo)
    [pair] = sides.pairs
    assert risk(pair.old) == "low" and risk(pair.new) == "medium"
    (repo / "specs" / "harness.toml").write_text("")  # a narrower root, on the new side only
    sides = load_sides(["HEAD", "specs/main.harness"], repo)
    [pair] = sides.pairs
    assert pair.old.ok and [d.code for d in pair.new.diagnostics] == ["H009"]
