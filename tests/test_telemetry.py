"""OpenTelemetry: off by default, one call to enable; spans for exposure, normalize, decide,
approval wait, invoke and workflow steps carry the decision id, effect, rule, policy version
and input hash, and never an argument's value or a secret."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from harnessc.runtime import Harness, PendingCall
from harnessc.runtime.integrations import telemetry
from harnessc.runtime.model import Spec
from harnessc.runtime.workflows import steps as steps
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .test_approvals import compile_text

SPEC = """
harness t { version "1.0.0" }
tool shell.run {
  summary "Run a command."
  effects write external
  risk high
  timeout 1m
  input { cmd: string, n: int?, token: string? secret }
}
tool files.read { summary "Read a file."; effects read; input { path: string } }
policy p {
  default deny
  ops: ask shell.run {
    approver role "ops"
    grant once ttl 10m
    reason "Operators approve each command."
  }
  reads: allow files.read
}
surface s { expose shell.*, files.* }
agent a { surface s; policy p }
"""

OPS = {"user": "u-ops", "role": "ops"}
USER = {"user": "u-1", "role": "dev"}
# values that must never leave the process through a span
CMD = "cat /srv/payroll-7f3e9a.csv"
TOKEN = "tok-5ecr3t-horse-battery"
NUMBER = 48151623
PATH = "/home/u-1/diary-0c1d.txt"
QUERY_WORD = "quarterly-zebra-report"
NEVER = (CMD, TOKEN, str(NUMBER), PATH, QUERY_WORD, "payroll", "5ecr3t", "diary")


class Worker:
    """What `workflow_steps` reads of a workflow worker: the harness, the delegate runner."""

    def __init__(self, harness: Harness, delegate: Any = None) -> None:
        self.harness = harness
        self.log = None  # no appender: a step's output is appended when handed over
        self.delegate = delegate
        self.previewers: dict[str, Any] = {}
        self.verifiers: dict[str, Any] = {}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("otel"), SPEC)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(tracer_provider=provider)
    try:
        yield exporter
    finally:
        telemetry.disable()


def harness(spec: Spec) -> Harness:
    h = Harness(spec)
    h.bind("shell.run", lambda args: {"ok": True, "echo": args["cmd"]})
    h.bind("files.read", lambda args: {"text": f"contents of {args['path']}"})
    return h


def frozen(result: object) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def everything_said(exporter: InMemorySpanExporter) -> str:
    """Every name, attribute, event and status text of every span, as one text."""
    parts: list[str] = []
    for span in exporter.get_finished_spans():
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
        parts.append(span.status.description or "")
    return "\n".join(parts)


def step_span(exporter: InMemorySpanExporter, **attributes: str) -> None:
    """The one workflow-step span, with `attributes` (`harnessc.workflow.<key>`, `_` for `.`)
    and the governed call's three stages as its children."""
    (step,) = by_name(exporter)["harnessc.workflow.step"]
    found = step.attributes or {}
    for key, value in attributes.items():
        assert found[f"harnessc.workflow.{key.replace('_', '.')}"] == value
    inside = [x for x in exporter.get_finished_spans() if x.parent is not None]
    assert {x.name for x in inside if x.parent.span_id == step.context.span_id} == {  # type: ignore[union-attr]
        "harnessc.normalize",
        "harnessc.decide",
        "harnessc.invoke",
    }


def governed_call(h: Harness) -> tuple[Any, PendingCall]:
    s = h.session("a", actor=USER, task="t-1")
    s.expose(f"run the {QUERY_WORD} command with {TOKEN}")
    call = frozen(s.normalize("shell.run", "call-1", {"cmd": CMD, "n": NUMBER, "token": TOKEN}))
    decision = s.decide(call)
    assert decision.effect == "ask"
    request = s.request_approval(call)
    assert h.approve(request.request_id, by=OPS).status == "approved"
    assert s.invoke(call).ok
    return s, call


def test_telemetry_is_off_until_enabled(spec: Spec) -> None:
    assert telemetry.tracer is None and not telemetry.enabled()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    governed_call(harness(spec))  # nothing is sent anywhere while off
    telemetry.enable(tracer_provider=provider)
    try:
        governed_call(harness(spec))
    finally:
        telemetry.disable()
    governed_call(harness(spec))
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("harnessc.invoke") == 1  # only the call made while enabled


