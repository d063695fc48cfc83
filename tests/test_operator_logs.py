"""Operator commands on logs as they are found: one a writer left with transactions still in its
WAL file, rows the chain does not vouch for, a path that is no file. A command that only reads
changes nothing, and every damaged log gets a message and exit code 2, never an internal
error."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime import Harness, PendingCall, SQLiteStore

from .test_approvals import SHELL, compile_text


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


@pytest.fixture
def live_copy(tmp_path: Path) -> tuple[Path, str]:
    """A copy of a log taken while its writer was still open: committed transactions sit in
    its `-wal` file, not yet in the database file. Returns the copy and a pending request."""
    spec = compile_text(tmp_path, SHELL)
    writer = SQLiteStore(tmp_path / "live.db")
    h = Harness(spec, store=writer)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"})
    assert isinstance(call, PendingCall)
    request = s.request_approval(call)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("live.db", "live.db-wal"):
        shutil.copyfile(tmp_path / name, copy / name)
    writer.close()
    assert (copy / "live.db-wal").stat().st_size > 0
    return copy, request.request_id


def test_listing_approvals_and_grants_changes_nothing_of_the_log(
    live_copy: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # opened read-write, a listing checkpointed the WAL into the database file and removed it
    # (and upgraded a log of an older schema)
    folder, request = live_copy
    before = _digest(folder)
    store = str(folder / "live.db")
    for command in (
        ["approvals", "list", "--store", store],
        ["approvals", "show", request, "--store", store],
        ["grants", "list", "--store", store],
    ):
        assert main(command) == 0, capsys.readouterr().err
    assert request in capsys.readouterr().out
    after = _digest(folder)
    assert {k: v for k, v in after.items() if k != "live.db-shm"} == {
        k: v for k, v in before.items() if k != "live.db-shm"
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_as_the_log_is_refused_at_once(tmp_path: Path) -> None:
    # SQLite's open of a named pipe waited for a writer: `log verify` hung for ever
    import subprocess
    import sys

    pipe = tmp_path / "log.db"
    os.mkfifo(pipe)
    for command, code in ((["log", "verify"], 1), (["approvals", "list"], 2)):
        done = subprocess.run(
            [sys.executable, "-m", "harnessc.compiler", *command, "--store", str(pipe)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert "is not a regular file" in done.stdout + done.stderr
