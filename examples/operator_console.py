"""`app.py --console`: the operations console on an example's store, and a person in it.

The console is `harnessc console`, started as a process of its own on the store the agent
writes (the same as an operator would run it beside a deployed agent) and stopped when the run
ends. Where the script's approver would answer, `ConsolePerson` prints what is waiting and
polls the harness's projections until a person decided it in the console: approved, approved
with edits (the agent then runs the edited call) or denied with a reason. The durable
workflow's gates wait the same way, decided on the console's Workflows page.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessc.runtime import ApprovalOutcome, Harness
from scripted_planner import REPO, Turn, harnessc_command

POLL_S = 0.25
"""How often the agent looks at the log for a person's answer."""

GRANT_WAIT_S = 10.0
"""How long the agent waits for the grant of an approval it has seen."""


class ConsoleError(Exception):
    """The console could not be started (a port in use, a bad operators file)."""


def add_options(parser: Any) -> None:
    """The `--console` options of `app.py`."""
    group = parser.add_argument_group("operations console")
    group.add_argument(
        "--console",
        action="store_true",
        help="serve the operations console on the store and wait for a person there wherever "
        "the script would approve",
    )
    group.add_argument("--host", default="127.0.0.1", help="console address (127.0.0.1)")
    group.add_argument("--port", type=int, default=8765, help="console port (8765)")
    group.add_argument(
        "--operators",
        help="the console's operators file; without it a one-time operator is created, its "
        "password printed once",
    )


class Console:
    """`harnessc console` in a process of its own, on `store` under the package's spec."""

    def __init__(
        self,
        store: str,
        spec: Path,
        *,
        host: str,
        port: int,
        operators: str | None,
        operator: tuple[str, tuple[str, ...]],
        out: Callable[[str], None] = print,
    ) -> None:
        """`operators`: the operators file; without one, `operator` (a name and its roles)
        is created for this run with a random password, printed once."""
        self.store = store
        self.spec = spec
        self.host = host
        self.port = port
        self.operators = operators
        self.operator = operator
        self.out = out
        self.url = f"http://{host}:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="harnessc-console-"))

    def start(self) -> None:
        _free(self.host, self.port)
        login = "the operators in " + str(self.operators) if self.operators else ""
        operators = self.operators
        if operators is None:
            name, roles = self.operator
            password = secrets.token_urlsafe(12)
            operators = str(self._dir / "operators.toml")
            Path(operators).write_text(
                f"[[operators]]\nname = {json.dumps(name)}\n"
                f"roles = {json.dumps(list(roles))}\n"
                f"password_hash = {json.dumps(_hash(password))}\n",
                encoding="utf-8",
            )
            os.chmod(operators, 0o600)
            login = f"name {name}, password {password} (this run only; shown once)"
        log = (self._dir / "console.log").open("wb")
        self.process = subprocess.Popen(
            [
                _command(),
                "console",
                "--log",
                self.store,
                "--spec",
                str(self.spec),
                "--operators",
                operators,
                "--host",
                self.host,
                "--port",
                str(self.port),
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the app, which stops the console itself
        )
        log.close()
        deadline = time.monotonic() + 120
        while not _listening(self.host, self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = (self._dir / "console.log").read_text(encoding="utf-8", errors="replace")
                self.stop()
                raise ConsoleError(f"the console did not start: {said.strip() or 'no output'}")
            time.sleep(0.1)
        self.out(f"console      {self.url}/  (log in: {login})")

    def check(self) -> None:
        """Raise `ConsoleError` when the console is no longer running (nobody could answer)."""
        code = self.process.poll() if self.process is not None else None
        if self.process is None or code is not None:
            said = (self._dir / "console.log").read_text(encoding="utf-8", errors="replace")
            raise ConsoleError(
                f"the console stopped (exit status {code}), so nobody can answer; its output:\n"
                + said.strip()[-2000:]
            )

    def stop(self) -> bool:
        """Stop the console (SIGTERM, then SIGKILL after 10 s) and remove its files; whether it
        was running."""
        process, self.process = self.process, None
        running = process is not None and process.poll() is None
        if process is not None and running:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)
        return running


class ConsolePerson:
    """Answers an ASK with what a person decides in the console (`Script(person=…)`)."""

    def __init__(self, h: Harness, console: Console, line: Callable[..., None]) -> None:
        self.h = h
        self.console = console
        self.line = line

    def __call__(self, turn: Turn) -> tuple[ApprovalOutcome, str]:
        req = turn.request
        assert req is not None and turn.session is not None
        asked = ", ".join(f"{a.kind} {a.value}" for a in req.approvers)
        self.line(
            "waiting",
            f"for a person: {req.request_id} ({req.tool_id}, asked of {asked}) — approve, "
            f"approve with edits or deny it at {self.console.url}/approvals",
        )
        sys.stdout.flush()
        view = self._answered(req.request_id)
        resolved = _resolved(self.h, req.session_id, req.request_id)
        who = str(view.by or resolved.get("by") or "?")
        request = self.h.approvals.get(req.request_id)
        grant = self._grant(req.request_id) if view.status in ("approved", "superseded") else None
        if view.status == "approved":
            return ApprovalOutcome(request, "approved", grant), who
        if view.status == "superseded":
            edited = turn.session.call(req.tool_call_id)
            return ApprovalOutcome(request, "approved", grant, call=edited), who
        status = "denied" if view.status == "rejected" else view.status
        return ApprovalOutcome(request, status, None, reason=resolved.get("reason")), who

    def _grant(self, request_id: str) -> Any:
        """The grant the approval issued: the console records it just after the answer, so it
        may reach the log a moment later (none at all when the call is now allowed)."""
        deadline = time.monotonic() + GRANT_WAIT_S
        while True:
            for grant in self.h.approvals.grants.values():
                if grant.approval_id == request_id:
                    return grant
            if time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)
            self.h.catch_up()

    def _answered(self, request_id: str) -> Any:
        while True:
            self.h.catch_up()
            view = self.h.projections.approvals.get(request_id)
            if view is not None and view.status != "pending":
                return view
            self.console.check()
            time.sleep(POLL_S)


