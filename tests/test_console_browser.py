"""The remediation example with the operations console, end to end in a real browser.

`examples/remediation/app.py --console` runs in a process of its own on a free port; an
operator logs in with headless Chromium (Playwright on Debian's `chromium`), approves every
call the agent waits on, approves the production deploy with an edited `canary_percent`,
watches the agent run the edited call, finds the superseded call in the session's timeline and
decides the durable workflow's gates on the Workflows page. The app exits 0 with its event log
verified."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("dbos")  # the example's workflow runs on the durable engine
sync_api = pytest.importorskip("playwright.sync_api")

from harnessc.compiler.console.auth import token_hash  # noqa: E402

from .test_workflows_support import until  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HARNESSC = Path(sys.executable).with_name("harnessc")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OPERATOR, TOKEN = "rm-test", "tok-release-manager"
ROLES = ["approver", "release-manager", "security", "user"]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)"
)


def confirm(button: Any) -> None:
    """Click a button that acts on its second click: the first arms it (`data-confirm`)."""
    button.click()
    button.click()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def app(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The example built with harnessc, running with `--console` on a free port."""
    subprocess.run(
        [
            str(HARNESSC),
            "build",
            "examples/remediation/remediation.harness",
            *("-o", str(tmp_path / "remediation"), "--no-embed"),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    operators = {
        "operators": [{"name": OPERATOR, "roles": ROLES, "token_sha256": token_hash(TOKEN)}]
    }
    (tmp_path / "ops.json").write_text(json.dumps(operators), encoding="utf-8")
    port = free_port()
    log = tmp_path / "app.out"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "examples" / "remediation" / "app.py"),
                *(str(tmp_path / "remediation"), "--log", f"sqlite:///{tmp_path / 'r.db'}"),
                *("--console", "--port", str(port), "--operators", str(tmp_path / "ops.json")),
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            # SIGABRT dumps every thread's stack into the output (`ended`, on a hang)
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    world = {"process": process, "url": f"http://127.0.0.1:{port}", "log": log, "tmp": tmp_path}
    try:
        yield world
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)


