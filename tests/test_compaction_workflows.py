"""Compaction of workflow runs whose steps record their sources by reference: a compaction never
leaves a step in the log referring to one in the archive (it carries the steps referred to), and
`replay --archive` / `why --archive` follow the references into the archive, deciding as on the
whole log."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")

from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness
from harnessc.runtime.judge.history import SourcesChain, SourcesUnresolved
from harnessc.runtime.judge.policy import PolicyEngine
from harnessc.runtime.log import cut
from harnessc.runtime.log.open import open_store
from harnessc.runtime.session.recorded import policies_in, read_decisions

from .test_workflow_sources import PAYEE, SPEC
from .test_workflows_support import until


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The log of a test: a SQLite file, or a database of its own on the PostgreSQL test
    server (where DBOS keeps its tables too)."""
    if request.param == "sqlite":
        yield str(tmp_path / "harness.db")
        return
    pytest.importorskip("psycopg", reason="PostgreSQL needs psycopg")
    from .postgres import ADMIN_URL, SKIP_REASON, fresh_database

    if not ADMIN_URL:
        pytest.skip(SKIP_REASON)
    with fresh_database() as url:
        yield url


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESSC_LOG_KEY", raising=False)
    monkeypatch.delenv("HARNESSC_LOG_KEY_FILE", raising=False)


ASKING = SPEC.replace(
    '  deny payments.send when args.iban from nowhere { reason "the payee appeared nowhere" }\n',
    '  deny payments.send when args.iban from nowhere { reason "the payee appeared nowhere" }\n'
    '  ask payments.send when args.iban == "GB82WEST12345698765432" {\n'
    '    approver role "treasury"\n'
    '    reason "a payment to a customer needs the treasury"\n'
    "  }\n",
)
"""`SPEC`, where paying the customer (`p2`) waits for the treasury's approval."""


def _run(tmp: Path, log: str, workflow: str, spec: str = SPEC) -> tuple[Path, str]:
    """One run of `workflow` on the log `log`, finished: the spec's file, the run's id. Under
    `ASKING`, the run is cancelled while its step `p2` waits for approval."""
    source = tmp / "wsrc.harness"
    source.write_text(spec, encoding="utf-8")
    result = check([source])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    h = Harness(result.model, store=open_store(log))
    h.bind("mail.read", lambda args: {"body": "NL91ABNA0417164300"})
    h.bind("crm.lookup", lambda args: {"iban": "GB82WEST12345698765432"})
    h.bind("job.run", lambda args: {"n": args["n"]})
    h.bind("payments.send", lambda args: {"ok": True})
    h.workflows.configure(log if "://" in log else f"sqlite:///{log}", poll_s=0.05)
    try:
        run = h.workflows.create(
            workflow, {"payee": PAYEE}, actor={"user": "u-1", "role": "ops"}, start=True
        )
        if spec == ASKING:
            waiting = until(lambda: h.workflows.status(run)["pending_gates"], what="p2's gate")
            assert [g["gate"] for g in waiting] == ["p2.approval"]
            assert h.workflows.cancel(run)["status"] == "cancelled"
        else:
            assert h.workflows.wait(run, timeout_s=120)["status"] == "failed"  # p3 is denied
    finally:
        h.workflows.close()
        h.store.close()
    return source, run


def _step(stream: str) -> str:
    return stream.split("/", 1)[1].split("#")[0]


def _decided(store: Any, spec: Any) -> dict[str, tuple[str, str | None]]:
    """Each step's decision, decided again from the log (`read_decisions`)."""
    engine, out = PolicyEngine(spec), {}
    for found in read_decisions(store, spec):
        assert found.context is not None
        d = engine.decide(policies_in(spec, found)[0], found.context)
        out[_step(found.session_id)] = (d.effect, d.rule)
    return out


def _cli(*args: str) -> tuple[int, str, str]:
    """`harnessc ARGS…`: its exit code, output and errors. (Not `capsys`: DBOS, started in a
    test, keeps writing to the `sys.stderr` it found, which `capsys` closes after the test.)"""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _replay(log: str, source: Path, *archives: Path) -> tuple[dict[str, Any], str]:
    args = ["replay", "--log", str(log), "--spec", str(source), "--format", "json"]
    for archive in archives:
        args += ["--archive", str(archive)]
    code, out, err = _cli(*args)
    assert code == 0, err
    return json.loads(out)["totals"], err