def wait_for_gates(wf: Any, run: str, console: Console, line: Callable[..., None]) -> Any:
    """Wait until the run finishes, printing each gate as it opens and as it is decided in the
    console's Workflows page; returns the run's last status."""
    opened: set[str] = set()
    done: set[str] = set()

    def show_decided(status: dict[str, Any]) -> None:
        waiting = {g["gate"] for g in status["pending_gates"]}
        # a gate may open and be decided between two polls: it is reported all the same
        decided = {g for g, info in status["gates"].items() if info.get("status") == "decided"}
        for gate in sorted(((opened - waiting) | decided) - done):
            info = status["gates"].get(gate, {})
            line(
                "decided", f"{gate}: {info.get('option') or info.get('status')} by {info.get('by')}"
            )
            done.add(gate)

    status = wf.status(run)
    while status["status"] not in ("completed", "failed", "cancelled"):
        show_decided(status)
        for info in status["pending_gates"]:
            if info["gate"] not in opened:
                opened.add(info["gate"])
                wanted = " or ".join(f"{b['kind']} {b['value']}" for b in info["by"])
                line(
                    "waiting",
                    f"{info['gate']}: {info['question']} (by {wanted}; options "
                    f"{', '.join(info.get('options') or [])}) — decide it at "
                    f"{console.url}/workflows",
                )
        console.check()
        time.sleep(POLL_S)
        status = wf.status(run)
    show_decided(status)
    return status


def _resolved(h: Harness, stream: str, request_id: str) -> dict[str, Any]:
    """The `approval.resolved` payload of a request (who answered, and why)."""
    for event in reversed(h.store.read(stream)):
        if event.type == "approval.resolved" and event.payload.get("approval_id") == request_id:
            return dict(event.payload)
    return {}


def _hash(password: str) -> str:
    """The password's hash for the operators file, by `harnessc console --hash-password`."""
    done = subprocess.run(
        [_command(), "console", "--hash-password"],
        input=password + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConsoleError(done.stderr.strip() or "harnessc console --hash-password failed")
    return done.stdout.strip()


def _command() -> str:
    try:
        return harnessc_command()
    except FileNotFoundError as error:
        raise ConsoleError(str(error)) from error


def _free(host: str, port: int) -> None:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as error:
            raise ConsoleError(
                f"cannot listen on {host}:{port} ({error.strerror}): choose another --port"
            ) from error


def _listening(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
