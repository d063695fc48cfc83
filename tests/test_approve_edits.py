"""Approve with edits: the operator's edited call is normalized and decided afresh, the
approval binds to it only, and the original is recorded as superseded and never runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import ApprovalError, Harness, PendingCall
from harnessc.runtime.log.store import SQLiteStore
from harnessc.runtime.model import Spec

from .conftest import ROOT
from .test_approvals import compile_text, frozen

DEPLOY = """
harness g { version "1.0.0" }
tool deploy.run {
  summary "Roll a service out as a canary."
  effects write external
  risk high
  timeout 1m
  input { service: string, canary_percent: int min 1 max 100 }
}
policy p {
  default deny
  too_wide: deny deploy.run when args.canary_percent > 50 {
    reason "A canary wider than half the fleet is not a canary."
  }
  trickle: allow deploy.run when args.canary_percent <= 2
  ops: ask deploy.run when args.canary_percent > 2 {
    approver role "ops"
    grant once ttl 10m
    reason "Operators approve each rollout."
  }
}
surface s { expose deploy.* }
agent a { surface s; policy p }
"""
OPS = {"user": "u-ops", "role": "ops"}
DEV = {"user": "u-1", "role": "dev"}
ARGS = {"service": "payments", "canary_percent": 25}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("edits"), DEPLOY)


def asked(h: Harness) -> tuple[Any, PendingCall, Any, list[dict[str, Any]]]:
    ran: list[dict[str, Any]] = []
    h.bind("deploy.run", lambda args: ran.append(dict(args)) or {"ok": True})
    s = h.session("a", actor=DEV, task="t-1")
    call = frozen(s.normalize("deploy.run", "call-1", ARGS))
    assert s.decide(call).effect == "ask"
    return s, call, s.request_approval(call), ran


def test_an_edit_that_still_asks_binds_the_grant_to_the_edited_call_only(spec: Spec) -> None:
    h = Harness(spec)
    s, original, req, ran = asked(h)
    out = h.approve_with_edits(
        req.request_id, {**ARGS, "canary_percent": 5}, by=OPS, reason="start smaller"
    )
    assert out.status == "approved" and out.request.status == "superseded"
    edited = out.call
    assert edited is not None and edited.input_hash != original.input_hash
    assert edited.tool_call_id == original.tool_call_id == "call-1"
    assert out.grant is not None and out.grant.input_hash == edited.input_hash
    assert s.call("call-1") is edited  # the agent receives the edited call
    refused = s.invoke(original)
    assert not refused.ran and refused.error_category == "superseded"
    assert "u-ops" in (refused.error or "")
    result = s.invoke(edited)
    assert result.ran and result.status == "success"
    assert ran == [{"service": "payments", "canary_percent": 5}]
    assert not s.invoke(original).ran  # still never
    events = [e for e in h.store.read() if e.type == "call.superseded"]
    assert len(events) == 1
    p = events[0].payload
    assert (p["input_hash"], p["edited_input_hash"]) == (original.input_hash, edited.input_hash)
    assert (p["by"], p["reason"], p["effect"]) == ("u-ops", "start smaller", "ask")
    assert h.verify().ok


def test_an_edit_the_policy_denies_is_refused_with_the_rule_and_the_request_stays(
    spec: Spec,
) -> None:
    h = Harness(spec)
    s, original, req, ran = asked(h)
    with pytest.raises(ApprovalError) as err:
        h.approve_with_edits(req.request_id, {**ARGS, "canary_percent": 80}, by=OPS)
    assert err.value.code == "edit-denied" and "`p.too_wide`" in err.value.message
    assert h.approvals.get(req.request_id).status == "pending"
    assert not [e for e in h.store.read() if e.type == "call.superseded"]
    # the original can still be approved as it was
    assert h.approve(req.request_id, by=OPS).status == "approved"
    assert s.invoke(original).ran and ran == [ARGS]


def test_an_edit_the_policy_allows_needs_no_grant_but_is_recorded(spec: Spec) -> None:
    h = Harness(spec)
    s, original, req, ran = asked(h)
    out = h.approve_with_edits(req.request_id, {**ARGS, "canary_percent": 1}, by=OPS)
    assert out.grant is None and out.decision.effect == "allow"
    assert out.call is not None and s.invoke(out.call).ran
    assert not s.invoke(original).ran
    (event,) = [e for e in h.store.read() if e.type == "call.superseded"]
    assert event.payload["effect"] == "allow" and event.payload["by"] == "u-ops"
    assert ran == [{**ARGS, "canary_percent": 1}]


def test_an_invalid_edit_is_a_structured_refusal_and_the_request_stays(spec: Spec) -> None:
    h = Harness(spec)
    _, _, req, _ = asked(h)
    for bad, code in (
        ({**ARGS, "canary_percent": "lots"}, "invalid-edit"),
        ({"service": "payments"}, "invalid-edit"),
        (ARGS, "edit-unchanged"),
    ):
        with pytest.raises(ApprovalError) as err:
            h.approve_with_edits(req.request_id, bad, by=OPS)
        assert err.value.code == code
    with pytest.raises(ApprovalError) as err:
        h.approve_with_edits(req.request_id, {**ARGS, "canary_percent": 5}, by=DEV)
    assert err.value.code == "not-an-approver"
    assert h.approvals.get(req.request_id).status == "pending"


def test_an_answered_request_cannot_be_edited(spec: Spec) -> None:
    h = Harness(spec)
    _, _, req, _ = asked(h)
    h.approve_with_edits(req.request_id, {**ARGS, "canary_percent": 5}, by=OPS)
    for answer in (
        lambda: h.approve_with_edits(req.request_id, {**ARGS, "canary_percent": 6}, by=OPS),
        lambda: h.approve(req.request_id, by=OPS),
    ):
        with pytest.raises(ApprovalError) as err:
            answer()
        assert err.value.code == "not-pending"


def test_another_process_edits_and_the_agent_receives_the_edited_call(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    (tmp_path / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    agent = Harness(spec, store=SQLiteStore(db))
    s, original, req, ran = asked(agent)
    script = textwrap.dedent(
        f"""
        from harnessc.runtime import Harness
        from harnessc.runtime.log.store import SQLiteStore
        h = Harness.from_json({str(tmp_path / "spec.json")!r}, store=SQLiteStore({str(db)!r}))
        out = h.approve_with_edits({req.request_id!r}, {{"service": "payments",
            "canary_percent": 5}}, by={{"user": "u-ops", "role": "ops"}}, reason="smaller")
        print(out.call.input_hash)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    edited_hash = done.stdout.strip()
    # the agent's own session, in this process, receives the edited call from the log
    edited = s.call("call-1")
    assert edited is not None and edited.input_hash == edited_hash
    refused = s.invoke(original)
    assert not refused.ran and refused.error_category == "superseded"
    assert s.invoke(edited).ran
    assert ran == [{"service": "payments", "canary_percent": 5}]
    # a harness opened on the store afterwards sees the supersession, the call and its result
    other = Harness(spec, store=SQLiteStore(db))
    resumed = other.resume(s.id)
    assert other.approvals.get(req.request_id).status == "superseded"
    assert resumed.call("call-1") == edited
    again = resumed.invoke(resumed.call("call-1"))  # type: ignore[arg-type]
    assert again.status == "success" and again.input_hash == edited_hash
    assert other.verify().ok
