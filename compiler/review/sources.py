"""The two sides of `harnessc diff`: files, folders or git revisions, each compiled in full.

The arguments are read in one of three shapes:

- `OLD NEW`, two files or two folders that exist: each side is those files (a folder: every
  `.harness` file under it), their roots picked as `check` picks them (compiler/roots.py);
- `REV..REV2 PATH…`: the specs at PATH as they are at REV (old) and at REV2 (new);
- `REV PATH…`: the specs at REV (old) against the working tree (new).

A revision's files are read from git (`git ls-tree` and one `git cat-file --batch`) into a
folder of their own, and the pipeline reads them from there through its loader hook under the
names the working tree's files have: a spec's imports resolve inside that revision, never
against the working tree, and diagnostics and `file:line` name the files as `check` would.
The standard library is the installed harnessc's on both sides.

Sides are paired by root: a file's path relative to its folder (files and folders) or to the
repository (revisions). A root present on one side only — a spec added or removed by the change
— is compared against an empty spec (no tools, no policies); a root that is on the other side a
module another root imports is compared there, inside that root's build, and said so in a note.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from harnessc.dsl.files import PROJECT_MARKERS, display_path, given_root, rooted_at

from ..pipeline import CheckResult, Load, LoadedFile, check, loading_once
from ..roots import file_roots

__all__ = [
    "WORKTREE",
    "Side",
    "Sides",
    "SourceError",
    "SpecPair",
    "load_sides",
]

WORKTREE = "the working tree"
"""How a side read from the file system is described when the other side is a revision."""


class SourceError(Exception):
    """The arguments name nothing `diff` can compare (a usage error: exit status 2)."""


@dataclass(frozen=True)
class Root:
    """One spec of a side: the key it is paired on, its name as shown, where it is read."""

    key: str
    shown: str
    path: Path


@dataclass
class Side:
    """One side of the comparison: where it comes from and each root's compiled build."""

    which: str
    """`old` or `new`."""
    described: str
    """What the side is, for headers and reports: a revision, `the working tree`, a path."""
    builds: dict[str, CheckResult] = field(default_factory=dict)
    """Each root's build, by pairing key, in the order the roots were found."""
    shown: dict[str, str] = field(default_factory=dict)
    """Each root's file name as diagnostics show it, by pairing key."""
    present: set[str] = field(default_factory=set)
    """The pairing keys of every spec file of the side, roots or not."""

    @property
    def failed(self) -> list[CheckResult]:
        return [build for build in self.builds.values() if not build.ok]


@dataclass(frozen=True)
class SpecPair:
    """One root compared: its build on each side (None: the spec is absent on that side)."""

    key: str
    shown: str
    old: CheckResult | None
    new: CheckResult | None


@dataclass
class Sides:
    old: Side
    new: Side
    pairs: list[SpecPair]
    notes: list[str]


def load_sides(args: Sequence[str], cwd: str | Path | None = None) -> Sides:
    """Read and compile both sides named by `args` (see the module's docstring).

    Raises `SourceError` for arguments that name nothing comparable. A side that does not
    compile is returned as it is: its builds carry the diagnostics (`Side.failed`).
    """
    here = Path(cwd) if cwd is not None else Path.cwd()
    if not args:
        raise SourceError("name two specs, two folders, or a revision and the specs to compare")
    first = args[0]
    if len(args) == 2 and all((here / a).exists() for a in args):
        return _paths(here / args[0], here / args[1], args[0], args[1], loading_once())
    if (here / first).exists():
        if len(args) == 1:
            raise SourceError(f"name what to compare `{first}` with")
        missing = [a for a in args[1:] if not (here / a).exists()]
        if not missing:
            raise SourceError(
                "name two files or two folders to compare, or a revision and the specs to "
                "compare at it"
            )
        raise SourceError(f"no such file or folder `{missing[0]}`")
    if first.endswith(".harness"):
        raise SourceError(f"no such file `{first}`")
    if len(args) < 2:
        raise SourceError(
            f"name the specs to compare at `{first}`: `harnessc diff {first} SPEC.harness`"
        )
    return _revisions(first, args[1:], here, loading_once())


# ---------------------------------------------------------------------------------------------
# Files and folders


