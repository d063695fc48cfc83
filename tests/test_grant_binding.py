"""A grant answers the request it was given for: a `once` grant authorises one execution in
total, of the call that was asked about, in the session that asked, whatever other sessions,
threads, processes or restarts present the same tool, call id and arguments."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.model import Spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .budget import examples
from .postgres import ADMIN_URL, fresh_database
from .test_approvals import OPS, SHELL, compile_text

ARGS = {"cmd": "ls", "n": 1}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("binding"), SHELL)


def frozen(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def asked_and_approved(h: Harness) -> tuple[Any, PendingCall]:
    """Session A (u-1, task t-1) asks for `shell.run` `call-1`; an operator approves it."""
    a = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = frozen(a.normalize("shell.run", "call-1", ARGS))
    outcome = h.approve(a.request_approval(call).request_id, by=OPS)
    assert outcome.grant is not None and outcome.grant.scope == "once"
    assert outcome.grant.session_id == a.id
    return a, call


def test_a_once_grant_authorises_nothing_in_another_session(spec: Spec) -> None:
    h = Harness(spec)
    runs: list[str] = []
    h.bind("shell.run", lambda args, ctx: runs.append(ctx.session_id) or {})
    a, call = asked_and_approved(h)
    # another actor, another task, the same tool, call id and arguments: the same input hash
    b = h.session("a", actor={"user": "u-9", "role": "dev"}, task="t-9")
    copy = frozen(b.normalize("shell.run", "call-1", ARGS))
    assert copy.input_hash == call.input_hash
    decision, grant = b.judge(copy)
    assert decision.effect == "ask" and grant is None
    assert b.decide(copy).effect == "ask"
    refused = b.invoke(copy)
    assert not refused.ran and refused.error_category == "waiting_approval"
    assert a.invoke(call).ran
    assert runs == [a.id]
    # spent: the approved session's second attempt returns the recorded result, runs nothing
    assert a.invoke(call).ran and runs == [a.id]
    decisions = [e.payload for e in h.store.read(b.id) if e.type == "decision"]
    assert decisions and not any(d["authorized"] for d in decisions)


def test_two_harnesses_racing_on_one_log_run_a_once_grant_once(spec: Spec, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    first = Harness(spec, store=SQLiteStore(db))
    a, _ = asked_and_approved(first)
    runs: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def executor(args: dict[str, Any]) -> dict[str, Any]:
        with lock:
            runs.append(args["cmd"])
        return {}

    harnesses = [first] + [Harness(spec, store=SQLiteStore(db)) for _ in range(3)]
    results: list[Any] = []

    def attempt(h: Harness) -> None:
        h.bind("shell.run", executor)
        session = h.resume(a.id)
        pending = frozen(session.normalize("shell.run", "call-1", ARGS))
        barrier.wait()
        results.append(session.invoke(pending))

    threads = [threading.Thread(target=attempt, args=(h,)) for h in harnesses]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs == ["ls"]
    # one execution; a harness that caught up on it returns its recorded result (ran)
    assert len({r.action_id for r in results if r.ran}) == 1
    # one that lost says why: the grant spent by another, or the call run by another
    # (`ran_elsewhere`: the log refused its RUNNING, docs/runtime.md "At most once")
    assert {r.error_category for r in results if not r.ran} <= {
        "grant_spent",
        "waiting_approval",
        "ran_elsewhere",
    }
    spent = [e for e in first.store.read() if e.type == "grant.spent"]
    assert len(spent) == 1 and spent[0].payload["session"] == a.id
    # a claim that lost records no RUNNING: the transition rides the claim's transaction
    running = [e for e in first.store.read() if e.payload.get("to") == "RUNNING"]
    assert len(running) == 1 and running[0].position == spent[0].position + 1


# Each process opens the log, resumes session A and invokes the approved call; the executor
# appends a line to a shared file, so the file counts the executions of every process.
RACER = r"""
import json, os, sys
from harnessc.runtime import Harness, SQLiteStore, Spec

spec_path, store_url, session_id, runs = sys.argv[1:5]
if store_url.startswith("postgresql:"):
    from harnessc.runtime.log.postgres import PostgresStore
    store = PostgresStore(store_url)
else:
    store = SQLiteStore(store_url)
h = Harness(Spec.from_json(open(spec_path, "rb").read()), store=store)


def run(args):
    fd = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, b"ran\n")
    os.close(fd)
    return {}


