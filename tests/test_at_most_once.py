"""A call that ran never runs again, whatever process holds its session: the store refuses a
second RUNNING for a call, a session catches up on its stream before deciding, and a RUNNING
action whose process died is reported UNKNOWN, never run again (docs/runtime.md, "At most
once across processes")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.model import Spec

from .test_approvals import OPS, SHELL, compile_text

ARGS = {"cmd": "ls", "n": 1}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("once"), SHELL)


def frozen(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


@pytest.mark.xfail(strict=True, reason="issue 38: a session open in two harnesses")
@pytest.mark.parametrize("opened", ["before the approval", "after the approval"])
def test_a_call_run_in_one_harness_is_not_run_again_by_another_on_the_same_log(
    spec: Spec, tmp_path: Path, opened: str
) -> None:
    """The issue's race: B holds the session open while A approves, spends and finishes the
    call; B decides the same call again. It gets the recorded decision and result: no second
    approval request, no second execution."""
    db = tmp_path / "log.db"
    runs: list[str] = []

    def executor(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        runs.append(ctx.action_id)
        return {"ok": True}

    first = Harness(spec, store=SQLiteStore(db))
    first.bind("shell.run", executor)
    a = first.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = frozen(a.normalize("shell.run", "call-1", ARGS))
    request = a.request_approval(call)
    second = Harness(spec, store=SQLiteStore(db))
    second.bind("shell.run", executor)
    if opened == "before the approval":
        b = second.resume(a.id)  # open in both processes at once
    first.approve(request.request_id, by=OPS)
    if opened == "after the approval":
        b = second.resume(a.id)

    done = a.invoke(call)
    assert done.ran and done.status == "success" and len(runs) == 1

    again = frozen(b.normalize("shell.run", "call-1", ARGS))
    decision = b.decide(again)
    assert decision.effect == "ask"
    if decision.effect == "ask":
        request = b.request_approval(again)
        if request.status == "pending":
            second.approve(request.request_id, by=OPS)
            b.decide(again)
    result = b.invoke(again)
    assert runs == [done.action_id], "the call ran again in the second harness"
    assert result.action_id == done.action_id and result.status == "success"
    log = first.store.read()
    assert sum(e.type == "approval.requested" for e in log) == 1, "a second approval was opened"
    moves = [e.payload["to"] for e in log if e.type == "action.transition"]
    assert moves[-3:] == ["AUTHORIZED", "RUNNING", "SUCCEEDED"], moves
