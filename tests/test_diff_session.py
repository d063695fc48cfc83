"""`harnessc diff` over session state: terms over one ledger solved as related (two windows of
one count, `all` and `any` over one list, provenance with the tools' trust and labels), trust
and labels of tools seen as changes of decision, every region's witness replayed on both specs
(reference evaluator and runtime, through the witness's session prelude), and the exit status
(0 nothing, 1 a verified widening, 2 an error, 3 only unverified regions)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.compare import (
    Comparison,
    Region,
    compare_specs,
    runtime_call,
    witness_preludes,
)
from harnessc.compiler.analysis.concrete import Call, decide
from harnessc.compiler.analysis.prelude import session_of, session_prelude
from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check
from harnessc.runtime import model as m
from harnessc.runtime.judge.policy import PolicyEngine
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT


def spec_of(folder: Path, text: str) -> tuple[Path, m.Spec]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.harness"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return path, result.model


def replays(old: m.Spec, new: m.Spec, region: Region) -> bool:
    """Whether the region's witness, with its session prelude, is decided as the region says
    on both specs, by the runtime and by the reference evaluator (concrete.py) over the
    session state the prelude gives on that spec."""
    return any(
        _replays_after(old, new, region, prelude.steps)
        for prelude in witness_preludes(
            old if region.old_policy else None,
            new if region.new_policy else old,
            region.witness,
            region.old_reading,
        )
        if prelude.missing is None
    )


def _replays_after(old: m.Spec, new: m.Spec, region: Region, steps: list[m.SessionStep]) -> bool:
    """`replays` after one session (a prelude's steps)."""
    sides = ((old, region.old_policy, region.old), (new, region.new_policy, region.new))
    for spec, name, outcome in sides:
        if name is None or outcome.refused:
            continue
        call = runtime_call(spec, region.witness, steps)
        decision = PolicyEngine(spec).decide(name, call)
        if decision.effect != outcome.effect or decision.rule != outcome.rule:
            return False
        policy = spec.policy(name)
        assert policy is not None
        witness = Call(**json.loads(json.dumps(asdict(region.witness))))
        witness.session = session_of(spec, region.witness, steps)
        reference = decide(spec, policy, witness)
        if reference.effect != outcome.effect or reference.rule != outcome.rule:
            return False
    return True


def compared(tmp_path: Path, old: str, new: str) -> tuple[m.Spec, m.Spec, Comparison]:
    _, a = spec_of(tmp_path / "old", old)
    _, b = spec_of(tmp_path / "new", new)
    return a, b, compare_specs(a, b, cache=AnalysisCache(on_disk=False))


def assert_sound(a: m.Spec, b: m.Spec, comparison: Comparison) -> None:
    """Every verified region's witness flips as reported; none unverified is a widening."""
    for region in comparison.regions:
        if region.verified:
            assert replays(a, b, region), (region.change, region.witness, region.notes)
        else:
            assert not region.widened


def cli(old: Path, new: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["diff", str(old), str(new)])
    return code, capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Trust and labels (a tool's results feed a rule over another tool)

CRM = """
harness crm { version "1" }
tool customer.lookup {
  summary "Look up a customer."
  effects read
  input { id: string }
  output { email: string }
}
tool customer.email {
  summary "E-mail a customer."
  effects external
  input { to: string, body: string }
}
policy main {
  default deny
  allow customer.lookup
  allow customer.email when args.to from trusted
}
agent support { policy main }
"""
TRUSTED_CRM = CRM.replace(
    "  output { email: string }", "  trust trusted\n  output { email: string }"
)


def test_trusting_a_tool_whose_results_feed_a_from_trusted_rule_is_a_widening(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, comparison = compared(tmp_path, CRM, TRUSTED_CRM)
    [region] = comparison.regions
    assert region.tool == "customer.email" and region.change == "deny→allow"
    assert region.verified and region.widened, region.notes
    assert replays(a, b, region)
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 1 and "WIDENED deny→allow" in out


def test_no_longer_trusting_the_tool_is_a_narrowing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, comparison = compared(tmp_path, TRUSTED_CRM, CRM)
    [region] = comparison.regions
    assert region.tool == "customer.email" and region.change == "allow→deny"
    assert region.verified and not region.widened, region.notes
    assert replays(a, b, region)
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 0 and "allow→deny" in out


def test_a_trusted_output_field_is_a_change_like_a_trusted_tool(tmp_path: Path) -> None:
    field = CRM.replace("output { email: string }", "output { email: string trusted }")
    a, b, comparison = compared(tmp_path, CRM, field)
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified
    assert replays(a, b, region)


def test_an_output_field_added_trusted_is_a_source_the_old_spec_reads_untrusted(
    tmp_path: Path,
) -> None:
    # the old spec does not declare `backup`: a result holding it is the tool's, untrusted
    new = CRM.replace(
        "output { email: string }", "output { email: string, backup: string trusted }"
    )
    a, b, comparison = compared(tmp_path, CRM, new)
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified, region.notes
    assert region.witness.sources and "customer.lookup:backup" in str(region.witness.sources)
    assert replays(a, b, region)
    # and removed, the other way
    a, b, comparison = compared(tmp_path / "back", new, CRM)
    [region] = comparison.regions
    assert region.change == "allow→deny" and region.verified, region.notes
    assert replays(a, b, region)


def test_a_label_added_to_a_tool_feeds_a_from_label_rule(tmp_path: Path) -> None:
    old = CRM.replace("allow customer.email when args.to from trusted", "allow customer.email")
    old = old.replace(
        "  default deny\n",
        '  default deny\n  deny customer.email when args.to from label pii { reason "pii" }\n',
    )
    new = old.replace("  output { email: string }", "  labels pii\n  output { email: string }")
    a, b, comparison = compared(tmp_path, old, new)
    [region] = comparison.regions
    assert region.tool == "customer.email" and region.change == "allow→deny"
    assert region.verified, region.notes
    assert replays(a, b, region)


def test_a_labelled_output_field_feeds_a_from_label_rule(tmp_path: Path) -> None:
    old = CRM.replace(
        "allow customer.email when args.to from trusted",
        'allow customer.email\n  deny customer.email when args.to from label pii { reason "pii" }',
    )
    new = old.replace("output { email: string }", "output { email: string label pii }")
    a, b, comparison = compared(tmp_path, old, new)
    [region] = comparison.regions
    assert region.change == "allow→deny" and region.verified, region.notes
    assert replays(a, b, region)


def test_a_tool_a_history_selector_newly_selects_is_a_change(tmp_path: Path) -> None:
    old = """
    harness s { version "1" }
    tool post {
      summary "Post."
      effects read
      input { text: string }
    }
    tool send {
      summary "Send."
      effects external
      packs outbound
      input { to: string }
    }
    policy main {
      default allow
      deny send when called(pack:outbound) { reason "once" }
    }
    agent a { policy main }
    """
    new = old.replace("effects read", "effects read\n  packs outbound")
    a, b, comparison = compared(tmp_path, old, new)
    sends = [r for r in comparison.regions if r.tool == "send"]
    assert [r.change for r in sends] == ["allow→deny"], [r.witness for r in sends]
    assert sends[0].verified, sends[0].notes
    assert replays(a, b, sends[0])


ADDING_CRM = CRM.replace("  output { email: string }", "  output { email: string }\n  ADD").replace(
    "tool customer.lookup", "fact known: list<string>\ntool customer.lookup"
)
ADDS = ADDING_CRM.replace("ADD", "on_success add result.email to known")


def test_a_result_field_on_success_adds_to_a_fact_is_trusted_whatever_the_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the address the lookup returns is a fact value (trusted) on both sides: no decision changes
    trusted = ADDS.replace("  output {", "  trust trusted\n  output {", 1)
    for name, (old, new) in {"untrust": (trusted, ADDS), "trust": (ADDS, trusted)}.items():
        _, _, comparison = compared(tmp_path / name, old, new)
        assert not comparison.regions, [(r.change, r.notes) for r in comparison.regions]
        code, out = cli(
            tmp_path / name / "old" / "spec.harness",
            tmp_path / name / "new" / "spec.harness",
            capsys,
        )
        assert code == 0, out


def test_an_on_success_add_of_a_result_field_feeds_a_from_trusted_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    without = ADDING_CRM.replace("ADD", "")
    a, b, comparison = compared(tmp_path, without, ADDS)
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified and region.widened, region.notes
    assert replays(a, b, region)
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 1 and "on_success: none → add result.email to known" in out, out
    a, b, comparison = compared(tmp_path / "back", ADDS, without)
    [region] = comparison.regions
    assert region.change == "allow→deny" and region.verified, region.notes
    assert replays(a, b, region)


def test_an_on_success_add_of_an_argument_makes_it_trusted_for_later_calls(
    tmp_path: Path,
) -> None:
    # an address an earlier `customer.email` was sent to is a fact on the side that adds it
    without = ADDING_CRM.replace("ADD", "").replace(
        "  input { to: string, body: string }", "  input { to: string, body: string }\n  ADD"
    )
    adds = without.replace("ADD", "on_success add args.to to known")
    without = without.replace("ADD", "")
    a, b, comparison = compared(tmp_path, without, adds)
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified and region.widened, region.notes
    assert "customer.email(args.to)" in str(region.witness.sources)
    assert replays(a, b, region)
    a, b, comparison = compared(tmp_path / "back", adds, without)
    [region] = comparison.regions
    assert region.change == "allow→deny" and region.verified, region.notes
    assert replays(a, b, region)


def test_a_value_trusted_only_as_a_fact_is_a_source_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no tool is trusted: a value is trusted only when the session's facts hold it
    pay = """
    harness pay { version "1" }
    fact payees: list<string>
    tool pay {
      summary "Pay."
      effects external
      input { iban: string }
    }
    policy main {
      default deny
      allow pay when args.iban from user
    }
    agent a { policy main }
    """
    a, b, comparison = compared(tmp_path, pay, pay.replace("from user", "from trusted"))
    widening = [r for r in comparison.regions if r.change == "deny→allow"]
    assert widening and all(r.verified for r in widening), [r.notes for r in widening]
    assert any("payees" in r.witness.facts for r in widening)
    for region in comparison.regions:
        assert replays(a, b, region)


# ---------------------------------------------------------------------------------------------
# Windows of one count

FILES = """
harness files { version "1" }
tool files.delete {
  summary "Delete a file."
  effects write
  input { path: path }
}
policy main {
  default allow
  deny files.delete when count(files.delete within 1h) > 5 { reason "too many" }
}
agent a { policy main }
"""


def test_a_wider_window_on_a_deny_above_a_count_only_narrows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, comparison = compared(tmp_path, FILES, FILES.replace("within 1h", "within 2h"))
    [region] = comparison.regions
    assert region.change == "allow→deny" and region.verified, region.notes
    assert replays(a, b, region)
    steps = session_prelude(b, region.witness).steps
    assert any(s.ago_ms is not None for s in steps)  # an earlier call between 1h and 2h ago
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 0 and "WIDENED" not in out and "UNVERIFIED" not in out


def test_a_narrower_window_only_widens(tmp_path: Path) -> None:
    a, b, comparison = compared(tmp_path, FILES.replace("within 1h", "within 2h"), FILES)
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.widened, region.notes
    assert replays(a, b, region)


def test_a_window_dropped_relates_the_whole_session_to_the_window(tmp_path: Path) -> None:
    a, b, comparison = compared(tmp_path, FILES, FILES.replace(" within 1h", ""))
    assert [r.change for r in comparison.regions] == ["allow→deny"]
    assert_sound(a, b, comparison)
    assert all(r.verified for r in comparison.regions)


def test_a_sum_over_non_negative_amounts_is_monotone_in_its_window(tmp_path: Path) -> None:
    pay = """
    harness pay { version "1" }
    tool pay {
      summary "Pay."
      effects external
      input { amount: int min 0 }
    }
    policy main {
      default allow
      deny pay when sum(args.amount of pay within 1d) > 1000 { reason "daily limit" }
    }
    agent a { policy main }
    """
    a, b, comparison = compared(tmp_path, pay, pay.replace("within 1d", "within 7d"))
    assert [r.change for r in comparison.regions] == ["allow→deny"]
    assert_sound(a, b, comparison)


# ---------------------------------------------------------------------------------------------
# An earlier call that meets a history term's `when`, solved rather than sampled

RECURSIVE = """
harness count_term { version "1" }
tool files.delete {
  summary "Delete a file."
  effects write
  input { path: string, recursive: bool }
}
policy deleting {
  default deny
  delete: allow files.delete
  bulk: ask files.delete when count(files.delete within 10m when args.recursive) > 2 {
    approver role "owner"
  }
}
agent a { policy deleting }
"""


def test_earlier_calls_meeting_a_when_are_solved_for_a_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wider = RECURSIVE.replace("within 10m when", "within 20m when")
    a, b, comparison = compared(tmp_path, RECURSIVE, wider)
    [region] = comparison.regions
    assert region.change == "allow→ask" and region.verified, region.notes
    assert replays(a, b, region)
    steps = session_prelude(b, region.witness).steps
    assert [s.args["recursive"] for s in steps] == [True, True, True]
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 0 and "UNVERIFIED" not in out, out


SHARING = """
harness history { version "1" }
tool files.read {
  summary "Read a file."
  effects read
  packs files
  input { path: string }
  output { text: string }
}
tool files.share {
  summary "Share a file."
  effects write external
  input { path: string, to: string }
}
policy sharing {
  default deny
  reads: allow files.read
  share: allow files.share when called(files.* within 1h when args.path == "/a")
  read_before: ask files.share when called(pack:files) { approver role "owner" }
}
agent a { policy sharing }
"""


def test_an_earlier_call_meets_a_when_without_making_another_term_true(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `files.*` selects both tools; a read of "/a" would also make `called(pack:files)` true,
    # which the witness needs false: the share of "/a" is the earlier call
    a, b, comparison = compared(tmp_path, SHARING, SHARING.replace("within 1h", "within 2h"))
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified and region.widened, region.notes
    assert replays(a, b, region)
    [step] = session_prelude(b, region.witness).steps
    assert step.tool == "files.share" and step.args["path"] == "/a"
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 1 and "WIDENED" in out and "UNVERIFIED" not in out, out


MAILS = """
harness mails { version "1" }
tool mail.read {
  summary "Read a mail."
  effects read
  input { id: string }
  output { sender: string trusted, body: string }
}
tool crm.lookup {
  summary "Look up a customer."
  effects read
  input { name: string }
}
policy p {
  default allow
  allow crm.lookup
  watched: deny crm.lookup when count(mail.read when args.id == "msg-1") > 0 {
    reason "Refused."
  }
}
agent a { policy p }
"""


def test_a_trust_change_means_nothing_to_a_count_whose_when_reads_no_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the count reads the earlier reads' `args.id`: the trust of their results' fields does
    # not enter it, so the same session counts alike on both sides and nothing changes
    untrusted = MAILS.replace("sender: string trusted", "sender: string")
    _, _, comparison = compared(tmp_path, MAILS, untrusted)
    assert comparison.regions == [], [(r.change, r.notes) for r in comparison.regions]
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 0 and "UNVERIFIED" not in out, out


def test_a_trust_change_still_changes_a_count_whose_when_asks_where_a_value_came_from(
    tmp_path: Path,
) -> None:
    asks = MAILS.replace(
        'count(mail.read when args.id == "msg-1")',
        "count(crm.lookup when args.name from trusted)",
    ).replace("default allow\n  allow crm.lookup", "default allow\n  allow crm.lookup, mail.read")
    a, b, comparison = compared(
        tmp_path, asks, asks.replace("sender: string trusted", "sender: string")
    )
    assert comparison.regions, "a lookup of a trusted sender's name counts only on the old side"
    assert_sound(a, b, comparison)


def test_a_label_taken_off_a_tool_is_verified_by_a_session_the_old_side_reads(
    tmp_path: Path,
) -> None:
    # `seen(pii)` holds under the old spec after a read whose tool carries `pii`, and not
    # under the new: only a session with such a read flips the lookup, and the new side's
    # reading of the witness (nothing seen) needs no read at all
    labelled = """
harness mails { version "1" }
tool mail.read {
  summary "Read a mail."
  effects read
  input { id: string }
  output { sender: string, body: string }
  labels pii
}
tool crm.lookup {
  summary "Look up a customer."
  effects read
  input { name: string }
}
policy p {
  default deny
  allow mail.read
  allow crm.lookup when seen(pii) or args.name from user
}
agent a { policy p }
"""
    a, b, comparison = compared(tmp_path, labelled, labelled.replace("  labels pii\n", ""))
    [region] = [r for r in comparison.regions if r.tool == "crm.lookup"]
    assert region.change == "allow→deny" and region.verified and region.exact, region.notes
    assert region.old_reading, "the old side reads `seen(pii)` otherwise"
    assert replays(a, b, region)


def test_an_earlier_call_meets_a_when_on_its_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = """
    harness jobs { version "1" }
    tool job.run {
      summary "Run a job."
      effects write
      input { name: string }
      output { status: string }
    }
    tool job.deploy {
      summary "Deploy."
      effects write
      input { target: string }
    }
    policy main {
      default deny
      allow job.run
      allow job.deploy
        when succeeded(job.run within 1h when result.status == "green" and args.name == "build")
    }
    agent a { policy main }
    """
    a, b, comparison = compared(tmp_path, jobs, jobs.replace("within 1h", "within 2h"))
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified, region.notes
    assert replays(a, b, region)
    [step] = session_prelude(b, region.witness).steps
    assert step.args == {"name": "build"} and step.result == {"status": "green"}
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 1 and "UNVERIFIED" not in out, out


def test_an_earlier_call_adding_an_amount_meets_its_when(tmp_path: Path) -> None:
    pay = """
    harness pay { version "1" }
    tool pay {
      summary "Pay."
      effects external
      input { amount: int min 0, currency: string }
    }
    policy main {
      default allow
      deny pay when sum(args.amount of pay within 1d when args.currency == "EUR") > 1000 {
        reason "daily limit"
      }
    }
    agent a { policy main }
    """
    a, b, comparison = compared(tmp_path, pay, pay.replace("within 1d", "within 7d"))
    assert [r.change for r in comparison.regions] == ["allow→deny"]
    assert all(r.verified for r in comparison.regions), [r.notes for r in comparison.regions]
    assert_sound(a, b, comparison)


HOSTS = """
harness q { version "1" }
tool mail.send {
  summary "Send mail."
  effects external
  input { to: string, body: string }
}
policy main {
  default deny
  allow mail.send when all h in hosts(args.body): h == "a.test"
}
agent a { policy main }
"""


def test_a_quantifier_over_hosts_gets_a_text_holding_an_item_its_body_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wider = HOSTS.replace('h == "a.test"', '(h == "a.test" or h == "b.test")')
    a, b, comparison = compared(tmp_path, HOSTS, wider)
    assert_sound(a, b, comparison)
    [widened] = [r for r in comparison.regions if r.widened]
    assert widened.verified and widened.witness.args["body"] == "b.test", widened.notes
    # the other region needs `all` of one list true and of the same list, with a wider
    # body, false: no text gives it, and it stays unverified
    assert [r.verified for r in comparison.regions if not r.widened] == [False]
    code, out = cli(tmp_path / "old" / "spec.harness", tmp_path / "new" / "spec.harness", capsys)
    assert code == 1 and "WIDENED deny→allow" in out, out


def test_any_and_all_over_the_hosts_of_one_text(tmp_path: Path) -> None:
    a, b, comparison = compared(tmp_path, HOSTS, HOSTS.replace("all h", "any h"))
    assert_sound(a, b, comparison)
    assert sorted(r.change for r in comparison.regions) == ["allow→deny", "deny→allow"]
    assert all(r.verified for r in comparison.regions), [r.notes for r in comparison.regions]


def test_a_url_of_the_text_from_the_user_gets_a_text_holding_one(tmp_path: Path) -> None:
    mail = HOSTS.replace(
        'all h in hosts(args.body): h == "a.test"', "any u in urls(args.body): u from user"
    )
    a, b, comparison = compared(tmp_path, mail, mail.replace("u from user", "u from untrusted"))
    assert_sound(a, b, comparison)
    [narrowed] = [r for r in comparison.regions if r.change == "allow→deny"]
    assert narrowed.verified, narrowed.notes
    steps = session_prelude(b, narrowed.witness).steps
    assert [s.said for s in steps] == [narrowed.witness.args["body"]]


def test_a_list_argument_gets_an_item_a_text_body_needs(tmp_path: Path) -> None:
    mail = """
    harness q { version "1" }
    tool mail.send {
      summary "Send mail."
      effects external
      input { to: list<string> min 1, body: string }
    }
    policy main {
      default allow
      deny mail.send when any r in args.to: r endswith "@evil.test" { reason "no" }
    }
    agent a { policy main }
    """
    a, b, comparison = compared(tmp_path, mail, mail.replace("@evil.test", "@bad.test"))
    assert_sound(a, b, comparison)
    assert comparison.regions and all(r.verified for r in comparison.regions), [
        (r.change, r.notes) for r in comparison.regions
    ]


# ---------------------------------------------------------------------------------------------
# Provenance of one value, with the tools' trust and labels

MAIL = """
harness mail { version "1" }
tool vault.read {
  summary "Read a secret."
  effects read
  trust trusted
  labels secret
  input { name: string }
  output { value: string }
}
tool web.fetch {
  summary "Fetch a page."
  effects read
  input { url: url }
  output { body: string }
}
tool mail.send {
  summary "Send mail."
  effects external
  input { to: string, body: string }
}
policy main {
  default allow
  deny mail.send when args.body from label secret and args.body from untrusted only {
    reason "never"
  }
}
agent a { policy main }
"""


def test_a_value_from_a_label_only_trusted_tools_carry_is_never_from_untrusted_only(
    tmp_path: Path,
) -> None:
    # the old rule can never match: `secret` comes only from a trusted tool, so removing it
    # changes no decision
    a, b, comparison = compared(
        tmp_path,
        MAIL,
        MAIL.replace("and args.body from untrusted only", "and args.body from untrusted"),
    )
    assert_sound(a, b, comparison)
    a, b, comparison = compared(tmp_path / "2", MAIL, _without_rule(MAIL))
    assert comparison.regions == [], [(r.change, r.witness, r.notes) for r in comparison.regions]
    # the same rule over a label an untrusted tool carries does match
    web = MAIL.replace("  input { url: url }", "  labels secret\n  input { url: url }")
    a, b, comparison = compared(tmp_path / "3", web, _without_rule(web))
    [region] = comparison.regions
    assert region.change == "deny→allow" and region.verified, region.notes
    assert replays(a, b, region)


def _without_rule(text: str) -> str:
    start = text.index("  deny mail.send")
    end = text.index("  }\n", start) + 4
    return text[:start] + text[end:]


def test_all_and_any_over_one_list_are_related(tmp_path: Path) -> None:
    lists = """
    harness lists { version "1" }
    tool share {
      summary "Share."
      effects external
      input { to: list<string> }
    }
    policy main {
      default allow
      deny share when (all x in args.to: x from user) and len(args.to) > 0
          and not (any x in args.to: x from user) {
        reason "never"
      }
    }
    agent a { policy main }
    """
    start = lists.index("  deny share")
    end = lists.index("  }\n", start) + 4
    # all (with an item) implies any: the rule never matches, and removing it changes nothing
    _, _, comparison = compared(tmp_path, lists, lists[:start] + lists[end:])
    assert comparison.regions == [], [(r.change, r.witness) for r in comparison.regions]


# ---------------------------------------------------------------------------------------------
# Exit status


def test_exit_status_0_1_2_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = spec_of(tmp_path / "a", FILES)
    same, _ = spec_of(tmp_path / "b", FILES)
    assert cli(old, same, capsys)[0] == 0
    wider, _ = spec_of(tmp_path / "c", FILES.replace("> 5", "> 50"))
    assert cli(old, wider, capsys)[0] == 1
    broken = tmp_path / "d" / "spec.harness"
    broken.parent.mkdir()
    broken.write_text("harness files { version 1", encoding="utf-8")
    assert main(["diff", str(old), str(broken)]) == 2
    capsys.readouterr()
    # a region whose witness no session can give (an item of the call's text from a tool,
    # and no tool returns a text)
    mail = """
    harness mail { version "1" }
    tool mail.send {
      summary "Send mail."
      effects external
      input { to: string, body: string }
    }
    policy main {
      default deny
      allow mail.send when any u in urls(args.body): u from untrusted
    }
    agent a { policy main }
    """
    before, _ = spec_of(tmp_path / "e", mail)
    after, _ = spec_of(tmp_path / "f", mail.replace("u from untrusted", "u from trusted"))
    code, out = cli(before, after, capsys)
    assert code == 3, out
    assert "UNVERIFIED deny→allow" in out and "WIDENED" not in out
    assert main(["diff", "--fail-on", "never", str(before), str(after)]) == 0
    capsys.readouterr()
    # every format says so, and none counts it as a widening
    assert main(["diff", "--format", "json", str(before), str(after)]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["widened"] is False and report["unverified"] == 2
    regions = report["specs"][0]["regions"]
    assert all(not r["verified"] and not r["widened"] for r in regions)
    assert main(["diff", "--format", "sarif", str(before), str(after)]) == 3
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"harnessc-diff/unverified"}
    assert main(["diff", "--format", "markdown", str(before), str(after)]) == 3
    markdown = capsys.readouterr().out
    assert "Widening" not in markdown and "deny→allow — policy `mail.main` — unverified" in markdown


def test_decide_agrees_with_the_reference_on_each_witness(tmp_path: Path) -> None:
    """The reference evaluator (concrete.py) judges each witness as its region says."""
    a, b, comparison = compared(tmp_path, FILES, FILES.replace("within 1h", "within 2h"))
    for region in comparison.regions:
        for spec, outcome, name in (
            (a, region.old, region.old_policy),
            (b, region.new, region.new_policy),
        ):
            assert name is not None
            policy = spec.policy(name)
            assert policy is not None
            assert decide(spec, policy, region.witness).effect == outcome.effect


# ---------------------------------------------------------------------------------------------
# Every region's witness replays: the golden pairs, and drawn pairs over session terms

GOLDEN_PAIRS = [
    ("tests/review/old.harness", "tests/review/new.harness"),
    ("tests/review/expiry-old.harness", "tests/review/expiry-new.harness"),
    ("tests/review/self-approval-old.harness", "tests/review/self-approval-new.harness"),
]


@pytest.mark.parametrize(("old", "new"), GOLDEN_PAIRS)
def test_every_region_of_the_golden_pairs_replays_on_both_specs(old: str, new: str) -> None:
    from harnessc.compiler.review.diff import renamed_root

    a, b = (check([ROOT / p]).model for p in (old, new))
    assert a is not None and b is not None
    if a.root_module != b.root_module:
        renamed = renamed_root(a, b.root_module)
        assert renamed is not None
        a = renamed
    comparison = compare_specs(a, b, cache=AnalysisCache(on_disk=False))
    assert comparison.regions
    for region in comparison.regions:
        assert region.verified, (region.change, region.notes)
        assert replays(a, b, region), (region.change, region.witness)


SESSION_TOOLS = """
harness drawn { version "1" }
tool lookup {
  summary "Look up."
  effects read
  TRUST
  LABELS
  input { id: string }
  output { email: string }
}
tool fetch {
  summary "Fetch."
  effects read
  input { url: url }
  output { body: string }
}
tool send {
  summary "Send."
  effects external
  input { to: string, items: list<string> }
}
policy main {
  default DEFAULT
RULES
}
agent a { policy main }
"""

WINDOWS = ("within 1h", "within 2h", "")
SOURCES = ("from trusted", "from untrusted", "from untrusted only", "from user", "from label pii")


def _condition(kind: int, window: str, n: int, source: str, quantifier: str) -> str:
    if kind == 0:
        return f"count(send {window}) > {n}".replace("  ", " ").replace(" )", ")")
    if kind == 1:
        return f"args.to {source}"
    if kind == 2:
        return f"{quantifier} x in args.items: x from user"
    return f"called(lookup {window})".replace(" )", ")")


rules = st.lists(
    st.tuples(
        st.sampled_from(["allow", "deny"]),
        st.integers(0, 3),
        st.sampled_from(WINDOWS),
        st.integers(1, 4),
        st.sampled_from(SOURCES),
        st.sampled_from(["all", "any"]),
    ),
    min_size=1,
    max_size=3,
)


def _session_spec(default: str, trusted: bool, labelled: bool, parts: list[tuple]) -> str:
    lines = []
    for effect, kind, window, n, source, quantifier in parts:
        reason = ' { reason "no" }' if effect == "deny" else ""
        lines.append(
            f"  {effect} send when {_condition(kind, window, n, source, quantifier)}{reason}"
        )
    return (
        SESSION_TOOLS.replace("TRUST", "trust trusted" if trusted else "")
        .replace("LABELS", "labels pii" if labelled else "")
        .replace("DEFAULT", default)
        .replace("RULES", "\n".join(lines))
    )


def _mutated(parts: list[tuple], which: int, how: int) -> list[tuple]:
    """One session term of one rule changed: its window, count, source or quantifier."""
    out = list(parts)
    effect, kind, window, n, source, quantifier = out[which % len(out)]
    if how == 0:
        window = WINDOWS[(WINDOWS.index(window) + 1) % len(WINDOWS)]
    elif how == 1:
        n = n + 1
    elif how == 2:
        source = SOURCES[(SOURCES.index(source) + 1) % len(SOURCES)]
    else:
        quantifier = "any" if quantifier == "all" else "all"
    out[which % len(out)] = (effect, kind, window, n, source, quantifier)
    return out


@settings(
    max_examples=examples(24),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    default=st.sampled_from(["allow", "deny"]),
    trusted=st.booleans(),
    labelled=st.booleans(),
    parts=rules,
    change=st.sampled_from(["term", "trust", "labels"]),
    which=st.integers(0, 2),
    how=st.integers(0, 3),
)
def test_every_verified_region_of_a_session_term_mutation_flips_as_reported(
    tmp_path_factory: pytest.TempPathFactory,
    default: str,
    trusted: bool,
    labelled: bool,
    parts: list[tuple],
    change: str,
    which: int,
    how: int,
) -> None:
    old = _session_spec(default, trusted, labelled, parts)
    if change == "term":
        new = _session_spec(default, trusted, labelled, _mutated(parts, which, how))
    elif change == "trust":
        new = _session_spec(default, not trusted, labelled, parts)
    else:
        new = _session_spec(default, trusted, not labelled, parts)
    folder = tmp_path_factory.mktemp("pair")
    a, b, comparison = compared(folder, old, new)
    assert comparison.undecided == []
    for region in comparison.regions:
        if region.verified:
            assert replays(a, b, region), (old, new, region.change, region.witness)
            event("verified region")
        else:
            assert not region.widened
            event("unverified region")
    if change != "term" and old != new:
        # trusting or labelling the tool changes a decision exactly when a rule reads it
        event(f"{change}: {len(comparison.regions)} regions")


# ---------------------------------------------------------------------------------------------
# The scenarios' session-aware specs, each with one term changed: every region verified


@pytest.mark.parametrize(
    ("scenario", "before", "after", "tool"),
    [
        # a sum over non-negative amounts counts this call's own amount
        ("payments", "from untrusted only or args.iban", "from untrusted or args.iban", None),
        # an e-mail address the user said is one a message indexes
        (
            "file_sharing",
            "allow drive.share when args.email from user or",
            "allow drive.share when args.email from user only or",
            None,
        ),
        # a tool no longer trusted: `seen(secret …)` reads labels, not trust, and stays one term
        ("file_sharing", "\n  trust trusted", "", None),
        # a nested output field no longer trusted (inside a list of records); `mail.send`'s
        # rules also read `not r endswith …` of each recipient, which no witness sets
        (
            "mail_calendar",
            "people: list<{ name: string, email: string }>",
            "people: list<{ name: string, email: string untrusted }>",
            "calendar.create",
        ),
        # a quantifier whose body is provenance of each item, item by item
        (
            "mail_calendar",
            "(a from user or a from trusted)",
            "(a from user or a from trusted only)",
            None,
        ),
        (
            "mail_calendar",
            "(a from untrusted only or a from nowhere)",
            "(a from untrusted or a from nowhere)",
            None,
        ),
    ],
)
def test_a_scenario_with_a_session_term_changed_has_every_region_verified(
    tmp_path: Path, scenario: str, before: str, after: str, tool: str | None
) -> None:
    text = (ROOT / "tests" / "scenarios" / f"{scenario}.harness").read_text(encoding="utf-8")
    assert before in text
    a, b, comparison = compared(tmp_path, text, text.replace(before, after, 1))
    regions = [r for r in comparison.regions if tool is None or r.tool == tool]
    assert regions
    for region in regions:
        assert region.verified, (region.change, region.notes)
        assert replays(a, b, region)
    for region in comparison.regions:
        assert region.verified or not region.widened


VALUE = "alice-0001@example.com"
ITEM_VALUES = ("bob-0002@example.com", "carol-0003@example.com")
SOURCE_STEPS = {
    "user": lambda v: m.SessionStep(said=v),
    "lookup": lambda v: m.SessionStep(tool="lookup", args={"id": "id-1"}, result={"email": v}),
    "fetch": lambda v: m.SessionStep(
        tool="fetch", args={"url": "https://example.com/"}, result={"body": v}
    ),
}
sessions = st.tuples(
    st.sets(st.sampled_from(sorted(SOURCE_STEPS))),
    st.lists(st.sets(st.sampled_from(sorted(SOURCE_STEPS))), max_size=2),
    st.lists(st.sampled_from([None, 90 * 60_000, 3 * 3_600_000]), max_size=6),
    st.booleans(),
)


def _session(drawn: tuple) -> tuple[dict, list[m.SessionStep]]:
    """A call of `send` and the session before it: where its values appeared, earlier sends
    at chosen times, perhaps an earlier lookup."""
    to_sources, item_sources, sends, looked_up = drawn
    steps = [SOURCE_STEPS[s](VALUE) for s in sorted(to_sources)]
    for value, where in zip(ITEM_VALUES, item_sources, strict=False):
        steps += [SOURCE_STEPS[s](value) for s in sorted(where)]
    steps += [
        m.SessionStep(tool="send", args={"to": "x", "items": []}, result={}, ago_ms=ago)
        for ago in sends
    ]
    if looked_up:
        steps.append(m.SessionStep(tool="lookup", args={"id": "id-2"}, result={"email": "z"}))
    args = {"to": VALUE, "items": list(ITEM_VALUES[: len(item_sources)])}
    return args, steps


@settings(
    max_examples=examples(24),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    default=st.sampled_from(["allow", "deny"]),
    trusted=st.booleans(),
    labelled=st.booleans(),
    parts=rules,
    change=st.sampled_from(["term", "trust", "labels"]),
    which=st.integers(0, 2),
    how=st.integers(0, 3),
    drawn=st.lists(sessions, min_size=4, max_size=16),
)
def test_a_call_decided_differently_in_a_drawn_session_is_in_a_reported_region(
    tmp_path_factory: pytest.TempPathFactory,
    default: str,
    trusted: bool,
    labelled: bool,
    parts: list[tuple],
    change: str,
    which: int,
    how: int,
    drawn: list[tuple],
) -> None:
    """Recall: a concrete session and call the runtime decides differently under the two
    specs falls in a region the comparison reported (the same winning rules)."""
    from harnessc.compiler.analysis.compare import runtime_outcome

    old = _session_spec(default, trusted, labelled, parts)
    if change == "term":
        new = _session_spec(default, trusted, labelled, _mutated(parts, which, how))
    elif change == "trust":
        new = _session_spec(default, not trusted, labelled, parts)
    else:
        new = _session_spec(default, trusted, not labelled, parts)
    a, b, comparison = compared(tmp_path_factory.mktemp("pair"), old, new)
    reported = {(r.old.rule, r.new.rule) for r in comparison.regions}
    engines = PolicyEngine(a), PolicyEngine(b)
    for session in drawn:
        args, steps = _session(session)
        call = Call("send", args)
        before = engines[0].decide("drawn.main", runtime_call(a, call, steps))
        after = engines[1].decide("drawn.main", runtime_call(b, call, steps))
        if runtime_outcome(before) != runtime_outcome(after):
            event("a drawn call decided differently")
            assert (before.rule, after.rule) in reported, (old, new, args, steps)


def test_a_changed_on_success_is_reported_and_its_decisions_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the lookup's address becomes a fact only when it is the company's; or it leaves the fact
    only_ours = ADDS.replace(
        "on_success add", 'on_success when result.email endswith "@example.com" add'
    )
    removes = ADDS.replace("on_success add result.email to", "on_success remove result.email from")
    for name, new, line in (
        (
            "when",
            only_ours,
            'on_success: add result.email to known → when result.email endswith "@example.com" '
            "add result.email to known",
        ),
        (
            "remove",
            removes,
            "on_success: add result.email to known → remove result.email from known",
        ),
    ):
        a, b, comparison = compared(tmp_path / name, ADDS, new)
        assert_sound(a, b, comparison)
        code, out = cli(
            tmp_path / name / "old" / "spec.harness",
            tmp_path / name / "new" / "spec.harness",
            capsys,
        )
        # narrower on both counts: the address is trusted less often, never more
        assert code == 0 and line in out and "1 allow→deny" in out, out