def test_a_finished_run_archived_whole_is_replayed_across_the_cut(
    tmp_path: Path, log_url: str
) -> None:
    """A branch-heavy run, finished, compacted to its last event: every stream of it goes to
    the archive. Replayed with the archive, each step's sources resolve through references
    into the archive, and every decision is the same as on the log before the cut."""
    log = log_url
    source, run = _run(tmp_path, log, "fan")
    with open_store(log) as store:
        spec = check([source]).model
        before = _decided(store, spec)
    assert before["p1"] == ("allow", None) and before["p3"][0] == "deny"
    whole, _ = _replay(log, source)
    archive = tmp_path / "archive.jsonl"
    assert (
        _cli("log", "compact", "--log", str(log), "--before", "head", "--to", str(archive))[0] == 0
    )
    with open_store(log) as store:
        assert not [e for e in store.read() if e.stream.startswith(f"workflow:{run}/")]
    archived = cut.read_archive(archive)
    assert any("after" in e.payload for e in archived if e.type == "workflow.sources")

    alone, note = _replay(log, source)
    assert "is archived" in note and alone["decisions"] == 0
    across, note = _replay(log, source, archive)
    assert "archived" not in note
    assert across == whole and across["decisions"] == len(before) == across["unchanged"]
    with open_store(log) as store:
        joined = cut.joined(store, [archive])
    assert _decided(joined, spec) == before

    denied = next(
        e.payload["decision_id"] for e in archived if e.type == "decision" and "/p3" in e.stream
    )
    code, _, err = _cli("why", str(source), "--log", str(log), "--decision", denied)
    assert code == 2 and "is archived" in err
    why = ["why", str(source), "--log", str(log), "--decision", denied, "--archive", str(archive)]
    code, out, err = _cli(*why, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["decision"]["effect"] == "deny"


def _kept_after_the_run(tmp: Path, log: str) -> tuple[Path, str, str, int]:
    """A run of `w` (its steps one after the other, each step's sources referring to the
    step's before) cancelled while its step `p2` waits for approval: the request stays pending
    on `p2`'s stream, which stays in the log at a cut at the run's end (a pending request is
    live), while the run itself is finished."""
    source, run = _run(tmp, log, "w", ASKING)
    with open_store(log) as store:
        head = store.head()[0]
        kept = next(e.stream for e in store.read() if e.stream.startswith(f"workflow:{run}/p2"))
    return source, run, kept, head


def test_a_step_kept_at_a_cut_keeps_the_steps_its_sources_refer_to(
    tmp_path: Path, log_url: str
) -> None:
    """The step that stays refers to the step before it, and that one to its own: the cut
    carries them (and only them), so the log alone resolves the kept step's sources and
    decides it as before; the run's own records go to the archive."""
    log = log_url
    source, run, kept, head = _kept_after_the_run(tmp_path, log)
    spec = check([source]).model
    with open_store(log) as store:
        before = _decided(store, spec)
        whole = SourcesChain(store).whole(kept)
    archive = tmp_path / "archive.jsonl"
    compacted = _cli(
        "log", "compact", "--log", str(log), "--before", str(head), "--to", str(archive)
    )
    assert compacted[0] == 0, compacted
    with open_store(log) as store:
        streams = {_step(e.stream) for e in store.read() if e.stream.startswith(f"workflow:{run}/")}
        # p2 refers to p1, p1 to j2, j2 to j1, j1 to c, c to m: all carried with it
        assert streams == {"m", "c", "j1", "j2", "p1", "p2"}
        assert SourcesChain(store).whole(kept) == whole
        assert len(whole["results"]) == 5
        assert _decided(store, spec) == before
        assert before["p2"][0] == "ask"
    # the run's own records (its start, the gate it waited at, its cancellation) are archived
    archived = {
        _step(e.stream)
        for e in cut.read_archive(archive)
        if e.stream.startswith(f"workflow:{run}/")
    }
    assert {"~start", "~cancel"} <= archived and not archived & streams


def test_a_log_cut_without_the_steps_referred_to_says_where_they_went(
    tmp_path: Path, log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log a compaction cut while leaving a kept step referring to an archived one (as
    compactions did before they carried the steps referred to): reading the kept step's
    sources stops, naming the archive, and never reads them as fewer."""
    log = log_url
    _, _, kept, head = _kept_after_the_run(tmp_path, log)
    monkeypatch.setattr(cut, "referred_streams", lambda kept, refers: set(kept))
    with open_store(log) as store:
        cut.compact(store, before=head, archive=tmp_path / "old.jsonl")
        with pytest.raises(SourcesUnresolved) as stopped:
            SourcesChain(store).whole(kept)
    assert "is archived" in str(stopped.value) and "old.jsonl" in str(stopped.value)
    assert "--archive FILE" in str(stopped.value)


def test_referred_streams_follow_each_reference_back() -> None:
    refers = {"d": "c", "c": "b", "b": "a", "y": "x"}
    assert cut.referred_streams({"d"}, refers) == {"a", "b", "c", "d"}
    assert cut.referred_streams({"y", "b"}, refers) == {"a", "b", "x", "y"}
    assert cut.referred_streams(set(), refers) == set()
