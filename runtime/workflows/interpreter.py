"""The interpreter: the one DBOS workflow, `harnessc.workflow`, that walks a run's IR in step
order, runs its steps as DBOS steps (`runtime/workflows/steps.py`), waits at its gates and
commits the run's state with each step.

Imported by the engine (`runtime/workflows/durable.py`), which registers it with DBOS by importing
it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from dbos import DBOS, SetWorkflowID

from ..judge.history import WORKFLOW_SOURCES
from ..model.ir import Approver, Step, Workflow
from .plan import (
    BRANCH_EVENT,
    DELTA_EVENT,
    FACTS_TOPIC,
    FOREVER_S,
    START_TOPIC,
    dependants_skipped,
    ending_options,
    evaluate_when,
    initial_state,
    may_decide,
    recorded,
    resolve_value,
    state_delta,
    step_order,
    who,
)
from .steps import (
    Publication,
    RunSources,
    call_step,
    close_request,
    delegate_step,
    log_step,
    published,
    record_step,
    run_ended,
    settle,
)

__all__ = ["INTERPRETER", "interpret"]

INTERPRETER = "harnessc.workflow"


@DBOS.workflow(name=INTERPRETER)
async def interpret(run: dict[str, Any]) -> dict[str, Any]:
    """Run one workflow's IR: the only workflow function DBOS knows."""
    this = _Run(run)
    try:
        return await this.go()
    finally:
        if this.branch is None:
            run_ended(this.id)


def _now() -> float:
    return time.time()


