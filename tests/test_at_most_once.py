"""A call that ran never runs again, whatever process holds its session: the store refuses a
second RUNNING for a call, a session catches up on its stream before deciding, and a RUNNING
action whose process died is reported UNKNOWN, never run again (docs/runtime.md, "At most
once across processes")."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.log.chain import TransitionRefused
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.store import EventStore, MemoryStore
from harnessc.runtime.model import Spec, Tool
from harnessc.runtime.session.lifecycle import Action, ActionState

from .postgres import ADMIN_URL, fresh_database
from .test_approvals import OPS, SHELL, compile_text

ARGS = {"cmd": "ls", "n": 1}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("once"), SHELL)


def frozen(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


@pytest.mark.parametrize("opened", ["before the approval", "after the approval"])
def test_a_call_run_in_one_harness_is_not_run_again_by_another_on_the_same_log(
    spec: Spec, tmp_path: Path, opened: str
) -> None:
    """The issue's race: B holds the session open while A approves, spends and finishes the
    call; B decides the same call again. It gets the recorded decision and result: no second
    approval request, no second execution."""
    db = tmp_path / "log.db"
    runs: list[str] = []

    def executor(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        runs.append(ctx.action_id)
        return {"ok": True}

    first = Harness(spec, store=SQLiteStore(db))
    first.bind("shell.run", executor)
    a = first.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = frozen(a.normalize("shell.run", "call-1", ARGS))
    request = a.request_approval(call)
    second = Harness(spec, store=SQLiteStore(db))
    second.bind("shell.run", executor)
    if opened == "before the approval":
        b = second.resume(a.id)  # open in both processes at once
    first.approve(request.request_id, by=OPS)
    if opened == "after the approval":
        b = second.resume(a.id)

    done = a.invoke(call)
    assert done.ran and done.status == "success" and len(runs) == 1

    again = frozen(b.normalize("shell.run", "call-1", ARGS))
    decision = b.decide(again)
    assert decision.effect == "ask"
    if decision.effect == "ask":
        request = b.request_approval(again)
        if request.status == "pending":
            second.approve(request.request_id, by=OPS)
            b.decide(again)
    result = b.invoke(again)
    assert runs == [done.action_id], "the call ran again in the second harness"
    assert result.action_id == done.action_id and result.status == "success"
    log = first.store.read()
    assert sum(e.type == "approval.requested" for e in log) == 1, "a second approval was opened"
    moves = [e.payload["to"] for e in log if e.type == "action.transition"]
    assert moves[-3:] == ["AUTHORIZED", "RUNNING", "SUCCEEDED"], moves


TOOL = Tool(id="pay.send", wire_name="pay_send", version=1)
S = ActionState


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, ...]]:
    """Two stores on one log (two processes' view of it; memory has one store only)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
    elif request.param == "sqlite":
        first, second = SQLiteStore(tmp_path / "log.db"), SQLiteStore(tmp_path / "log.db")
        yield first, second
        first.close()
        second.close()
    else:
        if not ADMIN_URL:
            pytest.skip("set HARNESSC_TEST_POSTGRES_URL to check PostgreSQL")
        pytest.importorskip("psycopg")
        from harnessc.runtime.log.postgres import PostgresStore

        with fresh_database() as url:
            first, second = PostgresStore(url), PostgresStore(url)
            yield first, second
            first.close()
            second.close()


def authorized(store: EventStore, call_id: str = "call-1") -> Action:
    action = Action.request(store, "s-1", TOOL, call_id, {"to": "x"}, digest="h-1")
    action.transition(S.VALIDATED)
    action.transition(S.AUTHORIZED)
    return action


def as_read_by(store: EventStore, action: Action, state: ActionState) -> Action:
    """The same action as another process holds it, in `state`."""
    return Action(
        store, action.stream, action.tool_call_id, action.tool_id, state, action_id=action.action_id
    )


def test_the_store_refuses_a_second_running_of_an_action_whoever_writes_it(
    stores: tuple[EventStore, EventStore],
) -> None:
    first, second = stores
    action = authorized(first)
    action.transition(S.RUNNING, input_hash="h-1")
    with pytest.raises(TransitionRefused) as refused:
        as_read_by(second, action, S.AUTHORIZED).transition(S.RUNNING, input_hash="h-1")
    assert refused.value.code == "transition-refused" and refused.value.to_state == "RUNNING"
    # the same call under another action id (two processes normalized it at once)
    other = Action.request(second, "s-1", TOOL, "call-1", {"to": "x"}, digest="h-1")
    other.transition(S.VALIDATED)
    other.transition(S.AUTHORIZED)
    with pytest.raises(TransitionRefused):
        other.transition(S.RUNNING, input_hash="h-1")
    # one move out of RUNNING: the outcome, or UNKNOWN, never both
    as_read_by(second, action, S.RUNNING).transition(S.UNKNOWN, reason="lease ended")
    with pytest.raises(TransitionRefused):
        action.transition(S.SUCCEEDED)
    moves = [
        (e.payload["action_id"], e.payload["to"])
        for e in first.read("s-1")
        if e.type == "action.transition" and e.payload["to"] in ("RUNNING", "SUCCEEDED", "UNKNOWN")
    ]
    assert moves == [(action.action_id, "RUNNING"), (action.action_id, "UNKNOWN")]


def test_a_move_decided_on_a_state_the_action_left_is_refused(
    stores: tuple[EventStore, EventStore],
) -> None:
    """An action leaves each state once (its lifecycle has no cycle), so the log's moves of
    it are one chain: a process that still holds the call WAITING_APPROVAL, after another ran
    it to SUCCEEDED, cannot record it AUTHORIZED again. Appended directly, the move is refused;
    deferred with the events of its decision, the move is left out and the rest kept."""
    first, second = stores
    action = Action.request(first, "s-1", TOOL, "call-1", {"to": "x"}, digest="h-1")
    action.transition(S.VALIDATED)
    action.transition(S.WAITING_APPROVAL)
    elsewhere = as_read_by(second, action, S.WAITING_APPROVAL)
    for state in (S.AUTHORIZED, S.RUNNING, S.SUCCEEDED):
        elsewhere.transition(state, **({"input_hash": "h-1"} if state == S.RUNNING else {}))
    stale = as_read_by(first, action, S.WAITING_APPROVAL)
    with pytest.raises(TransitionRefused) as refused:
        stale.transition(S.AUTHORIZED, grant_id="g-1")
    assert "moved on from WAITING_APPROVAL" in str(refused.value)
    _, move = stale.move(S.AUTHORIZED, grant_id="g-2")
    first.defer([NewEvent("s-1", "Text", "note", {"call": "call-1"}), move])
    first.flush()
    events = [e for e in first.read("s-1") if e.type in ("action.transition", "note")]
    chain = " ".join(e.payload.get("to", e.type) for e in events)
    assert chain == "REQUESTED VALIDATED WAITING_APPROVAL AUTHORIZED RUNNING SUCCEEDED note"
    assert Action.load(first, "s-1", "call-1").state == S.SUCCEEDED  # type: ignore[union-attr]
    assert first.verify().ok


def test_a_refused_transition_leaves_the_other_batches_of_its_commit(
    stores: tuple[EventStore, EventStore],
) -> None:
    first, _ = stores
    action = authorized(first)
    action.transition(S.RUNNING, input_hash="h-1")
    again = as_read_by(first, action, S.AUTHORIZED)
    _, running = again.move(S.RUNNING, input_hash="h-1")
    with pytest.raises(TransitionRefused):
        first.append_many([running])
    # a call of another id runs; the log goes on
    authorized(first, "call-2").transition(S.RUNNING, input_hash="h-2")
    assert first.verify().ok


def test_sqlite_holds_the_claim_in_the_file_itself(tmp_path: Path) -> None:
    """A row written past the store's own check (a second RUNNING) is refused by the log's
    unique index."""
    store = SQLiteStore(tmp_path / "log.db")
    action = authorized(store)
    action.transition(S.RUNNING, input_hash="h-1")
    store.close()
    raw = sqlite3.connect(tmp_path / "log.db")
    payload = (
        f'{{"action_id":"{action.action_id}","from":"AUTHORIZED","to":"RUNNING",'
        '"tool_call_id":"call-1","tool_id":"pay.send"}'
    )
    with pytest.raises(sqlite3.IntegrityError):
        raw.execute(
            "INSERT INTO events VALUES (99, 's-1', 99, 'Tool', 'action.transition', ?, "
            "'t', 'p', 'h', NULL)",
            (payload,),
        )
    raw.close()


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 9, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_running_call_whose_process_died_is_unknown_and_never_runs_again(
    spec: Spec, tmp_path: Path
) -> None:
    """A process recorded RUNNING and died (its executor never returned, nothing recorded).
    Within the lease another process reports the call running elsewhere; past it (the call's
    timeout + `lease_grace_ms`, on the injected clock) it records UNKNOWN: never run again."""
    db = tmp_path / "log.db"
    clock = Clock()
    runs: list[str] = []
    dying = Harness(spec, store=SQLiteStore(db), clock=clock)
    a = dying.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = frozen(a.normalize("shell.run", "call-1", ARGS))
    dying.approve(a.request_approval(call).request_id, by=OPS)

    class Died(BaseException):
        """The process stops where its executor runs (a kill: nothing after it is recorded)."""

    def die(args: dict[str, Any]) -> dict[str, Any]:
        runs.append("ran")
        raise Died

    dying.bind("shell.run", die)
    with pytest.raises(Died):
        a.invoke(call)
    running = [e for e in dying.store.read() if e.payload.get("to") == "RUNNING"]
    assert len(running) == 1 and running[0].payload["lease_until"]

    other = Harness(spec, store=SQLiteStore(db), clock=clock)
    other.bind("shell.run", lambda args: runs.append("again") or {})
    b = other.resume(a.id)
    again = frozen(b.normalize("shell.run", "call-1", ARGS))
    inside = b.invoke(again)
    assert not inside.ran and inside.error_category == "ran_elsewhere" and inside.state == "RUNNING"
    # the lease: the tool's timeout (1m) and the grace, from the next whole second
    clock.now += timedelta(minutes=1, seconds=1, milliseconds=other.lease_grace_ms)
    later = other.resume(a.id)
    assert later.action_state(again) == ActionState.UNKNOWN
    past = later.invoke(again)
    assert not past.ran and past.state == "UNKNOWN"
    assert runs == ["ran"]
    unknown = [e for e in other.store.read() if e.payload.get("to") == "UNKNOWN"]
    assert len(unknown) == 1 and "lease" in unknown[0].payload["reason"]


def kill_bench() -> Any:
    """bench/at_most_once.py, the kill test at any size (the suite runs a small one)."""
    path = Path(__file__).resolve().parent.parent / "bench" / "at_most_once.py"
    spec_ = importlib.util.spec_from_file_location("bench_at_most_once", path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module  # its dataclass reads its module
    spec_.loader.exec_module(module)
    return module


@pytest.mark.parametrize("store_kind", ["sqlite", "postgresql"])
def test_workers_killed_at_random_never_run_a_call_twice(store_kind: str, tmp_path: Path) -> None:
    """Four worker processes share ten sessions on one log and work through 200 calls (reads,
    and payments under `grant once` they approve themselves); a worker is SIGKILLed every few
    executions, ten times, and another started. Every execution is counted in a side file:
    no action and no call runs twice, and every call ends with its outcome recorded or
    UNKNOWN (a killed run, once its lease ended)."""
    bench = kill_bench()
    if store_kind == "sqlite":
        figures = bench.run(str(tmp_path / "log.db"), tmp_path, calls=200, kills=10)
    else:
        if not ADMIN_URL:
            pytest.skip("set HARNESSC_TEST_POSTGRES_URL to run the kill test on PostgreSQL")
        pytest.importorskip("psycopg")
        with fresh_database() as url:
            figures = bench.run(url, tmp_path, calls=200, kills=10)
    assert figures.problems == [], figures
    assert figures.kills >= 10 and figures.per_action == {1: figures.executions}
    assert sum(figures.outcomes.values()) == 200
