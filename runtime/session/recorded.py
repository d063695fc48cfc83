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

>>> from harnessc.runtime.log.store import MemoryStore
>>> list(read_decisions(MemoryStore()))
[]
"""

from __future__ import annotations

import itertools
import json
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from ..judge.availability import Facts
from ..judge.history import (
    FACTS_UPDATED,
    USER_SAID,
    WORKFLOW_INPUT,
    WORKFLOW_SOURCES,
    WORKFLOW_STEP_RESULT,
    HistoryTerms,
    Ledger,
    SourcesChain,
    time_ms,
)
from ..judge.policy import CallContext
from ..log.events import REDACTED, Event, UnreadableEvent, read_payload
from ..log.projections import Projections, SessionView
from ..log.store import EventStore, Row
from ..model.ir import Agent, Spec
from .calls import execution_params
from .sessions import FACT_EVENTS, fold_facts, session_policies

__all__ = [
    "PAGE",
    "RecordedDecision",
    "RecordedOutcome",
    "family_part",
    "policies_in",
    "read_decisions",
    "read_rows",
    "recorded_decision",
    "session_agent",
]

PAGE = 5000
"""Events read per page."""

_SESSION_TYPES = ("session.started", "session.resumed", "session.ended", "task.fact")
_LEDGER_TYPES = (USER_SAID, WORKFLOW_INPUT, WORKFLOW_STEP_RESULT, WORKFLOW_SOURCES)
_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, RecursionError)
"""What reading a payload of the wrong shape raises."""
_TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
_MARK = json.dumps(REDACTED)


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


@dataclass(slots=True)
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

    __slots__ = ("action_id", "args", "execution", "key", "redacted", "settled", "tool")

    def __init__(
        self,
        key: str,
        args: Any,
        execution: Any,
        withheld: bool,
        action_id: Any = None,
        tool_id: Any = None,
    ) -> None:
        self.key = key
        self.action_id = action_id
        self.tool = tool_id
        self.args: Mapping[str, Any] = args if type(args) is dict else {}
        self.execution = execution_params(execution) if type(execution) is dict else {}
        self.redacted: tuple[str, ...] = ()
        self.settled = False
        """Decided for good (authorised, or denied): its record may be dropped."""
        if withheld:  # the text holds the redaction mark: find where
            found: list[str] = []
            _redacted(self.args, "$", found)
            env = self.execution.get("env")
            if isinstance(env, Mapping):
                found.extend(f"$.execution.env.{k}" for k, v in env.items() if v == REDACTED)
            self.redacted = tuple(found)

    def requested(self) -> dict[str, Any]:
        """What `Ledger.feed` reads of the REQUESTED transition."""
        tool_call_id = self.key.rsplit(":", 1)[0]
        return {
            "to": "REQUESTED",
            "action_id": self.action_id,
            "tool_id": self.tool,
            "tool_call_id": tool_call_id,
            "args": self.args,
        }


class _Session:
    """What a session's decisions read, as of the position the stream has reached."""

    __slots__ = (
        "actor",
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


class _Row:
    """An event as the reader folds it: what `Projections.apply` and `Ledger.feed` read of an
    `Event` (position, stream, type, payload, time), without its hashes."""

    __slots__ = ("payload", "position", "stream", "time", "type")

    def __init__(
        self, position: int, stream: str, type_: str, payload: dict[str, Any], time: str
    ) -> None:
        self.position, self.stream, self.type, self.payload, self.time = (
            position,
            stream,
            type_,
            payload,
            time,
        )


def _pages(
    store: EventStore,
    types: Sequence[str],
    moves: Sequence[str],
    after: int,
    page: int,
) -> Iterator[list[Row]]:
    """The store's events of `types` after `after` as rows (`EventStore.read_rows`), page by
    page."""
    while True:
        found = store.read_rows(types, after=after, limit=page, moves=moves)
        if not found:
            return
        yield found
        if len(found) < page:
            return
        after = found[-1][0]


def read_rows(
    store: EventStore, types: Sequence[str], *, after: int = 0, page: int = PAGE
) -> Iterator[Row]:
    """The events of `types` after `after` as rows (position, stream, type, payload text,
    time), in position order, read a page at a time."""
    for rows in _pages(store, types, (), after, page):
        yield from rows


def read_decisions(
    store: EventStore,
    spec: Spec | None = None,
    *,
    terms: HistoryTerms | None = None,
    after: int = 0,
    page: int = PAGE,
    part: tuple[int, int] = (0, 1),
) -> Iterator[RecordedDecision]:
    """Every recorded decision of the log after position `after`, in log order, each with
    its context rebuilt as of its position. `spec` (or its `terms`, `PolicyEngine.terms`) is
    the spec the contexts are for: its history terms are what the ledger keeps; without one,
    or when it reads no session state, contexts carry no ledger. `part=(i, n)`: only the
    decisions of the session families `family_part` gives to `i` of `n` readers in parallel.

    Raises what the store raises when the log cannot be read (the decisions before the
    failure have been yielded)."""
    if terms is None and spec is not None:
        terms = HistoryTerms(spec)
    ledgers = terms is not None and terms.read
    types: tuple[str, ...] = ("decision", "action.transition", *_SESSION_TYPES, FACTS_UPDATED)
    moves: tuple[str, ...] = ("REQUESTED",)
    if ledgers:  # the ledger reads authorisations and results too
        types += _LEDGER_TYPES
        moves = ("REQUESTED", "AUTHORIZED", *_TERMINAL)
    folded = Projections()
    sessions: dict[str, _Session] = {}
    calls: dict[tuple[str, str], _Call] = {}
    sweep = 2 * KEPT
    family_ledgers: dict[str, Ledger] = {}
    chain = SourcesChain.of(store)  # the workflow steps' sources, resolved, shared by the ledgers
    index, parts = part
    others: set[str] = set()  # the streams of other parts' families
    at: tuple[int, str] = (after, "")  # the row being read: an error names it
    try:
        for rows in _pages(store, types, moves, after, page):
            for position, stream, kind, text, time in rows:
                at = (position, kind)
                if not isinstance(text, str):  # a blob that is not UTF-8
                    raise UnreadableEvent(position, kind, "its payload is not UTF-8 text")
                if stream in others:
                    continue
                if kind == "decision":
                    if parts > 1 and stream not in sessions and family_part(stream, parts) != index:
                        continue
                    found = _decision(position, stream, time, text, sessions, calls, family_ledgers)
                    yield found
                    if found.outcome.authorized or found.outcome.effect == "deny":
                        call = calls.get((stream, f"{found.tool_call_id}:{found.input_hash}"))
                        if call is not None:
                            call.settled = True
                    continue
                if kind == "action.transition":
                    st = sessions.get(stream)
                    if st is None:
                        continue
                    call = _requested(text) if '"to":"REQUESTED"' in text else None
                    if call is not None:
                        calls[stream, call.key] = call
                        if len(calls) > sweep:
                            sweep = len(_swept(calls)) + KEPT
                    if ledgers:
                        p = (
                            call.requested()
                            if call is not None
                            else read_payload(position, kind, text)
                        )
                        _feed(family_ledgers, st, _Row(position, stream, kind, p, time))
                    continue
                row = _Row(position, stream, kind, read_payload(position, kind, text), time)
                if kind in _SESSION_TYPES:
                    folded.apply(cast(Event, row))
                    if kind == "session.started":
                        st = _start(folded.sessions[stream], sessions)
                        if parts > 1 and family_part(st.family, parts) != index:
                            others.add(stream)
                            continue
                        if ledgers:
                            assert terms is not None
                            if st.family not in family_ledgers:
                                ledger = family_ledgers[st.family] = Ledger(terms)
                                ledger.sources = chain
                    elif kind == "task.fact" and stream in sessions:
                        sessions[stream].denied()
                    elif kind == "session.ended":
                        folded.sessions.pop(stream, None)
                st = sessions.get(stream)
                if st is None:
                    continue
                if kind in FACT_EVENTS:
                    st.facts = fold_facts(st.facts, kind, row.payload)
                if ledgers:
                    _feed(family_ledgers, st, row)
    except _SHAPE_ERRORS as error:
        # a payload without the fields its type has (written by something else, or changed
        # under the log): which event, never an internal error
        raise UnreadableEvent.of_shape(at[0], at[1], error) from None


def family_part(family: str, parts: int) -> int:
    """Which of `parts` readers takes the session family rooted at `family` (a session id)."""
    return zlib.crc32(family.encode("utf-8", "surrogatepass")) % parts


KEPT = 100_000
"""How many calls, at least, keep their record once decided (`read_decisions`)."""


def _swept(calls: dict[tuple[str, str], _Call]) -> dict[tuple[str, str], _Call]:
    """The call records without the oldest decided ones: a call decided for good (authorised,
    or denied) keeps its record while `KEPT` calls are requested after it, for a judgement
    again before it runs (a grant that expired, a spec loaded in between); a call waiting
    for an approval keeps it. Memory holds the recent and the waiting calls."""
    for key in list(itertools.islice(calls, len(calls) - KEPT)):
        call = calls.pop(key)
        if not call.settled:
            calls[key] = call  # waiting: kept, now among the newest
    return calls


_REQUEST = re.compile(
    r'\{"action_id":"([^"\\]*)",(?:"actor":(?:"[^"\\]*"|null),)?"agent":(?:"[^"\\]*"|null),'
    r'"args":'
)
"""The head of a REQUESTED transition's canonical text up to its arguments, when every value
before them is a plain text (most calls: the actor's user is one)."""
_EXECUTION = ',"execution":'
_NO_EXECUTION = ',"execution":{}'
_scan = json.JSONDecoder().raw_decode


def _requested(text: str) -> _Call | None:
    """A call's record from its REQUESTED transition's canonical text: its arguments and
    execution parameters are decoded where they stand and the few values after them read
    in place; any other shape is decoded whole."""
    head = _REQUEST.match(text)
    if head is not None:
        args, end = _scan(text, head.end())
        execution: Any = None
        if text.startswith(_NO_EXECUTION, end):
            end += len(_NO_EXECUTION)
        elif text.startswith(_EXECUTION, end):
            execution, end = _scan(text, end + len(_EXECUTION))
        tail = _TAIL.match(text, end)
        if tail is not None:
            key = f"{tail[2]}:{tail[1]}"
            return _Call(key, args, execution, _MARK in text, head[1], tail[3])
    p = json.loads(text)
    if p.get("to") != "REQUESTED":
        return None
    key = f"{p.get('tool_call_id')}:{p.get('input_hash')}"
    return _Call(
        key, p.get("args"), p.get("execution"), _MARK in text, p.get("action_id"), p.get("tool_id")
    )


_TAIL = re.compile(
    r',"from":null,"input_hash":"([0-9a-f]*)",(?:"skill":(?:"[^"\\]*"|null),)?'
    r'"to":"REQUESTED","tool_call_id":"([^"\\]*)","tool_id":"([^"\\]*)"'
)
"""The values after a REQUESTED transition's arguments: its input hash, tool_call_id and
tool id."""


def _cut(text: str) -> tuple[str, str, str, str, bool] | None:
    """The per-call values of a decision event's canonical text (sorted keys: `authorized`
    and `decision_id`, then `grant_id` and `input_hash`, then `tool_call_id`) and the text
    without them: the same for every call a rule decides alike. None for any other shape (a
    value with an escape in it)."""
    a = text.find('"authorized":')
    if a < 0:
        return None
    authorized = text.startswith("true,", a + 13)
    d = a + 13 + (5 if authorized else 6)
    if not text.startswith('"decision_id":"', d):
        return None
    d_end = text.find('"', d + 15)
    g = text.find('"grant_id":', d_end)
    if g < 0:
        return None
    g_end = g + 16 if text.startswith("null,", g + 11) else text.find('"', g + 12) + 2
    if not text.startswith('"input_hash":"', g_end):
        return None
    h_end = text.find('"', g_end + 14)
    t = text.find('"tool_call_id":"', h_end)
    t_end = text.find('"', t + 16) if t >= 0 else -1
    if t_end < 0 or "\\" in text[d : d_end + 1] or "\\" in text[t : t_end + 1]:
        return None
    rest = text[:a] + text[d_end + 2 : g] + text[h_end + 2 : t] + text[t_end + 2 :]
    return rest, text[d + 15 : d_end], text[g_end + 14 : h_end], text[t + 16 : t_end], authorized


_DECIDED: dict[str, _Decided] = {}
"""What the rest of a decision payload's text holds, by that text."""


class _Decided:
    """What a decision event holds that is the same for every call a rule decides alike."""

    __slots__ = ("agent", "outcomes", "policies", "skill", "tool_id")

    def __init__(self, p: Mapping[str, Any]) -> None:
        self.tool_id = str(p.get("tool_id"))
        self.agent: str | None = p.get("agent")
        self.skill: str | None = p.get("skill")
        policies = p.get("policies")
        self.policies: tuple[str, ...] = tuple(policies) if isinstance(policies, list) else ()
        self.outcomes = tuple(
            RecordedOutcome(
                effect=str(p.get("effect")),
                rule=p.get("rule"),
                policy=p.get("policy"),
                policy_version=p.get("policy_version"),
                authorized=authorized,
                default_used=bool(p.get("default_used")),
            )
            for authorized in (False, True)
        )


def _decision_payload(position: int, text: str) -> tuple[_Decided, str, str, str, bool]:
    """A decision event's shared part, decision id, input hash, tool_call_id and whether it
    authorised the call: the per-call values are cut out of its text, the rest decoded once
    per distinct text (`_DECIDED`); a text of another shape is decoded whole."""
    cut = _cut(text)
    if cut is None:
        p = read_payload(position, "decision", text)
        return (
            _Decided(p),
            str(p.get("decision_id")),
            str(p.get("input_hash")),
            str(p.get("tool_call_id")),
            bool(p.get("authorized")),
        )
    rest, decision_id, input_hash, tool_call_id, authorized = cut
    fixed = _DECIDED.get(rest)
    if fixed is None:
        if len(_DECIDED) > 4096:
            _DECIDED.clear()
        fixed = _DECIDED[rest] = _Decided(json.loads(rest))
    return fixed, decision_id, input_hash, tool_call_id, authorized


def _start(view: SessionView, sessions: dict[str, _Session]) -> _Session:
    started = view.started
    parent = sessions.get(started.get("parent") or "")
    me = (started.get("agent"), started.get("skill"))
    if parent is not None:
        st = _Session(view, parent.family, (*parent.lineage, me))
    else:
        st = _Session(view, view.session_id, (me,))
    sessions[view.session_id] = st
    return st


def _feed(ledgers: dict[str, Ledger], st: _Session, row: _Row) -> None:
    ledger = ledgers.get(st.family)
    if ledger is not None:
        ledger.feed(cast(Event, row))


def _decision(
    position: int,
    stream: str,
    time: str,
    text: str,
    sessions: dict[str, _Session],
    calls: dict[tuple[str, str], _Call],
    ledgers: dict[str, Ledger],
) -> RecordedDecision:
    fixed, decision_id, input_hash, tool_call_id, authorized = _decision_payload(position, text)
    tool_id = fixed.tool_id
    st = sessions.get(stream)
    context = None
    missing = None
    redacted: tuple[str, ...] = ()
    lineage: tuple[tuple[str | None, str | None], ...] = ()
    if st is None:
        missing = "session-not-recorded"
    else:
        lineage = st.lineage
        call = calls.get((stream, f"{tool_call_id}:{input_hash}"))
        if call is None:
            missing = "call-not-recorded"
        elif call.redacted:
            redacted = call.redacted
        else:
            ledger = ledgers.get(st.family)
            if ledger is not None:
                now = time_ms(time)
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
    return RecordedDecision(
        position,
        time,
        decision_id,
        stream,
        fixed.agent,
        fixed.skill,
        tool_id,
        tool_call_id,
        input_hash,
        fixed.policies,
        fixed.outcomes[authorized],
        context,
        lineage,
        redacted,
        missing,
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
        agent = session_agent(spec, agent_name)
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


def session_agent(spec: Spec, name: object) -> Agent | None:
    """The agent a recorded session names, in `spec`: a declared agent, or for a workflow
    judged by a policy rather than run by an agent the workflow itself (its session's agent
    is named after it and holds its policy, `runtime/workflows/steps.py`)."""
    if not isinstance(name, str):
        return None
    agent = spec.agents.get(name)
    if agent is not None:
        return agent
    workflow = spec.workflows.get(name)
    if workflow is not None and workflow.agent is None and workflow.policy:
        return Agent(name=name, policy=workflow.policy)
    return None
