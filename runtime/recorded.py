"""The recorded decisions of an event log, each with what it saw, read as a stream.

`read_decisions(store, spec)` reads the store's events in position order, a page at a time
(never the whole log), and folds per session what a decision reads — its agent, skill, actor,
task (with the denials recorded so far), resource, env, facts (the snapshot and every
`facts.updated` / `session.resumed` before the decision, `fold_facts`), the frozen call from
its REQUESTED transition (tool id, normalized arguments, execution parameters, input hash) and,
when `spec` reads session state, the family's provenance and history as of the decision's
position (the `Ledger` fed the family's events before it, its clock at the decision's recorded
time). Each `decision` event becomes a `RecordedDecision`: where it is, who decided what under
which policies, and a `CallContext` ready to decide again (`judge_policies`).

The folding is the runtime's own: session records by `Projections` (as `Harness.resume`
takes a session up), facts by `fold_facts`, the ledger by `Ledger.feed`, execution parameters
by `execution_params`.

A call whose recorded arguments the log redacted (a `secret` field, or the values of an `env`
execution parameter, which are never stored) cannot be decided again faithfully: its
`redacted` names the JSON paths and its `context` is None, as when the call's or the session's
own record is missing from the log (`missing` says which).

>>> from harnessc.runtime.store import MemoryStore
>>> list(read_decisions(MemoryStore()))
[]
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .availability import Facts
from .calls import execution_params
from .events import REDACTED, Event
from .history import (
    FACTS_UPDATED,
    USER_SAID,
    WORKFLOW_INPUT,
    WORKFLOW_STEP_RESULT,
    HistoryTerms,
    Ledger,
    time_ms,
)
from .model import Spec
from .policy import CallContext
from .projections import Projections, SessionView
from .sessions import FACT_EVENTS, fold_facts, session_policies
from .store import EventStore

__all__ = [
    "PAGE",
    "RecordedDecision",
    "RecordedOutcome",
    "policies_in",
    "read_decisions",
    "recorded_decision",
]

PAGE = 5000
"""Events read per page."""

_SESSION_TYPES = ("session.started", "session.resumed", "session.ended", "task.fact")
_LEDGER_TYPES = (USER_SAID, WORKFLOW_INPUT, WORKFLOW_STEP_RESULT)
_TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass(frozen=True, slots=True)
class RecordedOutcome:
    """What a decision decided, as the log records it."""

    effect: str
    rule: str | None
    policy: str | None
    policy_version: str | None
    authorized: bool
    default_used: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "effect": self.effect,
            "rule": self.rule,
            "policy": self.policy,
            "policy_version": self.policy_version,
            "authorized": self.authorized,
        }


@dataclass(frozen=True, slots=True)
class RecordedDecision:
    """One recorded decision and what it saw.

    `position` is the decision event's position (its id in the log), `time` its recorded
    time. `lineage` names the session's agent and skill and those of the sessions it was
    opened from, root first: the policies that judge it under another spec follow from it
    (`policies_in`). `context` is the call as policy saw it, ready to decide; None when it
    cannot be rebuilt faithfully: `redacted` lists the arguments the log withheld (JSON paths,
    `$.token`, `$.execution.env.API_KEY`), `missing` says what record the log lacks
    (`session-not-recorded`, `call-not-recorded`). The context's `ledger` is the family's as
    of this decision until the stream moves on: decide it before drawing the next one.
    """

    position: int
    time: str
    decision_id: str
    session_id: str
    agent: str | None
    skill: str | None
    tool_id: str
    tool_call_id: str
    input_hash: str
    policies: tuple[str, ...]
    """The policies that judged it (recorded)."""
    outcome: RecordedOutcome
    context: CallContext | None
    lineage: tuple[tuple[str | None, str | None], ...] = ()
    redacted: tuple[str, ...] = ()
    missing: str | None = None

    @property
    def replayable(self) -> bool:
        """Whether the call can be decided again as it was (`context` is set)."""
        return self.context is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "time": self.time,
            "decision_id": self.decision_id,
            "session_id": self.session_id,
            "agent": self.agent,
            "skill": self.skill,
            "tool_id": self.tool_id,
            "tool_call_id": self.tool_call_id,
            "input_hash": self.input_hash,
            "policies": list(self.policies),
            "outcome": self.outcome.to_dict(),
            "redacted": list(self.redacted),
            "missing": self.missing,
        }


class _Call:
    """A call's record (its REQUESTED transition), kept until the call ends."""

    __slots__ = ("args", "execution", "key", "redacted")

    def __init__(self, key: str, args: Any, execution: Any) -> None:
        self.key = key
        self.args: Mapping[str, Any] = args if isinstance(args, Mapping) else {}
        self.execution = execution_params(execution if isinstance(execution, Mapping) else None)
        found: list[str] = []
        _redacted(self.args, "$", found)
        env = self.execution.get("env")
        if isinstance(env, Mapping):
            found.extend(f"$.execution.env.{name}" for name, v in env.items() if v == REDACTED)
        self.redacted = tuple(found)


