"""The action lifecycle: the allowed transitions, the refusal of every other one, and the events
each transition leaves."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest
from harnessc.runtime.log.projections import Projections
from harnessc.runtime.log.store import MemoryStore, SQLiteStore
from harnessc.runtime.model import Tool
from harnessc.runtime.session import lifecycle
from harnessc.runtime.session.lifecycle import (
    TERMINAL,
    TRANSITIONS,
    Action,
    ActionState,
    IllegalTransitionError,
    can_transition,
)
from hypothesis import given
from hypothesis import strategies as st

S = ActionState
TOOL = Tool(id="change.create", wire_name="change_create", version=3)

# The table as docs and users read it; the code must say exactly this.
DOCUMENTED = {
    "REQUESTED": {"VALIDATED", "FAILED", "CANCELLED"},
    "VALIDATED": {"AUTHORIZED", "WAITING_APPROVAL", "FAILED", "CANCELLED"},
    "WAITING_APPROVAL": {"AUTHORIZED", "CANCELLED"},
    "AUTHORIZED": {"RUNNING", "CANCELLED"},
    "RUNNING": {"SUCCEEDED", "FAILED", "ACCEPTED", "CANCELLED", "UNKNOWN"},
    "ACCEPTED": {"WAITING_RESULT", "FAILED", "CANCELLED"},
    "WAITING_RESULT": {"SUCCEEDED", "FAILED", "CANCELLED"},
    "SUCCEEDED": set(),
    "FAILED": set(),
    "CANCELLED": set(),
    "UNKNOWN": set(),
}


def test_the_transition_table_is_the_documented_one() -> None:
    assert {a.value: {b.value for b in bs} for a, bs in TRANSITIONS.items()} == DOCUMENTED
    assert {s.value for s in TERMINAL} == {"SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"}


def test_every_open_state_can_be_cancelled_and_terminal_states_are_final() -> None:
    for state in ActionState:
        assert can_transition(state, S.CANCELLED) == (state not in TERMINAL)


def test_nothing_runs_without_authorization() -> None:
    assert {a for a, bs in TRANSITIONS.items() if S.RUNNING in bs} == {S.AUTHORIZED}
    assert {a for a, bs in TRANSITIONS.items() if S.AUTHORIZED in bs} == {
        S.VALIDATED,
        S.WAITING_APPROVAL,
    }


def test_every_state_is_reachable() -> None:
    reached = {S.REQUESTED}
    frontier = [S.REQUESTED]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()]:
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    assert reached == set(ActionState)


def action_in(store: MemoryStore, state: ActionState) -> Action:
    """An action driven to `state` along a shortest legal path."""
    paths: dict[ActionState, list[ActionState]] = {S.REQUESTED: []}
    queue = [S.REQUESTED]
    while queue:
        cur = queue.pop(0)
        for nxt in sorted(TRANSITIONS[cur]):
            if nxt not in paths:
                paths[nxt] = [*paths[cur], nxt]
                queue.append(nxt)
    a = Action.request(store, "s-1", TOOL, "call-1", {"service": "api"})
    for step in paths[state]:
        a.transition(step)
    return a


ILLEGAL = [(a, b) for a in ActionState for b in ActionState if b not in TRANSITIONS[a]]


@given(st.sampled_from(ILLEGAL))
def test_every_illegal_transition_is_refused_and_records_nothing(
    pair: tuple[ActionState, ActionState],
) -> None:
    start, to = pair
    store = MemoryStore()
    a = action_in(store, start)
    head = store.head()
    with pytest.raises(IllegalTransitionError) as err:
        a.transition(to)
    assert (err.value.code, err.value.from_state, err.value.to_state) == (
        "illegal-transition",
        start,
        to,
    )
    assert err.value.to_dict()["from"] == start.value
    assert store.head() == head
    assert a.state == start


def test_the_refusal_says_what_was_allowed() -> None:
    store = MemoryStore()
    a = action_in(store, S.WAITING_APPROVAL)
    with pytest.raises(IllegalTransitionError) as err:
        a.transition("RUNNING")
    assert str(err.value) == (
        "call `call-1` cannot go from WAITING_APPROVAL to RUNNING; "
        "from WAITING_APPROVAL it may go to one of AUTHORIZED, CANCELLED"
    )
    done = action_in(MemoryStore(), S.SUCCEEDED)
    with pytest.raises(IllegalTransitionError, match="it may go to nothing: it is terminal"):
        done.cancel("too late")


@given(st.lists(st.integers(0, 100), min_size=10, max_size=10))
def test_random_legal_walks_end_terminal(choices: list[int]) -> None:
    store = MemoryStore()
    a = Action.request(store, "s-1", TOOL, "call-1", {"service": "api"})
    walk = [S.REQUESTED]
    for choice in choices:
        if a.terminal:
            break
        options = sorted(TRANSITIONS[a.state])
        a.transition(options[choice % len(options)])
        walk.append(a.state)
    # the longest path (REQUESTED … WAITING_RESULT → end) has 7 moves: 10 choices always finish
    assert a.terminal
    assert len(walk) <= 8
    events = store.read()
    assert [e.payload["to"] for e in events] == [s.value for s in walk]
    assert [e.payload["from"] for e in events] == [None, *(s.value for s in walk[:-1])]
    assert Projections.rebuild(events).calls["call-1"].state == a.state.value


def test_each_transition_appends_one_event_with_its_details(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "e.db") as store:
        a = Action.request(
            store, "s-1", TOOL, "call-1", {"service": "api"}, execution={"cwd": "/r"}
        )
        a.transition(S.VALIDATED)
        a.transition("AUTHORIZED", decision_id="d-1")  # a state may be given by name
        a.transition(S.RUNNING)
        a.transition(S.ACCEPTED, external_id="job-9")
        a.transition(S.WAITING_RESULT)
        a.transition(S.FAILED, reason="the job timed out")
        events = store.read()
    assert [(e.kind, e.type) for e in events] == [("Tool", "action.transition")] * 7
    first = events[0].payload
    assert (first["tool_id"], first["tool_version"], first["args"]) == (
        "change.create",
        3,
        {"service": "api"},
    )
    assert len(first["input_hash"]) == 64
    assert events[2].payload["decision_id"] == "d-1"
    assert events[4].payload["external_id"] == "job-9"
    assert events[6].payload["reason"] == "the job timed out"
    assert a.position == events[-1].position


def test_an_action_is_picked_up_again_from_the_log(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    with SQLiteStore(path) as store:
        a = Action.request(store, "s-1", TOOL, "call-1", {"service": "api"})
        a.transition(S.VALIDATED)
        a.transition(S.WAITING_APPROVAL)
        Action.request(store, "s-1", TOOL, "call-2", {"service": "web"}).cancel("superseded")
    with SQLiteStore(path) as store:
        again = Action.load(store, "s-1", "call-1", tool=TOOL)
        assert again is not None
        assert (again.state, again.tool_id) == (S.WAITING_APPROVAL, "change.create")
        again.transition(S.AUTHORIZED)
        assert Action.load(store, "s-1", "call-2") is not None
        assert Action.load(store, "s-1", "call-3") is None
        assert store.verify().ok


def test_module_examples_run() -> None:
    assert doctest.testmod(lifecycle).failed == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_never_repeats_its_parents_ids() -> None:
    # ids are read from the operating system in blocks: a child must not reuse the parent's
    lifecycle.random_hex()  # the parent now holds a block of ids it has not handed out
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without running the parent's cleanup
        os.close(read)
        os.write(write, " ".join(lifecycle.random_hex() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {lifecycle.random_hex() for _ in range(8)}
    assert len(child) == 8
    assert not child & parent
