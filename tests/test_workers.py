"""Many workers on one log (docs/scaling.md, "Many workers on one PostgreSQL log"): any worker
continues any session with its history exact, a `count`/`sum` limit holds when calls arrive at
once from several processes, and worker processes killed at random lose, double and overrun
nothing (bench/workers.py at a small size)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.log.chain import HistoryMoved
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.store import EventStore, MemoryStore
from harnessc.runtime.model import Spec

from .postgres import ADMIN_URL, fresh_database
from .test_approvals import compile_text

LIMITED = """
harness w { version "1.0.0" }
tool pay.send { summary "Send."; effects write external; input { to: string, cents: int } }
policy p {
  default deny
  cap: deny pay.send when count(pay.send) > 3 { reason "At most three payments." }
  total: deny pay.send when sum(args.cents of pay.send) > 500 { reason "At most 5.00." }
  payee: deny pay.send when not (args.to from user) { reason "A payee the user named." }
  pay: allow pay.send
}
surface s { expose pay.* }
agent a { surface s; policy p }
"""


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("workers"), LIMITED)


def postgres_url() -> Iterator[str]:
    if not ADMIN_URL:
        pytest.skip("set HARNESSC_TEST_POSTGRES_URL to run the PostgreSQL tests")
    pytest.importorskip("psycopg")
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "log.db")
    else:
        yield from postgres_url()


def open_store(url: str) -> EventStore:
    if url.startswith("postgresql:"):
        from harnessc.runtime.log.postgres import PostgresStore

        return PostgresStore(url)
    return SQLiteStore(url)


def pending_of(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def test_any_worker_continues_any_session_with_its_history_exact(spec: Spec, log_url: str) -> None:
    """A session opened on worker A is continued by worker B and back, call by call: each
    decision reads the count, the sum and the provenance of both workers' calls and messages
    (a payee named to B is known to A), and the fourth payment is refused by the count
    wherever it arrives."""
    a, b = Harness(spec, store=open_store(log_url)), Harness(spec, store=open_store(log_url))
    try:
        continued(a, b)
    finally:
        a.store.close()  # type: ignore[attr-defined]
        b.store.close()  # type: ignore[attr-defined]


def continued(a: Harness, b: Harness) -> None:
    for h in (a, b):
        h.bind("pay.send", lambda args, ctx: {"ok": True})
    opened = a.session("a", actor={"user": "u-1"}, task="t-1", said=["pay alice and bob"])
    on_b = b.resume(opened.id)
    on_b.user_said("and carol too")
    steps = [
        (opened, "alice", 100, "p.pay"),
        (on_b, "carol", 100, "p.pay"),  # named to B
        (opened, "mallory", 100, "p.payee"),  # named to nobody
        (opened, "carol", 100, "p.pay"),  # named to B, judged on A
        (on_b, "bob", 100, "p.cap"),  # the fourth payment authorised: over the count
    ]
    for n, (session, to, cents, rule) in enumerate(steps):
        pending = pending_of(session.normalize("pay.send", f"c-{n}", {"to": to, "cents": cents}))
        result = session.invoke(pending)
        assert session.decide(pending).rule == rule, (n, to)
        assert result.ran == (rule == "p.pay"), result
    # the sum: a new session of A, continued on B: 300, then 300 more is over 500
    second = a.session("a", actor={"user": "u-1"}, task="t-2", said=["pay alice"])
    first = second.invoke(
        pending_of(second.normalize("pay.send", "s-1", {"to": "alice", "cents": 300}))
    )
    assert first.ran
    again = b.resume(second.id)
    pending = pending_of(again.normalize("pay.send", "s-2", {"to": "alice", "cents": 300}))
    over = again.invoke(pending)
    assert not over.ran and over.error_category == "denied"
    assert again.decide(pending).rule == "p.total"


def test_decisions_held_in_hand_and_refused_by_the_log_count_no_more(
    spec: Spec, log_url: str
) -> None:
    """Worker A authorises two payments and holds them (taken in hand by its ledger, not
    committed); worker B runs one meanwhile. The log refuses A's two decisions, which counted
    on a history that moved: each is judged again on the log as it is, with B's payment and
    without the refused ones, so exactly three run and the fourth is refused by the count."""
    a, b = Harness(spec, store=open_store(log_url)), Harness(spec, store=open_store(log_url))
    try:
        for h in (a, b):
            h.bind("pay.send", lambda args, ctx: {"ok": True})
        opened = a.session(
            "a", actor={"user": "u-1"}, task="t-1", said=["pay alice bob carol dave"]
        )
        a.store.flush()
        on_b = b.resume(opened.id)
        held = [
            pending_of(opened.normalize("pay.send", f"c-{n}", {"to": to, "cents": 1}))
            for n, to in enumerate(["alice", "bob"])
        ]
        assert [opened.decide(p).effect for p in held] == ["allow", "allow"]
        ran_b = on_b.invoke(
            pending_of(on_b.normalize("pay.send", "c-2", {"to": "carol", "cents": 1}))
        )
        assert ran_b.ran
        assert [opened.invoke(p).ran for p in held] == [True, True]
        last = opened.invoke(
            pending_of(opened.normalize("pay.send", "c-3", {"to": "dave", "cents": 1}))
        )
        assert not last.ran and last.error_category == "denied"
        runs = [
            e.payload["action_id"]
            for e in a.store.read(opened.id)
            if e.type == "action.transition" and e.payload["to"] == "RUNNING"
        ]
        assert len(runs) == 3
    finally:
        a.store.close()  # type: ignore[attr-defined]
        b.store.close()  # type: ignore[attr-defined]


FIRST = """
harness w { version "1.0.0" }
tool pay.check { summary "Check."; effects read; input { to: string } }
tool pay.send { summary "Send."; effects write external; input { to: string } }
policy p {
  default deny
  checked: deny pay.send when count(pay.check) < 1 { reason "Check first." }
  allow pay.*
}
surface s { expose pay.* }
agent a { surface s; policy p }
"""


def test_a_decision_that_counted_a_held_one_falls_with_it(tmp_path: Path) -> None:
    """A worker authorises a check and holds it; another writes to the session; the worker
    then authorises a payment because the check is counted (read after the other's event).
    The held check's commit is refused, and so is the payment's, which was judged on it:
    judged again, the payment waits for a check that ran."""
    spec = compile_text(tmp_path, FIRST)
    a = Harness(spec, store=open_store(str(tmp_path / "log.db")))
    b = Harness(spec, store=open_store(str(tmp_path / "log.db")))
    try:
        for h in (a, b):
            h.bind("pay.check", lambda args, ctx: {"ok": True})
            h.bind("pay.send", lambda args, ctx: {"ok": True})
        opened = a.session("a", actor={"user": "u-1"}, task="t-1")
        a.store.flush()
        on_b = b.resume(opened.id)
        check = pending_of(opened.normalize("pay.check", "c-1", {"to": "x"}))
        assert opened.decide(check).effect == "allow"  # held, in hand
        on_b.user_said("go on")
        b.store.flush()
        pay = pending_of(opened.normalize("pay.send", "c-2", {"to": "x"}))
        opened.decide(pay)
        paid = opened.invoke(pay)
        assert not paid.ran and paid.error_category == "denied"
        assert opened.invoke(check).ran
        again = opened.invoke(pending_of(opened.normalize("pay.send", "c-3", {"to": "x"})))
        assert again.ran
    finally:
        a.store.close()  # type: ignore[attr-defined]
        b.store.close()  # type: ignore[attr-defined]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def two_views(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, ...]]:
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
    elif request.param == "sqlite":
        first, second = SQLiteStore(tmp_path / "log.db"), SQLiteStore(tmp_path / "log.db")
        yield first, second
        first.close()
        second.close()
    else:
        for url in postgres_url():
            first, second = open_store(url), open_store(url)
            yield first, second
            first.close()  # type: ignore[attr-defined]
            second.close()  # type: ignore[attr-defined]


def test_a_batch_decided_on_a_history_another_writer_moved_is_refused(
    two_views: tuple[EventStore, EventStore],
) -> None:
    """`append_many(unmoved=…)`: written only if nobody appended to the named streams after the
    positions read; refused (`HistoryMoved`, nothing written) otherwise, whoever wrote."""
    first, second = two_views
    read = first.append(NewEvent("s-1", "Tool", "note", {"n": 1})).position
    first.append_many([NewEvent("s-1", "Tool", "note", {"n": 2})], unmoved={"s-1": read})
    with pytest.raises(HistoryMoved) as refused:  # decided on position `read`: moved since
        second.append_many([NewEvent("s-1", "Tool", "note", {"n": 3})], unmoved={"s-1": read})
    assert refused.value.code == "history-moved"
    second.append(NewEvent("s-2", "Tool", "note", {"n": 4}))  # another session: no matter
    head = first.head()[0]
    first.append_many([NewEvent("s-1", "Tool", "note", {"n": 5})], unmoved={"s-1": head - 1})
    assert [e.payload["n"] for e in first.read("s-1")] == [1, 2, 5]
    # held for the next commit: taken back to ride it, or refused when that commit finds the
    # stream moved (memory holds it unchecked: one process writes there)
    read = first.head()[0]
    held = first.defer_unmoved([NewEvent("s-1", "Tool", "note", {"n": 6})], {"s-1": read})
    if held is not None:
        taken = first.withdraw(held)
        assert taken is not None and [e.payload["n"] for e in taken] == [6]
        held = first.defer_unmoved([NewEvent("s-1", "Tool", "note", {"n": 7})], {"s-1": read})
        second.append(NewEvent("s-1", "Tool", "note", {"n": 8}))
        first.flush()
        with pytest.raises(HistoryMoved):
            first.withdraw(held)
        assert [e.payload["n"] for e in first.read("s-1")] == [1, 2, 5, 8]
    assert first.verify().ok


def workers_bench() -> Any:
    """bench/workers.py, whose processes the tests below start."""
    path = Path(__file__).resolve().parent.parent / "bench" / "workers.py"
    spec_ = importlib.util.spec_from_file_location("bench_workers", path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module  # its dataclasses read their module
    spec_.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("cents", "allowed"), [(1, 3), (200, 2)])
def test_a_limit_holds_when_calls_arrive_at_once_from_several_processes(
    spec: Spec, tmp_path: Path, cents: int, allowed: int
) -> None:
    """Four processes each try five payments in one session at the same instant: exactly as
    many run as the limit lets through (three by `count(pay.send) > 3` at 0.01 each, two by
    `sum(args.cents) > 500` at 2.00 each), never one more; the others are refused."""
    bench = workers_bench()
    for url in postgres_url():
        spec_path = tmp_path / "spec.json"
        spec_path.write_text(spec.to_json(), encoding="utf-8")
        h = Harness(spec, store=open_store(url))
        payees = " ".join(f"acct-{i}" for i in range(5))
        session = h.session("a", actor={"user": "u-1"}, task="t-1", said=[f"pay {payees}"])
        h.store.flush()
        start_at = time.time() + 3.0  # every process has opened its harness by then
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    bench.__file__,
                    "hammer",
                    str(spec_path),
                    url,
                    session.id,
                    f"w{k}",
                    str(start_at),
                    "5",
                    str(cents),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for k in range(4)
        ]
        outputs = [p.communicate(timeout=120) for p in processes]
        assert all(p.returncode == 0 for p in processes), [o[1][-2000:] for o in outputs]
        ran = sum(int(o[0]) for o in outputs)
        assert ran == allowed
        runs = [
            e
            for e in h.store.read(session.id)
            if e.type == "action.transition" and e.payload["to"] == "RUNNING"
        ]
        assert len(runs) == allowed
        h.store.close()  # type: ignore[attr-defined]


ASKING = """
harness w { version "1.0.0" }
tool pay.send { summary "Send."; effects write external; input { to: string, cents: int } }
policy p {
  default deny
  pay: ask pay.send { approver role "ops"; grant once ttl 10m; reason "Each payment." }
}
surface s { expose pay.* }
agent a { surface s; policy p }
"""
OPS = {"user": "u-ops", "role": "ops"}


def wait(worker: Harness, request_id: str, poll_s: float, answered: list[Any]) -> None:
    answered.append(worker.wait_for_answer(request_id, timeout_s=60, poll_s=poll_s))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_answer_given_elsewhere_reaches_the_worker_that_waits(tmp_path: Path, kind: str) -> None:
    """A worker asks and waits (`wait_for_answer`); an operator's harness on the same log
    approves. On PostgreSQL the commit's NOTIFY wakes the worker, though it would look at the
    log again only in an hour; on SQLite it looks every `poll_s`. Then the call runs there."""
    spec = compile_text(tmp_path, ASKING)
    urls = iter([str(tmp_path / "log.db")]) if kind == "sqlite" else postgres_url()
    for url in urls:
        worker, console = Harness(spec, store=open_store(url)), Harness(spec, store=open_store(url))
        try:
            worker.bind("pay.send", lambda args, ctx: {"ok": True})
            s = worker.session("a", actor={"user": "u-1"}, task="t-1")
            pending = pending_of(s.normalize("pay.send", "c-1", {"to": "bob", "cents": 5}))
            request = s.request_approval(pending)
            console.catch_up()
            answered: list[Any] = []
            poll_s = 3600.0 if kind == "postgresql" else 0.05

            t0 = time.monotonic()
            waiter = threading.Thread(
                target=wait, args=(worker, request.request_id, poll_s, answered)
            )
            waiter.start()
            time.sleep(0.3)  # the worker waits now
            console.approve(request.request_id, by=OPS)
            waiter.join(90)
            assert answered and answered[0].status == "approved", answered
            assert time.monotonic() - t0 < 60, "woken only by its deadline"
            assert s.invoke(pending).ran
        finally:
            worker.store.close()  # type: ignore[attr-defined]
            console.store.close()  # type: ignore[attr-defined]


def test_every_postgresql_commit_notifies_the_listeners() -> None:
    for url in postgres_url():
        listening, writing = open_store(url), open_store(url)
        try:
            assert listening.wait_for_append(0.0)  # starts listening: look at the log now
            assert not listening.wait_for_append(0.05)  # nothing committed since
            writing.append(NewEvent("s-1", "Tool", "note", {"n": 1}))
            assert listening.wait_for_append(30.0)
        finally:
            listening.close()  # type: ignore[attr-defined]
            writing.close()  # type: ignore[attr-defined]


def test_workers_killed_at_random_lose_nothing_double_nothing_overrun_nothing(
    tmp_path: Path,
) -> None:
    """bench/workers.py at a small size: three worker processes work 200 calls of 20 sessions
    (reads, payments under a count limit, payments an operator in this process approves),
    every session continued by several workers; one is `kill -9`ed every 0.3 s, three times,
    and replaced (early enough that the run, a few seconds, is still going). Every call has its
    outcome (SUCCEEDED, FAILED, CANCELLED or UNKNOWN for a run killed mid-call), none ran twice,
    and no session paid more than its limit."""
    bench = workers_bench()
    for url in postgres_url():
        figures = bench.measure(
            url, tmp_path, workers=3, sessions=20, calls=10, kills=3, kill_every_s=0.3
        )
    assert figures.problems == [], figures.problems
    assert figures.kills == 3 and figures.started == 6
    assert (figures.lost, figures.doubled, figures.over_limit) == (0, 0, 0)
    assert sum(figures.outcomes.values()) == 200
    # each session tries six payments under a limit of four: two are denied
    assert figures.outcomes.get("FAILED", 0) >= 40 - figures.outcomes.get("CANCELLED", 0)