h.bind("shell.run", run)
s = h.resume(session_id)
result = s.invoke(s.normalize("shell.run", "call-1", {"cmd": "ls", "n": 1}))
print(json.dumps({"ran": result.ran, "category": result.error_category}), flush=True)
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store to race on: a SQLite file, or a fresh database on the PostgreSQL test server."""
    if request.param == "sqlite":
        yield str(tmp_path / "log.db")
        return
    if not ADMIN_URL:
        pytest.skip("set HARNESSC_TEST_POSTGRES_URL to race on PostgreSQL")
    pytest.importorskip("psycopg")
    with fresh_database() as url:
        yield url


def open_store(url: str) -> Any:
    if url.startswith("postgresql:"):
        from harnessc.runtime.log.postgres import PostgresStore

        return PostgresStore(url)
    return SQLiteStore(url)


def test_processes_racing_on_one_store_run_a_once_grant_once(
    spec: Spec, tmp_path: Path, store_url: str
) -> None:
    store = open_store(store_url)
    h = Harness(spec, store=store)
    a, _ = asked_and_approved(h)
    store.close()
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json(), encoding="utf-8")
    runs = tmp_path / "runs"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(spec_path), store_url, a.id, str(runs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    said = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        said.append(json.loads(out.strip().splitlines()[-1]))
    # one execution; a process that came later returns the recorded result (ran), or says why
    # it did not run: the grant spent by another, the call running elsewhere, or, judged again
    # with the grant gone, waiting for a new approval or its authorisation taken back
    # (`cancelled`: it had loaded the call as AUTHORIZED)
    assert runs.read_text() == "ran\n", said
    assert all(
        s["ran"]
        or s["category"]
        in ("grant_spent", "not_authorized", "waiting_approval", "cancelled", "ran_elsewhere")
        for s in said
    ), said
    assert sum(s["ran"] for s in said) >= 1, said


# ---------------------------------------------------------------------------------------------
# The property: whatever sessions, tasks, actors and restarts do, the approved call runs at most
# once, and nothing else runs (every rule of the spec asks, and only one call was approved).

ACTORS = [{"user": "u-1", "role": "dev"}, {"user": "u-9", "role": "dev"}, OPS]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.integers(0, 2), st.sampled_from(["t-1", "t-2"])),
        st.tuples(st.just("resume-a")),
        st.tuples(
            st.just("invoke"),
            st.integers(0, 5),
            st.sampled_from(["call-1", "call-2"]),
            st.sampled_from(["ls", "rm"]),
        ),
        st.tuples(st.just("restart")),
    ),
    max_size=14,
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Where the property runs: a SQLite file per example, or one PostgreSQL database for the
    module (each example's sessions, requests and grants have ids of their own)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    if not ADMIN_URL:
        pytest.skip("set HARNESSC_TEST_POSTGRES_URL to check the property on PostgreSQL")
    pytest.importorskip("psycopg")
    with fresh_database() as url:
        yield url


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
def test_a_once_grant_yields_at_most_one_execution(
    spec: Spec,
    tmp_path_factory: pytest.TempPathFactory,
    store_kind: str,
    steps: list[tuple[Any, ...]],
) -> None:
    db = tmp_path_factory.mktemp("prop") / "log.db"
    runs: list[tuple[str, str, str]] = []

    def open_harness() -> Harness:
        h = Harness(spec, store=open_store(str(db) if store_kind == "sqlite" else store_kind))
        h.bind("shell.run", lambda args, ctx: runs.append((ctx.session_id, args["cmd"], "")) or {})
        return h

    h = open_harness()
    a, _ = asked_and_approved(h)
    ids = [a.id]
    sessions = [a]
    for step in steps:
        if step[0] == "open":
            s = h.session("a", actor=ACTORS[step[1]], task=step[2])
            ids.append(s.id)
            sessions.append(s)
        elif step[0] == "resume-a":
            sessions.append(h.resume(a.id))
            ids.append(a.id)
        elif step[0] == "restart":
            h.store.close()
            h = open_harness()
            sessions = [h.resume(i) for i in ids]
        else:
            _, index, call_id, cmd = step
            s = sessions[index % len(sessions)]
            pending = s.normalize("shell.run", call_id, {"cmd": cmd, "n": 1})
            if isinstance(pending, PendingCall):
                s.invoke(pending)
    h.store.close()
    assert len(runs) <= 1
    assert all(session == a.id and cmd == "ls" for session, cmd, _ in runs)
