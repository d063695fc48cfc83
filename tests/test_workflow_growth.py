"""What a workflow step writes does not grow with the step's number: the 180th to 200th steps of
a run write as many bytes as its first 20, in our log and in DBOS's checkpoints; and in a
branch-heavy run (three parallel branches, then a step joining them, 40 times), the last groups
as many as the first, DBOS's rows of each branch included. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.judge.history import SourcesChain

STEPS = 200
EDGE = 20
SPEC = (
    """\
harness growth { version "1.0.0" }
tool job.run {
  summary "Return the job's number."
  use_when "A workflow step runs a job."
  effects write reversible
  input { n: int }
  output { n: int }
}
surface tools { expose job.* }
policy jobs {
  default deny
  allow job.run
}
agent runner {
  surface tools
  policy jobs
}
workflow long {
  agent runner
  step s1 = call job.run(n: 1)
"""
    + "".join(f"  step s{i} = call job.run(n: {i}) after s{i - 1}\n" for i in range(2, STEPS + 1))
    + "}\n"
)
SOURCES = "workflow.sources"
"""Counted too: the sources a step's session is seeded with (the run's input and every earlier
call step's result, so its policy reads their provenance) hold only what changed since the
run's step before, and refer to its sources for the rest."""


GROUPS = 40
"""Groups of a branch-heavy run: three parallel branches, then a step that joins them."""
FAN = (
    "workflow fan {\n  agent runner\n  step j0 = call job.run(n: 0)\n"
    + "".join(
        "".join(
            f"  step b{g}x{k} = call job.run(n: {10 * g + k}) after j{g - 1}\n" for k in (1, 2, 3)
        )
        + f"  step j{g} = call job.run(n: {10 * g}) after b{g}x1, b{g}x2, b{g}x3\n"
        for g in range(1, GROUPS + 1)
    )
    + "}\n"
)


SPEC += FAN


def _store(kind: str, tmp: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'harness.db'}"
        return
    from .postgres import ADMIN_URL, SKIP_REASON, fresh_database

    if not ADMIN_URL:
        pytest.skip(SKIP_REASON)
    pytest.importorskip("psycopg", reason="PostgreSQL needs psycopg")
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, str, dict[str, str]]]:
    """A run of `long` and one of `fan` on their own store: a SQLite file (DBOS's beside it),
    or a database of its own on the PostgreSQL test server (DBOS's tables in it)."""
    tmp = tmp_path_factory.mktemp("growth")
    for url in _store(request.param, tmp):
        source = tmp / "growth.harness"
        source.write_text(SPEC, encoding="utf-8")
        result = check([source])
        assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
        if url.startswith("sqlite:///"):
            store: Any = SQLiteStore(url[len("sqlite:///") :])
        else:
            from harnessc.runtime.log.postgres import PostgresStore

            store = PostgresStore(url)
        h = Harness(result.model, store=store)
        h.bind("job.run", lambda args: {"n": args["n"]})
        h.workflows.configure(url, poll_s=0.05)
        try:
            ids = {}
            for name in ("long", "fan"):
                run = h.workflows.create(name, {}, actor={"user": "u-1", "role": "ops"}, start=True)
                assert h.workflows.wait(run, timeout_s=600)["status"] == "completed"
                ids[name] = run
            yield h, url, ids
        finally:
            h.workflows.close()
            store.close()


@pytest.fixture
def ran(runs: tuple[Harness, str, dict[str, str]]) -> tuple[Harness, str, str]:
    """The run of `long`: its harness, its store's URL, its id."""
    h, url, ids = runs
    return h, url, ids["long"]


@pytest.fixture
def fanned(runs: tuple[Harness, str, dict[str, str]]) -> tuple[Harness, str, str]:
    """The run of `fan`: its harness, its store's URL, its id."""
    h, url, ids = runs
    return h, url, ids["fan"]