class _Session:
    """What a session's decisions read, as of the position the stream has reached."""

    __slots__ = (
        "actor",
        "calls",
        "env",
        "facts",
        "family",
        "lineage",
        "resource",
        "task",
        "view",
    )

    def __init__(self, view: SessionView, family: str, lineage: tuple[Any, ...]) -> None:
        started = view.started
        self.view = view
        self.family = family
        self.lineage: tuple[tuple[str | None, str | None], ...] = lineage
        self.actor = _frozen(started.get("actor"))
        self.resource = _frozen(started.get("resource"))
        self.env = _frozen(started.get("env"))
        self.facts = Facts.from_json(started.get("facts"))
        self.task: Mapping[str, Any] = {}
        self.calls: dict[str, _Call] = {}
        self.denied()

    def denied(self) -> None:
        """The task as decisions read it: as started, with the denials recorded so far (as
        `Harness.resume` rebuilds it)."""
        task = dict(self.view.started.get("task") or {})
        if self.view.denials:
            task["denials"] = list(self.view.denials)
        self.task = MappingProxyType(task)


def _frozen(value: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(value)) if isinstance(value, Mapping) else MappingProxyType({})


def _redacted(value: Any, path: str, found: list[str]) -> None:
    if value == REDACTED:
        found.append(path)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _redacted(item, f"{path}.{key}", found)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _redacted(item, f"{path}[{i}]", found)


def _pages(
    store: EventStore, types: Sequence[str], moves: Sequence[str], after: int, page: int
) -> Iterator[list[Event]]:
    """The store's events of `types` after `after`, page by page (the store selects them
    when it can, `read_types`; else every event is read and the others dropped)."""
    select = getattr(store, "read_types", None)
    wanted = frozenset(types)
    while True:
        if select is not None:
            found: list[Event] = select(types, after=after, limit=page, moves=moves)
            if not found:
                return
            yield found
            if len(found) < page:
                return
            after = found[-1].position
        else:
            events = store.read(after=after, limit=page)
            if not events:
                return
            yield [e for e in events if e.type in wanted]
            if len(events) < page:
                return
            after = events[-1].position


def read_decisions(
    store: EventStore,
    spec: Spec | None = None,
    *,
    terms: HistoryTerms | None = None,
    after: int = 0,
    page: int = PAGE,
) -> Iterator[RecordedDecision]:
    """Every recorded decision of the log after position `after`, in log order, each with
    its context rebuilt as of its position. `spec` (or its `terms`, `PolicyEngine.terms`)
    is the spec the contexts are for: its history terms are what the ledger keeps; without
    one, or when it reads no session state, contexts carry no ledger.

    Raises what the store raises when the log cannot be read (the decisions before the
    failure have been yielded)."""
    if terms is None and spec is not None:
        terms = HistoryTerms(spec)
    ledgers = terms is not None and terms.read
    types: tuple[str, ...] = ("decision", "action.transition", *_SESSION_TYPES, FACTS_UPDATED)
    moves: tuple[str, ...] = ("REQUESTED", *_TERMINAL)
    if ledgers:
        types += _LEDGER_TYPES
        moves += ("AUTHORIZED",)
    folded = Projections()
    sessions: dict[str, _Session] = {}
    by_action: dict[str, tuple[_Session, str]] = {}
    family_ledgers: dict[str, Ledger] = {}
    loads = json.loads
    for events in _pages(store, types, moves, after, page):
        for event in events:
            kind = event.type
            stream = event.stream
            if kind == "action.transition":
                text = event.payload_json
                if '"to":"REQUESTED"' not in text and not ledgers:
                    # the end of a call: its record is no longer needed
                    ended = by_action.pop(_action_id(text), None)
                    if ended is not None:
                        ended[0].calls.pop(ended[1], None)
                    continue
                p = event.__dict__.get("payload") or loads(text)
                st = sessions.get(stream)
                if p.get("to") == "REQUESTED" and st is not None:
                    key = f"{p.get('tool_call_id')}:{p.get('input_hash')}"
                    st.calls[key] = _Call(key, p.get("args"), p.get("execution"))
                    action = p.get("action_id")
                    if isinstance(action, str):
                        by_action[action] = (st, key)
                elif p.get("to") in _TERMINAL:
                    ended = by_action.pop(p.get("action_id"), None)
                    if ended is not None:
                        ended[0].calls.pop(ended[1], None)
                if ledgers and st is not None:
                    _feed(family_ledgers, st, event, p)
                continue
            if kind == "decision":
                yield _decision(event, loads(event.payload_json), sessions, family_ledgers)
                continue
            p = loads(event.payload_json)
            event.__dict__["payload"] = p  # Event.payload, parsed once
            if kind in _SESSION_TYPES:
                folded.apply(event)
                if kind == "session.started":
                    st = _start(folded.sessions[stream], sessions, terms if ledgers else None)
                    if ledgers:
                        family_ledgers.setdefault(st.family, Ledger(terms))  # type: ignore[arg-type]
                elif kind == "task.fact" and stream in sessions:
                    sessions[stream].denied()
                elif kind == "session.ended":
                    folded.sessions.pop(stream, None)
            st = sessions.get(stream)
            if st is None:
                continue
            if kind in FACT_EVENTS:
                st.facts = fold_facts(st.facts, kind, p)
            if ledgers:
                _feed(family_ledgers, st, event, p)


