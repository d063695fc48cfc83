"""The run's state a step records (`workflow.state`) is written from parts it made canonical at
earlier steps: its text must stay exactly the canonical JSON of the state, whatever changed."""

from __future__ import annotations

from typing import Any

from harnessc.runtime.model.canonical import canonical_json
from harnessc.runtime.workflows.plan import StateText
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples

_names = st.sampled_from(["a", "b", "s10", "s2", "é", "\U0001f600", "\ue000", "Z"])
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(-1e6, 1e6) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
_change = st.tuples(
    st.sampled_from(["state", "value", "error", "attempts", "artifact", "status", "gate"]),
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


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_names, min_size=1, max_size=5, unique=True), st.lists(_change, max_size=12))
def test_the_state_text_is_the_canonical_json_of_the_state_after_every_step(
    names: list[str], changes: list[tuple[str, str, Any]]
) -> None:
    state = _state(names)
    text = StateText()
    assert text(state) == canonical_json({"state": state})
    for what, name, value in changes:
        record = state["steps"].get(name)
        if what == "artifact":
            state["artifacts"].append({"step": name, "value": value})
        elif what == "status":
            state["status"] = str(value)
        elif what == "gate":
            state["gates"][name] = {"status": "waiting", "preview": value}
        elif record is None:
            state["steps"][name] = {"kind": "call", "state": "running"}
        elif what == "value":
            record["value"] = value  # replaced, as the interpreter does
        elif what == "state":
            record["state"] = str(value)
        else:
            record[what] = value
        # a snapshot, as a step publishes it: fresh records and lists, the same values
        published = {
            **state,
            "steps": {k: dict(v) for k, v in state["steps"].items()},
            "artifacts": list(state["artifacts"]),
        }
        assert text(published) == canonical_json({"state": published})


def test_a_value_of_none_set_on_a_record_and_an_artifact_changed_in_place_are_written() -> None:
    state = _state(["a"])
    text = StateText()
    text(state)
    state["steps"]["a"]["value"] = None
    assert '"a":{"kind":"call","state":"pending","value":null}' in text(state)
    state["artifacts"].append({"step": "a", "value": None})
    text(state)
    state["artifacts"][0].pop("value")
    state["artifacts"][0]["note"] = None
    assert text(state) == canonical_json({"state": state})


def test_a_record_changed_in_place_is_written_again() -> None:
    state = _state(["a", "b"])
    text = StateText()
    text(state)
    state["steps"]["a"]["state"] = "succeeded"
    state["steps"]["a"]["value"] = {"n": 1}
    assert '"a":{"kind":"call","state":"succeeded","value":{"n":1}}' in text(state)
    state["steps"]["a"]["value"] = {"n": 2}
    assert text(state) == canonical_json({"state": state})
