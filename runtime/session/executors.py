"""Executors: the implementations bound to tools, how they are run, and the `Result` they leave.

`Executors.bind(tool_id, fn)` (or `@harness.implement(tool_id)`) binds a sync or async callable
taking the arguments (`fn(args)`) or the arguments and an `ExecutorContext` (`fn(args, ctx)`).
It returns the output data (a mapping), an `Outcome` to say more (a partial result, an
unknown outcome, a retryable failure), or `Accepted` when an external system took the work and
its result comes later (`Harness.complete` reports it). Running it:

- enforces the tool's timeout (the call's `timeout_ms` execution parameter when smaller); a
  sync executor cannot be stopped, so past its timeout the result is `unknown` with
  `side_effect=True` (unless the tool is read-only), and whatever the thread returns later is
  never recorded as the call's result (only an `action.late_result` event says it returned);
- turns every exception into a FAILED result — a traceback never escapes to the caller;
- validates the data against the tool's output schema when one is declared;
- records who ran it and when, and a compact observation for the model (secret output fields
  redacted);
- scrubs the call's secret argument values (`Secrets`) from the error and the observation, and
  from the data `Result.to_dict` records.

>>> from harnessc.runtime.model import Tool
>>> ex = Executors()
>>> ex.bind("t", lambda args: {"ok": True})
>>> ex.get("t").name
'<lambda>'
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import json
import os
import reprlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from ..judge.normalize import PendingCall, Validator, describe_value, thaw
from ..log.events import NO_SECRETS, Clock, Secrets, format_time, redact
from ..model.ir import Tool

__all__ = [
    "ACCEPTED",
    "OBSERVATION_LIMIT",
    "STATUSES",
    "Accepted",
    "BoundExecutor",
    "ExecutorContext",
    "Executors",
    "Outcome",
    "Result",
    "run_async",
    "run_sync",
    "settle",
]

STATUSES: tuple[str, ...] = ("success", "failure", "unknown", "partial")
"""What an executor (or a completion) may report."""
ACCEPTED = "accepted"
"""The status of a call whose executor returned `Accepted`: the result comes later."""
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
class Accepted:
    """What an executor returns when an external system took the work and the result will
    come later: the call's `Result` has status `accepted`, its action waits in WAITING_RESULT
    and the application reports the outcome with `Harness.complete(action_id, …)`.

    `handle` is the external system's id for the work (a job id, a ticket); `observation` is
    what the model reads meanwhile; `side_effect` says whether accepting it already changed
    something (by default: whether the tool has a side effect at all).

    >>> Accepted(handle="job-17").handle
    'job-17'
    """

    handle: str | None = None
    observation: str | None = None
    side_effect: bool | None = None


@dataclass(frozen=True)
class ExecutorContext:
    """What an executor knows about the call it runs. `action_id` names the action (give it
    to an external system so its callback can `Harness.complete` it); `idempotency_key` is
    the call's (`tool_call_id:input_hash`), to pass on to a system that deduplicates."""

    pending: PendingCall
    session_id: str
    actor: Mapping[str, Any]
    task_id: str | None
    timeout_ms: int
    action_id: str | None = None

    def __init__(
        self,
        pending: PendingCall,
        session_id: str,
        actor: Mapping[str, Any],
        task_id: str | None,
        timeout_ms: int,
        action_id: str | None = None,
    ) -> None:
        # as Result's: one dictionary update instead of a setattr per field (one per call)
        self.__dict__.update(
            pending=pending,
            session_id=session_id,
            actor=actor,
            task_id=task_id,
            timeout_ms=timeout_ms,
            action_id=action_id,
        )

    @property
    def idempotency_key(self) -> str:
        return self.pending.key


