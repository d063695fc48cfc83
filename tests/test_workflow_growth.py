"""What a workflow step writes does not grow with the step's number: the 180th to 200th steps of
a run write as many bytes as its first 20, in our log and in DBOS's checkpoints."""

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


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, Path, str]]:
    """One run of `long` on its own SQLite file, with DBOS's beside it."""
    tmp = tmp_path_factory.mktemp("growth")
    source = tmp / "growth.harness"
    source.write_text(SPEC, encoding="utf-8")
    result = check([source])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    h = Harness(result.model, store=SQLiteStore(tmp / "harness.db"))
    h.bind("job.run", lambda args: {"n": args["n"]})
    h.workflows.configure(f"sqlite:///{tmp / 'harness.db'}", poll_s=0.05)
    try:
        run = h.workflows.create("long", {}, actor={"user": "u-1", "role": "ops"}, start=True)
        assert h.workflows.wait(run, timeout_s=300)["status"] == "completed"
        yield h, tmp, run
    finally:
        h.workflows.close()


def _edges(sizes: dict[int, int]) -> tuple[int, int]:
    assert sorted(sizes) == list(range(1, STEPS + 1))
    first = sum(sizes[i] for i in range(1, EDGE + 1))
    last = sum(sizes[i] for i in range(STEPS - EDGE + 1, STEPS + 1))
    return first, last


def test_the_log_bytes_of_a_step_do_not_grow_with_its_number(
    ran: tuple[Harness, Path, str],
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
    ran: tuple[Harness, Path, str],
) -> None:
    _, tmp, run = ran
    conn = sqlite3.connect(tmp / "harness.db.dbos")
    try:
        rows = conn.execute(
            "SELECT function_name, output FROM operation_outputs WHERE workflow_uuid = ?", (run,)
        ).fetchall()
    finally:
        conn.close()
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
    ran: tuple[Harness, Path, str],
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
