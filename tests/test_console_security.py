"""The console's login and responses as an attacker would try them: a cookie kept after logout,
guessing passwords, telling names apart by time, framing or sniffing pages, a failure that
drops the connection, and a login over plain HTTP that cannot stick."""

from __future__ import annotations

import http.client
import logging
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.console import auth
from harnessc.compiler.console.app import SECURITY_HEADERS, build_app
from harnessc.compiler.console.auth import Logins, LoginThrottle
from starlette.testclient import TestClient

from .test_console import TOKENS, login, make_world, serve


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return make_world(tmp_path)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_logging_out_ends_the_login_for_every_copy_of_the_cookie(world: Any) -> None:
    client, csrf = login(world["app"], "carol")
    stolen = dict(client.cookies)
    assert client.post("/logout", data={"csrf": csrf}).status_code == 303
    replay = TestClient(world["app"], follow_redirects=False, cookies=stolen)
    assert replay.get("/api/pending").status_code == 401
    assert replay.get("/approvals").headers["location"] == "/login"


def test_a_login_ends_when_its_time_is_up() -> None:
    clock = Clock()
    logins = Logins(ttl_s=60, clock=clock)
    login_id = logins.open("alice")
    assert logins.operator(login_id) == "alice"
    clock.now += 61
    assert logins.operator(login_id) is None
    assert logins.operator(None) is None and logins.operator("forged") is None


def _attempt(client: TestClient, name: str, password: str) -> Any:
    return client.post("/login", data={"name": name, "password": password})


def test_five_failures_then_429_with_a_growing_delay_and_never_for_good(world: Any) -> None:
    clock = Clock()
    console = world["console"]
    console.throttle = LoginThrottle(clock=clock)
    client = TestClient(world["app"], follow_redirects=False)
    for _ in range(5):
        assert _attempt(client, "erin", "wrong").status_code == 401
    r = _attempt(client, "erin", "pw")  # even the right password waits
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert "too many failed logins" in r.text
    clock.now += 1
    assert _attempt(client, "erin", "wrong").status_code == 401  # heard again: a 6th failure
    assert _attempt(client, "erin", "wrong").headers["retry-after"] == "2"  # the delay doubles
    clock.now += 2
    assert _attempt(client, "erin", "wrong").status_code == 401
    assert _attempt(client, "erin", "wrong").headers["retry-after"] == "4"
    clock.now += 15 * 60 + 1  # the failures age out: no one is locked out for good
    assert _attempt(client, "erin", "pw").status_code == 303


def test_the_throttle_counts_per_address_across_names_too(world: Any) -> None:
    console = world["console"]
    console.throttle = LoginThrottle(clock=Clock())
    client = TestClient(world["app"], follow_redirects=False)
    for name in ("x1", "x2", "x3", "x4", "x5"):
        assert _attempt(client, name, "guess").status_code == 401
    assert _attempt(client, "alice", TOKENS["alice"]).status_code == 429


def test_a_success_clears_the_name_but_not_the_address() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    keys = ("name:erin", "address:10.0.0.9")
    for _ in range(4):
        throttle.failed(keys)
    throttle.succeeded(keys[:1])
    throttle.failed(("name:other", "address:10.0.0.9"))
    assert throttle.wait_s(("name:erin", "address:10.0.0.9")) > 0
    assert throttle.wait_s(("name:erin", "address:10.0.0.1")) == 0


def test_every_attempt_costs_one_scrypt_whoever_it_names(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the time of an answer must not tell which names exist: an unknown name and an operator
    # with a token only are checked against a dummy hash, as an operator's password is
    operators = world["console"].operators
    calls: list[str] = []
    real = auth.verify_password
    monkeypatch.setattr(auth, "verify_password", lambda p, h: calls.append(h) or real(p, h))
    for name, secret, who in (
        ("nobody", "x", None),
        ("alice", "wrong", None),  # a token operator
        ("alice", TOKENS["alice"], "alice"),
        ("erin", "wrong", None),  # a password operator
        ("erin", "pw", "erin"),
        ("nobody", "", None),
    ):
        calls.clear()
        op = auth.authenticate(operators, name, secret)
        assert (op.name if op else None) == who
        assert len(calls) == 1, (name, secret)


def test_every_response_carries_the_security_headers_and_a_request_id(world: Any) -> None:
    client, _ = login(world["app"], "alice")
    ids = set()
    for path in ("/login", "/approvals", "/static/console.css", "/no-such-page", "/"):
        r = client.get(path)
        for name, value in SECURITY_HEADERS.items():
            assert r.headers[name] == value, (path, name)
        ids.add(r.headers["x-request-id"])
    assert len(ids) == 5
    csp = SECURITY_HEADERS["content-security-policy"]
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp


def test_a_failure_is_a_page_naming_its_request_id_and_the_log_has_it(
    world: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = login(world["app"], "alice")
    console = world["console"]

    def broken() -> Any:
        raise RuntimeError("a bug in a page")

    monkeypatch.setattr(console, "fresh", broken)
    with caplog.at_level(logging.ERROR, logger="harnessc.console"):
        r = client.get("/approvals")
    request_id = r.headers["x-request-id"]
    assert r.status_code == 500 and f"request id {request_id}" in r.text
    assert "RuntimeError" not in r.text  # the details stay in the server's log
    [record] = [x for x in caplog.records if request_id in x.getMessage()]
    assert record.exc_info is not None and "a bug in a page" in str(record.exc_info[1])


def test_a_failure_keeps_the_connection_open(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    console = world["console"]
    real = console.templates.get_template

    def failing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "login.html":
            raise RuntimeError("a bug in the login page")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(console.templates, "get_template", failing)
    served = serve(world["app"])
    url = next(served)
    try:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/login")
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 500 and r.getheader("x-request-id") in body
        assert conn.sock is not None, "the server closed the connection after the failure"
        sock = conn.sock
        conn.request("GET", "/static/console.css")
        r = conn.getresponse()
        r.read()
        assert r.status == 200 and conn.sock is sock  # the same connection served both
        conn.close()
    finally:
        served.close()


def test_a_login_over_plain_http_that_could_not_stick_says_why(world: Any) -> None:
    console = world["console"]
    secure = build_app(console, secure_cookie=True)
    plain = TestClient(secure, follow_redirects=False, base_url="http://console.example")
    r = plain.post("/login", data={"name": "erin", "password": "pw"})
    assert r.status_code == 400 and "HTTPS" in r.text and "set-cookie" not in r.headers
    tls = TestClient(secure, follow_redirects=False, base_url="https://console.example")
    r = tls.post("/login", data={"name": "erin", "password": "pw"})
    assert r.status_code == 303 and "secure" in r.headers["set-cookie"].lower()
