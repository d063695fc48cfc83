"""build/package/harnessc: the installed package's layout, as symlinks to the source folders.

The source folders become `harnessc.*` only at install time (pyproject.toml's package-dir), and
the editable install maps them with an import hook that static tools do not run: mypy and
import-linter would see a `harnessc` of one file and every `harnessc.runtime` import as missing.
This tree lays the folders out as the wheel does (`harnessc/runtime` -> `runtime/`, …), one
symlink per folder, so a module added to a folder is seen at once; it is made from package-dir,
the one place the mapping is written.

    python scripts/package_tree.py                 make (or refresh) the tree
    python scripts/package_tree.py lint-imports    then run import-linter on it
    python scripts/package_tree.py mypy            then run mypy (pyproject.toml's mypy_path)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "package"


def make_tree() -> Path:
    """Make TREE/harnessc from package-dir and return TREE (idempotent)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    package = TREE / "harnessc"
    package.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, Path] = {}
    for name, folder in mapping.items():
        parts = name.split(".")
        if parts == ["harnessc"]:  # the root package: its files, beside the mapped folders
            wanted |= {p.name: p for p in (ROOT / folder).iterdir() if p.suffix in {".py", ".pyi"}}
        elif len(parts) == 2 and parts[0] == "harnessc":
            wanted[parts[1]] = ROOT / folder
    for entry in package.iterdir():
        if entry.name != "__pycache__" and (entry.name not in wanted or not entry.is_symlink()):
            entry.unlink()
    for name, target in wanted.items():
        link = package / name
        relative = os.path.relpath(target, package)
        if not link.is_symlink() or os.readlink(link) != relative:
            link.unlink(missing_ok=True)
            link.symlink_to(relative, target_is_directory=target.is_dir())
    return TREE


def main(argv: list[str]) -> int:
    tree = make_tree()
    bin_dir = Path(sys.executable).parent
    if argv[:1] == ["lint-imports"]:
        # from inside the tree, so that `harnessc` is found there before the checkout's own
        # harnessc/ folder (import-linter puts the working directory first on sys.path)
        config = ROOT / "pyproject.toml"
        command = [str(bin_dir / "lint-imports"), "--config", str(config), "--no-cache"]
        return subprocess.run([*command, *argv[1:]], cwd=tree).returncode
    if argv[:1] == ["mypy"]:
        return subprocess.run([sys.executable, "-m", "mypy", *argv[1:]], cwd=ROOT).returncode
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
