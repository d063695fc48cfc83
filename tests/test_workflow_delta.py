"""A workflow step records what it changed in the run's state (`workflow.delta`), not the run so
far: the state is the newest whole `workflow.state` with every delta after it applied, and a log
written when every step recorded the whole state reads as it did."""

from __future__ import annotations

import json
from typing import Any

from harnessc.runtime import MemoryStore
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.model.canonical import canonical_json
from harnessc.runtime.workflows.plan import (
    DELTA_EVENT,
    STATE_EVENT,
    apply_delta,
    own_state,
    recorded,
    run_state,
    state_delta,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples

_names = st.sampled_from(["a", "b", "s10", "s2", "é", "\U0001f600", "Z"])
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
_change = st.tuples(
    st.sampled_from(
        ["state", "value", "error", "attempts", "artifact", "status", "outcome", "gate", "ungate"]
    ),
    _names,
    _json,
)


def _state(names: list[str]) -> dict[str, Any]:
    return {
        "workflow": "w",
        "version": "v1",
        "status": "running",
        "steps": {n: {"kind": "call", "state": "pending"} for n in names},
        "order": list(names),
        "gates": {},
        "artifacts": [],
        "outcome": None,
        "error": None,
    }


def _change_state(state: dict[str, Any], what: str, name: str, value: Any) -> None:
    """One change as the interpreter makes it: records changed in place, values replaced,
    artifacts appended, a reopened gate removed."""
    record = state["steps"].get(name)
    if what == "artifact":
        state["artifacts"].append({"step": name, "value": value})
    elif what == "status":
        state["status"] = str(value)
    elif what == "outcome":
        state["outcome"] = value
    elif what == "gate":
        state["gates"][name] = {"status": "waiting", "preview": value}
    elif what == "ungate":
        state["gates"].pop(name, None)
    elif record is None:
        state["steps"][name] = {"kind": "call", "state": "running"}
    elif what == "value":
        record["value"] = value
    elif what == "state":
        record["state"] = str(value)
    else:
        record[what] = value


def _published(state: dict[str, Any]) -> dict[str, Any]:
    """A snapshot, as a step publishes it: fresh records and lists, the same values."""
    return {
        **state,
        "steps": {k: dict(v) for k, v in state["steps"].items()},
        "gates": {k: dict(v) for k, v in state["gates"].items()},
        "artifacts": list(state["artifacts"]),
        "order": list(state["order"]),
    }


def _through_the_log(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload as a reader finds it: its canonical JSON, parsed."""
    parsed: dict[str, Any] = json.loads(canonical_json(payload))
    return parsed


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(_names, min_size=1, max_size=5, unique=True),
    st.lists(st.lists(_change, max_size=4), max_size=10),
)
def test_the_deltas_of_a_run_rebuild_every_state_it_published(
    names: list[str], steps: list[list[tuple[str, str, Any]]]
) -> None:
    state = _state(names)
    shown = own_state(_published(state))  # the writer's view: what the log holds so far
    read = _through_the_log({"state": _published(state)})["state"]  # a reader's
    for changes in steps:
        for change in changes:
            _change_state(state, *change)
        now = _published(state)
        delta = state_delta(shown, now)
        assert delta is not None  # records changed, artifacts appended: always a delta
        apply_delta(shown, delta)
        apply_delta(read, _through_the_log({"delta": delta})["delta"])
        assert shown == now
        assert _through_the_log({"state": read}) == _through_the_log({"state": now})


def test_a_delta_holds_only_what_changed() -> None:
    before = _published(_state(["a", "b"]))
    before["artifacts"] = [{"step": "a", "value": {"n": 1}}]
    after = _published(before)
    after["steps"]["b"] = {"kind": "call", "state": "succeeded", "value": {"n": 2}}
    after["artifacts"].append({"step": "b", "value": {"n": 2}})
    after["gates"]["g"] = {"status": "waiting"}
    assert state_delta(before, after) == {
        "steps": {"b": {"kind": "call", "state": "succeeded", "value": {"n": 2}}},
        "artifacts": [{"step": "b", "value": {"n": 2}}],
        "gates": {"g": {"status": "waiting"}},
    }
    assert state_delta(after, _published(after)) == {}


def test_a_change_a_delta_cannot_say_records_the_whole_state() -> None:
    before = _published(_state(["a"]))
    before["artifacts"] = [{"step": "a", "value": 1}]
    rewritten = _published(before)
    rewritten["artifacts"] = [{"step": "a", "value": 2}]  # not an append
    assert state_delta(before, rewritten) is None
    fewer = _published(before)
    del fewer["error"]
    assert state_delta(before, fewer) is None


def test_a_run_reads_as_its_first_whole_state_with_each_change_after_it() -> None:
    """What the interpreter writes: the whole state first, a change per step after it, and
    the whole state again where a delta cannot say the change."""
    store = MemoryStore()
    state = _state(["a", "b"])
    shown: dict[str, Any] | None = None
    changes: list[tuple[str, Any]] = [
        ("a", {"n": 1}),
        ("b", {"n": 2}),
        ("rewrite", None),
        ("b", {"n": 3}),
    ]
    for n, (name, value) in enumerate([("~start", None), *changes]):
        if name == "rewrite":
            state["artifacts"] = [{"step": "a", "value": "archived"}]
        elif name != "~start":
            state["steps"][name] = {"kind": "call", "state": "succeeded", "value": value}
            state["artifacts"].append({"step": name, "value": value})
        now = _published(state)
        delta = None if shown is None else state_delta(shown, now)
        payload = {"state": now} if delta is None else {"delta": delta}
        assert ("state" in payload) == (n in (0, 3))
        shown = recorded(shown, payload)
        store.append(NewEvent(f"workflow:new-1/{name}#1", "State", DELTA_EVENT, payload))
        assert run_state(store, "new-1") == _through_the_log({"state": now})["state"]
    assert run_state(store, "new-2") is None


# -- logs written before deltas -----------------------------------------------------------------


def _old_shaped_run(store: MemoryStore, run: str, steps: int) -> list[dict[str, Any]]:
    """Events as a run of six steps wrote them before `workflow.delta`, up to its step `steps`:
    every step's stream records the run's whole state. Returns the states, in order."""
    state = _state([f"s{i}" for i in range(1, 7)])
    names = [f"s{i}" for i in range(1, steps + 1)]
    states = []
    for i, name in enumerate(["~start", *names]):
        if 1 <= i <= steps:
            state["steps"][name].update(state="succeeded", value={"n": i})
            state["artifacts"].append({"step": name, "value": {"n": i}})
        published = _published(state)
        states.append(published)
        stream = f"workflow:{run}/{name}" + ("#1" if name.startswith("s") else "")
        store.append_many(
            [
                NewEvent(stream, "State", STATE_EVENT, {"state": published}),
                NewEvent(stream, "State", "workflow.step", {"outcome": {"status": "ok"}}),
            ]
        )
    return states


def test_a_log_written_with_whole_states_reads_as_its_newest_state() -> None:
    store = MemoryStore()
    states = _old_shaped_run(store, "old-1", 6)
    assert run_state(store, "old-1") == _through_the_log({"state": states[-1]})["state"]


def test_a_run_resumed_by_this_version_reads_its_old_states_then_its_deltas() -> None:
    """An old run resumed here: its first steps recorded whole states, the later ones deltas
    against the newest of them."""
    store = MemoryStore()
    states = _old_shaped_run(store, "mixed-1", 3)
    # the writer's view, from the whole state the last old step checkpointed (`_Run.took`)
    shown = own_state(_through_the_log({"state": states[-1]})["state"])
    state = _published(states[-1])
    for i in range(4, 7):
        state = _published(state)
        state["steps"][f"s{i}"] = {"kind": "call", "state": "succeeded", "value": {"n": i}}
        if i == 6:
            state["status"] = "completed"
        state["artifacts"].append({"step": f"s{i}", "value": {"n": i}})
        delta = state_delta(shown, state)
        assert delta is not None
        apply_delta(shown, delta)
        store.append(NewEvent(f"workflow:mixed-1/s{i}#1", "State", DELTA_EVENT, {"delta": delta}))
    found = run_state(store, "mixed-1")
    assert found == _through_the_log({"state": state})["state"]
    assert found is not None and [a["step"] for a in found["artifacts"]] == [
        "s1",
        "s2",
        "s3",
        "s4",
        "s5",
        "s6",
    ]
