"""The approvals page as an on-call queue: oldest first with age, risk and who asked; filters
and search; a request on a page of its own; keys to move and open; approve and deny only on a
confirming second click."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import PendingCall

from .test_console import CHROMIUM, TOKENS, login, make_world, serve


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    world = make_world(tmp_path)  # two requests of shell.run: `ls` (with a secret), then `df`
    s = world["session"]
    call = s.normalize("shell.run", "call-2", {"cmd": "du -sh /var"})
    assert isinstance(call, PendingCall)
    world["requests"].append(s.request_approval(call).request_id)
    return world


def _ids(page: str) -> list[str]:
    return re.findall(r'<section class="approval" id="(apr-[0-9a-f]+)"', page)


def test_the_queue_is_oldest_first_with_age_risk_and_who_asked(world: dict[str, Any]) -> None:
    client, _ = login(world["app"], "alice")
    page = client.get("/approvals").text
    assert _ids(page) == world["requests"]
    assert "3 of 3 waiting, the oldest for" in page
    first = page[page.index(f'id="{world["requests"][0]}"') :]
    assert re.search(
        r'asked by <code>u-1</code> <time datetime="[^"]+" title="[^"]+">[^<]+ ago', first
    )
    assert re.search(r'<span class="risk \w+">\w+ risk</span>', first)


def test_filters_and_search_narrow_the_queue(world: dict[str, Any]) -> None:
    client, _ = login(world["app"], "alice")
    first, second, third = world["requests"]
    assert _ids(client.get('/approvals?q="df"').text) == [second]  # ids are hex: quoted
    assert _ids(client.get("/approvals?q=DU+/var").text) == [third]  # words, any case
    assert _ids(client.get(f"/approvals?q={first}").text) == [first]
    assert _ids(client.get("/approvals?tool=shell.run&actor=u-1").text) == [first, second, third]
    page = client.get("/approvals?tool=no.such").text
    assert _ids(page) == [] and "among those filtered" in page and "0 of 3 waiting" in page
    # the secret's value is masked on the page, and no search finds it
    assert _ids(client.get("/approvals?q=hunter2").text) == []
    # the list the page polls keeps the filters
    assert 'data-poll="/approvals?q=du&amp;part=1"' in client.get("/approvals?q=du").text
    assert _ids(client.get("/approvals?q=%2Fvar&part=1").text) == [third]


def test_a_request_has_a_page_of_its_own(world: dict[str, Any]) -> None:
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][1]
    page = client.get(f"/approvals/{rid}").text
    assert _ids(page) == [rid] and "the queue" in page
    assert client.post(f"/approvals/{rid}/approve", data={"csrf": csrf}).status_code == 200
    gone = client.get(f"/approvals/{rid}")
    assert gone.status_code == 404 and "is not a pending request" in gone.text


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)")
def test_in_a_browser_keys_move_and_open_and_approving_needs_a_second_click(
    world: dict[str, Any],
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    first, second, _ = world["requests"]
    served = serve(world["app"])
    url = next(served)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(f"{url}/login")
                page.fill("input[name=name]", "alice")
                page.fill("input[name=password]", TOKENS["alice"])
                page.click("button:has-text('Log in')")
                page.wait_for_url(f"{url}/approvals")
                page.keyboard.press("j")
                assert page.locator("section.approval.current").get_attribute("id") == first
                page.keyboard.press("j")
                page.keyboard.press("j")
                page.keyboard.press("k")
                assert page.locator("section.approval.current").get_attribute("id") == second
                page.keyboard.press("Enter")
                page.wait_for_url(f"{url}/approvals/{second}")
                page.go_back()
                page.wait_for_url(f"{url}/approvals")
                page.keyboard.press("/")
                assert page.evaluate("document.activeElement.name") == "q"
                page.keyboard.type('"df"')
                page.keyboard.press("Enter")  # in the search box: it searches
                page.wait_for_url(f"{url}/approvals?q=*")
                assert page.locator("section.approval").count() == 1
                # approving takes two clicks: the first says what the second will do
                approve = page.locator(f"section#{second} button:has-text('Approve')").first
                approve.click()
                assert approve.inner_text() == f"Confirm: Approve shell.run ({second})?"
                assert page.url.startswith(f"{url}/approvals?q=")  # nothing was sent
                page.keyboard.press("j")  # and no key approves
                approve.click()
                page.wait_for_selector("p.message")
                assert f"`{second}`: approved" in page.inner_text("p.message")
            finally:
                browser.close()
    finally:
        served.close()


def test_a_sessions_timeline_has_a_row_per_call_with_its_events_folded(
    world: dict[str, Any],
) -> None:
    client, csrf = login(world["app"], "alice")
    first = world["requests"][0]
    client.post(f"/approvals/{first}/approve", data={"csrf": csrf})
    page = client.get(f"/sessions/{world['session'].id}").text
    rows = re.findall(r'<tr class="call[^"]*">(.*?)</tr>', page, re.S)
    calls = [re.search(r"<code>([^<]+)</code>", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert calls == ["call-0", "call-1", "call-2"]  # each call once, in the order first seen
    approved = rows[0]
    assert "— ASK" in approved and "approval.requested" in approved
    assert f"approval {first} approved by alice" in approved  # the answer folds in its call
    [decision_id] = re.findall(r"--decision (dec-[0-9a-f]+)</code>", approved)
    assert "harnessc why" in approved and decision_id
    # the session's own events stay rows of their own
    assert '<tr class="session-started">' in page


def test_the_log_page_is_the_watch_and_a_whole_walk_finds_a_row_changed_under_it(
    world: dict[str, Any],
) -> None:
    import sqlite3

    client, csrf = login(world["app"], "carol")
    page = client.get("/log").text
    assert "The hash chain verifies up to the head" in page
    assert "Not walked from the first event since the console started" in page
    # a row the watch already walked is changed under the running console
    db = world["tmp"] / "h.db"
    with sqlite3.connect(db) as conn:  # past the append-only triggers, as an attacker would
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("""UPDATE events SET payload = '{"forged":1}' WHERE position = 2""")
    r = client.post("/log/verify", data={"csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/log"
    page = client.get("/log").text
    assert re.search(r"Walked from the first event at [^(]+\(\d+ ms\): it does not verify at", page)
    assert client.post("/log/verify").status_code == 403  # a POST without the CSRF token
