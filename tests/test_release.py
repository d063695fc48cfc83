"""A harness that serves many sessions keeps only the live ones in memory: a session that ended,
or sat idle past `release_after_s`, is released, and comes back from the log when anything
needs it (`resume`, an operator's answer, `cancel` by action id) with its calls, results and
requests intact; nothing it did runs twice."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from harnessc.runtime.model import Spec

from .test_approvals import Clock, compile_text

# A support desk: agents write notes freely, restart a service only with an operator's approval
# of that exact call, and a lead agent may hand a sub-task to a helper agent.
DESK = """
harness desk { version "1.0.0" }
tool notes.write {
  summary "Write a note on the ticket."
  effects write
  input { ticket: string, text: string }
  output { note_id: string }
}
tool ops.restart {
  summary "Restart a service."
  effects write external
  risk high
  input { service: string }
}
policy desk {
  default deny
  allow notes.write
  operators: ask ops.restart { approver role "ops"; grant once ttl 1h }
}
surface lead_tools { expose notes.*, ops.* }
surface helper_tools { expose notes.* }
agent lead { surface lead_tools; policy desk; delegate helper }
agent helper { surface helper_tools; policy desk }
"""
AGENT = {"user": "u-1", "role": "agent"}
OPS = {"user": "u-9", "role": "ops"}


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("desk"), DESK)


def frozen(result: object) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def counting(h: Harness) -> list[str]:
    runs: list[str] = []

    def write(args: dict[str, str], ctx: object) -> dict[str, str]:
        runs.append(args["text"])
        return {"note_id": f"n-{len(runs)}"}

    h.bind("notes.write", write)
    h.bind("ops.restart", lambda args: runs.append("restart:" + args["service"]) or {})
    return runs


def test_a_released_session_comes_back_from_the_log_and_runs_nothing_twice(
    desk: Spec, tmp_path: Path
) -> None:
    h = Harness(desk, store=SQLiteStore(tmp_path / "log.db"))
    runs = counting(h)
    s = h.session("lead", actor=AGENT, task="t-1")
    call = frozen(s.normalize("notes.write", "c-1", {"ticket": "T-1", "text": "first"}))
    assert s.decide(call).effect == "allow"
    first = s.invoke(call)
    assert first.ran

    assert h.release(s.id)
    assert s.id not in h.sessions
    back = h.resume(s.id)
    assert back is not s and back.id == s.id
    again = back.call("c-1")
    assert again is not None and again.input_hash == call.input_hash
    result = back.invoke(again)
    assert result.data == first.data and runs == ["first"]
    # the released object still works, as a session open in another process would
    assert s.invoke(call).data == first.data and runs == ["first"]
    assert h.verify().ok


def test_sessions_idle_past_the_limit_are_released_and_busy_ones_kept(desk: Spec) -> None:
    clock = Clock()
    h = Harness(desk, clock=clock, release_after_s=600)
    counting(h)
    quiet = h.session("lead", actor=AGENT, task="t-quiet")
    busy = h.session("lead", actor=AGENT, task="t-busy")
    clock.now += timedelta(seconds=400)
    frozen(busy.normalize("notes.write", "c-1", {"ticket": "T-2", "text": "still here"}))
    clock.now += timedelta(seconds=300)
    # opening a session sweeps: `quiet` was untouched for 700 s, `busy` for 300 s
    new = h.session("lead", actor=AGENT, task="t-new")
    assert quiet.id not in h.sessions and busy.id in h.sessions
    clock.now += timedelta(seconds=700)
    assert sorted(h.release_idle()) == sorted([busy.id, new.id])
    assert h.sessions == {}


def test_an_ended_session_is_released_at_once_only_when_release_is_on(desk: Spec) -> None:
    kept = Harness(desk)
    s = kept.session("lead", actor=AGENT, task="t-1")
    s.end()
    assert s.id in kept.sessions  # no release configured: the application decides
    assert kept.release_idle(0) == [s.id]

    h = Harness(desk, release_after_s=3600)
    ended = h.session("lead", actor=AGENT, task="t-1")
    ended.end()
    assert ended.id not in h.sessions
    assert h.resume(ended.id).id == ended.id


def test_a_session_running_a_call_is_never_released(desk: Spec) -> None:
    h = Harness(desk)
    started, finish = threading.Event(), threading.Event()

    def slow(args: dict[str, str]) -> dict[str, str]:
        started.set()
        finish.wait(10)
        return {"note_id": "n-1"}

    h.bind("notes.write", slow)
    s = h.session("lead", actor=AGENT, task="t-1")
    call = frozen(s.normalize("notes.write", "c-1", {"ticket": "T-1", "text": "slow"}))
    s.decide(call)
    worker = threading.Thread(target=s.invoke, args=(call,))
    worker.start()
    try:
        assert started.wait(10)
        assert not h.release(s.id)
        assert h.release_idle(0) == []
        assert s.id in h.sessions
    finally:
        finish.set()
        worker.join(10)
    assert h.release(s.id)


def test_an_operator_answers_and_cancels_the_calls_of_released_sessions(desk: Spec) -> None:
    h = Harness(desk)
    runs = counting(h)
    s = h.session("lead", actor=AGENT, task="t-1")
    restart = frozen(s.normalize("ops.restart", "c-1", {"service": "api"}))
    assert s.decide(restart).effect == "ask"
    request = s.request_approval(restart)
    other = frozen(s.normalize("ops.restart", "c-2", {"service": "db"}))
    s.decide(other)
    s.request_approval(other)
    waiting = s.action_id(other)
    assert waiting is not None
    assert h.release(s.id)

    assert h.approve(request.request_id, by=OPS).status == "approved"
    back = h.sessions[s.id]  # the answer resumed it
    assert back.invoke(frozen(back.call("c-1"))).ran
    assert runs == ["restart:api"]

    assert h.release(s.id)
    cancelled = h.cancel(waiting, by=OPS)  # found by its action id, from the log
    assert not cancelled.ran and runs == ["restart:api"]


def test_a_family_is_released_and_resumed_whole(desk: Spec) -> None:
    h = Harness(desk)
    counting(h)
    lead = h.session("lead", actor=AGENT, task="t-1")
    helper = lead.delegate("Write the summary note.", agent="helper")
    assert not isinstance(helper, type(None)) and hasattr(helper, "normalize")
    note = frozen(helper.normalize("notes.write", "c-1", {"ticket": "T-1", "text": "sum"}))
    helper.decide(note)
    assert helper.invoke(note).ran

    assert not h.release(helper.id)  # a child shares its parent's ledger: never alone
    assert h.release(lead.id)
    assert h.sessions == {}
    # resuming the child first brings its parent back, and each exists once
    child = h.resume(helper.id)
    parent = h.sessions[lead.id]
    assert child.parent is parent and [c.id for c in parent.children] == [helper.id]
    assert h.sessions[helper.id] is child
    assert child.invoke(frozen(child.call("c-1"))).data == {"note_id": "n-1"}
