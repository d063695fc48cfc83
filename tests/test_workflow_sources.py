"""A workflow step's sources recorded by reference (`workflow.sources` holding what changed since
the run's step before, and that step's stream) decide every provenance check of a run as the
sources recorded whole did, live and read back from the log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.judge.policy import PolicyEngine
from harnessc.runtime.session.recorded import policies_in, read_decisions
from harnessc.runtime.workflows.steps import RunSources

SPEC = """\
harness wsrc { version "1.0.0" }
tool mail.read {
  summary "Read a mail."
  use_when "A step reads a mail."
  effects read
  input { id: string }
  output { body: string }
  trust untrusted
}
tool crm.lookup {
  summary "Look a customer up."
  use_when "A step looks a customer up."
  effects read
  input { name: string }
  output { iban: string }
  trust trusted
}
tool job.run {
  summary "Run a job."
  use_when "A step runs a job."
  effects write reversible
  input { n: int }
  output { n: int }
}
tool payments.send {
  summary "Send a payment."
  use_when "A step pays."
  effects write external
  input { iban: string }
  output { ok: bool }
}
surface tools {
  expose mail.*
  expose crm.*
  expose job.*
  expose payments.*
}
policy pay {
  default allow
  deny payments.send when args.iban from untrusted only { reason "the payee came from a mail" }
  deny payments.send when args.iban from nowhere { reason "the payee appeared nowhere" }
}
agent runner {
  surface tools
  policy pay
}
workflow w {
  agent runner
  input { payee: string }
  step m = call mail.read(id: "m1")
  step c = call crm.lookup(name: "acme") after m
  step j1 = call job.run(n: 1) after c
  step j2 = call job.run(n: 2) after j1
  step p1 = call payments.send(iban: input.payee) after j2
  step p2 = call payments.send(iban: c.iban) after p1
  step p3 = call payments.send(iban: m.body) after p2
}
workflow fan {
  agent runner
  input { payee: string }
  step m = call mail.read(id: "m1")
  step c = call crm.lookup(name: "acme")
  step j1 = call job.run(n: 1) after m, c
  step j2 = call job.run(n: 2) after m, c
  step j3 = call job.run(n: 3) after j1, j2
  step p1 = call payments.send(iban: input.payee) after j3
  step p2 = call payments.send(iban: c.iban) after j3
  step p3 = call payments.send(iban: m.body) after j3
}
"""
PAYEE = "DE89370400440532013000"


def _run(tmp: Path, workflow: str = "w") -> dict[str, Any]:
    """One run of `w` on its own SQLite file: how it ended, each step's recorded decision, the
    same decided again from the log, and each step's `workflow.sources`."""
    source = tmp / "wsrc.harness"
    source.write_text(SPEC, encoding="utf-8")
    result = check([source])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    h = Harness(result.model, store=SQLiteStore(tmp / "harness.db"))
    h.bind("mail.read", lambda args: {"body": "NL91ABNA0417164300"})
    h.bind("crm.lookup", lambda args: {"iban": "GB82WEST12345698765432"})
    h.bind("job.run", lambda args: {"n": args["n"]})
    h.bind("payments.send", lambda args: {"ok": True})
    h.workflows.configure(f"sqlite:///{tmp / 'harness.db'}", poll_s=0.05)
    try:
        run = h.workflows.create(
            workflow, {"payee": PAYEE}, actor={"user": "u-1", "role": "ops"}, start=True
        )
        ended = h.workflows.wait(run, timeout_s=120)
    finally:
        h.workflows.close()

    def step(stream: str) -> str:
        return stream.split("/", 1)[1].split("#")[0]

    live = {
        step(e.stream): (e.payload["effect"], e.payload.get("rule"))
        for e in h.store.read()
        if e.type == "decision"
    }
    engine, spec = PolicyEngine(h.spec), h.spec
    again = {}
    for found in read_decisions(h.store, spec):
        assert found.context is not None
        d = engine.decide(policies_in(spec, found)[0], found.context)
        again[step(found.session_id)] = (d.effect, d.rule)
    sources = {step(e.stream): e.payload for e in h.store.read() if e.type == "workflow.sources"}
    outcome = {k: ended[k] for k in ("status", "outcome", "error", "steps", "artifacts")}
    return {
        "status": ended["status"],
        "ended": outcome,
        "live": live,
        "again": again,
        "sources": sources,
    }


@pytest.fixture(scope="module")
def fans(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], ...]]:
    """`fan`, whose steps run as parallel branches (two, two, one, three), by reference and
    whole."""
    by_reference = _run(tmp_path_factory.mktemp("fan-reference"), "fan")
    patch = pytest.MonkeyPatch()
    patch.setattr(RunSources, "seeded", lambda self, stream, sent=None: None)
    try:
        whole = _run(tmp_path_factory.mktemp("fan-whole"), "fan")
    finally:
        patch.undo()
    yield by_reference, whole


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], ...]]:
    by_reference = _run(tmp_path_factory.mktemp("reference"))
    # as before: no step refers to another's sources, each records them whole
    patch = pytest.MonkeyPatch()
    patch.setattr(RunSources, "seeded", lambda self, stream, sent=None: None)
    try:
        whole = _run(tmp_path_factory.mktemp("whole"))
    finally:
        patch.undo()
    yield by_reference, whole