@dataclass(frozen=True)
class Result:
    """The recorded result of one invocation.

    `status`: success, failure, unknown (it may or may not have happened: a timeout), partial,
    or accepted (an external system took it; `handle` names the work and the result comes
    with `Harness.complete`). `side_effect`: whether a side effect may have happened (False
    only when the tool is read-only or the call never started). `executor`: who ran it (the
    bound callable and the session's actor); `completed_by`: who reported an asynchronous
    result. `data` is the output (validated, secrets redacted in events). `action_id` names
    the action in `Harness.complete` and `Harness.cancel`.

    `secrets` are the call's secret argument values: `error` and `observation` never hold one
    (an executor's exception quoting its token reads `[REDACTED]`), and `to_dict` scrubs the
    data and the handle of them too; `data` itself is the executor's, unchanged.
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
    action_id: str | None = None
    handle: str | None = None
    completed_by: str | None = None
    secrets: Secrets = field(default=NO_SECRETS, repr=False, compare=False)

    def __init__(
        self,
        tool_id: str,
        tool_call_id: str,
        input_hash: str,
        status: str,
        data: Mapping[str, Any] | None,
        observation: str,
        error: str | None,
        error_category: str | None,
        retryable: bool,
        side_effect: bool,
        executor: str | None,
        actor: str | None,
        started_at: str | None,
        finished_at: str | None,
        duration_ms: float,
        state: str,
        ran: bool = True,
        decision_id: str | None = None,
        grant_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        action_id: str | None = None,
        handle: str | None = None,
        completed_by: str | None = None,
        secrets: Secrets = NO_SECRETS,
    ) -> None:
        # written here rather than generated: a frozen dataclass's own __init__ sets each of
        # these fields through object.__setattr__, which costs more than a no-op executor
        self.__dict__.update(
            tool_id=tool_id,
            tool_call_id=tool_call_id,
            input_hash=input_hash,
            status=status,
            data=data,
            observation=observation,
            error=error,
            error_category=error_category,
            retryable=retryable,
            side_effect=side_effect,
            executor=executor,
            actor=actor,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=duration_ms,
            state=state,
            ran=ran,
            decision_id=decision_id,
            grant_id=grant_id,
            extra={} if extra is None else extra,
            action_id=action_id,
            handle=handle,
            completed_by=completed_by,
            secrets=secrets,
        )

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def accepted(self) -> bool:
        """The work was accepted and its result has not been reported yet."""
        return self.status == ACCEPTED

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Result:
        """A result as `to_dict` recorded it (secret output fields stay redacted)."""
        names = {f for f in cls.__dataclass_fields__ if f not in ("extra", "secrets")}
        known = {k: v for k, v in value.items() if k in names}
        return cls(**known)

    def to_dict(self, output_schema: Any = None) -> dict[str, Any]:
        data = self.data
        if data is not None and output_schema is not None:
            data = redact(output_schema, data)
        if data is not None and self.secrets:
            data = self.secrets.scrub(thaw(data))
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
            "action_id": self.action_id,
            "handle": self.secrets.text(self.handle) if self.handle else self.handle,
            "completed_by": self.completed_by,
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


def _observation(
    tool: Tool, status: str, data: Any, error: str | None, secrets: Secrets = NO_SECRETS
) -> str:
    if error:
        text = f"{status}: {error}"
    else:
        try:
            # a model never reads a secret either (`redact` leaves the thawed data plain)
            data = redact(tool.output, thaw(data))
        except RecursionError:  # never shown unredacted: such data is not recorded either
            body = "data that contains itself, or nests too deeply"
        else:
            try:
                body = "".join(_OBSERVATION_ONE_SHOT(data, 0))
            except (TypeError, ValueError, RecursionError):
                body = reprlib.repr(data)  # bounded in depth and length
        text = f"{status}: {body}"
    text = secrets.text(text)  # before it is cut, so no part of a value is left at the end
    return text if len(text) <= OBSERVATION_LIMIT else text[: OBSERVATION_LIMIT - 1] + "…"


_OBSERVATION_JSON = json.JSONEncoder(
    sort_keys=True, default=str, ensure_ascii=False, check_circular=False
)
"""Writes a result's data into its observation (made once: `json.dumps` with options makes
an encoder per call). Data with a cycle never gets here: thawing it fails first."""
_OBSERVATION_ONE_SHOT: Callable[[Any, int], Any] = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None,
        _OBSERVATION_JSON.default,
        json.encoder.encode_basestring,
        None,
        _OBSERVATION_JSON.key_separator,
        _OBSERVATION_JSON.item_separator,
        True,
        False,
        True,
    )
    if getattr(json.encoder, "c_make_encoder", None) is not None
    else lambda data, _: _OBSERVATION_JSON.iterencode(data, _one_shot=True)
)
"""`_OBSERVATION_JSON`'s own one-shot encoder, made once instead of on every `encode`: the
text's parts (`encode` joins them)."""