def _paths(old: Path, new: Path, old_shown: str, new_shown: str, once: Load) -> Sides:
    if old.is_dir() != new.is_dir():
        raise SourceError(
            f"compare a file with a file or a folder with a folder: `{old_shown}` is "
            f"{'a folder' if old.is_dir() else 'a file'}, `{new_shown}` is "
            f"{'a folder' if new.is_dir() else 'a file'}"
        )
    if not old.is_dir():
        key = display_path(new)
        sides = [
            _compile("old", old_shown, [Root(key, display_path(old), old)], {key}, once),
            _compile("new", new_shown, [Root(key, key, new)], {key}, once),
        ]
        return _paired(sides[0], sides[1], [])
    found = []
    for which, folder, shown in (("old", old, old_shown), ("new", new, new_shown)):
        files = _specs_under(folder)
        if not files:
            raise SourceError(f"no `.harness` files under `{shown}`")
        found.append((which, shown, folder, files))
    sides = []
    for which, shown, folder, files in found:
        named = [Root(f.relative_to(folder).as_posix(), display_path(f), f) for f in files]
        sides.append(_compile(which, shown, named, {n.key for n in named}, once))
    return _paired(sides[0], sides[1], [])


def _specs_under(folder: Path) -> list[Path]:
    """Every `.harness` file under a folder, in path order; hidden folders are skipped."""
    out: list[Path] = []
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(Path(base) / f for f in sorted(files) if f.endswith(".harness"))
    return out


def _compile(
    which: str,
    described: str,
    files: list[Root],
    present: set[str],
    once: Load,
    names: dict[str, str] | None = None,
) -> Side:
    """Check each root among `files` as `check` does (roots picked by compiler/roots.py), every
    file read once: `once` is shared by both sides, which read the standard library alike and
    every other file at a path of their own; `names`: how to show files other than those named
    (a revision's)."""
    side = Side(which, described, present=set(present))
    shown_as = {**(names or {}), **{os.path.realpath(f.path): f.shown for f in files}}

    def load(path: str | Path, shown: str | None = None) -> LoadedFile:
        return once(path, shown_as.get(os.path.realpath(path), shown))

    by_path = {os.path.realpath(f.path): f for f in files}
    for root in file_roots([f.path for f in files], load):
        named = by_path[os.path.realpath(root)]
        side.builds[named.key] = check([named.path], load)
        side.shown[named.key] = named.shown
    return side


def _paired(old: Side, new: Side, notes: list[str]) -> Sides:
    pairs: list[SpecPair] = []
    keys = list(new.builds) + [k for k in old.builds if k not in new.builds]
    for key in keys:
        before, after = old.builds.get(key), new.builds.get(key)
        shown = new.shown.get(key) or old.shown[key]
        if before is None and key in old.present:
            notes.append(
                f"`{shown}` is a spec of its own on the new side only: on the old side another "
                "spec imports it, and its old version is compared inside that spec's build"
            )
            continue
        if after is None and key in new.present:
            notes.append(
                f"`{shown}` is a spec of its own on the old side only: on the new side another "
                "spec imports it, and its new version is compared inside that spec's build"
            )
            continue
        pairs.append(SpecPair(key, shown, before, after))
    return Sides(old, new, pairs, notes)


# ---------------------------------------------------------------------------------------------
# Git revisions


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args], cwd=repo, input=stdin, capture_output=True, check=False
        )
    except FileNotFoundError:
        raise SourceError("comparing revisions needs git, which is not installed") from None


