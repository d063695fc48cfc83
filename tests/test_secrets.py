"""Secret argument values never reach the log: an executor's exception, result, observation or
late result that quotes a secret, a refusal of a secret value, a secret given again in a field
that is not secret, a planner's query quoting one — the SQLite file never holds its bytes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import (
    Accepted,
    Harness,
    Outcome,
    PendingCall,
    Refusal,
    SQLiteStore,
)
from harnessc.runtime.exposure.ranker import QUERY_CAP
from harnessc.runtime.log.events import REDACTED, SHORT_SECRET, Secrets
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import Execution
from harnessc.runtime.session.evidence import build_evidence
from hypothesis import example, given
from hypothesis import strategies as st

SPEC = """
harness vault { version "1.0.0" }
tool vault.login {
  summary "Log in to the vault with a token."
  effects write
  input {
    user: string
    note: string?
    token: string secret
    pin: int? secret
    code: string? pattern "^[0-9]+$" secret
  }
  output { message: string, session: string secret }
}
tool vault.sync {
  summary "Sync the vault in the background."
  effects write
  input { token: string secret }
  output { message: string }
}
tool vault.rotate {
  summary "Rotate a token."
  effects write
  input { note: string?, token: string secret }
}
policy p {
  default deny
  allow vault.login, vault.sync
  ask vault.rotate { approver role "ops"; grant once ttl 10m; reason "Ops rotate tokens." }
}
surface s { expose vault.* }
agent a { surface s; policy p }
"""
TOKEN = "tok-9f2c-correct-horse"
PIN = 48051729
USER = {"user": "u-1", "role": "dev"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    path = tmp_path_factory.mktemp("vault") / "vault.harness"
    path.write_text(SPEC, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    return result.model


def log_bytes(db: Path) -> bytes:
    """The SQLite file and its write-ahead log, as stored on disk."""
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def assert_absent(db: Path, *secrets: Any) -> None:
    raw = log_bytes(db)
    assert raw, "the log is empty"
    for secret in secrets:
        text = str(secret)
        for form in {text, json.dumps(text)[1:-1], repr(text)[1:-1]}:
            assert form.encode("utf-8") not in raw, f"`{form}` is in the log"


def pending(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def open_vault(spec: Spec, tmp_path: Path) -> tuple[Harness, Path]:
    db = tmp_path / "events.db"
    return Harness(spec, store=SQLiteStore(db)), db


def login(h: Harness, call_id: str = "c-1", **args: Any) -> Any:
    s = h.session("a", actor=USER, task="t-1")
    call = pending(s.normalize("vault.login", call_id, {"user": "ana", "token": TOKEN, **args}))
    assert s.decide(call).effect == "allow"
    return s, s.invoke(call)


def test_an_exception_quoting_a_secret_is_recorded_redacted(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)

    @h.implement("vault.login")
    def fail(args: dict[str, Any]) -> dict[str, Any]:
        raise PermissionError(f"token {args['token']!r} refused for pin {args['pin']}")

    s, result = login(h, pin=PIN)
    assert result.status == "failure"
    assert result.error == "PermissionError: token '[REDACTED]' refused for pin [REDACTED]"
    assert TOKEN not in result.observation and str(PIN) not in result.observation
    assert TOKEN not in json.dumps(result.to_dict())
    assert TOKEN not in json.dumps(s.evidence().items[0].to_dict())
    assert_absent(db, TOKEN, PIN)


def test_a_result_and_an_observation_echoing_a_secret_are_scrubbed(
    spec: Spec, tmp_path: Path
) -> None:
    h, db = open_vault(spec, tmp_path)

    @h.implement("vault.login")
    def echo(args: dict[str, Any]) -> Outcome:
        return Outcome(
            status="partial",
            data={"message": f"hello, {args['token']}", "session": "sess-0001-abcdef"},
            observation=f"logged in with {args['token']}",
            error=f"half done for {args['token']}",
        )

    s, result = login(h)
    assert result.data is not None and result.data["message"] == f"hello, {TOKEN}"  # the app's
    assert result.observation == f"logged in with {REDACTED}"
    assert result.error == f"half done for {REDACTED}"
    recorded = result.to_dict(spec.tools["vault.login"].output)
    assert recorded["data"] == {"message": f"hello, {REDACTED}", "session": REDACTED}
    evidence = build_evidence(h.store, s.id).items[0]
    assert evidence.data == {"message": f"hello, {REDACTED}", "session": REDACTED}
    assert_absent(db, TOKEN, "sess-0001-abcdef")


def test_the_observation_is_scrubbed_before_it_is_cut(spec: Spec, tmp_path: Path) -> None:
    """A secret at the 400-character limit would otherwise leave its first half behind."""
    h, db = open_vault(spec, tmp_path)

    @h.implement("vault.login")
    def long(args: dict[str, Any]) -> dict[str, Any]:
        return {"message": "x" * 380 + args["token"], "session": "s"}

    _, result = login(h)
    assert TOKEN[:10] not in result.observation
    assert_absent(db, TOKEN, TOKEN[:12])


def test_a_secret_given_again_in_a_plain_field_is_not_recorded(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.login")(lambda args: {"message": "ok", "session": "s"})
    _, result = login(h, note=f"my token is {TOKEN}")
    assert result.ok
    assert_absent(db, TOKEN)


def test_an_approval_request_never_shows_a_secret(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)
    s = h.session("a", actor=USER, task="t-1")
    call = pending(s.normalize("vault.rotate", "c-1", {"note": f"old {TOKEN}", "token": TOKEN}))
    decision = s.decide(call)
    assert decision.effect == "ask"
    request = s.request_approval(call, decision)
    assert request.arguments == {"note": f"old {REDACTED}", "token": REDACTED}
    assert TOKEN not in request.what
    assert_absent(db, TOKEN)


def test_a_refusal_quoting_a_secret_value_is_scrubbed(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)
    s = h.session("a", actor=USER, task="t-1")
    bad_code = "not-a-number-7731"
    refused = s.normalize("vault.login", "c-1", {"user": "ana", "token": TOKEN, "code": bad_code})
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"
    assert bad_code not in refused.message and REDACTED in refused.message
    assert all(bad_code not in message for _, message in refused.errors)
    assert_absent(db, bad_code, TOKEN)


ENV_VALUE = "ghp-env-7d41-battery-staple"


class Context:
    """What an executor's exception may quote: a context whose repr shows its environment."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __repr__(self) -> str:
        return f"Context(env={self.env!r})"