def _side_effect_possible(tool: Tool, pending: PendingCall | None) -> bool:
    effects = set(tool.effects)
    op = pending.args.get("op") if pending is not None else None
    if isinstance(op, str) and op in tool.operations:
        effects = set(tool.operations[op].effects)
    return bool(effects - {"read", "preview", "idempotent"})


class _Judged(NamedTuple):
    """What a return value (or a failure) says, before the `Result` is written (a tuple: made
    on every call)."""

    status: str
    data: Mapping[str, Any] | None
    error: str | None
    category: str | None
    retryable: bool
    observation: str | None
    side_effect: bool
    handle: str | None = None


def _judge_value(
    tool: Tool, pending: PendingCall | None, value: Any, output: Validator | None, side: bool
) -> _Judged:
    """What an executor's (or a completion's) return value says: data, an `Outcome` or
    `Accepted`, checked against the output schema."""
    if isinstance(value, Accepted):
        handle = value.handle if isinstance(value.handle, str) else None
        where = f" as `{handle}`" if handle else ""
        return _Judged(
            ACCEPTED,
            None,
            None,
            None,
            False,
            value.observation
            or f"accepted: `{tool.id}` was accepted{where}; its result comes later",
            side if value.side_effect is None else value.side_effect,
            handle,
        )
    if isinstance(value, Outcome):
        if value.status not in STATUSES:
            return _Judged(
                "failure",
                None,
                f"the executor returned the status `{value.status}`",
                "invalid_outcome",
                False,
                None,
                side,
            )
        status, data, observation = value.status, value.data, value.observation
        err, category = value.error, value.error_category
        if value.side_effect is not None:
            side = value.side_effect
        retryable = bool(value.retryable) if value.retryable is not None else False
    else:  # plain data: what `Outcome(data=value)` says
        status, data, observation = "success", value, None
        err = category = None
        retryable = False
    shaped = output is not None and output.schema is not None and output.schema.shape is not None
    if data is not None and not shaped and type(data) is not dict and not isinstance(data, Mapping):
        # an output written as a type (`output list<{ … }>`) takes any JSON value its type does
        return _Judged(
            "failure",
            None,
            f"the executor returned {describe_value(data)}, not an object: a tool returning "
            "another type declares it (`output list<{ … }>`, `output string`)",
            "invalid_output",
            retryable,
            None,
            side,
        )
    if data is not None and output is not None and status in ("success", "partial"):
        checked, errors = output.run(data)
        if errors:
            path, message = errors[0]
            return _Judged(
                "failure",
                None,
                f"the output does not match the declared schema: {message} at `{path}`",
                "invalid_output",
                retryable,
                None,
                side,
            )
        data = checked
    return _Judged(status, data, err, category, retryable, observation, side)


