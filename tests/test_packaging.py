"""What a wheel ships: every package folder, the grammar and the standard library; the version
from one place; and, built for real, an sdist and a wheel that install in a fresh venv and
check a spec that imports the standard library.

The build test is slow (about a minute: `python -m build` sets up its isolated build
environment, then one fresh venv installs the wheel and harnessc's dependencies) and needs the
network (PyPI, pip's cache helps); it is marked `network` and runs in CI (`.ci/run` →
scripts/test.sh). `pytest -m "not network"` leaves it out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import harnessc

from .conftest import ROOT

TOP = {"dsl": "harnessc.dsl", "compiler": "harnessc.compiler", "runtime": "harnessc.runtime",
       "stdlib": "harnessc.stdlib", "harnessc": "harnessc"}  # fmt: skip


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed() -> None:
    listed = set(_config()["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *relative)))
    assert found - listed == set(), "add these packages to pyproject.toml"


def test_package_data_covers_the_grammar_and_stdlib() -> None:
    data = _config()["tool"]["setuptools"]["package-data"]
    assert "*.lark" in data["harnessc.dsl"]
    assert "*.harness" in data["harnessc.stdlib"]
    assert list((ROOT / "stdlib").glob("*.harness"))


def test_the_version_is_written_in_one_place() -> None:
    config = _config()
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "harnessc.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", harnessc.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog  # the next release's notes gather there


# A spec that imports the standard library: the wheel must ship stdlib/*.harness and the grammar.
SPEC = """\
harness packaged {
  version "1.0.0"
  summary "Checked by an installed wheel."
}

import std.risk

tool note.write {
  summary "Write a note to the team's notebook."
  effects write reversible
  input { text: string }
}

policy notes {
  default std.risk.defaults
  include std.risk.guardrails
  allow note.write when actor.role == "engineer"
}
"""


def _run(cmd: list[str], cwd: Path) -> str:
    """What the command printed, standard output then standard error; it must succeed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.mark.network
def test_the_sdist_and_wheel_build_install_in_a_fresh_venv_and_check_a_spec(
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    # sdist first, then the wheel built from the unpacked sdist: the sdist holds what a build
    # needs
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], tmp_path)
    version = harnessc.__version__
    sdist = dist / f"harnessc-{version}.tar.gz"
    wheel = dist / f"harnessc-{version}-py3-none-any.whl"
    assert sorted(p.name for p in dist.iterdir()) == sorted([sdist.name, wheel.name])

    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "harnessc/__init__.py", "dsl/harness.lark"} <= names
    assert "stdlib/risk.harness" in names
    with zipfile.ZipFile(wheel) as whl:
        shipped = set(whl.namelist())
        metadata = whl.read(f"harnessc-{version}.dist-info/METADATA").decode()
    for stdlib in (ROOT / "stdlib").glob("*.harness"):
        assert f"harnessc/stdlib/{stdlib.name}" in shipped
    assert "harnessc/dsl/harness.lark" in shipped
    assert any(n.startswith("harnessc/compiler/codegen/templates/") for n in shipped)
    assert f"\nVersion: {version}\n" in metadata

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    _run([str(bin_dir / "python"), "-m", "pip", "install", str(wheel)], tmp_path)
    spec = tmp_path / "packaged.harness"
    spec.write_text(SPEC, encoding="utf-8")
    # from a folder outside the repository, so nothing is imported from the checkout
    assert _run([str(bin_dir / "harnessc"), "--version"], tmp_path).split() == [
        "harnessc",
        version,
    ]
    out = _run([str(bin_dir / "harnessc"), "check", spec.name], tmp_path)
    assert "checked 1 file: no errors" in out
    where = _run([str(bin_dir / "python"), "-c", "import harnessc; print(harnessc.__file__)"],
                 tmp_path)  # fmt: skip
    assert Path(where.strip()).is_relative_to(env_dir)  # the venv's copy, not the checkout