def ended(app: dict[str, Any], timeout_s: float) -> int:
    """The app's exit status once it ends; if it has not ended within `timeout_s`, its
    threads' stacks (SIGABRT, faulthandler) and the end of its output fail the test."""
    try:
        return app["process"].wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        app["process"].send_signal(signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            app["process"].wait(timeout=30)
        raise AssertionError(
            f"the app did not end within {timeout_s:g} s; its output and stacks:\n"
            + output(app)[-8000:]
        ) from None


def output(app: dict[str, Any]) -> str:
    return app["log"].read_text(encoding="utf-8", errors="replace")


def running(app: dict[str, Any]) -> None:
    assert app["process"].poll() is None, f"the app exited early:\n{output(app)[-3000:]}"


@contextmanager
def logged_in(pw: Any, app: dict[str, Any]) -> Iterator[Any]:
    """A Chromium page logged in to the example's console (the browser closed afterwards)."""
    url = app["url"]
    until(lambda: f"console      {url}/" in output(app), 120, "the console to start")
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    try:
        page = browser.new_page()
        page.goto(f"{url}/login")
        page.fill("input[name=name]", OPERATOR)
        page.fill("input[name=password]", TOKEN)
        page.click("button:has-text('Log in')")
        page.wait_for_url(f"{url}/approvals")
        yield page
    finally:
        browser.close()


@pytest.mark.parametrize("deny_first_scan", [False, True], ids=["approve-all", "deny-a-scan"])
def test_an_operator_drives_the_remediation_example_from_the_console(
    app: dict[str, Any], deny_first_scan: bool
) -> None:
    """Every call approved (the first production deploy with an edit), or with the first scan
    denied: the script goes on after a denial and runs to the end either way."""
    url = app["url"]
    with sync_api.sync_playwright() as pw, logged_in(pw, app) as page:
        assert "the operators in" in output(app)
        answered: list[str] = []
        edited: dict[str, str] = {}
        denied = not deny_first_scan
        # every call the agent waits on, in order; the first production deploy is approved
        # with canary_percent 5 instead of the default 10
        while "The remediate workflow on the durable engine" not in output(app):
            running(app)
            page.goto(f"{url}/approvals")
            sections = page.locator("section.approval")
            if sections.count() == 0:
                time.sleep(0.3)
                continue
            section = sections.first
            rid = section.get_attribute("id") or ""
            assert rid not in answered, f"{rid} is still waiting after its answer"
            tool = section.locator("h2").inner_text().split()[0]
            assert f"for a person: {rid} ({tool}" in output(app)
            if tool == "mcp:scanner:tool:scan" and not denied:
                section.locator("input[name=reason]").first.fill("not during the freeze")
                confirm(section.locator("button:has-text('Deny')"))
                page.wait_for_selector("p.message")
                assert f"`{rid}`: denied" in page.inner_text("p.message")
                denied = True
            elif tool == "production.deploy" and not edited:
                text = section.locator("textarea[name=arguments]").input_value()
                args = json.loads(text)
                assert args["canary_percent"] == 10 and args["environment"] == "production"
                edited = {
                    "rid": rid,
                    "session": section.locator("a[href^='/sessions/']").inner_text(),
                }
                section.locator("summary").click()
                section.locator("textarea[name=arguments]").fill(
                    json.dumps({**args, "canary_percent": 5})
                )
                section.locator("input[name=reason]").last.fill("a smaller canary first")
                confirm(section.locator("button:has-text('Approve edited call')"))
                page.wait_for_selector("p.message")
                assert "as the edited call" in page.inner_text("p.message")
                # the agent takes up the edited call and runs it
                until(
                    lambda: '"canary_percent": 5' in output(app),
                    180,
                    "the edited deploy to run",
                )
            else:
                confirm(section.locator("button:has-text('Approve')").first)
                page.wait_for_selector("p.message")
                assert f"`{rid}`: approved" in page.inner_text("p.message")
            answered.append(rid)
        assert edited, "no production deploy waited for a person"
        assert len(answered) == 7, answered  # scans, terminal, deploys, the draft
        # the superseded call in the planner's timeline
        page.goto(f"{url}/sessions/{edited['session']}")
        timeline = page.inner_text("table.timeline")
        while "superseded by" not in timeline and page.locator("a:has-text('Next')").count():
            page.click("a:has-text('Next')")
            timeline = page.inner_text("table.timeline")
        assert f"superseded by {OPERATOR}: a smaller canary first" in timeline
        # the workflow's gates, decided on the Workflows page
        decided: list[str] = []
        while True:
            out = output(app)
            if app["process"].poll() is not None or "event log (" in out:
                break
            page.goto(f"{url}/workflows")
            gates = page.locator("div.gate")
            if gates.count() == 0:
                time.sleep(0.3)
                continue
            gate = gates.first.locator("h3").first.inner_text().removeprefix("Gate ")
            asked = None
            if gate.endswith(".approval"):  # a call's gate shows the call, as a request does
                call = gates.first.locator("dl.call")
                assert "Arguments" in call.inner_text() and "Request" in call.inner_text()
                assert gates.first.locator("div.review").count() == 1
                asked = call.locator("dd code").last.inner_text()
                assert asked in page.request.get(f"{url}/api/pending").json()["pending"]
            confirm(gates.first.locator("button:has-text('approve')"))
            page.wait_for_selector("p.message")
            assert "accepted" in page.inner_text("p.message"), page.inner_text("main")
            decided.append(gate)
            until(
                lambda g=gate: f"decided      {g}: approve by {OPERATOR}" in output(app),
                180,
                f"the app to see {gate} decided",
            )
            if asked is not None and gate == "scan.approval":  # the run goes on: look now
                until(
                    lambda a=asked: (
                        a not in page.request.get(f"{url}/api/pending").json()["pending"]
                    ),
                    120,
                    f"the request {asked} of the decided gate to close",
                )
        assert decided == ["scan.approval", "review", "deploy.approval"], decided
    assert ended(app, 120) == 0, output(app)[-3000:]
    out = output(app)
    assert "17 turns behaved as scripted" in out
    if deny_first_scan:  # the agent did not run it, said so, and went on
        assert f"DENIED by {OPERATOR}: not during the freeze" in out
        scan = out[out.index("[1] step scan") : out.index("[·] step patch")]
        assert "NOT RUN (cancelled)" in scan and "WAITING_APPROVAL" not in scan
    deploy = out[out.index("step deploy: deploy") :]
    assert re.search(r"with edits: canary_percent: 10 → 5", deploy)
    # the evidence is the edited call's, which ran, not the superseded original's
    evidence = deploy[: deploy.index("step verify")]
    assert "[SUCCEEDED] `production.deploy` ran" in evidence and "[CANCELLED]" not in evidence
    assert '"canary_percent": 5' in deploy[: deploy.index("step verify")]
    assert "remediate-" in out and "completed" in out
    assert "hash chain verified" in out and "console      stopped" in out
    done = subprocess.run(
        [str(HARNESSC), "log", "verify", "--log", str(app["tmp"] / "r.db")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def after_denial(out: str) -> str:
    """What the run printed after its first denial ("" before one is printed)."""
    at = out.find("DENIED by")
    return "" if at < 0 else out[at:]


def test_a_denial_in_the_console_reaches_the_agent_and_ctrl_c_stops_the_wait(
    app: dict[str, Any],
) -> None:
    """The first scan denied with a reason in the browser: the agent does not run it and goes
    on; at the next waiting call, SIGINT (Ctrl-C) ends the run with a clear message, and the
    console stops with it."""
    url = app["url"]
    with sync_api.sync_playwright() as pw, logged_in(pw, app) as page:
        section = page.locator("section.approval").first
        section.wait_for(timeout=120_000)
        assert "mcp:scanner:tool:scan" in section.locator("h2").inner_text()
        section.locator("input[name=reason]").first.fill("not during the freeze")
        confirm(section.locator("button:has-text('Deny')"))
        page.wait_for_selector("p.message")
    # the denial printed, then the next wait after it (the first wait is printed before either)
    until(lambda: "for a person: " in after_denial(output(app)), 180, "the denial, then a wait")
    out = output(app)
    assert f"DENIED by {OPERATOR}: not during the freeze" in out
    scan = out[out.index("[1] step scan") : out.index("[·] step patch")]
    assert "NOT RUN" in scan and "SUCCESS" not in scan
    app["process"].send_signal(signal.SIGINT)
    assert ended(app, 60) == 130, output(app)[-3000:]
    out = output(app)
    assert "interrupted: the run stopped here" in out and "console      stopped" in out
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(url.rsplit(":", 1)[1]))) != 0