class _Stop(Exception):
    def __init__(self, status: str, outcome: Any = None, error: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.outcome = outcome
        self.error = error


class _Run:
    def __init__(self, run: dict[str, Any]) -> None:
        self.dbos_id: str = DBOS.workflow_id or ""
        # a parallel branch runs in a child workflow but records under its run's id
        self.id: str = run.get("parent") or self.dbos_id
        self.branch: str | None = run.get("branch")
        self.wf = Workflow.model_validate(run["workflow"])
        self.input: dict[str, Any] = run.get("input") or {}
        self.ctx: dict[str, Any] = {
            "workflow_id": self.id,
            "workflow": self.wf.name,
            "agent": run.get("agent"),
            "policy": self.wf.policy,
            # a parallel branch's IR holds its own step only: the run's are handed over
            "tools": run.get("tools") or sorted({s.tool for s in self.wf.steps if s.tool}),
            "delegates": run.get("delegates")
            or sorted({s.agent for s in self.wf.steps if s.agent is not None}),
            "actor": run.get("actor") or {},
            "facts": run.get("facts") or {},
            "env": run.get("env") or {},
            "resource": run.get("resource") or {},
        }
        self.run = run
        self.values: dict[str, Any] = dict(run.get("values") or {})
        self.skipped: set[str] = set()
        self.visited: set[str] = set()
        self.wave: list[Step] = []
        self.steps = {s.name: s for s in self.wf.steps}
        self.order = [s for s in step_order(self.wf) if not s.compensation]
        names = {s.name for s in self.order}
        self.needs = {
            s.name: {d for d in (*s.after, *s.depends_on) if d in names} for s in self.order
        }
        self.state: dict[str, Any] = initial_state(self.wf, run.get("hash"))
        given = run.get("sources")
        self._handed = isinstance(given, Mapping)
        """Whether the run handed this parallel branch its sources (`RunSources.reference`):
        they are what its steps see, not its values (only those its step reads)."""
        self._sources = (
            RunSources.of(given) if isinstance(given, Mapping) else RunSources(self.input)
        )
        self.chained: str | None = None
        """The stream of this workflow's last call step whose sources a later step may refer
        to: a parallel branch hands it to the run."""
        self.shown: dict[str, Any] | None = None
        """The state as the run's checkpointed steps recorded it (`took`): what the next
        step's delta is taken against; None before the first step."""

    def stream(self, key: str) -> str:
        return f"workflow:{self.id}/{key}"

    # -- the state `status` shows ----------------------------------------------------------------
    #
    # The state is not published on its own: every DBOS step of the run records it with its
    # events (in its checkpointed output, which our log appends in one transaction), so keeping
    # `status` current costs no write of its own. It is a `workflow.delta`: the whole state
    # from the run's first step, from every later one only what it changed (`state_delta`,
    # against `shown`), so a step's record costs what changed, not the run so far. A step
    # records the state as it will be once the interpreter has taken the step's outcome: the
    # step done, the steps the outcome skips skipped, and the next ones running, so an operator
    # sees a call in progress as `running`.
    # A parallel branch records its own view of its step instead (`workflow.branch`), which
    # `run_state` lays over the run's state.

    def snapshot(self) -> dict[str, Any]:
        """A copy of the state to publish: its own step and gate records, artifacts and order,
        the only parts the interpreter changes in place (values are replaced, never changed),
        so the copy stays as it was when it was taken. A step's own events are made canonical
        as soon as it records them."""
        s = self.state
        return {
            **s,
            "steps": {k: dict(v) for k, v in s["steps"].items()},
            "gates": {k: dict(v) for k, v in s["gates"].items()},
            "artifacts": list(s["artifacts"]),
            "order": list(s["order"]),
        }

    def publication(self, state: dict[str, Any]) -> Publication:
        if self.branch is None:
            delta = None if self.shown is None else state_delta(self.shown, state)
            return DELTA_EVENT, {"state": state} if delta is None else {"delta": delta}
        return BRANCH_EVENT, {
            "step": self.branch,
            "steps": {k: v for k, v in state["steps"].items() if v["state"] != "pending"},
            "gates": state["gates"],
            "artifacts": state["artifacts"],
        }

    def took(self, output: Mapping[str, Any]) -> dict[str, Any]:
        """Hand a checkpointed step's events to the log and return its outcome, keeping
        `shown` the state its record makes of the run's: the step's own (live) or the one DBOS
        replays from its checkpoint (a run resumed after a crash, whose checkpoints an older
        version may have written whole), so the next delta is taken against what the log
        holds."""
        found = published(output)
        if found is not None:
            self.shown = recorded(self.shown, found)
        return log_step(output)

    def after(self, name: str, *, artifact: bool) -> Callable[[dict[str, Any]], Publication]:
        """What to commit with the outcome of the step `name` (called in the step, while this
        run awaits it)."""

        def state_after(outcome: dict[str, Any]) -> Publication:
            state = self.snapshot()
            info = state["steps"].get(name)
            if info is None:
                return self.publication(state)
            if outcome.get("status") == "succeeded":
                value = outcome.get("value")
                info["state"] = "succeeded"
                if value is not None:
                    info["value"] = value
                if artifact:
                    state["artifacts"].append({"step": name, "value": value})
                if self.branch is None and len(self.wave) == 1 and name in self.needs:
                    self.lookahead(state, {**self.values, name: value})
            elif outcome.get("status") == "ask":
                info["state"] = "waiting"
            else:
                info["error"] = outcome.get("error")
            return self.publication(state)

        return state_after

    def next_wave(self, visited: set[str]) -> list[Step]:
        """The steps not visited yet whose every dependency is: they run together (parallel
        branches when more than one does work), in the order of `step_order`."""
        return [s for s in self.order if s.name not in visited and self.needs[s.name] <= visited]

    def skips(self, step: Step, values: dict[str, Any], skipped: set[str]) -> bool:
        return dependants_skipped(step, skipped) or (
            step.when is not None and not evaluate_when(step.when, {**self.scope(), "step": values})
        )

    def lookahead(self, state: dict[str, Any], values: dict[str, Any]) -> None:
        """Mark the steps the run will skip next and the ones it will run next, exactly as
        `run_wave` will decide them."""
        visited, skipped = set(self.visited), set(self.skipped)
        try:
            while wave := self.next_wave(visited):
                visited.update(s.name for s in wave)
                runs = False
                for step in wave:
                    if self.skips(step, values, skipped):
                        state["steps"][step.name]["state"] = "skipped"
                        skipped.add(step.name)
                    else:
                        state["steps"][step.name]["state"] = "running"
                        runs = True
                if runs:
                    return
        except Exception:  # `run_wave` meets the same error and fails the run
            return

    async def recv(self, topic: str, timeout_s: float) -> Any:
        return await DBOS.recv_async(topic, timeout_seconds=timeout_s)

    async def record(
        self,
        key: str,
        type_: str,
        payload: dict[str, Any],
        state: dict[str, Any] | None = None,
    ) -> None:
        events = [{"kind": "State", "type": type_, "payload": payload}]
        output = await DBOS.run_step_async(
            {"name": f"record:{key}"},
            record_step,
            self.stream(key),
            events,
            {"status": "ok"},
            self.publication(state if state is not None else self.snapshot()),
        )
        self.took(output)

    async def go(self) -> dict[str, Any]:
        if self.branch is not None:
            return await self.go_branch()
        if not self.run.get("start"):
            await self.recv(START_TOPIC, FOREVER_S)
        self.state["status"] = "running"
        started = self.snapshot()
        self.lookahead(started, {})
        try:
            await self.record("~start", "workflow.started", self._summary(), started)
            try:
                while wave := self.next_wave(self.visited):
                    self.visited.update(s.name for s in wave)
                    await self.run_wave(wave)
                self.state["status"] = "completed"
            except _Stop as stop:
                self.state["status"] = stop.status
                self.state["outcome"] = stop.outcome
                self.state["error"] = stop.error
                for info in self.state["steps"].values():
                    if info["state"] == "pending":
                        info["state"] = "skipped"
            end = "workflow.completed" if self.state["status"] == "completed" else "workflow.failed"
            outcome, error = self.state["outcome"], self.state["error"]
            summary = {**self._summary(), "outcome": outcome, "error": error}
            await self.record("~end", end, summary)
        except asyncio.CancelledError:
            raise  # the engine shuts down: the run resumes at the next launch
        except BaseException:
            await settle()  # failed or cancelled: it is not replayed, so its steps go in now
            raise
        # a run ends (for DBOS, for whoever awaits it) only once its events are in the log
        await settle()
        return {"status": self.state["status"], "outcome": self.state["outcome"]}

    async def run_wave(self, wave: list[Step]) -> None:
        """Run the steps that became ready together. When more than one of them does work,
        each `call` and `delegate` among them runs as a parallel branch: a child workflow
        `<run id>::<step>`, all started before any is awaited; the other steps (decisions and
        gates) run here meanwhile. The results are taken in the order of the steps."""
        runnable = []
        for step in wave:
            if self.skips(step, self.values, self.skipped):
                self.state["steps"][step.name]["state"] = "skipped"
                self.skipped.add(step.name)
            else:
                runnable.append(step)
        self.wave = runnable
        branches = [s for s in runnable if s.kind in ("call", "delegate")]
        if len(runnable) < 2:
            branches = []
        handles = []
        sent: dict[str, Any] = {}
        if branches:
            names = [s.name for s in branches]
            for name in names:
                self.state["steps"][name]["state"] = "running"
            await self.record("~branches:" + ",".join(names), "workflow.branches", {"steps": names})
            # each branch is handed the sources by reference: what changed since the run's
            # last step whose sources are in the log, not the run so far
            sources = self.sources()
            handed, sent = sources.reference(), dict(sources.steps)
            if "after" in handed:
                await settle()  # the sources referred to are in the log for the branches to read
            for step in branches:
                handles.append(await self.start_branch(step, handed))
        stopped: _Stop | None = None
        try:
            for step in runnable:
                if step not in branches:
                    await self.visit(step)
        except _Stop as stop:
            stopped = stop
        failed = []
        chained = False
        for step, handle in zip(branches, handles, strict=True):
            result: dict[str, Any] = await handle.get_result()
            seeded = result.get("sources")
            if isinstance(seeded, str) and not chained:
                # the next step refers to the first branch's sources: the run's as they were
                # when the branches started
                self._sources.seeded(seeded, sent)
                chained = True
            self.state["steps"].update(result["steps"])
            self.state["gates"].update(result["gates"])
            self.state["artifacts"].extend(result["artifacts"])
            if result["status"] == "succeeded":
                self.values[step.name] = result["value"]
            else:
                failed.append(result["error"])
        if stopped is not None:
            raise stopped
        if failed:
            raise _Stop("failed", error="; ".join(str(e) for e in failed))

    async def start_branch(self, step: Step, sources: dict[str, Any]) -> Any:
        """Start the child workflow of a parallel branch. Its input is what the branch needs,
        its size that of the step, not of the run: the IR of its step and of the steps its
        failure policy compensates with, the values they read, the run's sources by reference
        (`sources`), the run's tools and delegates (its session's surface)."""
        own = [step, *(self.steps[a.step] for a in step.on_failure if a.step in self.steps)]
        reads = {d for s in own for d in s.depends_on}
        child = {
            **{k: v for k, v in self.run.items() if k not in ("values", "sources")},
            "workflow": self.wf.model_copy(update={"steps": tuple(own)}).model_dump(mode="json"),
            "tools": self.ctx["tools"],
            "delegates": self.ctx["delegates"],
            "parent": self.id,
            "branch": step.name,
            "values": {k: v for k, v in self.values.items() if k in reads},
            "sources": sources,
            "facts": self.ctx["facts"],
            "env": self.ctx["env"],
            "start": True,
        }
        with SetWorkflowID(f"{self.id}::{step.name}"):
            return await DBOS.start_workflow_async(interpret, child)

    async def go_branch(self) -> dict[str, Any]:
        """A parallel branch: one `call` (with its failure policy) or `delegate` step of the
        run, in a child workflow; returns the step's state, gates and artifacts to the run."""
        assert self.branch is not None
        step = self.steps[self.branch]
        self.state["status"] = "running"
        info = self.state["steps"][step.name]
        info["state"] = "running"
        status, value, error = "succeeded", None, None
        try:
            value = await (self.call(step) if step.kind == "call" else self.delegate(step))
            info["state"] = "succeeded"
            if value is not None:
                info["value"] = value
        except _Stop as stop:
            status, error = "failed", stop.error
        await settle()  # the run takes the branch's result once its events are in the log
        view = self.publication(self.state)[1]
        out = {"status": status, "value": value, "error": error, **view}
        if self.chained is not None:
            out["sources"] = self.chained  # the run's next step may refer to them
        return out

    def _summary(self) -> dict[str, Any]:
        return {"workflow": self.wf.name, "id": self.id, "version": self.run.get("hash")}

    def sources(self) -> RunSources:
        """What the policy of a step's call sees as the session's sources: the run's input
        (of kind `user`) and the results of the call steps before it (of their tool's trust).
        Kept for the whole run, so each result's seeded event is built once."""
        if self._handed:  # a parallel branch's, as the run handed them
            return self._sources
        known = self._sources.steps
        for name, value in self.values.items():
            step = self.steps.get(name)
            if step is None or step.kind != "call":
                continue
            if value is None:
                self._sources.discard(name)
            elif (found := known.get(name)) is None or found[1] is not value:
                self._sources.add(name, step.tool, value)
        return self._sources

    def scope(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "step": self.values,
            "actor": self.ctx["actor"],
            "env": self.ctx["env"],
            "facts": self.ctx["facts"].get("values") or {},
            "resource": self.ctx["resource"],
        }

    async def visit(self, step: Step) -> None:
        info = self.state["steps"][step.name]
        if self.skips(step, self.values, self.skipped):
            info["state"] = "skipped"
            self.skipped.add(step.name)
            return
        info["state"] = "running"
        if step.kind == "call":
            value = await self.call(step)
        elif step.kind == "delegate":
            value = await self.delegate(step)
        elif step.kind == "decide":
            value = await self.gate(
                step.name,
                question=step.question,
                options=list(step.options),
                by=[step.by] if step.by is not None else [],
                timeout_ms=step.timeout_ms,
                default=step.default,
            )
            ends = ending_options(self.wf, step.name)
            if value in ends:
                self.values[step.name] = value
                info["state"] = "succeeded"
                info["value"] = value
                raise _Stop("completed", outcome={"step": step.name, "option": value})
        else:
            await self.wait_for_facts(step)
            value = None
        self.values[step.name] = value
        info["state"] = "succeeded"
        if value is not None:
            info["value"] = value

    # -- call steps, with the failure policy -----------------------------------------------------

    async def call(self, step: Step, attempt_base: int = 1) -> Any:
        info = self.state["steps"][step.name]
        attempt = attempt_base
        outcome = await self.attempt(step, attempt)
        actions = list(step.on_failure)
        while outcome["status"] != "succeeded":
            if not actions:
                info["state"] = "failed"
                info["error"] = outcome.get("error")
                raise _Stop("failed", error=f"step `{step.name}`: {outcome.get('error')}")
            action = actions.pop(0)
            if action.kind == "retry" and outcome["status"] == "failed":
                backoff_ms = action.backoff_ms or 0
                for n in range(action.count or 1):
                    if backoff_ms:
                        await DBOS.sleep_async(backoff_ms * (2**n) / 1000)
                    attempt += 1
                    outcome = await self.attempt(step, attempt)
                    if outcome["status"] == "succeeded":
                        break
            elif action.kind == "compensate" and action.step in self.steps:
                await self.compensate(self.steps[action.step], step)
                info["state"] = "compensated"
                if not any(a.kind == "escalate" for a in actions):
                    raise _Stop("failed", error=f"step `{step.name}` failed and was compensated")
            elif action.kind == "escalate":
                gate = f"{step.name}.escalation"
                choice = await self.gate(
                    gate,
                    question=f"`{step.name}` failed: {outcome.get('error')}. Retry or abort?",
                    options=["retry", "abort"],
                    by=[action.approver] if action.approver is not None else [],
                    timeout_ms=None,
                    default=None,
                    reopen=True,
                )
                if choice == "abort":
                    info["state"] = "failed"
                    raise _Stop("failed", error=f"step `{step.name}` aborted after escalation")
                attempt += 1
                outcome = await self.attempt(step, attempt)
                actions = [action]  # another failure escalates again
        info["attempts"] = attempt
        value = outcome.get("value")
        self.state["artifacts"].append({"step": step.name, "value": value})
        return value

    async def attempt(self, step: Step, attempt: int) -> dict[str, Any]:
        info = self.state["steps"][step.name]
        info["attempts"] = attempt
        args = {k: resolve_value(v, self.scope()) for k, v in step.args.items()}
        key = f"{step.name}#{attempt}"
        call_id = f"{self.id}/{key}"
        outcome = await self._run_call(step, args, key, call_id, None)
        if outcome["status"] == "ask":
            gate = f"{step.name}.approval"
            info["state"] = "waiting"
            request = outcome["request"]
            choice = await self.gate(
                gate,
                question=f"Approve this call of `{step.tool}`? {request['why']}",
                options=["approve", "deny"],
                by=[Approver.model_validate(a) for a in outcome["approvers"]],
                timeout_ms=step.timeout_ms,
                default="deny",
                # the frozen call, and the request it opened: an operator reviews it at the gate
                preview={**request, "request_id": outcome.get("request_id")},
                not_by=outcome.get("not_by"),
            )
            info["state"] = "running"
            # the request the first pass opened leaves the operators' lists, whatever was chosen
            await DBOS.run_step_async(
                {"name": f"close:{key}"}, close_request, outcome.get("request_id"), gate, choice
            )
            if choice != "approve":
                return {"status": "denied", "error": "the approver denied the call"}
            decided = self.state["gates"][gate]
            approval = {"actor": decided.get("actor") or {}}
            outcome = await self._run_call(step, args, key + "+approved", call_id, approval)
        return outcome

    async def _run_call(
        self,
        step: Step,
        args: dict[str, Any],
        key: str,
        call_id: str,
        approval: dict[str, Any] | None,
    ) -> dict[str, Any]:
        assert step.tool is not None
        output: dict[str, Any] = await DBOS.run_step_async(
            {"name": f"call:{key}"},
            call_step,
            {**self.ctx, "sources": self.sources()},
            step.name,
            step.tool,
            args,
            self.stream(key),
            call_id,
            approval,
            self.after(step.name, artifact=not step.compensation),
        )
        if _chainable(output):
            self._sources.seeded(self.stream(key))
            self.chained = self.stream(key)
        return self.took(output)

    async def compensate(self, comp: Step, failed: Step) -> None:
        """Run a compensation step with its references bound now (saga order: the caller runs
        them in reverse order of the work they undo)."""
        args = {k: resolve_value(v, self.scope()) for k, v in comp.args.items()}
        key = f"{comp.name}@{failed.name}"
        self.state["steps"].setdefault(comp.name, {"kind": comp.kind, "state": "pending"})
        self.state["steps"][comp.name]["state"] = "running"
        outcome = await self._run_call(comp, args, key, f"{self.id}/{key}", None)
        self.state["steps"][comp.name]["state"] = (
            "succeeded" if outcome["status"] == "succeeded" else "failed"
        )
        if outcome["status"] != "succeeded":
            self.state["steps"][comp.name]["error"] = outcome.get("error")

    async def delegate(self, step: Step) -> Any:
        context = [resolve_value(v, self.scope()) for v in step.context]
        output: dict[str, Any] = await DBOS.run_step_async(
            {"name": f"delegate:{step.name}"},
            delegate_step,
            self.ctx,
            {"name": step.name, "goal": step.goal, "agent": step.agent},
            context,
            self.stream(step.name),
            self.after(step.name, artifact=True),
        )
        outcome = self.took(output)
        if outcome["status"] != "succeeded":
            self.state["steps"][step.name]["state"] = "failed"
            raise _Stop("failed", error=f"step `{step.name}`: {outcome.get('error')}")
        self.state["artifacts"].append({"step": step.name, "value": outcome["value"]})
        return outcome["value"]

    # -- gates ----------------------------------------------------------------------------------

    async def gate(
        self,
        gate: str,
        *,
        question: str | None,
        options: list[str],
        by: list[Approver],
        timeout_ms: int | None,
        default: str | None,
        preview: dict[str, Any] | None = None,
        reopen: bool = False,
        not_by: Mapping[str, Any] | None = None,
    ) -> str:
        """Wait for a person's decision on `gate`: recorded as waiting (with the state), answered
        by a message on `<id>/<gate>` (`recv`), or the default when the durable deadline
        passes. A message that fails the checks (not an option, not an approver, the requester
        `not_by` under separation of duties) is ignored."""
        opened: float = await DBOS.run_step_async({"name": f"clock:{gate}"}, _now)
        deadline = opened + (timeout_ms / 1000 if timeout_ms is not None else FOREVER_S)
        self.state["gates"][gate] = {
            "status": "waiting",
            "question": question,
            "options": options,
            "by": [a.model_dump(mode="json") for a in by],
            "deadline": _iso(deadline) if timeout_ms is not None else None,
            "default": default,
            "workflow_id": self.dbos_id,
            **({"preview": preview} if preview is not None else {}),
            **({"not_by": dict(not_by)} if not_by is not None else {}),
        }
        self.state["status"] = "waiting"
        await self.record(
            gate + "~waiting", "workflow.gate.waiting", {"gate": gate, **self.state["gates"][gate]}
        )
        await settle()  # the gate waits once `status` and `decide` can see it waiting
        # also a DBOS event, for DBOS's own tools: `get_event(id, "gate:<gate>", timeout)`
        # blocks until the run reaches the gate
        await DBOS.set_event_async(f"gate:{gate}", self.state["gates"][gate])
        topic = f"{self.id}/{gate}"
        checks = 0
        while True:
            remaining = deadline - opened
            message = await self.recv(topic, max(remaining, 0.0))
            if message is None:
                if default is None:
                    raise _Stop("failed", error=f"the gate `{gate}` timed out without a default")
                option, decided_by, actor = default, "timeout", None
                break
            chosen = message.get("option") if isinstance(message, dict) else None
            actor = message.get("actor") if isinstance(message, dict) else None
            if chosen in options and may_decide(by, not_by, chosen, actor or {}):
                option, decided_by = str(chosen), who(actor or {})
                break
            checks += 1  # not a valid decision: keep waiting until the same deadline
            opened = await DBOS.run_step_async({"name": f"clock:{gate}#{checks}"}, _now)
        self.state["gates"][gate].update(
            {"status": "decided", "option": option, "by": decided_by, "actor": actor}
        )
        self.state["status"] = "running"
        await self.record(
            gate, "workflow.gate.decided", {"gate": gate, "option": option, "by": decided_by}
        )
        if reopen:
            del self.state["gates"][gate]
        return option

    async def wait_for_facts(self, step: Step) -> None:
        """A `gate` step: wait until its condition over facts holds, re-checked at each
        `update`; past its timeout the step fails."""
        assert step.condition is not None
        opened: float = await DBOS.run_step_async({"name": f"clock:{step.name}"}, _now)
        timeout_s = step.timeout_ms / 1000 if step.timeout_ms is not None else FOREVER_S
        now = opened
        checks = 0
        while not evaluate_when(step.condition, self.scope()):
            if checks == 0:
                self.state["steps"][step.name]["state"] = "waiting"
                await self.record(
                    step.name + "~waiting", "workflow.gate.waiting", {"gate": step.name}
                )
                await settle()
            message = await self.recv(FACTS_TOPIC, max(opened + timeout_s - now, 0.0))
            if message is None:
                self.state["steps"][step.name]["state"] = "failed"
                raise _Stop("failed", error=f"the gate `{step.name}` timed out")
            if isinstance(message, dict):
                facts = message.get("snapshot") or {**self.ctx["facts"]}
                facts["values"] = {
                    **(self.ctx["facts"].get("values") or {}),
                    **(facts.get("values") or {}),
                    **(message.get("facts") or {}),
                }
                self.ctx["facts"] = facts
                self.ctx["env"] = {**self.ctx["env"], **(message.get("env") or {})}
            checks += 1
            now = await DBOS.run_step_async({"name": f"clock:{step.name}#{checks}"}, _now)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _chainable(output: Mapping[str, Any]) -> bool:
    """Whether a call step's output (live, or replayed from its checkpoint) recorded its
    sources unscrubbed: the next step's `workflow.sources` refers to them (`after`)."""
    for found in output.get("events") or ():
        if found[2] == WORKFLOW_SOURCES:
            text = found[3]
            return isinstance(text, str) and not json.loads(text).get("scrubbed")
    return False
