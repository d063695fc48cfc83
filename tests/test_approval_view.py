"""What an approval request shows beside the call: the tool's preview (`Harness.preview_with`),
each argument's sources, and the diff against the closest earlier call of the tool, read from
the log by `operations.approval` / `pending_approvals`, also from another harness on the store."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, HarnessError, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.model import Spec
from harnessc.runtime.session import approval_view, operations
from harnessc.runtime.session.approval_view import run_preview

from .test_approvals import compile_text

SPEC = """
harness g { version "1.0.0" }
label ops_data "operational data"
tool ticket.read {
  summary "Read a ticket."
  effects read
  input { id: string }
  output { host: string, note: string? label ops_data }
  trust untrusted
}
tool prod.deploy {
  summary "Deploy a version to a host."
  effects external idempotent preview
  risk high
  input { host: string, version: string, canary: int?, token: string? secret }
}
tool prod.restart {
  summary "Restart a host."
  effects external
  input { host: string }
}
policy p {
  default allow
  gate: ask prod.deploy, prod.restart {
    approver role "ops"
    reason "Deploys and restarts are approved."
  }
}
surface s { expose ticket.*, prod.* }
agent a { surface s; policy p; delegate helper }
agent helper { surface s; policy p }
"""
OPS = {"user": "u-ops", "role": "ops"}
SECRET = "tok-7f3a9c2e41d8"


@pytest.fixture
def spec(tmp_path: Path) -> Spec:
    return compile_text(tmp_path, SPEC)


def call(s: Any, tool: str, call_id: str, args: dict[str, Any]) -> PendingCall:
    pending = s.normalize(tool, call_id, args)
    assert isinstance(pending, PendingCall), pending
    return pending


def ask(s: Any, tool: str, call_id: str, args: dict[str, Any]) -> str:
    pending = call(s, tool, call_id, args)
    assert s.decide(pending).effect == "ask"
    return str(s.request_approval(pending).request_id)


def plan(args: dict[str, Any]) -> dict[str, Any]:
    return {"rollout": f"{args['version']} to {args['host']}", "canary": args.get("canary", 100)}


# -- preview ------------------------------------------------------------------------------------


def test_preview_with_refuses_an_unknown_tool_and_one_without_the_preview_effect(
    spec: Spec,
) -> None:
    h = Harness(spec)
    with pytest.raises(HarnessError) as unknown:
        h.preview_with("prod.nope", plan)
    assert unknown.value.code == "unknown-tool"
    with pytest.raises(HarnessError) as no_effect:
        h.preview_with("prod.restart", plan)
    assert no_effect.value.code == "no-preview-effect"
    assert "`preview` effect" in no_effect.value.message
    h.preview_with("prod.deploy", plan)  # declared `preview`: accepted


def test_an_asked_call_is_previewed_and_the_preview_is_bound_to_it_in_the_log(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "h.db"
    h = Harness(spec, SQLiteStore(db))
    h.preview_with("prod.deploy", plan)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    rid = ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "2.4", "canary": 5})
    request = h.approvals.get(rid)
    previewed = [e for e in h.store.read(s.id) if e.type == "call.previewed"]
    assert len(previewed) == 1
    assert previewed[0].payload["tool_call_id"] == "c-1"
    assert previewed[0].payload["input_hash"] == request.input_hash
    requested = next(e for e in h.store.read(s.id) if e.type == "approval.requested")
    assert previewed[0].position < requested.position  # recorded before the request
    # another process on the store reads it
    shown = operations.approval(Harness(spec, SQLiteStore(db)), rid)
    assert shown["preview"]["recorded"] and shown["preview"]["can_preview"]
    assert shown["preview"]["value"] == {"rollout": "2.4 to web-1", "canary": 5}
    assert shown["preview"]["error"] is None


def test_a_previewer_that_raises_records_its_error_scrubbed_and_a_secret_never_shows(
    spec: Spec,
) -> None:
    h = Harness(spec)

    def leaky(args: dict[str, Any]) -> Any:
        if args.get("canary"):
            raise RuntimeError(f"cannot reach {args['host']} with {args['token']}")
        return {"token": args["token"], "note": f"using {args['token']}"}

    h.preview_with("prod.deploy", leaky)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    failed = ask(
        s, "prod.deploy", "c-1", {"host": "h", "version": "1", "canary": 5, "token": SECRET}
    )
    quoted = ask(s, "prod.deploy", "c-2", {"host": "h", "version": "1", "token": SECRET})
    error = operations.approval(h, failed)["preview"]
    assert error["recorded"] and error["value"] is None
    assert error["error"] == "RuntimeError: cannot reach h with [REDACTED]"
    value = operations.approval(h, quoted)["preview"]["value"]
    assert value == {"token": "[REDACTED]", "note": "using [REDACTED]"}
    assert SECRET not in "".join(e.payload_json for e in h.store.read())


def test_a_tool_that_can_preview_without_a_previewer_says_so(spec: Spec) -> None:
    h = Harness(spec)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    deploy = operations.approval(h, ask(s, "prod.deploy", "c-1", {"host": "h", "version": "1"}))
    restart = operations.approval(h, ask(s, "prod.restart", "c-2", {"host": "h"}))
    assert deploy["preview"] == {"can_preview": True, "recorded": False}
    assert restart["preview"] == {"can_preview": False, "recorded": False}


def test_an_edited_call_is_previewed_afresh(spec: Spec) -> None:
    h = Harness(spec)
    h.preview_with("prod.deploy", plan)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    rid = ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "2.4", "canary": 50})
    out = operations.approve_with_edits(
        h, rid, {"host": "web-1", "version": "2.4", "canary": 5}, by=OPS, reason="smaller"
    )
    previews = {
        e.payload["input_hash"]: e.payload["preview"]
        for e in h.store.read(s.id)
        if e.type == "call.previewed"
    }
    assert previews[out["edited_input_hash"]] == {"rollout": "2.4 to web-1", "canary": 5}
    assert len(previews) == 2


def test_run_preview_is_the_one_previewer_runner() -> None:
    assert run_preview(lambda a: {"x": a["v"]}, None, {"v": 1}).value == {"x": 1}
    assert run_preview(lambda a: a["missing"], None, {}).error == "KeyError: 'missing'"
    found = doctest.testmod(approval_view)
    assert found.attempted and not found.failed


# -- provenance ---------------------------------------------------------------------------------


def test_each_argument_shows_its_sources_from_the_log(spec: Spec, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    h = Harness(spec, SQLiteStore(db))
    h.bind("ticket.read", lambda args: {"host": "web-7.example.test", "note": "v9.9.1-rc"})
    s = h.session(
        "a",
        actor={"user": "u-1", "role": "dev"},
        task="t-1",
        said="please deploy release-2041 today",
    )
    read = call(s, "ticket.read", "t-1", {"id": "TCK-1"})
    assert s.invoke(read).ok
    rid = ask(
        s,
        "prod.deploy",
        "c-1",
        {"host": "web-7.example.test", "version": "release-2041", "canary": 17, "token": SECRET},
    )
    shown = operations.approval(Harness(spec, SQLiteStore(db)), rid)  # another process
    by_arg = {p["arg"]: p for p in shown["provenance"]}
    host = by_arg["host"]["sources"]
    assert [(x["kind"], x["tool"], x["tool_call_id"]) for x in host] == [
        ("untrusted", "ticket.read", "t-1")
    ]
    assert host[0]["text"].startswith("the result of `ticket.read` (untrusted")
    assert ", call t-1, event #" in host[0]["text"]
    assert [x["kind"] for x in by_arg["version"]["sources"]] == ["user"]
    assert by_arg["version"]["sources"][0]["text"].startswith("a user message")
    assert by_arg["canary"]["sources"] == []  # from nowhere
    assert by_arg["token"] == {"arg": "token", "secret": True, "value": "[REDACTED]", "sources": []}
    assert SECRET not in repr(shown)


def test_an_argument_the_spec_defaults_shows_the_default_as_its_source(tmp_path: Path) -> None:
    defaulted = compile_text(tmp_path, SPEC.replace("canary: int?", "canary: int default 100"))
    h = Harness(defaulted)
    h.bind("ticket.read", lambda args: {"host": "web-1", "note": "100"})
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    assert s.invoke(call(s, "ticket.read", "t-1", {"id": "TCK-1"})).ok
    rid = ask(s, "prod.deploy", "c-1", {"host": "web-2", "version": "2.4"})  # canary left out
    by_arg = {p["arg"]: p for p in operations.approval(h, rid)["provenance"]}
    sources = by_arg["canary"]["sources"]
    # the spec's default first, then the result that happens to hold the same value
    assert [(x["kind"], x["tool"]) for x in sources] == [
        ("trusted", None),
        ("untrusted", "ticket.read"),
    ]
    assert sources[0]["text"] == "the default of `prod.deploy.canary` in the spec (trusted)"


def test_a_labelled_output_field_gives_its_label(spec: Spec) -> None:
    h = Harness(spec)
    h.bind("ticket.read", lambda args: {"host": "web-1", "note": "2.4-hotfix"})
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    assert s.invoke(call(s, "ticket.read", "t-1", {"id": "TCK-1"})).ok
    rid = ask(s, "prod.deploy", "c-1", {"host": "web-2", "version": "2.4-hotfix"})
    by_arg = {p["arg"]: p for p in operations.approval(h, rid)["provenance"]}
    [source] = by_arg["version"]["sources"]
    assert source["labels"] == ["ops_data"]
    assert "labels ops_data" in source["text"]


# -- diff against the closest earlier call -------------------------------------------------------


def test_no_earlier_call_of_the_tool_gives_no_diff(spec: Spec) -> None:
    h = Harness(spec)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    ask(s, "prod.restart", "r-1", {"host": "web-1"})  # another tool
    other = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    ask(other, "prod.deploy", "c-0", {"host": "web-1", "version": "1"})  # another session
    rid = ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "1"})
    assert operations.approval(h, rid)["diff"] is None


def test_the_diff_is_against_the_call_with_the_fewest_differences(spec: Spec) -> None:
    h = Harness(spec)
    h.bind("prod.deploy", lambda args: {"ok": True})
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    # c-1: approved and run; c-2: denied by a person; the new call is closest to c-1
    first = ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "2.3", "canary": 5})
    h.approve(first, by=OPS)
    assert s.invoke(s.call("c-1")).ok  # type: ignore[arg-type]
    second = ask(s, "prod.deploy", "c-2", {"host": "db-1", "version": "9.0"})
    h.deny(second, by=OPS, reason="not the database")
    rid = ask(s, "prod.deploy", "c-3", {"host": "web-1", "version": "2.4", "canary": 5})
    diff = operations.approval(h, rid)["diff"]
    assert diff["tool_call_id"] == "c-1" and diff["outcome"] == "succeeded"
    assert diff["input_hash"] == h.approvals.get(first).input_hash
    assert diff["differing"] == 1
    assert diff["changes"] == [
        {"arg": "version", "change": "changed", "secret": False, "before": "2.3", "after": "2.4"}
    ]
    # against c-2, closer now: added, removed and the denial as its outcome
    rid = ask(s, "prod.deploy", "c-4", {"host": "db-1", "version": "9.0", "token": SECRET})
    diff = operations.approval(h, rid)["diff"]
    assert (diff["tool_call_id"], diff["outcome"]) == ("c-2", "denied")
    assert diff["changes"] == [
        {"arg": "token", "change": "added", "secret": True, "after": "[REDACTED]"}
    ]


def test_a_tie_goes_to_the_most_recent_call(spec: Spec) -> None:
    h = Harness(spec)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "1"})
    ask(s, "prod.deploy", "c-2", {"host": "web-2", "version": "2"})
    rid = ask(s, "prod.deploy", "c-3", {"host": "web-1", "version": "2"})
    diff = operations.approval(h, rid)["diff"]
    assert (diff["tool_call_id"], diff["differing"]) == ("c-2", 1)
    assert diff["outcome"] == "waiting for approval"


def test_secret_arguments_are_compared_by_digest_and_shown_masked(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "h.db"
    h = Harness(spec, SQLiteStore(db))
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    args = {"host": "web-1", "version": "1", "token": SECRET}
    ask(s, "prod.deploy", "c-1", args)
    same = ask(s, "prod.deploy", "c-2", args)
    other = ask(s, "prod.deploy", "c-3", {**args, "token": "tok-other-value-99"})
    reader = Harness(spec, SQLiteStore(db))
    assert operations.approval(reader, same)["diff"]["changes"] == []
    changed = operations.approval(reader, other)["diff"]
    assert changed["changes"] == [
        {
            "arg": "token",
            "change": "changed",
            "secret": True,
            "before": "[REDACTED]",
            "after": "[REDACTED]",
        }
    ]
    assert SECRET not in "".join(e.payload_json for e in reader.store.read())


def test_pending_approvals_carry_all_three(spec: Spec, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    h = Harness(spec, SQLiteStore(db))
    h.preview_with("prod.deploy", plan)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1", said="deploy 2.4")
    ask(s, "prod.deploy", "c-1", {"host": "web-1", "version": "2.3"})
    ask(s, "prod.deploy", "c-2", {"host": "web-1", "version": "2.4"})
    listed = operations.pending_approvals(Harness(spec, SQLiteStore(db)))
    assert [r["tool_call_id"] for r in listed] == ["c-1", "c-2"]
    assert listed[0]["diff"] is None and listed[1]["diff"]["tool_call_id"] == "c-1"
    assert all(r["preview"]["recorded"] for r in listed)
    assert {p["arg"] for p in listed[1]["provenance"]} == {"host", "version"}


def test_the_cli_shows_the_preview_the_sources_and_the_diff(
    spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harnessc.compiler.cli import main

    db = str(tmp_path / "h.db")
    h = Harness(spec, SQLiteStore(db))
    h.preview_with("prod.deploy", plan)
    h.bind("ticket.read", lambda args: {"host": "web-7.example.test"})
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1", said="ship release-2041")
    assert s.invoke(call(s, "ticket.read", "t-1", {"id": "TCK-1"})).ok
    ask(s, "prod.deploy", "c-1", {"host": "web-7.example.test", "version": "release-2040"})
    args = {"host": "web-7.example.test", "version": "release-2041", "token": SECRET}
    rid = ask(s, "prod.deploy", "c-2", args)
    (tmp_path / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    assert main(["approvals", "show", rid, "--log", db, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["preview"]["value"]["rollout"] == "release-2041 to web-7.example.test"
    assert shown["diff"]["tool_call_id"] == "c-1"
    assert main(["approvals", "show", rid, "--log", db, "--spec", str(tmp_path / "spec.json")]) == 0
    text = capsys.readouterr().out
    assert 'preview: {"canary": 100, "rollout": "release-2041 to web-7.example.test"}' in text
    assert "    host: the result of `ticket.read` (untrusted), call t-1, event #" in text
    assert "    version: a user message, event #" in text
    assert "    token: secret (masked)" in text
    assert "diff: against call c-1 (waiting for approval), input " in text
    assert '    version: changed "release-2040" -> "release-2041"' in text
    assert '    token (secret, compared by digest): added - -> "[REDACTED]"' in text
    assert SECRET not in text


def test_a_delegated_childs_call_sees_the_families_sources_and_only_its_own_calls(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "h.db"
    h = Harness(spec, SQLiteStore(db))
    h.bind("ticket.read", lambda args: {"host": "web-7.example.test"})
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1", said="ship release-2041")
    assert s.invoke(call(s, "ticket.read", "t-1", {"id": "TCK-1"})).ok
    ask(s, "prod.deploy", "c-1", {"host": "web-7.example.test", "version": "release-2040"})
    child = s.delegate("deploy it", agent="helper")
    assert not isinstance(child, Refusal)
    rid = ask(
        child, "prod.deploy", "k-1", {"host": "web-7.example.test", "version": "release-2041"}
    )
    shown = operations.approval(Harness(spec, SQLiteStore(db)), rid)
    by_arg = {p["arg"]: p for p in shown["provenance"]}
    assert [x["tool_call_id"] for x in by_arg["host"]["sources"]] == ["t-1"]  # the parent's call
    assert [x["kind"] for x in by_arg["version"]["sources"]] == ["user"]  # the parent's user
    assert shown["diff"] is None  # the parent's deploy is another session's call