def test_each_stage_is_a_span_with_the_decision_it_made(
    spec: Spec, spans: InMemorySpanExporter
) -> None:
    h = harness(spec)
    s, call = governed_call(h)
    found = by_name(spans)
    assert set(found) == {
        "harnessc.expose",
        "harnessc.normalize",
        "harnessc.decide",
        "harnessc.approval.wait",
        "harnessc.invoke",
    }
    decisions = [e.payload for e in h.store.read(s.id) if e.type == "decision"]
    asked, authorised = decisions[0], decisions[-1]
    first = found["harnessc.decide"][0].attributes or {}
    assert first["harnessc.decision.id"] == asked["decision_id"]
    assert first["harnessc.decision.effect"] == "ask"
    assert first["harnessc.decision.rule"] == "p.ops"
    assert first["harnessc.policy.version"] == h.policy_version
    assert first["harnessc.input_hash"] == call.input_hash
    assert first["harnessc.tool.id"] == "shell.run"
    wait = found["harnessc.approval.wait"][0]
    attributes = wait.attributes or {}
    assert attributes["harnessc.decision.id"] == asked["decision_id"]
    assert attributes["harnessc.approval.outcome"] == "approved"
    assert attributes["harnessc.decision.rule"] == "p.ops"
    assert wait.end_time is not None and wait.start_time is not None
    assert wait.end_time >= wait.start_time
    invoked = found["harnessc.invoke"][0].attributes or {}
    assert invoked["harnessc.result.status"] == "success"
    assert invoked["harnessc.decision.id"] == authorised["decision_id"]
    assert invoked["harnessc.input_hash"] == call.input_hash
    assert invoked["harnessc.policy.version"] == h.policy_version
    exposed = found["harnessc.expose"][0].attributes or {}
    assert exposed["harnessc.expose.tools"] == 2


def test_no_argument_value_query_or_secret_reaches_a_span(
    spec: Spec, spans: InMemorySpanExporter
) -> None:
    h = harness(spec)
    s, _ = governed_call(h)
    # a refused call, a denied one and a read that returns the path in its data
    s.normalize("shell.run", "call-2", {"cmd": 7, "token": TOKEN})
    read = frozen(s.normalize("files.read", "call-3", {"path": PATH}))
    s.decide(read)
    assert s.invoke(read).data == {"text": f"contents of {PATH}"}
    request = s.request_approval(
        call := frozen(s.normalize("shell.run", "call-4", {"cmd": CMD, "token": TOKEN}))
    )
    h.deny(request.request_id, by=OPS, reason=f"not {CMD}")
    s.invoke(call)
    said = everything_said(spans)
    assert "harnessc.refusal.code=invalid-args" in said
    assert "harnessc.approval.outcome=denied" in said
    for value in NEVER:
        assert value not in said


def test_ainvoke_and_workflow_steps_are_spans(spec: Spec, spans: InMemorySpanExporter) -> None:
    h = harness(spec)
    s = h.session("a", actor=USER)
    call = frozen(s.normalize("files.read", "call-1", {"path": PATH}))
    s.decide(call)
    assert asyncio.run(s.ainvoke(call)).ok
    (span,) = by_name(spans)["harnessc.invoke"]
    assert (span.attributes or {})["harnessc.async"] is True

    ctx = {"workflow_id": "wf-1", "workflow": "nightly", "agent": "a", "actor": USER}
    steps.attach(Worker(h))
    try:
        output = steps.call_step(
            ctx,
            "read",
            "files.read",
            {"path": PATH},
            "workflow:wf-1/read",
            "wf-1:read",
            None,
            lambda outcome: ("workflow.state", {"state": "running"}),
        )
    finally:
        steps.attach(None)
    assert output["outcome"]["status"] == "succeeded"
    step_span(spans, id="wf-1", step="read", step_status="succeeded")
    assert PATH not in everything_said(spans)


DELEGATING = """
harness d { version "1.0.0" }
tool files.read { summary "Read a file."; effects read; input { path: string } }
policy p { default deny; reads: allow files.read }
surface planner_tools { expose files.* }
surface child_tools { expose files.* }
agent planner { surface planner_tools; policy p; delegate helper }
agent helper { surface child_tools; policy p }
"""


def test_a_delegate_step_is_a_span_holding_the_childs_calls(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """A workflow's delegate step: one `harnessc.workflow.step` span of kind delegate, its
    status, and the child session's own normalize/decide/invoke under it; the goal and the
    child's argument values stay out of every span."""
    h = Harness(compile_text(tmp_path, DELEGATING))
    h.bind("files.read", lambda args: {"text": f"contents of {args['path']}"})
    goal = "Summarise the diary-0c1d notes."

    def run_child(child: Any, goal_: str, context: list[Any]) -> dict[str, Any]:
        call = frozen(child.normalize("files.read", "child-1", {"path": PATH}))
        child.decide(call)
        assert child.invoke(call).ok
        return {"summary": "done"}

    ctx = {"workflow_id": "wf-2", "workflow": "nightly", "agent": "planner", "actor": USER}
    steps.attach(Worker(h, delegate=run_child))
    try:
        output = steps.delegate_step(
            ctx,
            {"name": "summarise", "goal": goal, "agent": "helper"},
            [],
            "workflow:wf-2/summarise",
            lambda outcome: ("workflow.state", {"state": "running"}),
        )
    finally:
        steps.attach(None)
    assert output["outcome"]["status"] == "succeeded", output
    step_span(spans, id="wf-2", step="summarise", step_kind="delegate", step_status="succeeded")
    said = everything_said(spans)
    assert PATH not in said and "diary" not in said
