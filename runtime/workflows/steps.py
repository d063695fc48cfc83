"""A workflow's steps outside DBOS: the governed call and the delegation a step runs, and
exactly-once recording of each step's events in the harness's own log.

DBOS runs these functions as steps (`runtime/workflows/interpreter.py`); they need no DBOS
themselves, only the worker of this process (`attach`), whose harness judges and records the calls.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..judge.availability import Facts
from ..judge.history import WORKFLOW_SOURCES, SourcesChain
from ..judge.normalize import Refusal
from ..log.events import NO_SECRETS, REDACTED, NewEvent, Secrets
from ..log.memory import Buffer
from ..model.canonical import canonical_json, jsonable
from ..model.ir import Agent
from ..model.ir import Path as ModelPath
from ..session import spans
from ..session.approval_view import Preview, record_preview, run_preview
from ..session.approvals import ApprovalError
from ..session.lifecycle import ActionState
from .appender import StepLog, append_once
from .plan import DELTA_EVENT, STATE_EVENT, STEP_EVENT, WorkflowError

if TYPE_CHECKING:
    from ..session.seams import HarnessSeam

__all__ = [
    "Publication",
    "RunSources",
    "StepOutput",
    "Worker",
    "attach",
    "call_step",
    "close_request",
    "delegate_step",
    "flush",
    "log_step",
    "published",
    "record_step",
    "run_ended",
    "running",
    "settle",
    "step_events",
    "watch_end",
    "worker",
]


class Worker(Protocol):
    """What a step needs of the engine running it (`durable.Engine`): the harness it records
    in, the appender of its log (None: each step's events are appended when handed over) and
    the application's runners."""

    harness: HarnessSeam
    log: StepLog | None
    delegate: Callable[..., Any] | None
    previewers: dict[str, Callable[[dict[str, Any]], Any]]
    verifiers: dict[str, Callable[[dict[str, Any], Any], Any]]


_WORKER: Worker | None = None


def attach(engine: Worker | None) -> None:
    """Make `engine` the worker of this process (None: no worker)."""
    global _WORKER
    _WORKER = engine


def running() -> Worker | None:
    """The worker of this process, if one runs."""
    return _WORKER


def worker() -> Worker:
    if _WORKER is None:
        raise WorkflowError("no-engine", "no workflow engine runs in this process")
    return _WORKER


class _Ends:
    """Who in this process waits for a run to end (`Workflows.wait`): the interpreter tells
    them when a run it runs here has ended (`run_ended`), so a waiter wakes at once instead of
    reading the run's state again and again while the run it waits for needs the interpreter
    lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[threading.Event]] = {}

    def watch(self, run: str) -> threading.Event:
        ended = threading.Event()
        with self._lock:
            self._waiting.setdefault(run, []).append(ended)
        return ended

    def forget(self, run: str, ended: threading.Event) -> None:
        with self._lock:
            waiting = self._waiting.get(run, [])
            if ended in waiting:
                waiting.remove(ended)
            if not waiting:
                self._waiting.pop(run, None)

    def ended(self, run: str) -> None:
        with self._lock:
            waiting = self._waiting.pop(run, [])
        for ended in waiting:
            ended.set()


_ENDS = _Ends()


def watch_end(run: str) -> tuple[threading.Event, Callable[[], None]]:
    """An event set when a run this process runs ends (its events in the log), and what
    forgets it; a run another process runs never sets it."""
    ended = _ENDS.watch(run)
    return ended, lambda: _ENDS.forget(run, ended)


def run_ended(run: str) -> None:
    """Called by the interpreter when a run ends here (completed, failed, cancelled, or
    stopped by the engine's shutdown): wake whoever waits for it."""
    _ENDS.ended(run)


# ---------------------------------------------------------------------------------------------
# Exactly-once events


Publication = tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]
"""What a step records for `status`: (`workflow.delta`, what it changed in the run's state, or
the whole state from the run's first step) or (`workflow.branch`, a parallel branch's view of
its step), and the canonical JSON of that payload when it is known already."""


class StepOutput(dict[str, Any]):
    """What a step returns, and DBOS checkpoints: `{"outcome": …, "events": [[stream, kind,
    type, payload JSON], …]}`, the step's events as the log will hold them. The events as the
    step built them (`built`) ride along in this process only, so the appender does not parse
    their payloads again; an output DBOS replays from its checkpoint is a plain dict."""

    __slots__ = ("built",)
    built: list[tuple[str, str, str, Any, str]]


def _output(
    buffer: Buffer, stream: str, outcome: dict[str, Any], publish: Publication
) -> StepOutput:
    """The step's output: its events, what it publishes for `status`, and last its
    `workflow.step` event (the outcome). DBOS checkpoints them with the step, in its own
    transaction; the interpreter hands them to the log once that checkpoint is written
    (`log_step`)."""
    buffer.append(NewEvent(stream, "State", *publish))
    buffer.append(NewEvent(stream, "State", STEP_EVENT, {"outcome": outcome}))
    events = [[s, k, t, text] for s, k, t, _, text in buffer.appended]
    out = StepOutput(outcome=outcome, events=events)
    out.built = buffer.appended
    return out


def step_events(output: Mapping[str, Any]) -> list[NewEvent]:
    """The events a step's output carries, to append to the log."""
    built = getattr(output, "built", None)
    if built is not None:
        return [NewEvent(s, k, t, payload, text) for s, k, t, payload, text in built]
    return [
        NewEvent(stream, kind, type_, json.loads(text), text)
        for stream, kind, type_, text in output.get("events") or ()
    ]


def published(output: Mapping[str, Any]) -> dict[str, Any] | None:
    """The payload of the run's state a step's output records (`workflow.delta`, or
    `workflow.state` in a checkpoint of a version before deltas), or None: as the step built
    it, or read from the checkpoint DBOS replays."""
    built = getattr(output, "built", None)
    if built is not None:
        for _, _, type_, payload, _ in reversed(built):
            if type_ in (STATE_EVENT, DELTA_EVENT):
                found: dict[str, Any] = payload
                return found
        return None
    for _, _, type_, text in reversed(output.get("events") or ()):
        if type_ in (STATE_EVENT, DELTA_EVENT):
            parsed: dict[str, Any] = json.loads(text)
            return parsed
    return None


def log_step(output: Mapping[str, Any]) -> dict[str, Any]:
    """Hand a checkpointed step's events to the log (the worker's appender) and return the
    step's outcome. Called by the interpreter after `run_step` returned, that is once DBOS has
    checkpointed the output: the log never holds a step DBOS could run again. A step replayed
    from its checkpoint hands them over again, and they are appended only if they are not in
    the log already."""
    engine = worker()
    if engine.log is not None:
        engine.log.add(lambda: step_events(output))
    else:
        append_once(engine.harness.store, step_events(output))
    outcome: dict[str, Any] = output["outcome"]
    return outcome


async def settle() -> None:
    """Wait until every step this process handed to the log is in it (a gate that opens, a run
    or a branch that ends)."""
    engine = running()
    if engine is not None and engine.log is not None:
        await engine.log.settle()


def flush(timeout_s: float = 5.0) -> None:
    """`settle` for a thread: a reader in the worker's process (`status`, `decide`, `cancel`)
    sees every step checkpointed before it asked. While the log cannot take them (its database
    away), it waits at most `timeout_s` and reads the log as it stands: a view of the run from
    a little earlier, as another process would see it."""
    engine = running()
    if engine is not None and engine.log is not None:
        with contextlib.suppress(TimeoutError):
            engine.log.flush(timeout_s=timeout_s)


def _step_harness(h: HarnessSeam) -> tuple[HarnessSeam, Buffer]:
    """The harness seen by one step: the same compiled spec, executors and engine, but its own
    event buffer, approvals and sessions, so concurrent steps never share a buffer."""
    buffer = Buffer(h.clock)
    return h._step_view(buffer), buffer


def record_step(
    stream: str, events: list[dict[str, Any]], outcome: dict[str, Any], publish: Publication
) -> StepOutput:
    """A DBOS step that only records events (a gate decided, the run's end) and the state."""
    buffer = Buffer(worker().harness.clock)
    for e in events:
        buffer.append(NewEvent(stream, e["kind"], e["type"], e["payload"]))
    return _output(buffer, stream, outcome, publish)


# ---------------------------------------------------------------------------------------------
# The governed call inside a step


def call_step(
    ctx: dict[str, Any],
    step_name: str,
    tool: str,
    args: dict[str, Any],
    stream: str,
    call_id: str,
    approval: dict[str, Any] | None,
    after: Callable[[dict[str, Any]], Publication],
) -> StepOutput:
    """normalize → decide → (approval) → invoke → evidence, as the workflow's creator, in a
    session whose id is the step's stream; every event committed at the end, once, with the
    run's state `after(outcome)`."""
    if spans.tracer is not None:
        return _traced(
            ctx,
            step_name,
            "call",
            lambda: _call_step(ctx, step_name, tool, args, stream, call_id, approval, after),
        )
    return _call_step(ctx, step_name, tool, args, stream, call_id, approval, after)


def _traced(
    ctx: dict[str, Any], step_name: str, kind: str, run: Callable[[], StepOutput]
) -> StepOutput:
    """A step in its telemetry span, whose status is the step's outcome."""
    found: list[StepOutput] = []

    def outcome() -> dict[str, Any]:
        found.append(run())
        result: dict[str, Any] = found[0]["outcome"]
        return result

    spans.workflow_step(ctx, step_name, kind, outcome)
    return found[0]


def _call_step(
    ctx: dict[str, Any],
    step_name: str,
    tool: str,
    args: dict[str, Any],
    stream: str,
    call_id: str,
    approval: dict[str, Any] | None,
    after: Callable[[dict[str, Any]], Publication],
) -> StepOutput:
    h = worker().harness
    view, buffer = _step_harness(h)
    session = _step_session(view, ctx, step_name, stream)
    # the sources the step's session reads: its own whole, as the run knows it, and those of
    # the run's earlier steps from the log the step's events go to (not the step's buffer)
    session.ledger.sources = SourcesChain(h.store)
    seed_sources(session, ctx.get("sources"), _hidden_inputs(view, ctx, tool, args))
    outcome = _governed(view, session, tool, args, call_id, approval)
    session.end("completed" if outcome["status"] == "succeeded" else outcome["status"])
    return _output(buffer, stream, outcome, after(outcome))


def _hidden_inputs(
    view: HarnessSeam, ctx: Mapping[str, Any], tool: str, args: Mapping[str, Any]
) -> tuple[frozenset[str], Secrets]:
    """What of a run's input never reaches the log: the input fields declared `secret`, or
    passed by some step to a `secret` field of its tool; and this step's secret values."""
    found = view.spec.tools.get(tool)
    secrets = Secrets.of(found, args) if found is not None else NO_SECRETS
    return _hidden_fields(view.spec, ctx.get("workflow") or ""), secrets


_HIDDEN: dict[tuple[int, str], tuple[Any, frozenset[str]]] = {}
"""The hidden input fields of a workflow, by (spec, workflow): the same for all its steps."""


def _hidden_fields(spec: Any, name: str) -> frozenset[str]:
    known = _HIDDEN.get((id(spec), name))
    if known is not None and known[0] is spec:
        return known[1]
    hidden: set[str] = set()
    workflow = spec.workflows.get(name)
    if workflow is not None:
        if workflow.input is not None:
            hidden.update(f.name for f in workflow.input.fields if f.secret)
        for step in workflow.steps:
            called = spec.tools.get(step.tool or "")
            if called is None:
                continue
            for arg, value in step.args.items():
                field = called.input.field(arg)
                if (
                    field is not None
                    and field.secret
                    and isinstance(value, ModelPath)
                    and value.root == "input"
                    and value.parts
                ):
                    hidden.add(value.parts[0])
    if len(_HIDDEN) >= 64:  # specs loaded again and again: keep the newest
        _HIDDEN.clear()
    _HIDDEN[(id(spec), name)] = (spec, frozenset(hidden))
    return frozenset(hidden)


class RunSources:
    """What the sessions of a run's steps read as their sources (`seed_sources`): the run's
    input and each call step's result, kept by the interpreter as the run goes. Each seeded
    payload and its canonical text are built once for the run instead of once for every later
    step; a step that has secret values of its own scrubs them from fresh copies."""

    __slots__ = ("_dropped", "_input", "_sent", "_texts", "base", "input", "partial", "steps")

    def __init__(self, input: Mapping[str, Any] | None = None) -> None:
        self.input: Mapping[str, Any] = input or {}
        self.steps: dict[str, tuple[str | None, Any]] = {}
        """Each call step's result by step: (its tool, its value)."""
        self._texts: dict[str, tuple[dict[str, Any], str]] = {}
        self._input: tuple[frozenset[str], dict[str, Any], str] | None = None
        self.base: str | None = None
        """The stream of the run's last step whose `workflow.sources` a later one refers to
        (`after`): what it held is not written again."""
        self._sent: dict[str, tuple[str | None, Any]] = {}
        """What the sources on `base` hold, resolved: each step's (tool, value)."""
        self._dropped: list[str] = []
        """The steps gone since `base` that `_sent` does not know of (`partial`)."""
        self.partial = False
        """Whether `steps` holds only what changed since `base` (a parallel branch's sources,
        handed over by reference, `reference`): the whole is `base`'s, from the log, with
        them."""

    def whole(self, fields: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The sources whole, as a step that refers to `base` has them (unscrubbed, the input's
        `fields` redacted): what a step's own session reads without resolving its reference."""
        out: dict[str, Any] = {}
        if self.input:
            out["input"] = {k: REDACTED if k in fields else v for k, v in self.input.items()}
        results = []
        for name in sorted(self.steps):
            built = self._texts.get(name)
            if built is not None:
                results.append(built[0])
            else:
                tool, value = self.steps[name]
                results.append({"step": name, "tool": tool, "data": value})
        out["results"] = results
        return out

    def seeded(self, stream: str, sent: Mapping[str, tuple[str | None, Any]] | None = None) -> None:
        """The step on `stream` recorded its sources as they are now, unscrubbed: the next
        step's refer to them and hold only what changed since. Called by the run after the
        step (live or replayed from its checkpoint), so the chain is the same either way.
        `sent`: what that step's sources held, when not the sources as they are now (a
        parallel branch's step, seeded with the run's sources as they were when it started).
        Sources still `partial` (a branch's step replayed from its checkpoint, never made
        whole here) keep referring to the run's step: the step on `stream` may not be in the
        log yet for a later one to read, the run's was before the branch started."""
        if self.partial:
            return
        self.base = stream
        self._sent = dict(self.steps if sent is None else sent)
        self._dropped = []

    def complete(self, whole: Mapping[str, Any]) -> None:
        """`partial` sources made whole with `whole`, the sources on `base` read back: what
        they hold and `steps` do not replace or drop is `base`'s (and the run's input)."""
        gone = set(self._dropped)
        sent: dict[str, tuple[str | None, Any]] = {}
        for r in whole.get("results") or ():
            if isinstance(r, Mapping) and isinstance(r.get("step"), str):
                sent[r["step"]] = (r.get("tool"), r.get("data"))
        given = whole.get("input")
        if isinstance(given, Mapping) and not self.input:
            self.input = given
        changed = self.steps
        self.steps = {n: found for n, found in sent.items() if n not in gone}
        self.steps.update(changed)
        self._texts.clear()
        self._sent, self._dropped, self.partial = sent, [], False

    def reference(self) -> dict[str, Any]:
        """The sources as a parallel branch is handed them (`of` reads it back): by reference
        to `base` with what changed since, or whole while no step's sources can be referred
        to. Its size is what changed, not the run so far."""
        names, dropped = self._changed() if self.base is not None else (list(self.steps), [])
        steps = {n: {"tool": self.steps[n][0], "value": self.steps[n][1]} for n in sorted(names)}
        if self.base is None:
            return {"input": dict(self.input), "steps": steps}
        return {"after": self.base, "dropped": sorted(dropped), "steps": steps}

    def _changed(self) -> tuple[list[str], list[str]]:
        """The steps whose result is new or other since `base`, and those dropped."""
        sent = self._sent
        new = [
            name
            for name, found in self.steps.items()
            if (was := sent.get(name)) is None
            or not (was[0] == found[0] and (was[1] is found[1] or was[1] == found[1]))
        ]
        return new, [name for name in sent if name not in self.steps] + self._dropped

    @classmethod
    def of(cls, sources: Mapping[str, Any]) -> RunSources:
        """From the mapping form: `{"input": …, "steps": {step: {"tool": …, "value": …}}}`, or
        by reference (`reference`): `{"after": stream, "dropped": […], "steps": {…}}`, the
        steps only those changed since the sources on `after`."""
        given = sources.get("input")
        out = cls(given if isinstance(given, Mapping) else None)
        for name, found in (sources.get("steps") or {}).items():
            out.add(name, found.get("tool"), found.get("value"))
        after = sources.get("after")
        if isinstance(after, str):
            out.base, out.partial = after, True
            out._dropped = [str(n) for n in sources.get("dropped") or ()]
        return out

    def add(self, step: str, tool: str | None, value: Any) -> None:
        """The result of the call step `step` (again: it replaces the one before)."""
        self.steps[step] = (tool, value)
        self._texts.pop(step, None)

    def discard(self, step: str) -> None:
        self.steps.pop(step, None)
        self._texts.pop(step, None)

    def events(
        self, stream: str, hidden: tuple[frozenset[str], Secrets] = (frozenset(), NO_SECRETS)
    ) -> list[NewEvent]:
        """The event that seeds a step's session on `stream` (none when there is nothing to
        seed): one `workflow.sources` holding the run's input and each step's result, in the
        order of the steps' names. Its canonical text is put together from each part's text,
        built once for the run; a step with secret values of its own scrubs fresh copies."""
        fields, secrets = hidden
        if not self.input and not self.steps:
            return []
        if secrets:
            payload: dict[str, Any] = {}
            if self.input:
                shown = {k: REDACTED if k in fields else v for k, v in self.input.items()}
                payload["input"] = secrets.scrub(shown)
            payload["results"] = [
                {"step": name, "tool": tool, "data": secrets.scrub(value)}
                for name, (tool, value) in sorted(self.steps.items())
            ]
            # whole, scrubbed of this step's secrets: no later step refers to it
            payload["scrubbed"] = True
            return [NewEvent(stream, "State", WORKFLOW_SOURCES, payload)]
        names, dropped = self._changed() if self.base is not None else (list(self.steps), [])
        parts: list[tuple[dict[str, Any], str]] = []
        for name in sorted(names):
            built = self._texts.get(name)
            if built is None:
                tool, value = self.steps[name]
                data = {"step": name, "tool": tool, "data": value}
                built = self._texts[name] = (data, canonical_json(data))
            parts.append(built)
        payload = {"results": [data for data, _ in parts]}
        # canonical JSON sorts the keys: `after`, `dropped`, `input`, `results`, each part as
        # it was written
        text = '"results":[' + ",".join(t for _, t in parts) + "]}"
        if self.base is not None:
            # the run's input and the results before are on `base`'s, once
            head: dict[str, Any] = {"after": self.base}
            if dropped:
                head["dropped"] = sorted(dropped)
            payload = {**head, **payload}
            return [NewEvent(stream, "State", WORKFLOW_SOURCES, payload, canonical_json(payload))]
        if self.input:
            if self._input is None or self._input[0] != fields:
                shown = {k: REDACTED if k in fields else v for k, v in self.input.items()}
                self._input = (fields, shown, canonical_json(shown))
            payload = {"input": self._input[1], **payload}
            text = '{"input":' + self._input[2] + "," + text
        else:
            text = "{" + text
        return [NewEvent(stream, "State", WORKFLOW_SOURCES, payload, text)]


def seed_sources(
    session: Any,
    sources: RunSources | Mapping[str, Any] | None,
    hidden: tuple[frozenset[str], Secrets] = (frozenset(), NO_SECRETS),
) -> None:
    """Record a workflow run's sources in a step's session, so its policy reads provenance:
    one `workflow.sources` event holding the run's input (of kind `user`) and each earlier
    call step's result (of its tool's trust and labels). `hidden`: the input fields and the
    secret values that never reach the log (nor the index)."""
    if not sources:
        return
    found = sources if isinstance(sources, RunSources) else RunSources.of(sources)
    if found.partial:  # a parallel branch's: the rest is the run's, on `base` in the log
        chain = session.ledger.sources
        store = chain.store if chain is not None else session.harness.store
        assert found.base is not None
        found.complete(SourcesChain.of(store).whole(found.base))
    events = found.events(session.id, hidden)
    if events:
        if events[0].payload.get("after") is not None:
            chain = session.ledger.sources
            if chain is None:
                chain = session.ledger.sources = SourcesChain.of(session.harness.store)
            chain.keep(session.id, found.whole(hidden[0]))
        session.harness.store.append_many(events)


def _step_session(view: HarnessSeam, ctx: dict[str, Any], step_name: str, stream: str) -> Any:
    """The session a step runs in, as the workflow's creator: one of the workflow's agent, or,
    for a workflow that names only a policy, of the workflow itself: judged by that policy,
    its surface the tools the workflow calls, delegating to the agents its steps name."""
    task = {"id": ctx["workflow_id"], "workflow": ctx["workflow"], "step": step_name}
    # the stream is the runtime's own (`workflow:<run>/…`), which `Harness.session` refuses to
    # an application
    if ctx.get("agent"):
        agent, tools = view._agent(ctx["agent"]), None
    else:
        agent = Agent(
            name=ctx["workflow"], policy=ctx["policy"], delegates=tuple(ctx.get("delegates") or ())
        )
        tools = tuple(ctx.get("tools") or ())
    return view._open(
        agent=agent,
        actor=ctx["actor"],
        task=task,
        facts=Facts.from_json(ctx.get("facts")),
        resource=ctx.get("resource") or {},
        env=ctx.get("env") or {},
        session_id=stream,
        tools=tools,
    )


def _governed(
    view: HarnessSeam,
    session: Any,
    tool: str,
    args: dict[str, Any],
    call_id: str,
    approval: dict[str, Any] | None,
) -> dict[str, Any]:
    pending = session.normalize(tool, call_id, args)
    if isinstance(pending, Refusal):
        return {"status": "refused", "error": pending.message, "code": pending.code}
    spec_tool = view.spec.tools[pending.tool_id]
    # the outcome becomes the run's durable state (DBOS's step output, our log): the call's
    # secret values and secret output fields never reach it, so a later step reads them as
    # `[REDACTED]`
    secrets = Secrets.of(spec_tool, pending.args)
    decision = session.decide(pending)
    if decision.effect == "deny":
        return {"status": "denied", "error": decision.reason or "the policy denies this call"}
    if decision.effect == "ask" and session.action_state(pending) != ActionState.AUTHORIZED:
        previewed = _preview(pending.tool_id, args) if approval is None else None
        if previewed is not None:  # bound to the call in the log too, as a session's preview
            record_preview(session.harness.store, session.id, pending, previewed)
        request = session.request_approval(pending, decision)
        if approval is None:
            return {
                "status": "ask",
                # the request this pass opened: closed when the gate is decided (close_request)
                "request_id": request.request_id,
                "approvers": [{"kind": a.kind, "value": a.value} for a in decision.approvers],
                # separation of duties: the run's creator may not decide the gate
                "not_by": None if decision.requester_may_approve else session.actor,
                "request": secrets.scrub(
                    {
                        "what": request.what,
                        "why": request.why,
                        "arguments": jsonable(request.arguments),
                        "reversibility": request.reversibility,
                        "impact": jsonable(request.impact),
                        **_gate_preview(previewed),
                    }
                ),
            }
        answered = view.approve(request.request_id, by=approval["actor"])
        if answered.status != "approved":
            return {"status": "denied", "error": answered.reason or "denied when judged again"}
    result = session.invoke(pending)
    if result.ok:
        # no data is an empty record; an `output list<…>` may return an empty list, kept
        data = {} if result.data is None else result.data
        failed = _verify(view, session, pending, args, jsonable(data), secrets)
        if failed is not None:
            return {"status": "failed", "error": failed, "category": "verify", "ran": True}
        recorded = result.to_dict(spec_tool.output)["data"]
        return {"status": "succeeded", "value": jsonable({} if recorded is None else recorded)}
    return {
        "status": "failed",
        "error": result.error or result.observation,
        "category": result.error_category,
        "ran": result.ran,
    }


def close_request(request_id: str | None, gate: str, choice: str) -> None:
    """A DBOS step, once a call's gate is decided: the approval request its first pass opened
    (and listed for operators) is resolved `withdrawn`, saying what the gate decided. Approved,
    the call runs under a request of its own, in the step's next session; denied or timed out,
    it never runs. Claimed on the request's own stream, as any answer, so a retried step or an
    operator who answered first leaves it as it is."""
    if request_id is None:
        return
    h = worker().harness
    flush()  # the first pass's request is in the log before it is looked up
    h.catch_up()
    req = h.approvals.requests.get(request_id)
    if req is None or req.status != "pending":
        return
    then = "the call runs under the run's own request" if choice == "approve" else "it does not run"
    with contextlib.suppress(ApprovalError):
        h.approvals.resolve(
            request_id,
            "withdrawn",
            None,
            reason=f"the workflow gate `{gate}` was decided: {choice}; {then}",
        )


def _preview(tool: str, args: dict[str, Any]) -> Preview | None:
    """What the tool's previewer (`workflows.preview_with`) says the call would do, for the
    approval request; None when the tool has none."""
    previewer = worker().previewers.get(tool)
    if previewer is None:
        return None
    return run_preview(previewer, worker().harness.spec.tools.get(tool), args)


def _gate_preview(found: Preview | None) -> dict[str, Any]:
    """The gate's `preview`: the previewer's output, or `{"error": …}`; nothing without one."""
    if found is None:
        return {}
    return {"preview": {"error": found.error} if found.error is not None else found.value}


def _verify(
    view: HarnessSeam,
    session: Any,
    pending: Any,
    args: dict[str, Any],
    value: Any,
    secrets: Secrets = NO_SECRETS,
) -> str | None:
    """Run the tool's verifier (`workflows.verify_with`) on a committed call: None when the
    real system shows the call took effect (or the tool has no verifier), else why not. The
    verdict is recorded as `action.verified` in the step's session, scrubbed of the call's
    secret values."""
    verifier = worker().verifiers.get(pending.tool_id)
    if verifier is None:
        return None
    try:
        verdict = verifier(dict(args), value)
        reason = None if verdict is None or verdict is True else str(verdict or "not verified")
    except Exception as exc:  # the verifier is the application's code
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        reason = secrets.text(reason)
    view.store.append(
        NewEvent(
            session.id,
            "Tool",
            "action.verified",
            {"tool_call_id": pending.tool_call_id, "ok": reason is None, "reason": reason},
        )
    )
    return None if reason is None else f"verification failed: {reason}"


def delegate_step(
    ctx: dict[str, Any],
    step: dict[str, Any],
    context: list[Any],
    stream: str,
    after: Callable[[dict[str, Any]], Publication],
) -> StepOutput:
    if spans.tracer is not None:
        return _traced(
            ctx, step["name"], "delegate", lambda: _delegate_step(ctx, step, context, stream, after)
        )
    return _delegate_step(ctx, step, context, stream, after)


def _delegate_step(
    ctx: dict[str, Any],
    step: dict[str, Any],
    context: list[Any],
    stream: str,
    after: Callable[[dict[str, Any]], Publication],
) -> StepOutput:
    engine = worker()
    view, buffer = _step_harness(engine.harness)
    parent = _step_session(view, ctx, step["name"], stream)
    outcome: dict[str, Any]
    if engine.delegate is None:
        outcome = {"status": "failed", "error": "no delegate runner is set (`delegate_with`)"}
    else:
        child = parent.delegate(step["goal"] or "", agent=step["agent"])
        if isinstance(child, Refusal):
            outcome = {"status": "refused", "error": child.message, "code": child.code}
        else:
            try:
                value = engine.delegate(child, step["goal"], context)
                outcome = {"status": "succeeded", "value": jsonable(value or {})}
            except Exception as exc:  # the runner is the application's code
                outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            child.end("completed" if outcome["status"] == "succeeded" else "failed")
    parent.end("completed" if outcome["status"] == "succeeded" else "failed")
    return _output(buffer, stream, outcome, after(outcome))