def _state_of(status: str) -> str:
    if status == ACCEPTED:
        return "WAITING_RESULT"
    return "SUCCEEDED" if status in ("success", "partial") else "FAILED"


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
    decision_id: str | None = None,
    grant_id: str | None = None,
) -> Result:
    idempotent = "idempotent" in tool.effects
    side = _side_effect_possible(tool, pending)
    if timed_out:
        # the executor may still be running (a thread cannot be stopped): whatever it does
        # later is not this result, so the outcome is unknown and a write may have happened
        judged = _Judged(
            "unknown",
            None,
            f"`{tool.id}` did not finish within {ctx.timeout_ms} ms",
            "timeout",
            idempotent or not side,
            None,
            side,
        )
    elif error is not None:
        judged = _Judged(
            "failure",
            None,
            f"{type(error).__name__}: {error}",
            "executor_error",
            idempotent or not side,
            None,
            side,
        )
    else:
        judged = _judge_value(tool, pending, value, output, side)
    secrets = Secrets.of_call(tool, pending.args, pending.execution)
    user = ctx.actor.get("user")
    return Result(
        tool_id=tool.id,
        tool_call_id=pending.tool_call_id,
        input_hash=pending.input_hash,
        status=judged.status,
        data=judged.data,
        observation=_observed(tool, judged, secrets),
        error=secrets.text(judged.error) if judged.error else judged.error,
        error_category=judged.category,
        retryable=judged.retryable,
        side_effect=judged.side_effect,
        executor=bound.name,
        actor=user if isinstance(user, str) else None,
        started_at=started,
        finished_at=finished,
        duration_ms=round(duration_ms, 3),
        state=_state_of(judged.status),
        decision_id=decision_id,
        grant_id=grant_id,
        action_id=ctx.action_id,
        handle=judged.handle,
        secrets=secrets,
    )


def unrecordable(tool: Tool, result: Result, problem: str) -> Result:
    """`result` as the failure it is when its data has no JSON form (a set, an object, a value
    that contains itself): the log cannot record that data, so the call failed with
    `invalid_output`, as for data that breaks the output schema. Found where the result is
    recorded, which makes its JSON text anyway, rather than by a second walk of every result."""
    judged = _Judged(
        "failure",
        None,
        f"the executor returned data that is not JSON: {problem}",
        "invalid_output",
        result.retryable,
        None,
        result.side_effect,
    )
    return replace(
        result,
        status=judged.status,
        data=None,
        observation=_observed(tool, judged, result.secrets),
        error=result.secrets.text(judged.error) if judged.error else judged.error,
        error_category=judged.category,
        state=_state_of(judged.status),
    )


def _observed(tool: Tool, judged: _Judged, secrets: Secrets) -> str:
    """The observation of a result: the executor's own, or one written from its data."""
    if judged.observation:
        return secrets.text(judged.observation)
    return _observation(tool, judged.status, judged.data, judged.error, secrets)


def settle(
    tool: Tool,
    pending: PendingCall | None,
    accepted: Result,
    value: Any,
    error: str | BaseException | None,
    *,
    by: str | None,
    finished: datetime,
    output: Validator | None = None,
) -> Result:
    """The final result of accepted work, from what the application reports: the output data,
    an `Outcome`, or an `error`. It is checked like an executor's return value (the output
    schema included); timings run from the start of the call to `finished`. The call's secret
    values are scrubbed as in an executor's result: the pending call's when it is known, else
    the accepted result's (a call restored from the log carries none)."""
    side = accepted.side_effect or _side_effect_possible(tool, pending)
    if error is not None:
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
        judged = _Judged(
            "failure",
            None,
            str(text),
            "external_error",
            "idempotent" in tool.effects or not side,
            None,
            side,
        )
    elif isinstance(value, Accepted):
        judged = _Judged(
            "failure",
            None,
            "a completion cannot accept the work again",
            "invalid_outcome",
            False,
            None,
            side,
        )
    else:
        judged = _judge_value(tool, pending, value, output, side)
    secrets = (
        Secrets.of_call(tool, pending.args, pending.execution)
        if pending is not None
        else accepted.secrets
    )
    started = accepted.started_at
    duration = accepted.duration_ms
    if started is not None:
        begun = datetime.fromisoformat(started.replace("Z", "+00:00"))
        duration = max((finished - begun).total_seconds() * 1000, 0.0)
    return replace(
        accepted,
        status=judged.status,
        data=judged.data,
        observation=_observed(tool, judged, secrets),
        error=secrets.text(judged.error) if judged.error else judged.error,
        error_category=judged.category,
        retryable=judged.retryable,
        side_effect=judged.side_effect,
        finished_at=format_time(finished),
        duration_ms=round(duration, 3),
        state=_state_of(judged.status),
        completed_by=by,
        secrets=secrets,
    )


