"""Durable workflows and the event log on PostgreSQL, for real: a worker killed with SIGKILL,
three workers sharing the queue with one killed mid-run, and the PostgresStore contract.

Set HARNESSC_TEST_POSTGRES_URL to a server's URL (`.ci/run` starts one on loopback); each test
creates and drops its own database there."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")
psycopg = pytest.importorskip("psycopg", reason="PostgreSQL needs psycopg")

from harnessc.runtime.log.events import NewEvent  # noqa: E402
from harnessc.runtime.log.postgres import PostgresStore  # noqa: E402
from harnessc.runtime.log.store import ConcurrencyError  # noqa: E402

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database  # noqa: E402
from .test_workflows_support import Worker, compiled, observer, until  # noqa: E402

pytestmark = pytest.mark.skipif(not ADMIN_URL, reason=SKIP_REASON)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    with fresh_database() as url:
        yield url


def test_the_store_keeps_one_chain_and_refuses_edits(pg_url: str) -> None:
    from harnessc.runtime.workflows.steps import append_once

    with PostgresStore(pg_url) as store:
        assert store.append(NewEvent("s-1", "State", "session.started", {"a": 1})).position == 1
        assert [e.seq for e in store.append_many([NewEvent("s-1", "Text", "note")] * 2)] == [2, 3]
        with pytest.raises(ConcurrencyError):
            store.append(NewEvent("s-1", "Text", "note"), expected_seq=1)
        assert append_once(store, [NewEvent("wf/a#1", "State", "x", {})] * 2)
        assert not append_once(store, [NewEvent("wf/a#1", "State", "x", {})])
        assert [e.position for e in store.read(after=3)] == [4, 5]
        assert store.verify().ok
        assert store.head()[0] == 5
        # `last` matches a stream prefix literally: `_` and `%` in a run id are not wildcards
        store.append_many(
            [
                NewEvent("workflow:r_1/a#1", "State", "workflow.step", {"n": 1}),
                NewEvent("workflow:r%1/a#1", "State", "workflow.step", {"n": 2}),
                NewEvent("workflow:rx1/a#1", "State", "workflow.step", {"n": 3}),
            ]
        )
        found = store.last("workflow:r_1/", "workflow.step")
        assert found is not None and found.position == 6
        found = store.last("workflow:r%1/", "workflow.step")
        assert found is not None and found.position == 7
        assert store.last("workflow:r/", "workflow.step") is None
        with psycopg.connect(pg_url, autocommit=True) as conn, pytest.raises(psycopg.Error):
            conn.execute("UPDATE harnessc.events SET payload = '{}'")
        with PostgresStore(pg_url) as again:  # a second process sees the same log
            assert again.head() == store.head()


def test_sigkill_after_step_two_resumes_without_repeating(tmp_path: Path, pg_url: str) -> None:
    watch = observer(compiled(), pg_url)
    first = Worker(tmp_path, pg_url, hold=(3,))
    try:
        first.create("four", {"base": 1}, "crash-1")
        until(
            lambda: (
                {s["name"]: s["state"] for s in watch.workflows.status("crash-1")["steps"]}.get("c")
                == "running"
            ),
            what="step 3 to start",
        )
    finally:
        first.kill()
    second = Worker(tmp_path, pg_url)
    try:
        until(lambda: watch.workflows.status("crash-1")["status"] == "completed", what="resume")
    finally:
        second.kill()
    ran = second.ran()
    assert [n for n, _, _ in ran] == [1, 2, 3, 4]
    assert {pid for _, _, pid in ran[:2]} == {first.proc.pid}
    assert {pid for _, _, pid in ran[2:]} == {second.proc.pid}
    with PostgresStore(pg_url) as store:
        assert store.verify().ok
        steps = Counter(e.stream for e in store.read() if e.type == "workflow.step")
    assert steps == Counter({f"workflow:crash-1/{s}#1": 1 for s in "abcd"}) + Counter(
        {"workflow:crash-1/~start": 1, "workflow:crash-1/~end": 1}
    )
    watch.workflows.close()


def test_three_workers_one_killed_every_run_finishes_once(tmp_path: Path, pg_url: str) -> None:
    watch = observer(compiled(), pg_url)
    options = {
        "configure": {
            "poll_s": 0.05,
            "concurrency": 2,
            "heartbeat_s": 0.2,
            "stale_after_s": 1.5,
        },
        "job_s": 0.05,
    }
    doomed = Worker(tmp_path, pg_url, "w1", hold=(3,), **options)
    others: list[Worker] = []
    runs = [f"run-{i}" for i in range(6)]
    try:
        for run in runs[:2]:
            doomed.create("four", {"base": 1}, run)
        until(
            lambda: all(
                {s["name"]: s["state"] for s in watch.workflows.status(r)["steps"]}.get("c")
                == "running"
                for r in runs[:2]
            ),
            what="w1 to hold two runs at step 3",
        )
        others = [Worker(tmp_path, pg_url, w, **options) for w in ("w2", "w3")]
        for run in runs[2:]:
            others[0].create("four", {"base": 1}, run)
        doomed.kill()
        until(
            lambda: all(watch.workflows.status(r)["status"] == "completed" for r in runs),
            timeout_s=120,
            what="every run to finish",
        )
    finally:
        if doomed.proc.poll() is None:
            doomed.kill()
        for worker in others:
            worker.kill()
    jobs = doomed.jobs()
    assert Counter((run, n) for n, _, _, run in jobs) == Counter(
        {(run, n): 1 for run in runs for n in (1, 2, 3, 4)}
    )
    # the held runs finished elsewhere: w1 ran their first two steps, another worker the rest
    for run in runs[:2]:
        by = {n: executor for n, executor, _, r in jobs if r == run}
        assert by[1] == by[2] == "w1"
        assert by[3] in ("w2", "w3") and by[4] in ("w2", "w3")
    with PostgresStore(pg_url) as store:
        assert store.verify().ok
        steps = Counter(e.stream for e in store.read() if e.type == "workflow.step")
    assert all(count == 1 for count in steps.values())
    assert len(steps) == 6 * 6  # four steps, a start and an end per run
    watch.workflows.close()