def _action_id(text: str) -> str:
    """The `action_id` of a transition's canonical text (its first key, when present)."""
    if text.startswith('{"action_id":"'):
        return text[14 : text.index('"', 14)]
    found: Any = json.loads(text).get("action_id")
    return found if isinstance(found, str) else ""


def _start(
    view: SessionView, sessions: dict[str, _Session], terms: HistoryTerms | None
) -> _Session:
    started = view.started
    parent = sessions.get(started.get("parent") or "")
    me = (started.get("agent"), started.get("skill"))
    if parent is not None:
        st = _Session(view, parent.family, (*parent.lineage, me))
    else:
        st = _Session(view, view.session_id, (me,))
    sessions[view.session_id] = st
    return st


def _feed(ledgers: dict[str, Ledger], st: _Session, event: Event, payload: Any) -> None:
    ledger = ledgers.get(st.family)
    if ledger is not None:
        event.__dict__["payload"] = payload
        ledger.feed(event)


def _decision(
    event: Event,
    p: dict[str, Any],
    sessions: dict[str, _Session],
    ledgers: dict[str, Ledger],
) -> RecordedDecision:
    tool_id = str(p.get("tool_id"))
    tool_call_id = str(p.get("tool_call_id"))
    input_hash = str(p.get("input_hash"))
    outcome = RecordedOutcome(
        effect=str(p.get("effect")),
        rule=p.get("rule"),
        policy=p.get("policy"),
        policy_version=p.get("policy_version"),
        authorized=bool(p.get("authorized")),
        default_used=bool(p.get("default_used")),
    )
    st = sessions.get(event.stream)
    context = None
    missing = None
    redacted: tuple[str, ...] = ()
    lineage: tuple[tuple[str | None, str | None], ...] = ()
    if st is None:
        missing = "session-not-recorded"
    else:
        lineage = st.lineage
        call = st.calls.get(f"{tool_call_id}:{input_hash}")
        if call is None:
            missing = "call-not-recorded"
        elif call.redacted:
            redacted = call.redacted
        else:
            ledger = ledgers.get(st.family)
            if ledger is not None:
                now = time_ms(event.time)
                if now is not None:
                    ledger.now_ms = now
            facts = st.facts
            context = CallContext(
                tool_id=tool_id,
                args=call.args,
                actor=st.actor,
                resource=st.resource,
                task=st.task,
                env=st.env,
                facts=facts.values,
                connected=facts.connected,
                running=facts.running,
                tool_call_id=tool_call_id,
                execution=call.execution,
                ledger=ledger,
            )
    policies = p.get("policies")
    return RecordedDecision(
        position=event.position,
        time=event.time,
        decision_id=str(p.get("decision_id")),
        session_id=event.stream,
        agent=p.get("agent"),
        skill=p.get("skill"),
        tool_id=tool_id,
        tool_call_id=tool_call_id,
        input_hash=input_hash,
        policies=tuple(policies) if isinstance(policies, list) else (),
        outcome=outcome,
        context=context,
        lineage=lineage,
        redacted=redacted,
        missing=missing,
    )


def recorded_decision(
    store: EventStore, decision_id: str, spec: Spec | None = None
) -> RecordedDecision | None:
    """The recorded decision `decision_id` (`dec-…`) with its context, or None when the log
    holds no such decision. The log is read up to it, a page at a time."""
    for found in read_decisions(store, spec):
        if found.decision_id == decision_id:
            return found
    return None


def policies_in(spec: Spec, decision: RecordedDecision) -> tuple[str, ...] | str:
    """The policies that judge the recorded decision's session under `spec`: its agent's
    policy there (a skill session: the parent's policies, then the skill's profile), as
    `Session` computes them; or why there are none to judge it with (the session's agent or
    skill is not declared in `spec`)."""
    if not decision.lineage:
        return "its session is not recorded in the log"
    policies: tuple[str, ...] | None = None
    for agent_name, skill_name in decision.lineage:
        agent = spec.agents.get(agent_name) if isinstance(agent_name, str) else None
        if agent is None:
            return f"the agent `{agent_name}` is not declared in the spec"
        skill = None
        if skill_name:
            skill = spec.skills.get(skill_name)
            if skill is None:
                return f"the skill `{skill_name}` is not declared in the spec"
        policies = session_policies(agent, skill, policies)
    assert policies is not None
    return policies
