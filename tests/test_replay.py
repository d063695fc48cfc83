"""Replay (`runtime/session/replay.py`, `harnessc replay`): the recorded decisions of logs real
sessions wrote, decided again under a spec — nothing flips under the spec that made them, exactly
the expected decisions flip under a changed one, and what cannot be replayed is said."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime import Facts, Harness, MemoryStore, SQLiteStore
from harnessc.runtime.model import Agent, Spec
from harnessc.runtime.session.replay import ReplayReport, replay
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database
from .test_recorded import ACTOR, SPEC, compiled, pending, run_sessions, store_fixture  # noqa: F401

# the changed spec: the freeze rule is gone (a denied deploy is allowed: widened) and a payment
# whose IBAN the user never gave is denied instead of asked
CHANGED = SPEC.replace(
    '  frozen: deny deploy.run when release.freeze == true { reason "frozen" }\n', ""
).replace(
    '  ask pay.send when not (args.iban from user) { approver role "ops"; grant once ttl 10m }',
    '  stranger: deny pay.send when not (args.iban from user) { reason "unknown IBAN" }',
)


def decision_ids(store: Any, **where: Any) -> set[str]:
    found = set()
    for e in store.read():
        if e.type == "decision" and all(e.payload.get(k) == v for k, v in where.items()):
            found.add(e.payload["decision_id"])
    return found


def ids_of(report: ReplayReport, kind: str) -> set[str]:
    out: set[str] = set()
    for change, group in report.flips.items():
        if change.kind == kind:
            out.update(i for _, i in group.first)
    return out


def test_under_the_same_spec_nothing_flips(tmp_path: Path, store: Any) -> None:
    spec = compiled(tmp_path)
    run_sessions(Harness(spec, store=store))
    report = replay(store, spec, page=5)
    assert report.decisions == len(decision_ids(store)) > 10
    assert report.flipped == report.rule_changed == report.widened == 0
    assert report.unchanged == report.replayed == report.decisions - 1
    (reason, detail), group = next(iter(report.not_replayed.items()))
    assert (reason, detail, group.count) == ("redacted", "vault.put $.value", 1)
    assert report.incomplete is None


def test_a_changed_spec_flips_exactly_the_decisions_it_changes(tmp_path: Path, store: Any) -> None:
    spec = compiled(tmp_path)
    run_sessions(Harness(spec, store=store))
    report = replay(store, compiled(tmp_path, CHANGED))
    frozen = decision_ids(store, rule="main.frozen")
    asked = decision_ids(store, tool_id="pay.send", effect="ask")
    assert len(frozen) == 1 and len(asked) == 3
    assert ids_of(report, "deny→allow") == frozen
    assert ids_of(report, "ask→deny") == asked
    assert report.flipped == 4 and report.widened == 1
    assert report.by_tool() == {"deploy.run": {"deny→allow": 1}, "pay.send": {"ask→deny": 3}}
    data = report.to_dict()
    assert data["version"] == 1 and data["totals"]["flipped"] == 4
    widened = [g for g in data["flips"] if g["widened"]]
    assert widened[0]["old"]["rule"] == "main.frozen" and widened[0]["tool_id"] == "deploy.run"
    assert widened[0]["new"]["origin"].endswith("rec.harness:34")  # the allow it falls to


def test_what_cannot_be_replayed_is_counted_by_reason(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    no_agent = replay(h.store, compiled(tmp_path, SPEC.replace("agent payer", "agent sender")))
    assert no_agent.replayed == 0
    assert {r for r, _ in no_agent.not_replayed} == {"agent-not-in-spec", "redacted"}
    no_tool = replay(
        h.store,
        compiled(
            tmp_path,
            SPEC.replace(
                'tool deploy.run {\n  summary "Deploy."', 'tool deploy.start {\n  summary "D."'
            )
            .replace("deploy.run when", "deploy.start when")
            .replace("allow deploy.run", "allow deploy.start"),
        ),
    )
    assert (
        no_tool.not_replayed[("tool-not-in-spec", "the tool `deploy.run` is not declared")].count
        == 2
    )


def test_a_partial_log_is_reported_not_guessed(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    events = h.store.read()
    cut = next(
        e.position for e in events if e.type == "decision" and e.payload["tool_id"] == "pay.send"
    )
    partial = MemoryStore()
    partial.append_many([_copy(e) for e in events[cut - 1 :]])  # the log from a decision on
    report = replay(partial, spec)
    assert (
        report.not_replayed[
            (
                "session-not-recorded",
                "the log does not hold the session's start (`session.started`)",
            )
        ].count
        >= 1
    )
    assert report.flipped == 0


def _copy(e: Any) -> Any:
    from harnessc.runtime.log.events import NewEvent

    return NewEvent(e.stream, e.kind, e.type, e.payload)


# -- a property: replaying a log under the spec that wrote it flips nothing -----------------------

CALLS = st.lists(
    st.tuples(
        st.sampled_from(
            ["pay-user", "pay-mail", "pay-other", "deploy", "mail", "freeze", "thaw", "said"]
        ),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


@pytest.fixture(scope="module")
def module_spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compiled(tmp_path_factory.mktemp("spec"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=CALLS)
def test_replay_under_the_same_spec_flips_nothing_for_any_sequence(
    module_spec: Spec, calls: list[tuple[str, bool]]
) -> None:
    h = Harness(module_spec)
    for tool in module_spec.tools:
        h.bind(tool, lambda args: {"body": "pay DE00MAIL000000000001"})
    s = h.session("payer", actor=ACTOR, task="t", facts={"release.freeze": False})
    s.user_said("pay DE89370400440532013000")
    ibans = {
        "pay-user": "DE89370400440532013000",
        "pay-mail": "DE00MAIL000000000001",
        "pay-other": "X1",
    }
    for n, (what, run) in enumerate(calls):
        if what == "said":
            s.user_said(f"also DE{n:02}370400440532013000")
            continue
        if what in ("freeze", "thaw"):
            s.update_facts({"release.freeze": what == "freeze"})
            continue
        if what == "mail":
            call = pending(s.normalize("mail.read", f"c-{n}", {"folder": "inbox"}))
        elif what == "deploy":
            call = pending(s.normalize("deploy.run", f"c-{n}", {"service": "api"}))
        else:
            call = pending(s.normalize("pay.send", f"c-{n}", {"iban": ibans[what], "amount": n}))
        decision = s.decide(call)
        if run and decision.effect == "allow":
            s.invoke(call)
    report = replay(h.store, module_spec, page=3)
    assert report.flipped == report.rule_changed == 0, report.to_dict()
    assert report.replayed == report.decisions


# -- PostgreSQL ----------------------------------------------------------------------------------


@pytest.mark.skipif(not ADMIN_URL, reason=SKIP_REASON)
def test_replay_reads_a_postgresql_log(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    from harnessc.runtime.log.postgres import PostgresStore

    spec = compiled(tmp_path)
    with fresh_database() as url:
        store = PostgresStore(url)
        run_sessions(Harness(spec, store=store))
        same = replay(store, spec, page=4)
        assert same.flipped == 0 and same.replayed == same.decisions - 1
        store.close()
        (tmp_path / "changed.harness").write_text(CHANGED, encoding="utf-8")
        assert main(["replay", "--log", url, "--spec", str(tmp_path / "changed.harness")]) == 1


# -- the command line ------------------------------------------------------------------------------


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    spec = compiled(tmp_path)
    store = SQLiteStore(tmp_path / "events.db")
    run_sessions(Harness(spec, store=store))
    store.close()
    (tmp_path / "same.harness").write_text(SPEC, encoding="utf-8")
    (tmp_path / "changed.harness").write_text(CHANGED, encoding="utf-8")
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes_say_whether_anything_widened(
    logged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(logged / "events.db")
    code, out, _ = run(capsys, "replay", "--log", log, "--spec", str(logged / "same.harness"))
    assert code == 0 and "0 flipped (0 widened)" in out
    code, out, _ = run(
        capsys, "replay", "--log", f"sqlite:///{log}", "--spec", str(logged / "changed.harness")
    )
    assert code == 1
    assert "deploy.run: deny→allow  main.frozen → main#5 (" in out
    assert "changed.harness:34)  ×1  WIDENED" in out
    assert "redacted: vault.put $.value  ×1" in out
    changed = ["replay", "--log", log, "--spec", str(logged / "changed.harness")]
    assert run(capsys, *changed, "--fail-on", "never")[0] == 0
    assert run(capsys, *changed, "--fail-on", "changed")[0] == 1


def test_cli_formats(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "--log", str(logged / "events.db"), "--spec", str(logged / "changed.harness")]
    code, out, _ = run(capsys, *argv, "--format", "json", "--first", "1")
    data = json.loads(out)
    assert code == 1 and data["version"] == 1 and data["totals"]["widened"] == 1
    asked = next(g for g in data["flips"] if g["kind"] == "ask→deny")
    assert asked["count"] == 3 and len(asked["decisions"]) == 1
    assert asked["decisions"][0]["decision_id"].startswith("dec-")
    code, out, _ = run(capsys, *argv, "--format", "markdown")
    assert (
        out.startswith("### Replay under `rec`")
        and "| `deploy.run` | **deny→allow** (widened)" in out
    )


def test_cli_usage_errors_exit_2(logged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = str(logged / "events.db")
    (logged / "bad.harness").write_text(
        SPEC.replace("policy main {", "policy main {\n  allow nope.tool"), encoding="utf-8"
    )
    code, _, err = run(capsys, "replay", "--log", log, "--spec", str(logged / "bad.harness"))
    assert code == 2 and "nope.tool" in err and "does not compile" in err
    code, _, err = run(
        capsys, "replay", "--log", str(logged / "none.db"), "--spec", str(logged / "same.harness")
    )
    assert code == 2 and "no event log" in err


def test_cli_a_log_damaged_mid_file_is_reported_with_what_was_read(
    logged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = logged / "damaged.db"
    shutil.copy(logged / "events.db", damaged)
    with sqlite3.connect(damaged) as conn:  # the file cut: its later pages are lost
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    data = damaged.read_bytes()
    damaged.write_bytes(data[: len(data) * 2 // 3])
    code, out, err = run(
        capsys, "replay", "--log", str(damaged), "--spec", str(logged / "same.harness")
    )
    assert pages > 2 and code == 2
    assert "harnessc:" in err and "Traceback" not in err + out


class _Failing(MemoryStore):
    """A log whose reads fail past a position, as a store that loses its disk mid-read."""

    def __init__(self, events: list[Any], fail_after: int) -> None:
        super().__init__()
        self.append_many([_copy(e) for e in events])
        self.fail_after = fail_after

    def read(self, stream: str | None = None, *, after: int = 0, limit: int | None = None) -> Any:
        if after >= self.fail_after:
            from harnessc.runtime.log.store import StoreError

            raise StoreError("disk I/O error")
        return super().read(stream, after=after, limit=limit)


def test_a_log_that_fails_mid_read_gives_the_report_of_what_was_read(tmp_path: Path) -> None:
    spec = compiled(tmp_path)
    h = Harness(spec)
    run_sessions(h)
    events = h.store.read()
    report = replay(_Failing(events, 20), spec, page=10)
    assert report.incomplete is not None and "disk I/O error" in report.incomplete
    assert 0 < report.decisions < len(decision_ids(h.store))
    assert report.incomplete.startswith(
        f"the log could not be read after position {report.last_position}"
    )
    assert report.to_dict()["incomplete"] == report.incomplete


def test_workers_give_the_report_one_reader_gives(
    logged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = compiled(logged, CHANGED)
    log = str(logged / "events.db")
    one = replay(log, spec).to_dict()
    assert replay(log, spec, workers=2).to_dict() == one
    assert replay(log, spec, workers=3, first=1).to_dict()["totals"] == one["totals"]
    argv = ["replay", "--log", log, "--spec", str(logged / "changed.harness"), "--format", "json"]
    code, out, _ = run(capsys, *argv, "--workers", "2")
    cli = json.loads(out)  # the same report; its spec read from another file name
    assert code == 1 and (cli["totals"], cli["by_tool"]) == (one["totals"], one["by_tool"])
    assert run(capsys, *argv, "--workers", "0")[0] == 2


def test_a_workflow_judged_by_a_policy_is_replayed_under_its_policy(tmp_path: Path) -> None:
    workflow = "\nworkflow pays {\n  policy main\n  input { iban: string }\n"
    workflow += "  step send = call pay.send(iban: input.iban, amount: 1)\n}\n"
    spec = compiled(tmp_path, SPEC + workflow)
    h = Harness(spec)
    # a step's session as runtime/workflows/steps.py opens it for a workflow with no agent
    wf = spec.workflows["rec.pays"]
    s = h._open(
        agent=Agent(name=wf.name, policy=wf.policy),
        actor=ACTOR,
        task={"id": "wf-1", "workflow": wf.name, "step": "send"},
        facts=Facts(),
        resource={},
        env={},
        session_id="workflow:wf-1/send",
        tools=("pay.send",),
    )
    assert (
        s.decide(pending(s.normalize("pay.send", "wf-1/send#1", {"iban": "X", "amount": 1}))).effect
        == "ask"
    )
    changed = compiled(tmp_path, CHANGED + workflow)
    report = replay(h.store, changed)
    assert report.skipped == 0 and report.by_tool() == {"pay.send": {"ask→deny": 1}}