def _repository(here: Path) -> Path:
    found = _git(here, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise SourceError(
            f"`{display_path(here) or '.'}` is not inside a git repository: name two files or "
            "two folders to compare, or run inside the repository"
        )
    return Path(found.stdout.decode().strip())


def _commit(repo: Path, rev: str) -> str:
    if not rev or rev.startswith("-"):
        raise SourceError(f"`{rev}` is not a revision")
    found = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise SourceError(
            f"unknown revision `{rev}`: not a commit, branch or tag of this repository, nor a file"
        )
    return found.stdout.decode().strip()


def _revisions(spec: str, paths: Sequence[str], here: Path, once: Load) -> Sides:
    repo = _repository(here)
    if ".." in spec and "..." not in spec:
        old_rev, new_rev = spec.split("..", 1)
        old_rev, new_rev = old_rev or "HEAD", new_rev or "HEAD"
    elif "..." in spec:
        raise SourceError(
            f"`{spec}`: name two revisions as `OLD..NEW` (the merge base of `...` is not "
            "supported; write it out: `$(git merge-base A B)..B`)"
        )
    else:
        old_rev, new_rev = spec, None
    wanted = []
    for path in paths:
        full = (here / path).resolve() if not Path(path).is_absolute() else Path(path)
        try:
            rel = full.relative_to(repo.resolve()).as_posix()
        except ValueError:
            raise SourceError(f"`{path}` is outside the repository at `{repo}`") from None
        wanted.append(("" if rel == "." else rel, path))
    with _checkout(repo, _commit(repo, old_rev)) as old_tree:
        old = _side_at("old", old_rev, old_tree, repo, wanted, once)
        if new_rev is None:
            new = _side_at("new", WORKTREE, None, repo, wanted, once)
        else:
            with _checkout(repo, _commit(repo, new_rev)) as new_tree:
                new = _side_at("new", new_rev, new_tree, repo, wanted, once)
    for rel, path in wanted:
        if not any(_under(key, rel) for key in old.present | new.present):
            at = f"`{old_rev}` " + (f"nor at `{new_rev}`" if new_rev else "nor in the working tree")
            if (repo / rel).is_dir():
                raise SourceError(f"no `.harness` files under `{path}` at {at}")
            raise SourceError(f"no `{path}` at {at}")
    return _paired(old, new, [])


def _under(key: str, rel: str) -> bool:
    return rel == "" or key == rel or key.startswith(rel.rstrip("/") + "/")


@contextmanager
def _checkout(repo: Path, commit: str) -> Iterator[Path]:
    """Every `.harness` file of a commit, written under a temporary folder at its path in the
    repository (one `git ls-tree`, one `git cat-file --batch`)."""
    listed = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    if listed.returncode != 0:
        raise SourceError(f"cannot list the files of `{commit[:12]}`: {_stderr(listed)}")
    blobs: list[tuple[str, str]] = []
    markers: list[str] = []
    for entry in listed.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        path = name.decode("utf-8", errors="surrogateescape")
        # a symbolic link's blob is its target's name, not a spec: it is left out
        if kind == "blob" and mode != "120000" and path.endswith(".harness"):
            blobs.append((oid, path))
        elif kind == "blob" and path.rpartition("/")[2] in PROJECT_MARKERS:
            markers.append(path)
    folder = Path(tempfile.mkdtemp(prefix="harnessc-diff-"))
    try:
        # the files that mark a project root, empty: the revision's specs are confined to the
        # same folders as in the working tree
        for path in markers:
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).touch()
        if blobs:
            batch = _git(
                repo, "cat-file", "--batch", stdin="".join(f"{o}\n" for o, _ in blobs).encode()
            )
            if batch.returncode != 0:
                raise SourceError(f"cannot read the files of `{commit[:12]}`: {_stderr(batch)}")
            data, at = batch.stdout, 0
            for _, path in blobs:
                header_end = data.index(b"\n", at)
                header = data[at:header_end].split()
                if len(header) != 3:  # `<oid> missing`: a partial or shallow clone
                    raise SourceError(f"git has no copy of `{path}` at `{commit[:12]}`")
                size = int(header[2])
                body = data[header_end + 1 : header_end + 1 + size]
                at = header_end + 1 + size + 1
                target = folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(body)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stderr(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode(errors="replace").strip() or f"git exited with {done.returncode}"


def _side_at(
    which: str,
    described: str,
    tree: Path | None,
    repo: Path,
    wanted: list[tuple[str, str]],
    once: Load,
) -> Side:
    """The specs at `wanted` (repository-relative paths, as written) in `tree` (a revision's
    files), or in the working tree when `tree` is None."""
    base = tree if tree is not None else repo
    files: list[Path] = []
    for rel, _ in wanted:
        at = base / rel if rel else base
        if at.is_dir():
            files.extend(_specs_under(at))
        elif at.is_file():
            files.append(at)
    names: dict[str, str] = {}
    if tree is not None:
        # every file of the revision is named as its working-tree twin, imports included
        names = {
            os.path.realpath(f): display_path(repo / f.relative_to(tree))
            for f in tree.rglob("*.harness")
        }
    roots = [
        Root(
            Path(r).relative_to(base).as_posix(),
            display_path(repo / Path(r).relative_to(base)),
            Path(r),
        )
        for r in files
    ]
    present = {f.relative_to(base).as_posix() for f in files}
    given = given_root()
    if tree is not None and given is not None:
        # `--root` names a folder of the working tree: its twin in the revision's files
        with suppress(ValueError):
            given = tree / Path(os.path.realpath(given)).relative_to(os.path.realpath(repo))
    with rooted_at(given):
        return _compile(which, described, roots, present, once, names)
