"""`harnessc serve`: the runtime over HTTP, through Starlette's TestClient and a real server
(the CLI, over TLS, on a free port), with bearer tokens issued by the CLI."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

import httpx
from harnessc.compiler.cli import main
from harnessc.runtime import Harness, Spec, SQLiteStore
from harnessc.runtime.serve.app import MAX_BODY, build_app
from harnessc.runtime.serve.tokens import Tokens
from starlette.testclient import TestClient

from .test_approvals import compile_text

PAY = """
harness pay { version "1.0.0" }
tool payments.send {
  summary "Send a payment."
  effects write external
  risk high
  input { iban: string, amount: int }
  output { id: string }
}
tool ledger.read {
  summary "Read the ledger."
  effects read
  input { account: string }
  output { balance: int }
}
policy p {
  default deny
  read: allow ledger.read
  big: deny payments.send when args.amount > 10000 { reason "Payments over 10,000 are refused." }
  pay: ask payments.send {
    approver role "finance"
    grant once ttl 10m
    reason "Finance approves each payment."
  }
}
surface s { expose payments.*, ledger.* }
agent clerk { surface s; policy p }
"""
CLERK = {"user": "u-1", "role": "clerk"}
FINANCE = {"user": "f-1", "role": "finance"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("pay"), PAY)


def open_session(c: TestClient, actor: dict[str, Any] | None = None, **kw: Any) -> str:
    body = {"agent": "clerk", **({"actor": actor} if actor is not None else {}), **kw}
    r = c.post("/v1/sessions", json=body, headers=kw.pop("headers", None))
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def decide(c: TestClient, sid: str, tool: str, call_id: str, args: Any, **kw: Any) -> Any:
    body = {"tool": tool, "tool_call_id": call_id, "args": args, **kw}
    r = c.post(f"/v1/sessions/{sid}/calls", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_deny_from_a_rule_over_the_arguments_is_the_decision_the_runtime_records(
    spec: Spec,
) -> None:
    h = Harness(spec)
    c = TestClient(build_app(h))
    sid = open_session(c, CLERK)
    out = decide(c, sid, "payments_send", "c-1", {"iban": "DE1", "amount": 20_000})
    assert out["outcome"] == "deny" and out["authorized"] is False
    assert out["decision"]["rule"] == "p.big"
    assert out["decision"]["reason"] == "Payments over 10,000 are refused."
    assert out["policy_version"] == h.policy_version
    recorded = [e.payload for e in h.store.read(sid) if e.type == "decision"]
    assert [p["decision_id"] for p in recorded] == [out["decision_id"]]
    assert out["call"]["input_hash"] == recorded[0]["input_hash"]
    # the same amount under the limit is an ASK, and a read is allowed
    small = decide(c, sid, "payments.send", "c-2", {"iban": "DE1", "amount": 20})
    assert small["outcome"] == "ask" and small["decision"]["rule"] == "p.pay"
    assert decide(c, sid, "ledger.read", "c-3", {"account": "a"})["outcome"] == "allow"
    # the runtime's refusals, as they are
    bad = decide(c, sid, "payments.send", "c-4", {"iban": "DE1", "amount": "ten"})
    assert bad["outcome"] == "refused" and bad["refusal"]["code"] == "invalid-args"
    assert bad["refusal"]["errors"][0][0] == "$.amount"
    assert decide(c, sid, "mail.send", "c-5", {})["refusal"]["code"] == "unknown-tool"


def test_an_ask_answered_through_the_api_reaches_the_waiting_session(spec: Spec) -> None:
    h = Harness(spec)
    sent: list[dict[str, Any]] = []

    @h.implement("payments.send")
    def send(args: dict[str, Any]) -> dict[str, str]:
        sent.append(dict(args))
        return {"id": "pay-1"}

    c = TestClient(build_app(h))
    sid = open_session(c, CLERK)
    out = decide(
        c, sid, "payments.send", "c-1", {"iban": "DE1", "amount": 50}, request_approval=True
    )
    request_id = out["approval"]["request_id"]
    assert (
        out["approval"]["status"] == "pending"
        and out["approval"]["decision_id"] == out["decision_id"]
    )
    # not authorised yet: invoking runs nothing
    early = c.post(f"/v1/sessions/{sid}/calls/c-1/invoke").json()
    assert early["ran"] is False and sent == []
    # the agent waits on the request while an approver answers it
    waited: dict[str, Any] = {}

    def wait() -> None:
        waited.update(c.get(f"/v1/approvals/{request_id}?wait=10").json())

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)
    # the clerk may not approve a finance ASK
    refused = c.post(f"/v1/approvals/{request_id}/approve", json={"by": CLERK})
    assert refused.status_code == 403 and refused.json()["error"] == "not-an-approver"
    answer = c.post(f"/v1/approvals/{request_id}/approve", json={"by": FINANCE}).json()
    assert answer["status"] == "approved" and answer["grant_id"]
    t.join(15)
    assert waited["status"] == "approved"
    result = c.post(f"/v1/sessions/{sid}/calls/c-1/invoke").json()
    assert result["status"] == "success" and result["data"] == {"id": "pay-1"}
    assert sent == [{"iban": "DE1", "amount": 50}]
    assert result["grant_id"] == answer["grant_id"]
    # invoking again returns the recorded result: it never runs twice
    assert c.post(f"/v1/sessions/{sid}/calls/c-1/invoke").json()["status"] == "success"
    assert len(sent) == 1
    items = c.get(f"/v1/sessions/{sid}/evidence").json()["items"]
    assert items[0]["approved_by"] == "f-1" and items[0]["status"] == "success"


def test_a_denial_through_the_api_stops_the_call(spec: Spec) -> None:
    h = Harness(spec)
    c = TestClient(build_app(h))
    sid = open_session(c, CLERK)
    args = {"iban": "DE1", "amount": 70}
    out = decide(c, sid, "payments.send", "c-1", args, request_approval=True)
    rid = out["approval"]["request_id"]
    r = c.post(f"/v1/approvals/{rid}/deny", json={"by": FINANCE, "reason": "unknown payee"})
    assert r.json()["status"] == "denied" and r.json()["request"]["status"] == "rejected"
    result = c.post(f"/v1/sessions/{sid}/calls/c-1/invoke").json()
    assert result["ran"] is False and result["status"] != "success"
    again = c.post(f"/v1/approvals/{rid}/approve", json={"by": FINANCE})
    assert again.status_code == 409 and again.json()["error"] == "not-pending"
    ended = c.post(f"/v1/sessions/{sid}/end").json()
    assert ended["session_id"] == sid
    assert [e.type for e in h.store.read(sid)][-1] == "session.ended"


def test_a_tool_the_client_runs_is_accepted_and_its_result_checked_and_recorded(
    spec: Spec,
) -> None:
    h = Harness(spec)
    c = TestClient(build_app(h))
    sid = open_session(c, CLERK)
    decide(c, sid, "ledger.read", "r-1", {"account": "a"})
    accepted = c.post(f"/v1/sessions/{sid}/calls/r-1/invoke").json()
    assert accepted["status"] == "accepted" and accepted["state"] == "WAITING_RESULT"
    done = c.post(f"/v1/sessions/{sid}/calls/r-1/result", json={"data": {"balance": 7}}).json()
    assert done["status"] == "success" and done["data"] == {"balance": 7}
    twice = c.post(f"/v1/sessions/{sid}/calls/r-1/result", json={"data": {"balance": 8}})
    assert twice.status_code == 409 and twice.json()["error"] == "already-finished"
    # an output that is not the tool's is a failure, as an executor's would be
    decide(c, sid, "ledger.read", "r-2", {"account": "b"})
    c.post(f"/v1/sessions/{sid}/calls/r-2/invoke")
    wrong = c.post(f"/v1/sessions/{sid}/calls/r-2/result", json={"data": {"balance": "x"}})
    assert wrong.json()["status"] == "failure"
    assert wrong.json()["error_category"] == "invalid_output"


def test_bad_requests_get_structured_errors_never_a_traceback(spec: Spec) -> None:
    c = TestClient(build_app(Harness(spec)), raise_server_exceptions=False)
    sid = open_session(c, CLERK)

    def error(r: Any) -> tuple[int, str]:
        body = r.json()
        assert set(body) == {"error", "message", "errors"} and "Traceback" not in r.text
        return r.status_code, body["error"]

    assert error(c.post("/v1/sessions", content=b"{nope")) == (400, "invalid-json")
    nested = b"[" * 100_000 + b"]" * 100_000
    assert error(c.post("/v1/sessions", content=nested)) == (400, "invalid-json")
    r = c.post("/v1/sessions", json={"agent": "clerk", "actor": "me"})
    assert error(r) == (400, "invalid-request") and r.json()["errors"][0]["path"] == "$.actor"
    assert error(c.post("/v1/sessions", json={"agent": "clerk", "x": 1})) == (
        400,
        "invalid-request",
    )
    assert error(c.post("/v1/sessions", json={"agent": "nobody"})) == (404, "unknown-agent")
    assert error(
        c.post("/v1/sessions/ses-none/calls", json={"tool": "t", "tool_call_id": "c"})
    ) == (
        404,
        "unknown-session",
    )
    assert error(c.post(f"/v1/sessions/{sid}/calls/none/invoke")) == (404, "unknown-call")
    assert error(c.get("/v1/nothing")) == (404, "not-found")
    assert error(c.get("/v1/sessions")) == (405, "method-not-allowed")
    assert (
        error(c.post("/v1/sessions", content=b"agent=x", headers={"content-type": "text/plain"}))[1]
        == "unsupported-media-type"
    )
    big = b'{"agent": "' + b"x" * MAX_BODY + b'"}'
    assert error(c.post("/v1/sessions", content=big)) == (413, "body-too-large")
    # the runtime's own argument limits hold as in process
    many = {"iban": "x" * (1_048_576 + 1), "amount": 1}
    assert decide(c, sid, "payments.send", "c-9", many)["refusal"]["code"] == "args-too-large"


@pytest.fixture
def tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Tokens issued by the CLI: a clerk agent's, another clerk's, and finance's."""
    path = tmp_path / "tokens.json"
    out = {"path": path}
    for name, user, role in (
        ("clerk", "u-1", "clerk"),
        ("other", "u-2", "clerk"),
        ("fin", "f-1", "finance"),
    ):
        argv = [
            "serve",
            "token",
            "issue",
            name,
            "--tokens",
            str(path),
            "--user",
            user,
            "--role",
            role,
        ]
        if name != "fin":
            argv += ["--agent", "clerk"]
        assert main(argv) == 0
        out[name] = capsys.readouterr().out.strip()
    return out


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_tokens_bind_the_actor_and_a_revoked_token_is_refused(
    spec: Spec, tokens: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    stored = tokens["path"].read_text()
    assert tokens["clerk"].startswith("hct_") and tokens["clerk"] not in stored  # hashed only
    assert oct(tokens["path"].stat().st_mode & 0o777) == "0o600"
    h = Harness(spec)
    c = TestClient(build_app(h, Tokens(tokens["path"])))
    assert c.post("/v1/sessions", json={"agent": "clerk"}).status_code == 401
    assert (
        c.post("/v1/sessions", json={"agent": "clerk"}, headers=bearer("hct_wrong")).status_code
        == 401
    )
    r = c.post("/v1/sessions", json={"agent": "clerk"}, headers=bearer(tokens["clerk"]))
    assert r.status_code == 201 and r.json()["actor"] == CLERK
    sid = r.json()["session_id"]
    # the body cannot act as someone else
    r = c.post(
        "/v1/sessions",
        json={"agent": "clerk", "actor": {"user": "u-1", "role": "finance"}},
        headers=bearer(tokens["clerk"]),
    )
    assert r.status_code == 403 and r.json()["error"] == "actor-override"
    # nor use another actor's session
    call = {"tool": "ledger.read", "tool_call_id": "c", "args": {"account": "a"}}
    r = c.post(f"/v1/sessions/{sid}/calls", json=call, headers=bearer(tokens["other"]))
    assert r.status_code == 403 and r.json()["error"] == "not-your-session"
    # an approval's approver is the token's actor: the clerk cannot approve as finance
    body = {
        **call,
        "tool": "payments.send",
        "args": {"iban": "x", "amount": 5},
        "request_approval": True,
    }
    out = c.post(f"/v1/sessions/{sid}/calls", json=body, headers=bearer(tokens["clerk"])).json()
    rid = out["approval"]["request_id"]
    r = c.post(
        f"/v1/approvals/{rid}/approve", json={"by": FINANCE}, headers=bearer(tokens["clerk"])
    )
    assert r.status_code == 403 and r.json()["error"] == "actor-override"
    # another clerk may not read the request; the requester and its approver may
    r = c.get(f"/v1/approvals/{rid}", headers=bearer(tokens["other"]))
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert c.get(f"/v1/approvals/{rid}", headers=bearer(tokens["clerk"])).status_code == 200
    r = c.post(f"/v1/approvals/{rid}/approve", json={}, headers=bearer(tokens["fin"]))
    assert r.status_code == 200 and r.json()["status"] == "approved"
    # a token limited to the clerk agent; finance's may open no session of an unknown agent
    assert main(["serve", "token", "list", "--tokens", str(tokens["path"])]) == 0
    listed = capsys.readouterr().out
    assert "clerk\t" in listed and "live" in listed
    # revoked on disk: refused at the next request, the server still running
    assert main(["serve", "token", "revoke", "clerk", "--tokens", str(tokens["path"])]) == 0
    r = c.get(f"/v1/sessions/{sid}/evidence", headers=bearer(tokens["clerk"]))
    assert r.status_code == 401 and r.json()["message"] == "the token is unknown or revoked"
    assert c.get("/v1/decisions", headers=bearer(tokens["fin"])).status_code == 200


def test_a_session_resumes_after_a_restart_and_its_approved_call_runs(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    c = TestClient(build_app(Harness(spec, SQLiteStore(db))))
    sid = open_session(c, CLERK)
    out = decide(
        c, sid, "payments.send", "c-1", {"iban": "DE1", "amount": 50}, request_approval=True
    )
    rid = out["approval"]["request_id"]
    # a new process on the same log: the approval and the call are found there
    h2 = Harness(spec, SQLiteStore(db))
    c2 = TestClient(build_app(h2))
    assert (
        c2.post(f"/v1/approvals/{rid}/approve", json={"by": FINANCE}).json()["status"] == "approved"
    )
    resumed = c2.post(f"/v1/sessions/{sid}/resume", json={}).json()
    assert resumed["session_id"] == sid and resumed["actor"] == CLERK
    result = c2.post(f"/v1/sessions/{sid}/calls/c-1/invoke").json()
    assert result["status"] == "accepted" and result["grant_id"]


def test_the_openapi_document_describes_every_answer(spec: Spec) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    c = TestClient(build_app(Harness(spec)))
    doc = c.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    schemas = doc["components"]["schemas"]
    text = json.dumps(doc)
    for ref in set(re.findall(r'"#/components/schemas/([^"]+)"', text)):
        assert ref in schemas, ref
    assert {"/v1/sessions", "/access/v1/evaluation", "/v1/decisions"} <= set(doc["paths"])

    def check(answer: Any, name: str) -> None:
        schema = {**schemas[name], "components": {"schemas": schemas}}
        text = json.dumps(schema).replace("#/components/schemas/", "#/components/schemas/")
        jsonschema.validate(answer, json.loads(text))

    sid = open_session(c, CLERK)
    check(decide(c, sid, "payments.send", "c-1", {"iban": "x", "amount": 99_999}), "DecideOut")
    check(
        decide(c, sid, "payments.send", "c-2", {"iban": "x", "amount": 1}, request_approval=True),
        "DecideOut",
    )
    check(decide(c, sid, "nope", "c-3", {}), "DecideOut")
    check(c.get(f"/v1/sessions/{sid}/evidence").json(), "EvidenceOut")
    check(c.get("/v1/decisions").json(), "DecisionLogOut")
    check(c.post("/v1/sessions", json={}).json(), "ErrorOut")


def test_authzen_evaluations_carry_ask_in_their_context(spec: Spec) -> None:
    h = Harness(spec)
    c = TestClient(build_app(h))
    config = c.get("/.well-known/authzen-configuration").json()
    assert config["access_evaluation_endpoint"].endswith("/access/v1/evaluation")
    subject = {"type": "user", "id": "u-1", "properties": {"role": "clerk"}}

    def evaluate(name: str, props: dict[str, Any], **ctx: Any) -> Any:
        body = {
            "subject": subject,
            "action": {"name": name, "properties": props},
            "resource": {"type": "account", "id": "acme"},
            "context": ctx,
        }
        r = c.post("/access/v1/evaluation", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    assert evaluate("ledger_read", {"account": "a"})["decision"] is True
    denied = evaluate("payments.send", {"iban": "x", "amount": 20_000})
    assert denied == {
        "decision": False,
        "context": {
            **denied["context"],
            "outcome": "deny",
            "rule": "p.big",
            "reason_user": {"en": "Payments over 10,000 are refused."},
        },
    }
    asked = evaluate("payments.send", {"iban": "x", "amount": 5}, tool_call_id="pay-1")
    assert asked["decision"] is False and asked["context"]["outcome"] == "ask"
    rid = asked["context"]["approval_id"]
    assert (
        c.post(f"/v1/approvals/{rid}/approve", json={"by": FINANCE}).json()["status"] == "approved"
    )
    again = evaluate("payments.send", {"iban": "x", "amount": 5}, tool_call_id="pay-1")
    assert again["decision"] is True and again["context"]["outcome"] == "ask"
    assert again["context"]["session_id"] == asked["context"]["session_id"]
    assert evaluate("nope", {})["context"]["refusal"]["code"] == "unknown-tool"
    batch = {
        "subject": subject,
        "options": {"evaluations_semantic": "deny_on_first_deny"},
        "evaluations": [
            {"action": {"name": "ledger.read", "properties": {"account": "a"}}},
            {"action": {"name": "payments.send", "properties": {"iban": "x", "amount": 20_000}}},
            {"action": {"name": "ledger.read", "properties": {"account": "b"}}},
        ],
    }
    got = c.post("/access/v1/evaluations", json=batch).json()["evaluations"]
    assert [e["decision"] for e in got] == [True, False]  # stopped at the first deny
    # the resource reaches policy as the session's resource
    sid = asked["context"]["session_id"]
    assert h.resume(sid).resource == {"type": "account", "id": "acme"}


def test_authzen_subject_cannot_differ_from_the_token(spec: Spec, tokens: dict[str, Any]) -> None:
    c = TestClient(build_app(Harness(spec), Tokens(tokens["path"])))
    body = {
        "subject": {"type": "user", "id": "f-1"},
        "action": {"name": "ledger.read", "properties": {"account": "a"}},
    }
    r = c.post("/access/v1/evaluation", json=body, headers=bearer(tokens["clerk"]))
    assert r.status_code == 403 and r.json()["error"] == "actor-override"
    body["subject"] = {"type": "user", "id": "u-1"}
    r = c.post("/access/v1/evaluation", json=body, headers=bearer(tokens["clerk"]))
    assert r.json()["decision"] is True


def test_decision_logs_are_read_from_the_event_log_in_opas_shape(spec: Spec) -> None:
    h = Harness(spec)
    c = TestClient(build_app(h))
    sid = open_session(c, CLERK)
    made = [
        decide(c, sid, "payments.send", f"c-{i}", {"iban": "x", "amount": amount})
        for i, amount in enumerate((20_000, 5, 30_000))
    ]
    first = c.get("/v1/decisions?limit=2").json()
    assert [d["decision_id"] for d in first["decisions"]] == [m["decision_id"] for m in made[:2]]
    rest = c.get(f"/v1/decisions?after={first['next_after']}").json()
    assert [d["decision_id"] for d in rest["decisions"]] == [made[2]["decision_id"]]
    entry = first["decisions"][0]
    assert entry["result"]["effect"] == "deny" and entry["result"]["rule"] == "p.big"
    assert entry["input_hash"] == made[0]["call"]["input_hash"]
    assert entry["revision"] == h.policy_version and entry["input"]["actor"] == CLERK
    assert entry["path"] == "harnessc/pay.p" and entry["timestamp"].startswith("20")


# -- a real server: the CLI over TLS on a free port -------------------------------------------


def trusting(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def make_certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def server(tmp_path: Path, tokens: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`harnessc serve BUILD --port 0` over TLS with tokens, in its own process."""
    (tmp_path / "pay.harness").write_text(PAY, encoding="utf-8")
    assert main(["build", str(tmp_path / "pay.harness"), "-o", str(tmp_path / "build")]) == 0
    cert, key = make_certificate(tmp_path)
    argv = [
        sys.executable,
        "-m",
        "harnessc.compiler",
        "serve",
        str(tmp_path / "build"),
        "--port",
        "0",
        "--log",
        str(tmp_path / "log.db"),
        "--tokens",
        str(tokens["path"]),
        "--certfile",
        str(cert),
        "--keyfile",
        str(key),
    ]
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"https://127\.0\.0\.1:(\d+)/", line)
        assert match, line + proc.stderr.read()
        url = f"https://127.0.0.1:{match.group(1)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/v1/health", verify=trusting(cert))
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        yield {"url": url, "cert": cert, **tokens}
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_real_server_over_tls_serves_a_build_with_tokens(server: dict[str, Any]) -> None:
    with httpx.Client(base_url=server["url"], verify=trusting(server["cert"])) as c:
        r = c.post("/v1/sessions", json={"agent": "clerk"}, headers=bearer(server["clerk"]))
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        call = {
            "tool": "payments.send",
            "tool_call_id": "c-1",
            "args": {"iban": "x", "amount": 20_000},
        }
        out = c.post(f"/v1/sessions/{sid}/calls", json=call, headers=bearer(server["clerk"])).json()
        assert out["outcome"] == "deny" and out["decision"]["rule"] == "p.big"
        assert c.post("/v1/sessions", json={"agent": "clerk"}).status_code == 401
    # plain HTTP is not served
    with pytest.raises(httpx.HTTPError):
        httpx.get(server["url"].replace("https", "http") + "/v1/health", timeout=5)


def test_expose_ranks_the_surface_and_the_console_shares_the_server(
    spec: Spec, tmp_path: Path
) -> None:
    from harnessc.compiler.console.app import Console
    from harnessc.compiler.console.app import build_app as console_app

    h = Harness(spec)
    console = console_app(Console(h, {}))
    c = TestClient(build_app(h, fallback=console), follow_redirects=False)
    sid = open_session(c, CLERK)
    r = c.post(f"/v1/sessions/{sid}/expose", json={"query": "read the ledger"})
    assert r.status_code == 200 and set(r.json()["tools"]) == {"ledger.read", "payments.send"}
    assert r.json()["rule"] == "all"  # the surface fits its limit: nothing ranked
    assert [e.type for e in h.store.read(sid)][-1] == "tools.exposed"
    # the console answers every path the API does not, on the same harness
    page = c.get("/login")
    assert page.status_code == 200 and "<form" in page.text
    assert c.get("/v1/health").json()["policy_version"] == h.policy_version


# -- the TypeScript client, from Node ---------------------------------------------------------

CLIENT = Path(__file__).resolve().parent.parent / "clients" / "typescript"


@pytest.fixture
def live(spec: Spec, tokens: dict[str, Any]) -> Iterator[str]:
    """The server's application on a real socket (uvicorn in a thread), with tokens."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    app = build_app(Harness(spec), Tokens(tokens["path"]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def test_the_typescript_client_drives_the_server_from_node(
    live: str, tokens: dict[str, Any]
) -> None:
    # Node comes from Debian's packages (.ci/run) and the compiler from the committed lockfile
    # (`npm ci` in scripts/setup.sh test): neither is optional, so this test never skips
    tsc = CLIENT / "node_modules" / "typescript" / "bin" / "tsc"
    assert tsc.is_file(), "run scripts/setup.sh test (npm ci in clients/typescript)"
    build = subprocess.run(
        ["node", str(tsc), "-p", "tsconfig.json"], cwd=CLIENT, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout + build.stderr
    env = {
        **os.environ,
        "HARNESSC_URL": live,
        "CLERK_TOKEN": tokens["clerk"],
        "FINANCE_TOKEN": tokens["fin"],
    }
    run = subprocess.run(
        ["node", "test/e2e.mjs"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["deny"]["rule"] == "p.big" and seen["deny"]["decision_id"].startswith("dec-")
    assert seen["ask"]["result"] == "success" and seen["ask"]["grant_id"]
    assert seen["authzen"] == "allow" and seen["operations"] == 15


def test_a_build_is_served_without_the_compiler(tmp_path: Path) -> None:
    (tmp_path / "pay.harness").write_text(PAY, encoding="utf-8")
    assert main(["build", str(tmp_path / "pay.harness"), "-o", str(tmp_path / "build")]) == 0
    script = f"""
import sys
for name in ("harnessc.compiler", "harnessc.dsl", "lark", "jinja2", "networkx", "z3"):
    sys.modules[name] = None  # importing any of them fails
from harnessc.runtime import Harness
from harnessc.runtime.serve.app import build_app
from starlette.testclient import TestClient
c = TestClient(build_app(Harness.from_json({str(tmp_path / "build" / "pay" / "model.json")!r})))
opened = c.post("/v1/sessions", json={{"agent": "clerk", "actor": {{"user": "u-1"}}}})
sid = opened.json()["session_id"]
call = {{"tool": "payments.send", "tool_call_id": "c", "args": {{"iban": "x", "amount": 20000}}}}
print(c.post(f"/v1/sessions/{{sid}}/calls", json=call).json()["decision"]["rule"])
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "p.big"


def test_the_command_refuses_an_open_server_off_loopback_and_half_a_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "pay.harness"
    spec.write_text(PAY, encoding="utf-8")
    assert main(["serve", str(spec), "--host", "0.0.0.0"]) == 2
    assert "loopback only" in capsys.readouterr().err
    assert main(["serve", str(spec), "--certfile", str(tmp_path / "c.pem")]) == 2
    assert "both --certfile and --keyfile" in capsys.readouterr().err
    assert main(["serve", "token", "issue", "x", "--tokens", str(tmp_path / "t.json")]) == 2
    assert "give --user" in capsys.readouterr().err
    bad = tmp_path / "bad.harness"
    bad.write_text("harness {", encoding="utf-8")
    assert main(["serve", str(bad)]) == 1
    assert "does not compile" in capsys.readouterr().err


def test_a_session_archived_by_a_compaction_answers_410_archived(
    spec: Spec, tmp_path: Path
) -> None:
    """An ended session that a compaction (here the operator's, in another process) archived
    while the server held it answers `archived`, naming the archive; a live one goes on."""
    from harnessc.runtime.log.cut import compact

    h = Harness(spec, store=SQLiteStore(str(tmp_path / "log.db")))
    c = TestClient(build_app(h))
    ended, live = open_session(c, CLERK), open_session(c, CLERK)
    decide(c, ended, "ledger.read", "c-1", {"account": "a"})
    assert c.post(f"/v1/sessions/{ended}/end").status_code == 200
    operator = SQLiteStore(str(tmp_path / "log.db"))
    compact(operator, before=operator.head()[0], archive=tmp_path / "archive.jsonl")
    operator.close()
    r = c.get(f"/v1/sessions/{ended}/evidence")
    assert r.status_code == 410 and r.json()["error"] == "archived"
    assert "archive.jsonl" in r.json()["message"]
    assert decide(c, live, "ledger.read", "c-2", {"account": "a"})["outcome"] == "allow"
    h.store.close()
