"""Project configuration: the `[tool.harnessc]` table of the nearest `pyproject.toml`.

    [tool.harnessc]
    select = ["L"]            # codes or prefixes of the warnings and notes to report
    ignore = ["L013", "L01"]  # codes or prefixes never reported

A warning or note is reported when the longest entry of `select` or `ignore` that is a prefix of
its code belongs to `select` (ties go to `ignore`), as in ruff: `select = ["L"]`, `ignore =
["L01"]`, `select = ["L012"]` reports L012 and no other L01x. Errors are never filtered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harnessc.dsl.codes import CODES
from harnessc.dsl.suggest import did_you_mean

DEFAULT_SELECT = ("L", "H")
KNOWN_KEYS = ("select", "ignore")


class ConfigError(Exception):
    """A `[tool.harnessc]` table that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = DEFAULT_SELECT
    ignore: tuple[str, ...] = ()
    path: Path | None = None
    """The pyproject.toml it was read from, if any."""

    def enabled(self, code: str) -> bool:
        """Whether a warning or note with this code is reported."""
        best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        best_ignore = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        return best_select > best_ignore

    def extended(
        self, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
    ) -> LintConfig:
        """Command-line `--select` replaces the file's `select`; `--ignore` adds to `ignore`."""
        sel = tuple(_codes(select, "--select")) if select else self.select
        ign = (*self.ignore, *_codes(ignore, "--ignore")) if ignore else self.ignore
        return LintConfig(sel, ign, self.path)


def find_pyproject(start: Path) -> Path | None:
    """The nearest `pyproject.toml` in `start` (a folder or a file's folder) or above it."""
    folder = start.resolve()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load_config(spec_paths: Iterable[str | Path] = (), cwd: Path | None = None) -> LintConfig:
    """The configuration for a run: the nearest pyproject.toml above the first spec, else
    above the working directory; defaults when there is none or it has no `[tool.harnessc]`."""
    first = next(iter(spec_paths), None)
    path = find_pyproject(Path(first)) if first is not None else None
    if path is None:
        path = find_pyproject(cwd or Path.cwd())
    if path is None:
        return LintConfig()
    return read_config(path)


def read_config(path: Path) -> LintConfig:
    import tomllib  # a check reads no configuration: loaded by the commands that do

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error}") from error
    table = data.get("tool", {}).get("harnessc")
    if table is None:
        return LintConfig(path=path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.harnessc` must be a table")
    for key in table:
        if key not in KNOWN_KEYS:
            hint = did_you_mean(key, KNOWN_KEYS)
            raise ConfigError(
                f"{path}: unknown key `{key}` in `[tool.harnessc]`"
                + (f"; {hint}" if hint else f"; the keys are {', '.join(KNOWN_KEYS)}")
            )
    select = _list(table, "select", path)
    ignore = _list(table, "ignore", path)
    return LintConfig(
        tuple(select) if select is not None else DEFAULT_SELECT, tuple(ignore or ()), path
    )


def _list(table: dict, key: str, path: Path) -> list[str] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` in `[tool.harnessc]` must be a list of strings")
    return list(_codes(value, f"`{key}` in {path}"))


def _codes(values: Iterable[str], where: str) -> Iterable[str]:
    """Codes or prefixes, upper-cased and split on commas; each must match a known code."""
    for raw in values:
        for part in raw.split(","):
            code = part.strip().upper()
            if not code:
                continue
            if not any(known.startswith(code) for known in CODES):
                hint = did_you_mean(code, sorted(CODES))
                raise ConfigError(
                    f"{where}: `{part.strip()}` matches no diagnostic code"
                    + (f"; {hint}" if hint else "")
                )
            yield code
