"""The recorded decisions of a log (`runtime/session/recorded.py`): each rebuilt with what it saw,
as of its position, from logs real sessions wrote."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, MemoryStore, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.judge.policy import PolicyEngine
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.model import Spec
from harnessc.runtime.session.calls import judge_policies
from harnessc.runtime.session.recorded import (
    RecordedDecision,
    policies_in,
    read_decisions,
    recorded_decision,
)

SPEC = """
harness rec { version "1.0.0" }
fact release.freeze: bool
tool mail.read {
  summary "Read mail."
  effects read
  input { folder: string }
  output { body: string }
}
tool pay.send {
  summary "Send a payment."
  effects external
  risk medium
  input { iban: string, amount: int }
}
tool deploy.run {
  summary "Deploy."
  effects external
  risk medium
  input { service: string }
}
tool vault.put {
  summary "Store a credential."
  effects write
  input { name: string, value: string secret }
}
surface tools { expose mail.*, pay.*, deploy.*, vault.* }
policy main {
  default deny
  allow mail.read, vault.put
  allow pay.send when args.iban from user
  ask pay.send when not (args.iban from user) { approver role "ops"; grant once ttl 10m }
  many: deny pay.send when count(pay.send within 1h) > 2 { reason "too many" }
  frozen: deny deploy.run when release.freeze == true { reason "frozen" }
  allow deploy.run
}
policy profile {
  default deny
  allow note.write
}
skill notes {
  profile profile
  private tool note.write { summary "w"; effects write; input { text: string } }
}
agent payer { surface tools; policy main; skills notes }
"""

ACTOR = {"user": "u-1", "role": "dev"}


def compiled(tmp_path: Path, text: str = SPEC) -> Spec:
    path = tmp_path / "rec.harness"
    path.write_text(text, encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def pending(call: PendingCall | Refusal) -> PendingCall:
    assert isinstance(call, PendingCall), call
    return call


def run_sessions(h: Harness) -> list[tuple[str, str]]:
    """A few sessions of the spec: provenance, a count, facts changed mid-session, a secret,
    a skill. Returns (decision effect, tool) in order."""
    for tool in ("mail.read", "pay.send", "deploy.run", "vault.put", "note.write"):
        h.bind(tool, lambda args: {"body": "pay DE00MAIL000000000001 now"})
    s = h.session("payer", actor=ACTOR, task="t-1", facts={"release.freeze": False})
    s.user_said("please pay DE89370400440532013000")
    s.invoke(pending(s.normalize("mail.read", "m-1", {"folder": "inbox"})))
    for i, iban in enumerate(
        ["DE89370400440532013000", "DE00MAIL000000000001", "DE89370400440532013000"] * 2
    ):
        call = pending(s.normalize("pay.send", f"p-{i}", {"iban": iban, "amount": 5}))
        if s.decide(call).effect != "deny":
            s.invoke(call)
    s.decide(pending(s.normalize("deploy.run", "d-1", {"service": "api"})))
    s.update_facts({"release.freeze": True})
    s.decide(pending(s.normalize("deploy.run", "d-2", {"service": "api"})))
    s.decide(pending(s.normalize("vault.put", "v-1", {"name": "db", "value": "hunter2-long"})))
    notes = s.skill("notes")
    assert not isinstance(notes, Refusal)
    notes.decide(pending(notes.normalize("note.write", "n-1", {"text": "hi"})))
    other = h.session("payer", actor=ACTOR, task="t-2")
    other.decide(pending(other.normalize("pay.send", "q-1", {"iban": "X", "amount": 1})))
    return []


@pytest.fixture(params=["memory", "sqlite"], name="store")
def store_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
    else:
        found = SQLiteStore(tmp_path / "events.db")
        yield found
        found.close()


def redecide(engine: PolicyEngine, spec: Spec, d: RecordedDecision) -> tuple[str, str | None]:
    policies = policies_in(spec, d)
    assert isinstance(policies, tuple)
    assert d.context is not None
    best = judge_policies(engine, policies, d.context, agent=str(d.agent))[0]
    return best.effect, best.rule


def test_every_decision_is_rebuilt_as_it_was_decided(tmp_path: Path, store: Any) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec, store=store)
    run_sessions(h)
    engine = PolicyEngine(spec)
    found, effects = [], []
    for d in read_decisions(store, spec, page=7):  # pages smaller than a session
        found.append(d)
        effects.append((d.tool_id, d.outcome.effect, d.outcome.rule))
        if not d.redacted:  # decided as it is drawn: the ledger is as of its position
            assert redecide(engine, spec, d) == (d.outcome.effect, d.outcome.rule), d
    recorded = [e for e in store.read() if e.type == "decision"]
    assert [d.decision_id for d in found] == [e.payload["decision_id"] for e in recorded]
    assert [d.position for d in found] == [e.position for e in recorded]
    # provenance (a value from the user, one from a mail), a count as of each position,
    # facts changed mid-session, a skill session under both policies
    pays = [e for t, e, _ in effects if t == "pay.send"]
    # p-1 (an IBAN from a mail) asks, and is judged again when invoked without a grant; the
    # fourth payment is the third authorised one within the hour
    assert pays == ["allow", "ask", "ask", "allow", "deny", "deny", "deny", "ask"]
    deploys = [(e, r) for t, e, r in effects if t == "deploy.run"]
    assert deploys == [("allow", "main#6"), ("deny", "main.frozen")]
    note = next(d for d in found if d.tool_id == "note.write")
    assert note.skill == "rec.notes" and note.policies == ("rec.main", "rec.profile")
    assert policies_in(spec, note) == note.policies


def test_a_secret_argument_is_reported_redacted_never_guessed(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    vault = [d for d in read_decisions(h.store, spec) if d.tool_id == "vault.put"]
    assert len(vault) == 1
    assert vault[0].redacted == ("$.value",) and vault[0].context is None
    assert not vault[0].replayable and vault[0].outcome.effect == "allow"


def test_one_decision_by_its_id(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    frozen = next(d for d in read_decisions(h.store, spec) if d.outcome.rule == "main.frozen")
    found = recorded_decision(h.store, frozen.decision_id, spec)
    assert found is not None and found.position == frozen.position
    assert found.context is not None and found.context.facts["release.freeze"] is True
    assert found.outcome.to_dict()["effect"] == "deny"
    assert recorded_decision(h.store, "dec-nope", spec) is None


def test_a_partial_log_says_which_record_is_missing(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    events = h.store.read()
    # a copy of the log from the first decision on: its session's start and call are lost
    first = next(e for e in events if e.type == "decision")
    copy = MemoryStore()
    copy.append_many(
        [
            NewEvent(e.stream, e.kind, e.type, e.payload)
            for e in events[: first.position - 1]
            if e.type != "session.started"
        ]
    )
    copy.append_many(
        [NewEvent(e.stream, e.kind, e.type, e.payload) for e in events[first.position - 1 :]]
    )
    found = list(read_decisions(copy, spec))
    assert found[0].missing == "session-not-recorded" and found[0].context is None
    assert policies_in(spec, found[0]) == "its session is not recorded in the log"


def test_a_spec_without_the_agent_says_so(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    other = compiled(tmp_path, SPEC.replace("agent payer", "agent sender"))
    d = next(read_decisions(h.store, spec))
    assert policies_in(other, d) == "the agent `rec.payer` is not declared in the spec"


def test_memory_keeps_waiting_calls_and_drops_old_decided_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harnessc.runtime.session.recorded as recorded

    monkeypatch.setattr(recorded, "KEPT", 2)
    spec = compiled(tmp_path)
    h = Harness(spec)
    h.bind("mail.read", lambda args: {"body": "x"})
    s = h.session("payer", actor=ACTOR, task="t")
    waiting = pending(s.normalize("pay.send", "p-1", {"iban": "X", "amount": 1}))
    assert s.decide(waiting).effect == "ask"
    reads = []
    for i in range(8):
        reads.append(pending(s.normalize("mail.read", f"m-{i}", {"folder": str(i)})))
        s.decide(reads[-1])
    s.decide(waiting)  # judged again long after: its record was kept
    s.decide(reads[0])  # an old decided call judged again: its record is gone, never guessed
    found = list(read_decisions(h.store, spec))
    assert found[-2].tool_call_id == "p-1" and found[-2].context is not None
    assert found[-1].tool_call_id == "m-0" and found[-1].missing == "call-not-recorded"


TENANTS = """
harness ten { version "1.0.0" }
fact region: string
tool shell.run { summary "Run a command."; effects write; input { cmd: string } }
surface s { expose shell.* }
policy p {
  default allow
  cross_tenant: deny shell.run when resource.tenant != actor.tenant { reason "other tenant" }
  away: deny shell.run when region != "eu-1" { reason "another region" }
}
agent a { surface s; policy p }
"""


@pytest.mark.parametrize(
    ("actor", "resource", "facts"),
    [
        # an ORM's UUID beside the same tenant as text
        ({"tenant": uuid.UUID(int=7)}, {"tenant": str(uuid.UUID(int=7))}, {"region": "eu-1"}),
        ({"tenant": b"acme"}, {"tenant": "b'acme'"}, {"region": "eu-1"}),
        ({"tenant": "acme"}, {"tenant": "acme"}, {"region": Path("eu-1")}),
        ({"tenant": ("acme",)}, {"tenant": ["acme"]}, {"region": "eu-1"}),
    ],
    ids=["uuid", "bytes", "fact-object", "tuple"],
)
def test_values_that_are_not_json_decide_as_the_log_records_them(
    tmp_path: Path, actor: dict, resource: dict, facts: dict
) -> None:
    # the live decision read the objects (a UUID is not its text: deny), while a resumed
    # session and a replay read the log's text of them (allow)
    spec = compiled(tmp_path, TENANTS)
    store = SQLiteStore(tmp_path / "events.db")
    h = Harness(spec, store=store)
    s = h.session("a", actor={"user": "u-1", **actor}, task="t-1", resource=resource, facts=facts)
    live = s.decide(pending(s.normalize("shell.run", "c-1", {"cmd": "ls"})))
    assert (live.effect, live.rule) == ("allow", None)
    again = Harness(spec, store=SQLiteStore(tmp_path / "events.db")).resume(s.id)
    resumed = again.decide(pending(again.normalize("shell.run", "c-2", {"cmd": "ls"})))
    assert (resumed.effect, resumed.rule) == (live.effect, live.rule)
    [d] = [d for d in read_decisions(store, spec) if d.tool_call_id == "c-1"]
    assert redecide(PolicyEngine(spec), spec, d) == (live.effect, live.rule)
