"""Shadow mode (`Harness(spec, shadow=…)`, `h.shadow`, `harnessc log divergences`): a candidate
judges every decision beside the active spec, never enforced; divergences are events in the
decision's commit, and a candidate that fails never breaks the active decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime import Harness, MemoryStore, Refusal, SQLiteStore
from harnessc.runtime.log.events import DECISION_DIVERGED
from harnessc.runtime.log.projections import Projections
from harnessc.runtime.session.replay import replay
from harnessc.runtime.session.shadow import divergences

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database
from .test_recorded import ACTOR, SPEC, compiled, pending, run_sessions
from .test_replay import CHANGED


def diverged(store: Any) -> list[Any]:
    return [e for e in store.read() if e.type == DECISION_DIVERGED]


def test_the_candidate_is_recorded_never_enforced(tmp_path: Path) -> None:
    active, candidate = compiled(tmp_path), compiled(tmp_path, CHANGED)
    h = Harness(active, shadow=candidate)
    run_sessions(h)
    events = h.store.read()
    decisions = {e.payload["decision_id"]: e for e in events if e.type == "decision"}
    found = diverged(h.store)
    # the active spec decided: the frozen deploy was denied, the unknown IBANs asked
    frozen = next(e for e in decisions.values() if e.payload["rule"] == "main.frozen")
    assert frozen.payload["effect"] == "deny"
    assert {e.payload["kind"] for e in found} == {"deny→allow", "ask→deny"}
    for event in found:
        p = event.payload
        decided = decisions[p["decision_id"]]
        # the same commit: the divergence follows its decision, in its session's stream
        assert event.stream == decided.stream and event.position == decided.position + 1
        assert p["active"]["effect"] == decided.payload["effect"]
        assert p["active"]["policy_version"] == h.policy_version
        assert p["candidate"]["policy_version"] == candidate.content_hash()
        assert p["tool_call_id"] == decided.payload["tool_call_id"]
    assert h.shadowing is not None
    assert h.shadowing.diverged == len(found) and h.shadowing.judged == len(decisions)
    assert h.verify().ok
    # the projections fold the divergence into the call's view
    views = Projections.rebuild(events)
    assert views.calls["d-2"].diverged is not None
    assert views.calls["d-2"].diverged["kind"] == "deny→allow"
    assert views.calls["m-1"].diverged is None


def test_shadow_and_replay_find_the_same_changes(tmp_path: Path) -> None:
    """The divergences shadow mode records are the flips a replay of the same log under the
    candidate finds (the secret call aside: replay cannot see its value, shadow mode can)."""
    active, candidate = compiled(tmp_path), compiled(tmp_path, CHANGED)
    h = Harness(active, shadow=candidate)
    run_sessions(h)
    shadowed = {(e.payload["decision_id"], e.payload["kind"]) for e in diverged(h.store)}
    report = replay(h.store, candidate)
    replayed = {(i, c.kind) for c, g in report.flips.items() for _, i in g.first}
    assert shadowed == replayed and len(shadowed) == 4


def test_shadow_none_stops_and_a_new_candidate_replaces(tmp_path: Path) -> None:
    active = compiled(tmp_path)
    h = Harness(active)
    assert h.shadow(None) is None and h.shadowing is None
    shadow = h.shadow(compiled(tmp_path, CHANGED))
    assert shadow is not None and h.shadowing is shadow
    s = h.session("payer", actor=ACTOR, task="t")
    s.decide(pending(s.normalize("pay.send", "p-1", {"iban": "X", "amount": 1})))
    assert len(diverged(h.store)) == 1
    h.shadow(None)
    s.decide(pending(s.normalize("pay.send", "p-2", {"iban": "Y", "amount": 1})))
    assert len(diverged(h.store)) == 1
    types = [e.type for e in h.store.read("harness")]
    assert types.count("shadow.loaded") == 1 and types.count("shadow.stopped") == 1


def test_a_failing_candidate_never_breaks_the_active_decision(tmp_path: Path) -> None:
    active = compiled(tmp_path)
    h = Harness(active, shadow=compiled(tmp_path, CHANGED))
    assert h.shadowing is not None

    def broken(name: str) -> Any:
        raise RuntimeError("the candidate's decider is broken")

    h.shadowing.engine.decider = broken  # type: ignore[method-assign]
    h.bind("mail.read", lambda args: {"body": "hello"})
    s = h.session("payer", actor=ACTOR, task="t")
    call = pending(s.normalize("mail.read", "m-1", {"folder": "inbox"}))
    assert s.decide(call).effect == "allow" and s.invoke(call).ran
    (event,) = diverged(h.store)
    assert event.payload["kind"] == "error"
    assert event.payload["candidate"]["error"] == "RuntimeError: the candidate's decider is broken"
    assert h.shadowing.errors == 1


def test_a_candidate_without_the_agent_records_an_error(tmp_path: Path) -> None:
    h = Harness(
        compiled(tmp_path), shadow=compiled(tmp_path, SPEC.replace("agent payer", "agent x"))
    )
    s = h.session("payer", actor=ACTOR, task="t")
    assert s.decide(pending(s.normalize("mail.read", "m-1", {"folder": "a"}))).effect == "allow"
    (event,) = diverged(h.store)
    assert "does not declare the agent `rec.payer`" in event.payload["candidate"]["error"]


def test_a_skill_session_is_judged_by_the_candidates_profile(tmp_path: Path) -> None:
    # the parent's policy denies the skill's tool; the candidate's allows it, and so does the
    # skill's profile: the candidate names the profile's rule, the more specific
    wider = SPEC.replace("allow mail.read, vault.put", "allow mail.read, vault.put, note.write")
    h = Harness(compiled(tmp_path), shadow=compiled(tmp_path, wider))
    s = h.session("payer", actor=ACTOR, task="t")
    notes = s.skill("notes")
    assert not isinstance(notes, Refusal)
    assert (
        notes.decide(pending(notes.normalize("note.write", "n-1", {"text": "x"}))).effect == "deny"
    )
    (event,) = diverged(h.store)
    assert event.payload["kind"] == "deny→allow" and event.payload["skill"] == "rec.notes"
    assert event.payload["candidate"]["policy"] == "rec.profile"


def test_a_candidate_reading_session_state_sees_the_session(tmp_path: Path) -> None:
    # the active spec reads nothing of the session; the candidate asks for a value no source holds
    plain = SPEC.replace("  allow pay.send when args.iban from user\n", "  allow pay.send\n")
    asks = '  ask pay.send when not (args.iban from user) { approver role "ops"; grant once '
    asks += "ttl 10m }\n"
    plain = plain.replace(asks, "").replace(
        '  many: deny pay.send when count(pay.send within 1h) > 2 { reason "too many" }\n', ""
    )
    h = Harness(compiled(tmp_path, plain), shadow=compiled(tmp_path, SPEC))
    s = h.session("payer", actor=ACTOR, task="t")
    s.user_said("pay DE89370400440532013000")
    given = pending(s.normalize("pay.send", "p-1", {"iban": "DE89370400440532013000", "amount": 1}))
    made_up = pending(
        s.normalize("pay.send", "p-2", {"iban": "DE11111111111111111111", "amount": 1})
    )
    assert s.decide(given).effect == s.decide(made_up).effect == "allow"
    assert [e.payload["tool_call_id"] for e in diverged(h.store)] == ["p-2"]


def test_harnessc_log_divergences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SQLiteStore(tmp_path / "events.db")
    run_sessions(Harness(compiled(tmp_path), store=store, shadow=compiled(tmp_path, CHANGED)))
    store.close()
    log = str(tmp_path / "events.db")
    assert main(["log", "divergences", "--log", log]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 divergences recorded by shadow mode")
    assert "pay.send: ask→deny  main#3 → main.stranger" in out and "×3" in out
    assert main(["log", "divergences", "--log", log, "--format", "json", "--first", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1 and data["total"] == 4
    assert data["by_kind"] == {"ask→deny": 3, "deny→allow": 1}
    widened = next(g for g in data["groups"] if g["widened"])
    assert widened["tool_id"] == "deploy.run" and len(widened["decisions"]) == 1
    assert divergences(MemoryStore()).to_dict()["total"] == 0
    assert main(["log", "divergences", "--log", str(tmp_path / "none.db")]) == 2


@pytest.mark.skipif(not ADMIN_URL, reason=SKIP_REASON)
def test_shadow_mode_on_postgresql(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psycopg")
    from harnessc.runtime.log.postgres import PostgresStore

    with fresh_database() as url:
        store = PostgresStore(url)
        h = Harness(compiled(tmp_path), store=store, shadow=compiled(tmp_path, CHANGED))
        run_sessions(h)
        events = store.read()
        store.close()
        found = [e for e in events if e.type == DECISION_DIVERGED]
        decided = {e.payload["decision_id"]: e.position for e in events if e.type == "decision"}
        assert len(found) == 4
        assert all(e.position == decided[e.payload["decision_id"]] + 1 for e in found)
        assert main(["log", "divergences", "--log", url, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["total"] == 4