def test_an_exception_quoting_an_env_value_is_recorded_redacted(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)

    @h.implement("vault.sync")
    def fail(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise RuntimeError(f"sync failed in {Context(dict(ctx.pending.execution.env))!r}")

    s = h.session("a", actor=USER, task="t-1")
    execution = Execution(env={"GITHUB_TOKEN": ENV_VALUE, "DEBUG": "1"})
    call = pending(s.normalize("vault.sync", "c-1", {"token": TOKEN}, execution=execution))
    assert s.decide(call).effect == "allow"
    result = s.invoke(call)
    assert result.status == "failure"
    assert result.error == (
        "RuntimeError: sync failed in Context(env={'GITHUB_TOKEN': '[REDACTED]', 'DEBUG': '1'})"
    )
    assert ENV_VALUE not in result.observation
    assert_absent(db, ENV_VALUE, TOKEN)


def test_an_env_value_repeated_in_an_argument_or_the_output_is_not_recorded(
    spec: Spec, tmp_path: Path
) -> None:
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.login")(lambda args: {"message": f"env {ENV_VALUE}", "session": "s"})
    s = h.session("a", actor=USER, task="t-1")
    execution = Execution(env={"GITHUB_TOKEN": ENV_VALUE})
    args = {"user": "ana", "token": TOKEN, "note": f"with {ENV_VALUE}"}
    call = pending(s.normalize("vault.login", "c-1", args, execution=execution))
    assert s.decide(call).effect == "allow"
    assert s.invoke(call).ok
    assert_absent(db, ENV_VALUE, TOKEN)


@pytest.mark.parametrize(
    ("call_id", "env"),
    [
        (TOKEN, None),  # a secret argument's value
        (f"call-{TOKEN}", None),  # holding it
        (ENV_VALUE, {"GITHUB_TOKEN": ENV_VALUE}),  # an env value
    ],
)
def test_a_call_id_holding_a_secret_is_refused_without_showing_it(
    spec: Spec, tmp_path: Path, call_id: str, env: dict[str, str] | None
) -> None:
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.sync")(lambda args: {"message": "ok"})
    s = h.session("a", actor=USER, task="t-1")
    execution = Execution(env=env) if env else None
    refused = s.normalize("vault.sync", call_id, {"token": TOKEN}, execution=execution)
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"
    assert refused.path == "$.tool_call_id" and refused.tool_call_id is None
    assert "secret" in refused.message and call_id not in refused.message
    # the same arguments under another id are a call like any other
    assert pending(s.normalize("vault.sync", "c-2", {"token": TOKEN}, execution=execution))
    assert_absent(db, TOKEN, ENV_VALUE)


def test_a_refused_call_never_records_a_call_id_holding_a_secret(
    spec: Spec, tmp_path: Path
) -> None:
    h, db = open_vault(spec, tmp_path)
    s = h.session("a", actor=USER, task="t-1")
    refused = s.normalize("vault.login", TOKEN, {"user": "ana", "token": TOKEN, "code": "x"})
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"
    assert refused.tool_call_id is None
    assert_absent(db, TOKEN)


def test_a_late_result_quoting_a_secret_is_scrubbed(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)
    release = threading.Event()

    @h.implement("vault.login")
    def slow(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(30)
        raise TimeoutError(f"gave up on {args['token']}")

    s = h.session("a", actor=USER, task="t-1")
    call = pending(
        s.normalize(
            "vault.login",
            "c-1",
            {"user": "ana", "token": TOKEN},
            execution=Execution(timeout_ms=50),
        )
    )
    s.decide(call)
    assert s.invoke(call).status == "unknown"
    release.set()
    deadline = time.monotonic() + 30
    while not any(e.type == "action.late_result" for e in h.store.read(s.id)):
        assert time.monotonic() < deadline, "the late result was never recorded"
        time.sleep(0.01)
    late = next(e for e in h.store.read(s.id) if e.type == "action.late_result")
    assert late.payload["error"] == f"TimeoutError: gave up on {REDACTED}"
    assert_absent(db, TOKEN)


def test_a_completion_quoting_a_secret_is_scrubbed(spec: Spec, tmp_path: Path) -> None:
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.sync")(lambda args: Accepted(handle=f"job-for-{args['token']}"))
    s = h.session("a", actor=USER, task="t-1")
    call = pending(s.normalize("vault.sync", "c-1", {"token": TOKEN}))
    s.decide(call)
    accepted = s.invoke(call)
    assert accepted.accepted
    final = s.complete(accepted.action_id or "", error=f"the vault rejected {TOKEN}")
    assert final.error == f"the vault rejected {REDACTED}"
    assert_absent(db, TOKEN)


def test_a_restored_action_learns_its_secrets_when_its_call_is_normalized_again(
    spec: Spec, tmp_path: Path
) -> None:
    """After a restart the log holds no secret, so a restored action knows none; normalizing
    the same call again in the resumed session gives them back before a completion is recorded."""
    db = tmp_path / "events.db"
    with SQLiteStore(db) as store:
        h = Harness(spec, store=store)
        h.implement("vault.sync")(lambda args: Accepted(handle="job-1"))
        s = h.session("a", actor=USER, task="t-1")
        call = pending(s.normalize("vault.sync", "c-1", {"token": TOKEN}))
        s.decide(call)
        action_id = s.invoke(call).action_id
    with SQLiteStore(db) as store:
        h = Harness(spec, store=store)
        resumed = h.resume(s.id)
        assert resumed.call("c-1") is None  # not rebuilt: its secret was never stored
        again = pending(resumed.normalize("vault.sync", "c-1", {"token": TOKEN}))
        assert again.input_hash == call.input_hash
        final = resumed.complete(action_id or "", error=f"the vault rejected {TOKEN}")
        assert final.error == f"the vault rejected {REDACTED}"
    assert_absent(db, TOKEN)


def test_an_exposure_query_quoting_a_secret_of_the_session_is_scrubbed(
    spec: Spec, tmp_path: Path
) -> None:
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.login")(lambda args: {"message": "ok", "session": "s"})
    s, _ = login(h)
    s.expose(f"sync the vault again with {TOKEN}")
    exposed = [e for e in h.store.read(s.id) if e.type == "tools.exposed"]
    assert exposed and exposed[0].payload["query"] == f"sync the vault again with {REDACTED}"
    assert_absent(db, TOKEN)


def test_a_secret_across_the_cut_of_a_long_query_is_not_half_kept(
    spec: Spec, tmp_path: Path
) -> None:
    # the log keeps the first QUERY_CAP characters of a query, cut after the secrets are
    # withheld: cut first, the half of a secret before the cut would not match it
    h, db = open_vault(spec, tmp_path)
    h.implement("vault.login")(lambda args: {"message": "ok", "session": "s"})
    s, _ = login(h)
    half = len(TOKEN) // 2
    query = "sync " + "a" * (QUERY_CAP - 6 - half) + " " + TOKEN + " and more"
    assert query.index(TOKEN) < QUERY_CAP < query.index(TOKEN) + len(TOKEN)
    s.expose(query)
    (exposed,) = [e for e in h.store.read(s.id) if e.type == "tools.exposed"]
    assert TOKEN[:half] not in exposed.payload_json
    assert len(exposed.payload["query"]) == QUERY_CAP == len(exposed.payload["trace"]["query"])
    assert exposed.payload["trace"]["query_chars"] == len(query)
    assert_absent(db, TOKEN)


def test_a_short_secret_withholds_the_whole_text(spec: Spec, tmp_path: Path) -> None:
    """A value shorter than SHORT_SECRET is not cut out of a text (the gaps would tell it):
    the text that holds it is withheld whole."""
    h, db = open_vault(spec, tmp_path)

    @h.implement("vault.login")
    def fail(args: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"pin {args['pin']} is wrong (attempt 3 of 5)")

    _, result = login(h, pin=42)
    assert len("42") < SHORT_SECRET
    assert result.error == REDACTED
    assert_absent(db, TOKEN, "pin 42")


# -- the scrubbing itself ---------------------------------------------------------------------

PLAIN = st.text(min_size=0, max_size=40)
SECRET = st.text(min_size=1, max_size=24).filter(lambda v: v not in REDACTED)


@given(secret=SECRET, before=PLAIN, after=PLAIN)
@example(secret="{", before="", after="")
def test_no_form_of_a_secret_survives_a_scrub(secret: str, before: str, after: str) -> None:
    secrets = Secrets.from_values([secret])
    for form in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]):
        assert secret not in secrets.text(before + form + after)
    nested = secrets.scrub({"k": [before + secret + after], before + secret: 1})
    # every text the scrubbed value holds, keys included (JSON's own punctuation, `{` or `"`,
    # is the serializer's, not the value's: a secret `{` is not "in" `{}`)
    assert not [text for text in _texts(nested) if secret in text]


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(k) + _texts(v)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _texts(item)]
    return []


@given(
    secrets=st.lists(SECRET, min_size=1, max_size=4),
    parts=st.lists(PLAIN, min_size=1, max_size=5),
)
def test_overlapping_secrets_never_survive(secrets: list[str], parts: list[str]) -> None:
    scrubber = Secrets.from_values(secrets)
    text = "".join(p + s for p, s in zip(parts, secrets * 5, strict=False))
    out = scrubber.text(text)
    assert all(s not in out for s in secrets)


def test_a_repr_never_shows_a_secret() -> None:
    secrets = Secrets.from_values([TOKEN])
    assert TOKEN not in repr(secrets) and TOKEN not in str(secrets)


def test_a_text_without_secrets_is_untouched() -> None:
    secrets = Secrets.from_values(["correct-horse-battery", 12345678, True, None, ""])
    assert secrets.text("nothing to hide here") == "nothing to hide here"
    assert secrets.scrub({"n": 7, "ok": True, "x": None}) == {"n": 7, "ok": True, "x": None}
    assert secrets.scrub({"n": 12345678}) == {"n": REDACTED}