def _edges(sizes: dict[int, int]) -> tuple[int, int]:
    assert sorted(sizes) == list(range(1, STEPS + 1))
    first = sum(sizes[i] for i in range(1, EDGE + 1))
    last = sum(sizes[i] for i in range(STEPS - EDGE + 1, STEPS + 1))
    return first, last


def test_the_log_bytes_of_a_step_do_not_grow_with_its_number(
    ran: tuple[Harness, str, str],
) -> None:
    h, _, run = ran
    sizes: dict[int, int] = {}
    for e in h.store.read():
        if e.stream.startswith(f"workflow:{run}/s"):
            step = int(e.stream.rsplit("/s", 1)[1].split("#")[0])
            sizes[step] = sizes.get(step, 0) + len(e.payload_json.encode("utf-8"))
    first, last = _edges(sizes)
    # the step's number, its result's digits and the step it refers to differ, nothing else
    assert last <= first * 1.1, (first, last)


def test_the_checkpoint_of_a_step_does_not_grow_with_its_number(
    ran: tuple[Harness, str, str],
) -> None:
    _, url, run = ran
    rows = _dbos(
        url,
        lambda _, schema, mark: (
            f"SELECT function_name, output FROM {schema}operation_outputs "
            f"WHERE workflow_uuid = {mark}"
        ),
        (run,),
    )
    sizes: dict[int, int] = {}
    for name, output in rows:
        if not name.startswith("call:s"):
            continue
        step = int(name[len("call:s") :].split("#")[0])
        checkpoint: dict[str, Any] = json.loads(output)
        sizes[step] = len(json.dumps(checkpoint, separators=(",", ":")).encode("utf-8"))
    first, last = _edges(sizes)
    assert last <= first * 1.1, (first, last)


def test_a_step_seeds_what_changed_and_refers_to_the_step_before(
    ran: tuple[Harness, str, str],
) -> None:
    """Each step's sources hold the result of the step just before and refer to that step's
    sources; resolved, they are every earlier step's result, as the step's policy saw them."""
    h, _, run = ran
    seeded = {
        e.stream: e.payload
        for e in h.store.read()
        if e.stream.startswith(f"workflow:{run}/s") and e.type == SOURCES
    }
    by_step = {int(stream.rsplit("/s", 1)[1].split("#")[0]): stream for stream in seeded}
    assert sorted(by_step) == list(range(2, STEPS + 1))  # the first step has no sources
    assert "after" not in seeded[by_step[2]]
    chain = SourcesChain(h.store)
    for i in range(3, STEPS + 1):
        payload = seeded[by_step[i]]
        assert payload["after"] == by_step[i - 1]
        assert [r["step"] for r in payload["results"]] == [f"s{i - 1}"]
        whole = chain.resolve(payload)
        assert sorted(r["data"]["n"] for r in whole["results"]) == list(range(1, i))


def _group(step: str) -> int:
    """The group of a step of `fan` (`b<g>x<k>`, `j<g>`)."""
    return int(step[1:].split("x")[0])


def _fan_edges(sizes: dict[int, int]) -> tuple[int, int]:
    assert sorted(sizes) == list(range(1, GROUPS + 1)), sorted(sizes)
    return sum(sizes[g] for g in range(1, 6)), sum(sizes[g] for g in range(GROUPS - 4, GROUPS + 1))


Query = Callable[[Callable[[str], str], str, str], str]
"""A query of DBOS's tables, from how the database sizes a column in bytes, the schema of DBOS's
tables (with its dot) and a parameter's placeholder."""


