"""The runtime's module paths from 0.1.0, before its subpackages, still import for one release:
each gives the module at its new path (the same object) and a DeprecationWarning naming it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from harnessc.runtime._moved import MOVED

from .conftest import ROOT


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_every_old_path_is_the_module_at_its_new_path_with_a_warning() -> None:
    # a fresh interpreter: the old paths must work as the first import of the runtime
    code = (
        "import importlib, json, warnings\n"
        "from harnessc.runtime._moved import MOVED\n"
        "out = {}\n"
        "for old, new in sorted(MOVED.items()):\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module('harnessc.runtime.' + old)\n"
        "    same = module is importlib.import_module('harnessc.runtime.' + new)\n"
        "    said = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "    out[old] = [same, said]\n"
        "print(json.dumps(out))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert set(seen) == set(MOVED)
    for old, (same, said) in seen.items():
        assert same, old
        new = f"harnessc.runtime.{MOVED[old]}"
        assert [w for w in said if f"harnessc.runtime.{old} has moved to {new}" in w], (old, said)


def test_a_name_from_an_old_path_is_the_same_object_and_a_patch_reaches_both() -> None:
    with pytest.warns(DeprecationWarning, match="harnessc.runtime.session.sessions"):
        from harnessc.runtime.sessions import Session as Old  # type: ignore[import-not-found]
    from harnessc.runtime import Session

    assert Old is Session
    with pytest.warns(DeprecationWarning):
        import harnessc.runtime.store as old_store  # type: ignore[import-not-found]
    from harnessc.runtime.log import store

    assert old_store is store


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("from harnessc.runtime.exposure import Exposure", "harnessc.runtime.exposure.ranker"),
        ("from harnessc.runtime.workflows import Workflows", "harnessc.runtime.workflows.manage"),
    ],
)
def test_an_old_module_that_is_a_package_now_still_gives_its_names(old: str, new: str) -> None:
    # `exposure` and `workflows` were modules; their names read through the package
    code = f"import warnings\nwarnings.simplefilter('error')\n{old}\n"
    done = _run(code)
    assert done.returncode != 0 and "DeprecationWarning" in done.stderr and new in done.stderr
    done = _run(f"{old}\nprint('ok')\n", "-W", "ignore::DeprecationWarning")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_submodule_of_such_a_package_is_no_moved_name() -> None:
    code = (
        "import warnings\nwarnings.simplefilter('error')\n"
        "from harnessc.runtime.exposure import embedding, lexical, ranker\n"
        "from harnessc.runtime.workflows import plan, steps\n"
        "print(ranker.__name__, plan.__name__)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "harnessc.runtime.exposure.ranker",
        "harnessc.runtime.workflows.plan",
    ]


def test_python_dash_m_at_an_old_path_runs_the_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harnessc.runtime.exports", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--format" in done.stdout


def test_an_unknown_name_is_still_an_import_error() -> None:
    done = _run("import harnessc.runtime.no_such_module\n")
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr
    done = _run("from harnessc.runtime.exposure import no_such_name\n")
    assert done.returncode != 0 and "ImportError" in done.stderr
