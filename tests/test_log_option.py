"""Every command that reads or writes an event log names it `--log` (docs/cli.md); `--store`,
the name some of them took before, still works, warns on standard error and is not listed by
`--help`. The commands are found by walking the parser, not listed by hand."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from harnessc.compiler.cli import build_parser, main


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, (*path, name))


LEAVES = dict(_leaves(build_parser()))
WITH_LOG = {path: leaf for path, leaf in LEAVES.items() if "--log" in leaf._option_string_actions}


def _argv(path: tuple[str, ...], leaf: argparse.ArgumentParser, *log: str) -> list[str]:
    """The command with each required argument filled in, and `log`."""
    argv = [*path]
    for action in leaf._actions:
        if action.option_strings:
            if action.required and "--log" not in action.option_strings:
                argv += [action.option_strings[0], "x"]
        elif action.nargs not in ("?", "*"):
            argv.append(str(next(iter(action.choices))) if action.choices else "x")
    for group in leaf._mutually_exclusive_groups:  # one of them required (`--before`, …)
        if group.required:
            argv += [group._group_actions[0].option_strings[0], "x"]
    return [*argv, *log]


def test_every_command_on_an_event_log_takes_log() -> None:
    commands = {path[0] for path in WITH_LOG}
    assert commands >= {"approvals", "grants", "console", "workflow", "log", "replay", "why"}
    assert ("log", "verify") in WITH_LOG and ("approvals", "approve") in WITH_LOG
    for path, leaf in LEAVES.items():  # no command shows `--store` any more
        assert "--store" not in leaf.format_help(), path


@pytest.mark.parametrize("path", sorted(WITH_LOG), ids=" ".join)
def test_log_and_the_deprecated_store_name_the_log(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    leaf = WITH_LOG[path]
    assert "--log" in leaf.format_help()
    assert build_parser().parse_args(_argv(path, leaf, "--log", "a.db")).log == "a.db"
    assert capsys.readouterr().err == ""
    for store in (["--store", "b.db"], ["--store=b.db"]):
        assert build_parser().parse_args(_argv(path, leaf, *store)).log == "b.db"
        err = capsys.readouterr().err
        assert "`--store` is deprecated" in err and "use `--log`" in err, path


def test_a_command_run_with_store_still_works_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "none.db")
    for flag in ("--log", "--store"):
        assert main(["log", "verify", flag, missing]) == 2
        err = capsys.readouterr().err
        assert "no event log at" in err
        assert ("deprecated" in err) == (flag == "--store")


def test_store_is_not_taken_by_a_command_without_a_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--store", "a.db", "x.harness"])
    assert "unrecognized arguments: --store" in capsys.readouterr().err
