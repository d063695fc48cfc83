"""Separation of duties: the actor who asked for a call may not approve it when the ASK says
`self_approval deny`, the default at risk `high` and above; `self_approval allow` lets them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import ApprovalError, Harness, PendingCall, SQLiteStore
from harnessc.runtime.model import Spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .budget import examples
from .test_approvals import compile_text

SPEC = """
harness sod { version "1.0.0" }
tool pay.high { summary "Pay."; effects external; risk high; input { iban: string } }
tool pay.medium { summary "Pay."; effects external; risk medium; input { iban: string } }
tool pay.strict { summary "Pay."; effects external; risk medium; input { iban: string } }
tool pay.solo { summary "Pay."; effects external; risk critical; input { iban: string } }
policy p {
  default deny
  ask pay.high, pay.medium { approver role "finance"; grant once ttl 10m }
  ask pay.strict { approver role "finance"; self_approval deny; grant once ttl 10m }
  # harnessc: ignore[L019] a one-person team approves its own payments
  ask pay.solo { approver role "finance"; self_approval allow; grant once ttl 10m }
}
surface s { expose pay.* }
agent a { surface s; policy p }
"""
ALICE = {"user": "alice", "role": "finance"}
BOB = {"user": "bob", "role": "finance"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("sod"), SPEC)


def ask(h: Harness, tool: str, actor: dict[str, Any]) -> Any:
    s = h.session("a", actor=actor, task="t-1")
    call = s.normalize(tool, "call-1", {"iban": "DE00"})
    assert isinstance(call, PendingCall)
    return s, call, s.request_approval(call)


@pytest.mark.parametrize(
    ("tool", "may"),
    [("pay.high", False), ("pay.medium", True), ("pay.strict", False), ("pay.solo", True)],
)
def test_the_requester_approves_only_where_the_ask_lets_them(
    spec: Spec, tool: str, may: bool
) -> None:
    h = Harness(spec)
    runs: list[str] = []
    h.bind(tool, lambda args: runs.append(args["iban"]) or {})
    s, call, request = ask(h, tool, ALICE)
    assert request.scope["requester_may_approve"] is may
    if may:
        assert h.approve(request.request_id, by=ALICE).status == "approved"
    else:
        with pytest.raises(ApprovalError) as err:
            h.approve(request.request_id, by=ALICE)
        assert err.value.code == "self-approval"
        assert "`alice` asked for this call" in err.value.message
        assert not s.invoke(call).ran  # still waiting: a refused approval grants nothing
        assert h.approvals.get(request.request_id).status == "pending"
        assert h.approve(request.request_id, by=BOB).status == "approved"
    assert s.invoke(call).ran and runs == ["DE00"]


def test_an_approver_without_a_user_cannot_be_told_from_the_requester(spec: Spec) -> None:
    h = Harness(spec)
    _, _, request = ask(h, "pay.high", ALICE)
    with pytest.raises(ApprovalError) as err:
        h.approve(request.request_id, by={"role": "finance"})
    assert err.value.code == "self-approval" and "names no `user`" in err.value.message
    # the requester may still deny their own request
    assert h.deny(request.request_id, by=ALICE, reason="wrong IBAN").status == "denied"


def test_separation_holds_across_a_restart(spec: Spec, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    first = Harness(spec, store=SQLiteStore(db))
    _, _, request = ask(first, "pay.high", ALICE)
    first.store.close()
    second = Harness(spec, store=SQLiteStore(db))
    with pytest.raises(ApprovalError) as err:
        second.approve(request.request_id, by=ALICE)
    assert err.value.code == "self-approval"
    assert second.approve(request.request_id, by=BOB).status == "approved"


USERS = st.sampled_from(["alice", "bob", None])
ROLES = st.lists(st.sampled_from(["finance", "dev"]), max_size=2)


@settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    tool=st.sampled_from(["pay.high", "pay.medium", "pay.strict", "pay.solo"]),
    requester=USERS,
    approver=USERS,
    roles=ROLES,
)
def test_an_approval_succeeds_exactly_when_the_approver_may_give_it(
    spec: Spec, tool: str, requester: str | None, approver: str | None, roles: list[str]
) -> None:
    h = Harness(spec)
    actor: dict[str, Any] = {"role": "finance"} | ({"user": requester} if requester else {})
    by: dict[str, Any] = {"roles": roles} | ({"user": approver} if approver else {})
    _, _, request = ask(h, tool, actor)
    may_self = tool in ("pay.medium", "pay.solo")
    expected = "finance" in roles and (may_self or (approver is not None and approver != requester))
    try:
        outcome = h.approve(request.request_id, by=by)
    except ApprovalError as err:
        assert not expected, err.message
        assert err.code == ("not-an-approver" if "finance" not in roles else "self-approval")
        return
    assert expected and outcome.status == "approved"