def _args_for(bound: BoundExecutor, pending: PendingCall, ctx: ExecutorContext) -> tuple[Any, ...]:
    args = thaw(pending.args)
    return (args, ctx) if bound.wants_context else (args,)


LateHook = Callable[[str, BaseException | None], None]
"""Called when an executor that timed out finishes anyway: `("returned", None)` or
`("raised", error)`. Its return value is dropped: the call's result stays `unknown`."""


def _watch_late(future: concurrent.futures.Future[Any], on_late: LateHook | None) -> None:
    if on_late is None:
        return

    def done(f: concurrent.futures.Future[Any]) -> None:
        if f.cancelled():
            return
        _report_late(on_late, f.exception())

    future.add_done_callback(done)


def _report_late(on_late: LateHook, error: BaseException | None) -> None:
    # a late report must never break the worker thread (nor leak a thread exception)
    with contextlib.suppress(Exception):
        on_late("raised" if error is not None else "returned", error)


class _Run:
    """One executor run handed to a worker thread by `run_sync`, and its way back: the caller
    waits on `done` (a lock the worker releases when the executor returned), which is cheaper
    than a `Future` and its condition. `claim` is taken by whoever gets there first: the worker
    to run the executor, or the caller whose timeout passed before it started (it then never
    runs). A run that outlives its timeout reports to `late` when it finishes."""

    __slots__ = ("claim", "done", "ended", "error", "fn", "late", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Lock()
        self.done.acquire()
        self.claim = threading.Lock()
        self.value: Any = None
        self.error: BaseException | None = None
        self.late: LateHook | None = None
        self.ended = False

    def execute(self) -> None:
        if not self.claim.acquire(blocking=False):
            return  # its caller gave up before it started
        try:
            self.value = self.fn()
        except BaseException as error:  # the caller's result, never this thread's
            self.error = error

    def settle(self) -> None:
        with _LATE:
            self.ended = True
            late = self.late
        self.done.release()
        if late is not None:
            _report_late(late, self.error)

    def abandon(self, on_late: LateHook | None) -> None:
        """The caller's timeout passed: the run never starts, or `on_late` hears when it ends
        (at once, from a thread of its own, if it ended meanwhile)."""
        if self.claim.acquire(blocking=False) or on_late is None:
            return
        with _LATE:
            ended = self.ended
            if not ended:
                self.late = on_late
        if ended:
            threading.Thread(target=_report_late, args=(on_late, self.error), daemon=True).start()


_LATE = threading.Lock()
"""Orders a run's end against its caller giving up on it (`_Run`)."""


class _Submitted:
    """A callable run for a `Future` (`_Workers.submit`, for `run_async`)."""

    __slots__ = ("args", "fn", "future")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], future: concurrent.futures.Future[Any]
    ) -> None:
        self.fn = fn
        self.args = args
        self.future = future

    def execute(self) -> None:
        future = self.future
        if future.set_running_or_notify_cancel():
            try:
                value = self.fn(*self.args)
            except BaseException as error:  # the caller's result, never this thread's
                future.set_exception(error)
            else:
                future.set_result(value)

    def settle(self) -> None:
        pass


class _Worker:
    """A worker thread's way in: the job to run and a pipe it sleeps on, woken by one byte.
    A byte written with `os.write` wakes it while the writer has let go of the interpreter
    lock, so it runs at once instead of waking to find the lock held (about a third of the
    cost of a queue or a lock as the wake-up)."""

    __slots__ = ("job", "wait", "wake")

    def __init__(self) -> None:
        self.job: _Run | _Submitted | None = None
        self.wait, self.wake = os.pipe()


