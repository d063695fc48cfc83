"""Regenerate the console's screenshots in docs/console/ from the remediation example.

    python tools/console_screenshots.py            # writes docs/console/{approvals,grants,
                                                   #   timeline,workflows}.png
    python tools/console_screenshots.py --out DIR

It builds examples/remediation into a temporary folder, runs `app.py --console` on a fresh
SQLite store and a free port, and plays the operator in headless Chromium (Playwright on
`chromium`): it approves each call the agent waits on, and photographs

- approvals.png: the production deploy waiting for a release manager;
- grants.png: the grant its approval with an edited `canary_percent` issued (the agent is
  paused with SIGSTOP for the photograph, since it spends a `once` grant at once);
- timeline.png: the planner's timeline where the original deploy is superseded;
- workflows.png: the durable `remediate` run waiting at its security review.

Every page is taken at one viewport size, from the same script, so a run after a change of the
console differs only where the console did (ids and times differ from run to run).
"""

from __future__ import annotations

import argparse
import json
import os
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

ROOT = Path(__file__).resolve().parent.parent
OPERATOR, TOKEN = "release-manager", "screenshots"
ROLES = ["approver", "release-manager", "security", "user"]
VIEWPORT = {"width": 1280, "height": 900}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: needs Playwright for Python (pip install playwright)", file=sys.stderr)
        return 2
    if not Path(args.chromium).is_file():
        print(f"error: no chromium at {args.chromium} (--chromium PATH)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="console-shots-") as tmp:
        app = App(Path(tmp))
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                try:
                    shoot(browser.new_page(viewport=VIEWPORT), app, args.out)
                finally:
                    browser.close()
            code = app.process.wait(timeout=300)
        finally:
            app.stop()
        if code != 0:
            print(app.output()[-3000:], file=sys.stderr)
            print(f"error: the example exited {code}", file=sys.stderr)
            return 1
    for name in ("approvals", "grants", "timeline", "workflows"):
        print(f"wrote {args.out / (name + '.png')}")
    return 0


class App:
    """The remediation example with `--console`, built and started in `tmp`."""

    def __init__(self, tmp: Path) -> None:
        from harnessc.compiler.console.auth import token_hash

        harnessc = Path(sys.executable).with_name("harnessc")
        subprocess.run(
            [
                str(harnessc),
                "build",
                "examples/remediation/remediation.harness",
                *("-o", str(tmp / "remediation"), "--no-embed"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        operator = {"name": OPERATOR, "roles": ROLES, "token_sha256": token_hash(TOKEN)}
        (tmp / "ops.json").write_text(json.dumps({"operators": [operator]}), encoding="utf-8")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.log = tmp / "app.out"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "examples" / "remediation" / "app.py"),
                    *(str(tmp / "remediation"), "--log", f"sqlite:///{tmp / 'r.db'}"),
                    *("--console", "--port", str(port), "--operators", str(tmp / "ops.json")),
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait(self, what: str, probe: Callable[[], Any], timeout: float = 180.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            self.alive(what)
            time.sleep(0.2)
        raise SystemExit(f"timed out waiting for {what}")

    def alive(self, what: str) -> None:
        if self.process.poll() is not None:
            raise SystemExit(f"the example exited while waiting for {what}:\n{self.output()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            self.process.wait(timeout=60)


def shoot(page: Any, app: App, out: Path) -> None:
    url = app.url
    app.wait("the console", lambda: f"console      {url}/" in app.output(), 120)
    page.goto(f"{url}/login")
    page.fill("input[name=name]", OPERATOR)
    page.fill("input[name=password]", TOKEN)
    page.click("button:has-text('Log in')")
    page.wait_for_url(f"{url}/approvals")
    session = None
    while "The remediate workflow on the durable engine" not in app.output():
        page.goto(f"{url}/approvals")
        sections = page.locator("section.approval")
        if sections.count() == 0:
            app.alive("a request or the workflow")
            time.sleep(0.3)
            continue
        section = sections.first
        tool = section.locator("h2").inner_text().split()[0]
        if tool == "production.deploy" and session is None:
            session = section.locator("a[href^='/sessions/']").inner_text()
            page.screenshot(path=str(out / "approvals.png"))
            args = json.loads(section.locator("textarea[name=arguments]").input_value())
            section.locator("summary").click()
            section.locator("textarea[name=arguments]").fill(
                json.dumps({**args, "canary_percent": 5})
            )
            section.locator("input[name=reason]").last.fill("a smaller canary first")
            os.kill(app.process.pid, signal.SIGSTOP)  # the grant stays unspent meanwhile
            try:
                section.locator("button:has-text('Approve edited call')").click()
                section.locator("button:has-text('Approve edited call')").click()
                page.wait_for_selector("p.message")
                page.goto(f"{url}/grants")
                page.screenshot(path=str(out / "grants.png"))
            finally:
                os.kill(app.process.pid, signal.SIGCONT)
        else:
            section.locator("button:has-text('Approve')").first.click()
            section.locator("button:has-text('Approve')").first.click()
            page.wait_for_selector("p.message")
    if session is None:
        raise SystemExit("no production deploy waited for a person")
    page.goto(f"{url}/sessions/{session}")
    while "superseded by" not in page.inner_text("table.timeline"):
        page.click("a:has-text('Next')")
    row = page.locator("table.timeline tr", has_text="superseded by").first
    row.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -200)")
    page.screenshot(path=str(out / "timeline.png"))
    shot = False
    while "event log (" not in app.output():
        page.goto(f"{url}/workflows")
        gates = page.locator("div.gate")
        if gates.count() == 0:
            app.alive("a gate")
            time.sleep(0.3)
            continue
        gate = gates.first.locator("h3").first.inner_text().removeprefix("Gate ")
        if gate == "review":  # the security review, after the scan and the patch
            page.screenshot(path=str(out / "workflows.png"))
            shot = True
        gates.first.locator("button:has-text('approve')").click()
        gates.first.locator("button:has-text('approve')").click()
        page.wait_for_selector("p.message")
        app.wait(f"{gate} decided", lambda g=gate: f"decided      {g}: approve" in app.output())
    if not shot:
        raise SystemExit("the run never waited at its review gate")


if __name__ == "__main__":
    sys.exit(main())
