"""What a parallel branch writes does not grow with its number: a branch-heavy run (three
parallel branches, then a step joining them, 40 times) writes as many bytes per group at its
end as at its start, in our log and in DBOS's tables, on SQLite and PostgreSQL; a branch's
sources refer to the run's, and resolve to every earlier result."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.judge.history import SourcesChain

from .test_workflow_growth import SOURCES, SPEC

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
def fanned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, str, str]]:
    """One run of `fan` (three parallel branches per group, 160 steps) on its own store (a
    SQLite file, or a database of its own on the PostgreSQL test server)."""
    tmp = tmp_path_factory.mktemp("fan")
    for url in _store(request.param, tmp):
        source = tmp / "fan.harness"
        source.write_text(
            SPEC.replace("workflow long {", FAN + "workflow long {"), encoding="utf-8"
        )
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
            run = h.workflows.create("fan", {}, actor={"user": "u-1", "role": "ops"}, start=True)
            assert h.workflows.wait(run, timeout_s=600)["status"] == "completed"
            yield h, url, run
        finally:
            h.workflows.close()
            store.close()


def _group(step: str) -> int:
    """The group of a step of `fan` (`b<g>x<k>`, `j<g>`)."""
    return int(step[1:].split("x")[0])


def _fan_edges(sizes: dict[int, int]) -> tuple[int, int]:
    assert sorted(sizes) == list(range(1, GROUPS + 1)), sorted(sizes)
    return sum(sizes[g] for g in range(1, 6)), sum(sizes[g] for g in range(GROUPS - 4, GROUPS + 1))


def _dbos_rows(url: str, run: str) -> list[tuple[str, str, int]]:
    """The bytes DBOS keeps of each child workflow of `run` (a parallel branch): its input and
    output, and each of its steps' checkpointed output, as (workflow, what, bytes)."""
    from harnessc.runtime.workflows.durable import system_database_url

    system = system_database_url(url)
    if system.startswith("sqlite:///"):
        conn: Any = sqlite3.connect(system[len("sqlite:///") :])
        size, schema, mark = "length(CAST({} AS BLOB))", "", "?"
    else:
        import psycopg

        conn = psycopg.connect(system)
        size, schema, mark = "octet_length({}::text)", "dbos.", "%s"
    inputs = f"coalesce({size.format('inputs')}, 0)"
    outputs = f"coalesce({size.format('output')}, 0)"
    try:
        rows = conn.execute(
            f"SELECT workflow_uuid, 'input', {inputs} FROM {schema}workflow_status "
            f"WHERE workflow_uuid LIKE {mark} UNION ALL "
            f"SELECT workflow_uuid, 'output', {outputs} FROM {schema}workflow_status "
            f"WHERE workflow_uuid LIKE {mark} UNION ALL "
            f"SELECT workflow_uuid, function_name, {outputs} FROM {schema}operation_outputs "
            f"WHERE workflow_uuid LIKE {mark}",
            (run + "::%",) * 3,
        ).fetchall()
    finally:
        conn.close()
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