class _Workers:
    """The threads executors run in, kept between calls: starting a thread costs more than a
    no-op executor. A call takes an idle thread or starts one; a thread goes back to the idle
    ones when its executor returns (before its caller is woken, so that the thread is asleep
    again, waiting for work, when the caller wakes), so one that outlives its timeout is given
    no other work until it finishes. At most `keep` idle threads are kept (daemons: an idle one
    never holds up the interpreter's exit)."""

    def __init__(self, keep: int = 4) -> None:
        self._keep = keep
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._count = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.start(_Submitted(fn, args, future))
        return future

    def start(self, job: _Run | _Submitted) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._count += 1
                number = self._count
        if worker is None:
            worker = _Worker()
            try:
                threading.Thread(
                    target=self._work, args=(worker,), name=f"harness-exec-{number}", daemon=True
                ).start()
            except BaseException:  # no thread (the system's limit): its pipe goes too
                os.close(worker.wait)
                os.close(worker.wake)
                raise
        worker.job = job
        try:
            os.write(worker.wake, b"\0")
        except BaseException:
            worker.job = None  # never woken (a signal's exception): it waits, idle again
            with self._lock:
                self._idle.append(worker)
            raise

    def _work(self, worker: _Worker) -> None:
        try:
            while True:
                os.read(worker.wait, 1)
                job, worker.job = worker.job, None
                if job is None:
                    continue
                job.execute()
                with self._lock:
                    stay = len(self._idle) < self._keep
                    if stay:
                        self._idle.append(worker)
                job.settle()
                del job
                if not stay:
                    return
        finally:
            os.close(worker.wait)
            os.close(worker.wake)

    def forget(self) -> None:
        """In a child process after `fork`: the parent's threads are not there."""
        self._idle = []
        self._lock = threading.Lock()


_WORKERS = _Workers()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKERS.forget)


def run_sync(
    tool: Tool,
    pending: PendingCall,
    bound: BoundExecutor,
    ctx: ExecutorContext,
    clock: Clock,
    output: Validator | None = None,
    on_late: LateHook | None = None,
    *,
    decision_id: str | None = None,
    grant_id: str | None = None,
) -> Result:
    """Run an executor in a worker thread, waiting at most the timeout; async executors run
    in their own event loop there. A thread cannot be stopped: past the timeout it is left to
    finish, its return value is dropped and `on_late` hears of it. `decision_id` and
    `grant_id` go into the result as they are."""
    started, t0 = format_time(clock()), time.perf_counter()
    value: Any = None
    error: BaseException | None = None
    timed_out = False
    call_args = _args_for(bound, pending, ctx)

    def target() -> Any:
        if bound.is_async:
            return asyncio.run(bound.fn(*call_args))
        return bound.fn(*call_args)

    run = _Run(target)
    _WORKERS.start(run)
    if run.done.acquire(timeout=ctx.timeout_ms / 1000):
        value, error = run.value, run.error
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: the caller's, as they were
    else:
        timed_out = True
        run.abandon(on_late)
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
        decision_id,
        grant_id,
    )


async def run_async(
    tool: Tool,
    pending: PendingCall,
    bound: BoundExecutor,
    ctx: ExecutorContext,
    clock: Clock,
    output: Validator | None = None,
    on_late: LateHook | None = None,
    *,
    decision_id: str | None = None,
    grant_id: str | None = None,
) -> Result:
    """Run an executor on the running event loop (a sync one in a thread), with the timeout.
    An async executor past its timeout is cancelled; a sync one is left to finish in its
    thread, as in `run_sync`."""
    started, t0 = format_time(clock()), time.perf_counter()
    value: Any = None
    error: BaseException | None = None
    timed_out = False
    call_args = _args_for(bound, pending, ctx)
    thread: concurrent.futures.Future[Any] | None = None
    try:
        if bound.is_async:
            awaitable = bound.fn(*call_args)
        else:
            thread = _WORKERS.submit(bound.fn, *call_args)
            awaitable = asyncio.wrap_future(thread)
        value = await asyncio.wait_for(awaitable, ctx.timeout_ms / 1000)
    except TimeoutError:
        timed_out = True
        if thread is not None and not thread.cancel():
            _watch_late(thread, on_late)
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
        decision_id,
        grant_id,
    )
