"""Executor-side file access (runtime/session/files.py): what `within` cannot see — symbolic
links — resolved (`resolve_within`) or refused on the way (`open_within`)."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest
from harnessc.runtime import PathEscapeError, open_within, resolve_within
from harnessc.runtime.model.semantics import normalize_path
from harnessc.runtime.session import files


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """root/ with src/app.py, a link inside (`same` → src), a link out (`out` → outside/),
    and a file link out (`passwd` → outside/secret); outside/ holds `secret`."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    (outside / "secret").write_text("s3cr3t\n")
    (root / "same").symlink_to(root / "src")
    (root / "out").symlink_to(outside)
    (root / "passwd").symlink_to(outside / "secret")
    return root, outside


def test_the_module_examples_run() -> None:
    assert doctest.testmod(files).failed == 0


def test_a_link_out_passes_within_but_not_the_executor(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    path = f"{root}/out/secret"
    # what a policy sees: the text is within the root
    normal = normalize_path(path)
    assert normal is not None and normal.startswith(f"{root}/")
    with pytest.raises(PathEscapeError, match="resolves to") as caught:
        resolve_within(root, path)
    assert caught.value.path == path
    with pytest.raises(PathEscapeError, match="`out` is a symbolic link"):
        open_within(root, path)
    with pytest.raises(PathEscapeError, match="`passwd` is a symbolic link"):
        open_within(root, "passwd")
    with pytest.raises(PathEscapeError):
        resolve_within(root, "passwd")
    assert (outside / "secret").read_text() == "s3cr3t\n"  # nothing was written or moved


def test_paths_inside_resolve_and_open(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    real = (root / "src" / "app.py").resolve()
    assert resolve_within(root, "src/app.py") == real
    assert resolve_within(root, f"{root}/src/../src/./app.py") == real
    assert resolve_within(root, "same/app.py") == real  # a link that stays inside resolves
    assert resolve_within(root, "src/new.txt") == (root / "src").resolve() / "new.txt"
    assert resolve_within(root, ".") == root.resolve()
    with open_within(root, f"{root}/src/app.py") as f:
        assert f.read() == "print('app')\n"
    with open_within(root, "src/app.py", "rb") as f:
        assert f.read() == b"print('app')\n"


def test_open_within_refuses_every_link_even_one_inside(tree: tuple[Path, Path]) -> None:
    # no link is followed, so none can be swapped in between a check and the open
    root, _ = tree
    with pytest.raises(PathEscapeError, match="`same` is a symbolic link"):
        open_within(root, "same/app.py")


@pytest.mark.parametrize("mode", ["w", "a", "x", "wb"])
def test_writing_through_a_link_is_refused_and_writes_nothing(
    tree: tuple[Path, Path], mode: str
) -> None:
    root, outside = tree
    with pytest.raises(PathEscapeError):
        open_within(root, "passwd", mode)
    with pytest.raises(PathEscapeError):
        open_within(root, "out/new.txt", mode)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "s3cr3t\n"


def test_writing_inside_creates_the_file(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with open_within(root, "src/out.txt", "w", encoding="utf-8") as f:
        f.write("done")
    assert (root / "src" / "out.txt").read_text() == "done"
    with pytest.raises(FileExistsError):
        open_within(root, "src/out.txt", "x")


@pytest.mark.parametrize("path", ["../outside/secret", "src/../../outside/secret", "/etc/passwd"])
def test_a_path_that_leaves_by_its_text_is_refused_before_any_file_is_read(
    tree: tuple[Path, Path], path: str
) -> None:
    root, _ = tree
    with pytest.raises(PathEscapeError):
        resolve_within(root, path)
    with pytest.raises(PathEscapeError):
        open_within(root, path)


def test_other_failures_are_the_usual_errors(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with pytest.raises(FileNotFoundError):
        open_within(root, "src/missing.txt")
    with pytest.raises(IsADirectoryError):
        open_within(root, ".")
    with pytest.raises(ValueError, match="mode"):
        open_within(root, "src/app.py", "r+")
    with pytest.raises(FileNotFoundError):
        resolve_within(root / "missing-root", "x")
    assert not os.path.exists(root / "src" / "missing.txt")