def _dbos(url: str, query: Query, params: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The rows of `query` in DBOS's system database for the store at `url`."""
    from harnessc.runtime.workflows.durable import system_database_url

    system = system_database_url(url)
    if system.startswith("sqlite:///"):
        conn: Any = sqlite3.connect(system[len("sqlite:///") :])
        text = query(lambda c: f"coalesce(length(CAST({c} AS BLOB)), 0)", "", "?")
    else:
        import psycopg

        conn = psycopg.connect(system)
        text = query(lambda c: f"coalesce(octet_length({c}::text), 0)", "dbos.", "%s")
    try:
        return list(conn.execute(text, params).fetchall())
    finally:
        conn.close()


def _dbos_rows(url: str, run: str) -> list[tuple[str, str, int]]:
    """The bytes DBOS keeps of each child workflow of `run` (a parallel branch): its input and
    output, and each of its steps' checkpointed output, as (workflow, what, bytes)."""
    rows = _dbos(
        url,
        lambda size, schema, mark: (
            f"SELECT workflow_uuid, 'input', {size('inputs')} FROM {schema}workflow_status "
            f"WHERE workflow_uuid LIKE {mark} UNION ALL "
            f"SELECT workflow_uuid, 'output', {size('output')} FROM {schema}workflow_status "
            f"WHERE workflow_uuid LIKE {mark} UNION ALL "
            f"SELECT workflow_uuid, function_name, {size('output')} FROM {schema}operation_outputs "
            f"WHERE workflow_uuid LIKE {mark}"
        ),
        (run + "::%",) * 3,
    )
    return [(str(w), str(what), int(n)) for w, what, n in rows]


def test_the_log_bytes_of_a_branch_do_not_grow_with_its_number(
    fanned: tuple[Harness, str, str],
) -> None:
    """A parallel branch's steps (its sources too: by reference, like a step in sequence) and
    the join after them write as many bytes at the run's end as at its start."""
    h, _, run = fanned
    sizes: dict[int, int] = {}
    sources = 0
    for e in h.store.read():
        if not e.stream.startswith(f"workflow:{run}/") or "~" in e.stream:
            continue
        step = e.stream.split("/", 1)[1].split("#")[0]
        if step == "j0":
            continue
        sizes[_group(step)] = sizes.get(_group(step), 0) + len(e.payload_json.encode("utf-8"))
        if e.type == SOURCES and step.startswith("b") and _group(step) > 1:
            assert "after" in e.payload, step  # by reference, never whole
            sources += 1
    assert sources == 3 * (GROUPS - 1)
    first, last = _fan_edges(sizes)
    assert last <= first * 1.1, (first, last)


def test_a_branch_keeps_what_it_needs_in_dbos_not_the_run(
    fanned: tuple[Harness, str, str],
) -> None:
    """DBOS keeps of a parallel branch (its child workflow's input, output and checkpoints) as
    many bytes at the run's end as at its start: its input holds its own step's IR and the
    values it reads, not the run's IR nor every value so far."""
    h, url, run = fanned
    rows = _dbos_rows(url, run)
    sizes: dict[int, int] = {}
    for workflow, _, n in rows:
        group = _group(workflow.rsplit("::", 1)[1])
        sizes[group] = sizes.get(group, 0) + n
    assert len({w for w, _, _ in rows}) == 3 * GROUPS
    first, last = _fan_edges(sizes)
    assert last <= first * 1.1, (first, last)
    whole_ir = len(json.dumps(h.spec.workflows["growth.fan"].model_dump(mode="json")))
    biggest = max(n for _, what, n in rows if what == "input")
    assert biggest * 20 < whole_ir, (biggest, whole_ir)


def test_a_branch_sees_every_earlier_result_through_its_reference(
    fanned: tuple[Harness, str, str],
) -> None:
    """Resolved, the sources of each branch of the last group are the result of every call
    step of the run before the group, as with its sources whole."""
    h, _, run = fanned
    chain = SourcesChain(h.store)
    last = {
        e.stream: e.payload
        for e in h.store.read()
        if e.stream.startswith(f"workflow:{run}/b{GROUPS}x") and e.type == SOURCES
    }
    assert len(last) == 3
    before = sorted(
        [10 * g for g in range(GROUPS)] + [10 * g + k for g in range(1, GROUPS) for k in (1, 2, 3)]
    )
    for payload in last.values():
        assert [r["step"] for r in payload["results"]] == [f"j{GROUPS - 1}"]
        assert sorted(r["data"]["n"] for r in chain.resolve(payload)["results"]) == before
