"""Size by cohesion, not by a line count: a module keeps its private names to itself. Each reach
of a private name across modules (tests/house/reaches.py says what counts) is in the committed
baseline tests/house/private_reaches.txt; a change may remove reaches, never add one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .conftest import ROOT, update_goldens
from .house.reaches import reaches

BASELINE = ROOT / "tests" / "house" / "private_reaches.txt"
HEADER = (
    "# Private names reached across modules: count, then file and reach (tests/test_house.py).\n"
    "# Only ever lowered: `pytest tests/test_house.py --update-goldens` after removing reaches.\n"
)


def _read(path: Path) -> Counter[str]:
    counted: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            count, reach = line.split(" ", 1)
            counted[reach] = int(count)
    return counted


def _write(path: Path, counted: Counter[str]) -> None:
    lines = [f"{n} {reach}\n" for reach, n in sorted(counted.items())]
    path.write_text(HEADER + "".join(lines), encoding="utf-8")


def test_no_change_adds_a_private_reach_across_modules() -> None:
    now = reaches(ROOT)
    if update_goldens():
        _write(BASELINE, now)
    baseline = _read(BASELINE)
    added = sorted(f"{n} {r}" for r, n in (now - baseline).items())
    assert added == [], (
        "a module reaches another's private name: make what it needs part of that module's "
        "interface (a public name, a method) instead"
    )
    removed = sorted(f"{n} {r}" for r, n in (baseline - now).items())
    assert removed == [], (
        "fewer private reaches than the baseline: lower it with "
        "`pytest tests/test_house.py --update-goldens`"
    )


def test_a_reach_is_an_import_or_an_attribute_of_another_modules_private_name(
    tmp_path: Path,
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "__init__.py").write_text("")
    (runtime / "_inner.py").write_text("X = 1\n")
    (runtime / "store.py").write_text(
        "class Store:\n"
        "    def __init__(self):\n"
        "        self._conn = None\n"
        "    def close(self, other):\n"
        "        other._conn = self._conn  # its own class's field: not a reach\n"
        "_HELPER = 1\n"
    )
    (runtime / "user.py").write_text(
        "from . import _inner  # the package's own private module: not a reach\n"
        "from .store import _HELPER, Store\n"
        "import os\n"
        "def f(s: Store):\n"
        "    s._conn.execute(_HELPER)\n"
        "    s._conn = None\n"
        "    os._exit(0)\n"
        "    return s.__class__, s._replace()\n"
    )
    assert dict(reaches(tmp_path)) == {
        "runtime/user.py: imports _HELPER from harnessc.runtime.store": 1,
        "runtime/user.py: reaches ._conn": 2,
        "runtime/user.py: reaches ._exit": 1,
    }
