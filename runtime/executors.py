"""Executors: the implementations bound to tools, how they are run, and the `Result` they leave.

`Executors.bind(tool_id, fn)` (or `@harness.implement(tool_id)`) binds a sync or async callable
taking the arguments (`fn(args)`) or the arguments and an `ExecutorContext` (`fn(args, ctx)`).
It returns the output data (a mapping), or an `Outcome` to say more (a partial result, an
unknown outcome, a retryable failure). Running it:

- enforces the tool's timeout (the call's `timeout_ms` execution parameter when smaller);
- turns every exception into a FAILED result — a traceback never escapes to the caller;
- validates the data against the tool's output schema when one is declared;
- records who ran it and when, and a compact observation for the model.

>>> from harnessc.runtime.model import Tool
>>> ex = Executors()
>>> ex.bind("t", lambda args: {"ok": True})
>>> ex.get("t").name
'<lambda>'
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .events import Clock, format_time, redact
from .model import Tool
from .normalize import PendingCall, Validator, thaw

__all__ = [
    "OBSERVATION_LIMIT",
    "STATUSES",
    "BoundExecutor",
    "ExecutorContext",
    "Executors",
    "Outcome",
    "Result",
    "run_async",
    "run_sync",
]

STATUSES: tuple[str, ...] = ("success", "failure", "unknown", "partial")
OBSERVATION_LIMIT = 400
"""At most this many characters of an observation (the compact text a model reads)."""
DEFAULT_TIMEOUT_MS = 5 * 60_000


@dataclass(frozen=True)
class Outcome:
    """What an executor may return instead of plain data, to report more than success."""

    status: str = "success"
    data: Mapping[str, Any] | None = None
    observation: str | None = None
    error: str | None = None
    error_category: str | None = None
    retryable: bool | None = None
    side_effect: bool | None = None


@dataclass(frozen=True)
class ExecutorContext:
    """What an executor knows about the call it runs."""

    pending: PendingCall
    session_id: str
    actor: Mapping[str, Any]
    task_id: str | None
    timeout_ms: int


@dataclass(frozen=True)
class Result:
    """The recorded result of one invocation.

    `status`: success, failure, unknown (it may or may not have happened: a timeout) or partial.
    `side_effect`: whether a side effect may have happened (False only when the tool is
    read-only or the call never started). `executor`: who ran it (the bound callable and the
    session's actor). `data` is the output (validated, secrets redacted in events).
    """

    tool_id: str
    tool_call_id: str
    input_hash: str
    status: str
    data: Mapping[str, Any] | None
    observation: str
    error: str | None
    error_category: str | None
    retryable: bool
    side_effect: bool
    executor: str | None
    actor: str | None
    started_at: str | None
    finished_at: str | None
    duration_ms: float
    state: str
    ran: bool = True
    """False when nothing ran (not authorised, no executor)."""
    decision_id: str | None = None
    grant_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def to_dict(self, output_schema: Any = None) -> dict[str, Any]:
        data = self.data
        if data is not None and output_schema is not None:
            data = redact(output_schema, data)
        return {
            "tool_id": self.tool_id,
            "tool_call_id": self.tool_call_id,
            "input_hash": self.input_hash,
            "status": self.status,
            "data": thaw(data) if data is not None else None,
            "observation": self.observation,
            "error": self.error,
            "error_category": self.error_category,
            "retryable": self.retryable,
            "side_effect": self.side_effect,
            "executor": self.executor,
            "actor": self.actor,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_ms": self.duration_ms,
            "state": self.state,
            "ran": self.ran,
            "decision_id": self.decision_id,
            "grant_id": self.grant_id,
        }


@dataclass(frozen=True)
class BoundExecutor:
    fn: Callable[..., Any]
    name: str
    is_async: bool
    wants_context: bool


class Executors:
    """The executors bound per tool id."""

    def __init__(self) -> None:
        self._bound: dict[str, BoundExecutor] = {}

    def bind(self, tool_id: str, fn: Callable[..., Any]) -> None:
        try:
            params = [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            wants_context = len(params) >= 2
        except (TypeError, ValueError):
            wants_context = False
        # an object whose `__call__` is a coroutine function is async too
        call = type(fn).__dict__.get("__call__") if not inspect.isfunction(fn) else None
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        self._bound[tool_id] = BoundExecutor(fn, name, is_async, wants_context)

    def get(self, tool_id: str) -> BoundExecutor | None:
        return self._bound.get(tool_id)

    def __contains__(self, tool_id: str) -> bool:
        return tool_id in self._bound


def timeout_of(tool: Tool, pending: PendingCall) -> int:
    """The enforced timeout: the tool's, or the call's own when it is smaller."""
    limit = tool.timeout_ms or DEFAULT_TIMEOUT_MS
    asked = pending.execution.timeout_ms
    return min(limit, asked) if asked else limit


def _observation(status: str, data: Any, error: str | None) -> str:
    if error:
        text = f"{status}: {error}"
    else:
        try:
            body = json.dumps(thaw(data), sort_keys=True, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            body = repr(data)
        text = f"{status}: {body}"
    return text if len(text) <= OBSERVATION_LIMIT else text[: OBSERVATION_LIMIT - 1] + "…"


def _side_effect_possible(tool: Tool, pending: PendingCall) -> bool:
    effects = set(tool.effects)
    op = pending.args.get("op")
    if isinstance(op, str) and op in tool.operations:
        effects = set(tool.operations[op].effects)
    return bool(effects - {"read", "preview", "idempotent"})


def _finish(
    tool: Tool,
    pending: PendingCall,
    bound: BoundExecutor,
    ctx: ExecutorContext,
    value: Any,
    error: BaseException | None,
    timed_out: bool,
    started: str,
    finished: str,
    duration_ms: float,
    output: Validator | None,
) -> Result:
    idempotent = "idempotent" in tool.effects
    side = _side_effect_possible(tool, pending)
    status, data, err, category, retryable, observation = "success", None, None, None, False, None
    if timed_out:
        status, category = "unknown", "timeout"
        err = f"`{tool.id}` did not finish within {ctx.timeout_ms} ms"
        retryable = idempotent or not side
    elif error is not None:
        status, category = "failure", "executor_error"
        err = f"{type(error).__name__}: {error}"
        retryable = idempotent or not side
    else:
        outcome = value if isinstance(value, Outcome) else Outcome(data=value)
        if outcome.status not in STATUSES:
            status, category = "failure", "invalid_outcome"
            err = f"the executor returned the status `{outcome.status}`"
        else:
            status = outcome.status
            data = outcome.data
            err, category = outcome.error, outcome.error_category
            observation = outcome.observation
            if outcome.side_effect is not None:
                side = outcome.side_effect
            retryable = bool(outcome.retryable) if outcome.retryable is not None else False
            if data is not None and not isinstance(data, Mapping):
                status, category = "failure", "invalid_output"
                err = "the executor returned something other than an object"
                data = None
            elif data is not None and output is not None and status in ("success", "partial"):
                checked, errors = output.run(data)
                if errors:
                    path, message = errors[0]
                    status, category = "failure", "invalid_output"
                    err = f"the output does not match the declared schema: {message} at `{path}`"
                else:
                    data = checked
    return Result(
        tool_id=tool.id,
        tool_call_id=pending.tool_call_id,
        input_hash=pending.input_hash,
        status=status,
        data=data,
        observation=observation or _observation(status, data, err),
        error=err,
        error_category=category,
        retryable=retryable,
        side_effect=side,
        executor=bound.name,
        actor=ctx.actor.get("user") if isinstance(ctx.actor.get("user"), str) else None,
        started_at=started,
        finished_at=finished,
        duration_ms=round(duration_ms, 3),
        state="SUCCEEDED" if status in ("success", "partial") else "FAILED",
    )


def _args_for(bound: BoundExecutor, pending: PendingCall, ctx: ExecutorContext) -> tuple[Any, ...]:
    args = thaw(pending.args)
    return (args, ctx) if bound.wants_context else (args,)


def run_sync(
    tool: Tool,
    pending: PendingCall,
    bound: BoundExecutor,
    ctx: ExecutorContext,
    clock: Clock,
    output: Validator | None = None,
) -> Result:
    """Run an executor in a worker thread, waiting at most the timeout; async executors run
    in their own event loop there."""
    started, t0 = format_time(clock()), time.perf_counter()
    value: Any = None
    error: BaseException | None = None
    timed_out = False
    call_args = _args_for(bound, pending, ctx)

    def target() -> Any:
        if bound.is_async:
            return asyncio.run(bound.fn(*call_args))
        return bound.fn(*call_args)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-exec")
    try:
        future = pool.submit(target)
        try:
            value = future.result(timeout=ctx.timeout_ms / 1000)
        except concurrent.futures.TimeoutError:
            timed_out = True
            future.cancel()
        except Exception as exc:  # an executor's failure is a result, never a traceback
            error = exc
    finally:
        pool.shutdown(wait=False)
    return _finish(
        tool,
        pending,
        bound,
        ctx,
        value,
        error,
        timed_out,
        started,
        format_time(clock()),
        (time.perf_counter() - t0) * 1000,
        output,
    )


async def run_async(
    tool: Tool,
    pending: PendingCall,
    bound: BoundExecutor,
    ctx: ExecutorContext,
    clock: Clock,
    output: Validator | None = None,
) -> Result:
    """Run an executor on the running event loop (a sync one in a thread), with the timeout."""
    started, t0 = format_time(clock()), time.perf_counter()
    value: Any = None
    error: BaseException | None = None
    timed_out = False
    call_args = _args_for(bound, pending, ctx)
    try:
        if bound.is_async:
            awaitable = bound.fn(*call_args)
        else:
            awaitable = asyncio.to_thread(bound.fn, *call_args)
        value = await asyncio.wait_for(awaitable, ctx.timeout_ms / 1000)
    except TimeoutError:
        timed_out = True
    except Exception as exc:  # an executor's failure is a result, never a traceback
        error = exc
    return _finish(
        tool,
        pending,
        bound,
        ctx,
        value,
        error,
        timed_out,
        started,
        format_time(clock()),
        (time.perf_counter() - t0) * 1000,
        output,
    )