def test_the_steps_sources_are_recorded_by_reference(runs: tuple[dict[str, Any], ...]) -> None:
    by_reference, whole = runs
    seeded = by_reference["sources"]
    assert "after" not in seeded["m"] and seeded["m"]["input"] == {"payee": PAYEE}
    for name, before in (("c", "m"), ("j1", "c"), ("p3", "p2")):
        assert seeded[name]["after"].split("/", 1)[1].split("#")[0] == before
        assert [r["step"] for r in seeded[name]["results"]] == [before]
    assert all("after" not in found for found in whole["sources"].values())
    assert len(whole["sources"]["p3"]["results"]) == 6


def test_a_step_decides_its_provenance_checks_as_with_its_sources_whole(
    runs: tuple[dict[str, Any], ...],
) -> None:
    by_reference, whole = runs
    assert by_reference["live"] == whole["live"]
    assert by_reference["again"] == whole["again"] == whole["live"]
    # the payee from the input (the user) and from the CRM (trusted) are paid; from a mail, not
    assert by_reference["live"]["p1"] == ("allow", None)
    assert by_reference["live"]["p2"] == ("allow", None)
    assert by_reference["live"]["p3"][0] == "deny"
    assert by_reference["status"] == whole["status"] == "failed"


def test_parallel_branches_refer_to_the_runs_sources(fans: tuple[dict[str, Any], ...]) -> None:
    """A branch's sources refer to those of the run's step before (the first branch of the
    wave before, its sources as the wave started) and hold what changed since."""
    by_reference, whole = fans
    seeded = by_reference["sources"]
    assert "after" not in seeded["m"] and "after" not in seeded["c"]  # nothing to refer to yet
    for name in ("j1", "j2"):
        assert seeded[name]["after"].split("/", 1)[1] == "m#1"
        assert [r["step"] for r in seeded[name]["results"]] == ["c", "m"]
    assert seeded["j3"]["after"].split("/", 1)[1] == "j1#1"
    assert [r["step"] for r in seeded["j3"]["results"]] == ["j1", "j2"]
    for name in ("p1", "p2", "p3"):
        assert seeded[name]["after"].split("/", 1)[1] == "j3#1"
        assert [r["step"] for r in seeded[name]["results"]] == ["j3"]
    assert all("after" not in found for found in whole["sources"].values())
    assert len(whole["sources"]["p3"]["results"]) == 5


def test_parallel_branches_decide_and_end_as_with_their_sources_whole(
    fans: tuple[dict[str, Any], ...],
) -> None:
    """Differential: the same branch-heavy run, its sources by reference and whole: the same
    decisions live, the same decided again from the log, the same outcome."""
    by_reference, whole = fans
    assert by_reference["live"] == whole["live"]
    assert by_reference["again"] == whole["again"] == whole["live"]
    assert by_reference["ended"] == whole["ended"]
    assert by_reference["live"]["p1"] == ("allow", None)
    assert by_reference["live"]["p2"] == ("allow", None)
    assert by_reference["live"]["p3"][0] == "deny"
    assert by_reference["status"] == "failed"


def test_sources_handed_by_reference_make_the_same_whole() -> None:
    """What a run hands a parallel branch (`reference`: what changed since its last seeded
    step, what was dropped) made whole from that step's sources read back (`complete`) is the
    run's sources as they are; the branch records only what changed, which resolves to it."""
    from harnessc.runtime.judge.history import SourcesChain
    from harnessc.runtime.log.memory import MemoryStore

    run = RunSources({"payee": PAYEE})
    run.add("a", "mail.read", {"body": "x"})
    run.add("b", "job.run", {"n": 1})
    log = MemoryStore()
    log.append_many(run.events("workflow:r/b#1"))
    chain = SourcesChain(log)
    run.seeded("workflow:r/b#1")
    run.discard("a")
    run.add("b", "job.run", {"n": 2})
    run.add("c", "crm.lookup", {"iban": "y"})
    handed = run.reference()
    assert handed == {
        "after": "workflow:r/b#1",
        "dropped": ["a"],
        "steps": {
            "b": {"tool": "job.run", "value": {"n": 2}},
            "c": {"tool": "crm.lookup", "value": {"iban": "y"}},
        },
    }
    branch = RunSources.of(handed)
    assert branch.partial and branch.base == "workflow:r/b#1"
    branch.complete(chain.whole("workflow:r/b#1"))
    assert not branch.partial
    assert branch.whole() == run.whole()
    written = branch.events("workflow:r/d#1")[0].payload
    assert written["after"] == "workflow:r/b#1" and written["dropped"] == ["a"]
    assert [r["step"] for r in written["results"]] == ["b", "c"]
    assert chain.resolve(written) == run.whole()
    # a branch's step replayed from its checkpoint (its sources never made whole here): the
    # next keeps referring to the run's step, which was in the log before the branch started
    replayed = RunSources.of(handed)
    replayed.seeded("workflow:r/d#1")
    assert replayed.partial and replayed.base == "workflow:r/b#1"
    replayed.complete(chain.whole("workflow:r/b#1"))
    assert replayed.whole() == run.whole()
    # a run with nothing to refer to yet hands its sources whole
    fresh = RunSources({"payee": PAYEE})
    fresh.add("a", "mail.read", {"body": "x"})
    whole = RunSources.of(fresh.reference())
    assert not whole.partial and whole.whole() == fresh.whole()
