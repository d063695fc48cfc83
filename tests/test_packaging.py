"""What a wheel ships: every package folder, the grammar and the standard library."""

from __future__ import annotations

import tomllib

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
