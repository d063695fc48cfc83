"""`harnessc diff`'s four renderings of pairs of example specs, recorded as goldens
(`tests/review/old.harness` → `new.harness`, `expiry-old.harness` → `expiry-new.harness` and
`self-approval-old.harness` → `self-approval-new.harness`; `pytest --update-goldens` rewrites
them), and the renderers on constructed regions: every
region the comparison returned is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harnessc.compiler.analysis.compare import Comparison, Outcome, Region
from harnessc.compiler.analysis.concrete import Call
from harnessc.compiler.review.changes import Change
from harnessc.compiler.review.diff import run_diff
from harnessc.compiler.review.report import (
    DETAILS_OVER,
    DiffReport,
    SpecDiff,
    render_json,
    render_markdown,
    render_sarif,
    render_text,
)

from harnessc import __version__

from .conftest import ROOT, update_goldens

CASES = ROOT / "tests" / "review"
PAIR = ["tests/review/old.harness", "tests/review/new.harness"]
EXPIRY_PAIR = ["tests/review/expiry-old.harness", "tests/review/expiry-new.harness"]
SELF_PAIR = ["tests/review/self-approval-old.harness", "tests/review/self-approval-new.harness"]
SUFFIX = {"text": "txt", "markdown": "md", "json": "json", "sarif": "sarif"}


def _rendered(
    fmt: str, capsys: pytest.CaptureFixture[str], pair: list[str] = PAIR
) -> tuple[int, str]:
    code = run_diff(pair, fmt)
    out = capsys.readouterr().out
    # the driver's version is harnessc's: a release must not change the golden
    return code, out.replace(json.dumps(__version__), '"VERSION"')


@pytest.mark.parametrize("fmt", list(SUFFIX))
def test_each_format_renders_as_recorded(
    fmt: str, in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _rendered(fmt, capsys)
    assert code == 1  # staging deploys no longer ask: widened
    golden = CASES / f"release.{SUFFIX[fmt]}"
    if update_goldens():
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", list(SUFFIX))
@pytest.mark.parametrize(("name", "pair"), [("expiry", EXPIRY_PAIR), ("self-approval", SELF_PAIR)])
def test_a_change_within_an_ask_renders_as_recorded(
    name: str, pair: list[str], fmt: str, in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _rendered(fmt, capsys, pair)
    # a request that waits longer or shorter, or that its requester may now approve, still
    # waits for an approval: an ASK stays an ASK, as with another approver, so nothing widens
    assert code == 0
    golden = CASES / f"{name}.{SUFFIX[fmt]}"
    if update_goldens():
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_only_a_change_of_expiry_is_reported_as_one(
    in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the pair differs only in `expires`: added (staging deploys), removed (rotations),
    # shortened (production deploys), lengthened (the risk table's high entry)
    run_diff(EXPIRY_PAIR, "json")
    report = json.loads(capsys.readouterr().out)
    [spec] = report["specs"]
    assert spec["changes"] == [] and report["widened"] is False
    seen = {
        (r["tool"], r["witness"]["args"].get("environment"), r["change"]): (
            r["old"]["expires"],
            r["new"]["expires"],
        )
        for r in spec["regions"]
    }
    assert seen == {
        ("deploy", "production", "ask→ask (expires)"): ("4h", "30m"),
        ("deploy", "staging", "ask→ask (expires)"): (None, "1h"),
        ("secrets.rotate", None, "ask→ask (expires)"): ("2h", None),
        ("cache.flush", None, "ask→ask (expires)"): ("1d", "2d"),
    }
    assert all(r["verified"] and r["exact"] for r in spec["regions"])
    # everything else of each ASK is the same on both sides: the expiry is the whole change
    for r in spec["regions"]:
        old = {k: v for k, v in r["old"].items() if k not in ("expires", "origin")}
        new = {k: v for k, v in r["new"].items() if k not in ("expires", "origin")}
        assert old == new
    # the unchanged ASK (service restarts) is no region
    assert "service.restart" not in {r["tool"] for r in spec["regions"]}
    run_diff(EXPIRY_PAIR, "sarif")
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["harnessc-diff/decision-changed"] * 4


def test_an_ask_change_is_named_by_the_first_part_that_differs() -> None:
    def ask(expires: str | None, grant: str = "once ttl 15m") -> Outcome:
        return Outcome(
            "ask", "main#1", "a.harness:3:3", "demo.main", ['role "sre"'], grant, expires
        )

    def region(old: Outcome, new: Outcome) -> Region:
        return Region(
            "deploy", "policy demo.main", "demo.main", "demo.main", old, new, Call("deploy")
        )

    shorter = region(ask("4h"), ask("30m"))
    assert shorter.change == "ask→ask (expires)" and shorter.old.key() != shorter.new.key()
    assert region(ask(None), ask("1h")).change == "ask→ask (expires)"
    assert region(ask("4h"), ask("1h", "once ttl 5m")).change == "ask→ask (grant)"
    text = render_text(_report([shorter]))
    assert 'old: ask (approver role "sre"; grant once ttl 15m; expires 4h)' in text
    assert 'new: ask (approver role "sre"; grant once ttl 15m; expires 30m)' in text


def test_only_a_change_of_self_approval_is_reported_as_one(
    in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the pair differs only in self-approval: allow → deny (production deploys), deny → allow
    # (staging deploys), the risk default → allow (database calls: only a migration, risk
    # high, changes; a query, risk low, was allowed already), and a default moved by the
    # tool's risk (cache flushes, medium → high)
    run_diff(SELF_PAIR, "json")
    report = json.loads(capsys.readouterr().out)
    [spec] = report["specs"]
    assert report["widened"] is False
    seen = {
        (r["tool"], json.dumps(r["witness"]["args"], sort_keys=True), r["change"]): (
            r["old"]["self_approval"],
            r["new"]["self_approval"],
        )
        for r in spec["regions"]
    }
    assert seen == {
        ("deploy", '{"environment": "production"}', "ask→ask (self-approval)"): (
            "allow",
            "deny",
        ),
        ("deploy", '{"environment": "staging"}', "ask→ask (self-approval)"): ("deny", "allow"),
        ("db", '{"op": "migrate"}', "ask→ask (self-approval)"): ("deny", "allow"),
        ("cache.flush", '{"name": "x"}', "ask→ask (self-approval)"): ("allow", "deny"),
    }
    # the runtime's own decision agrees on each witness
    assert all(r["verified"] and r["exact"] for r in spec["regions"])
    for r in spec["regions"]:
        old = {k: v for k, v in r["old"].items() if k not in ("self_approval", "origin")}
        new = {k: v for k, v in r["new"].items() if k not in ("self_approval", "origin")}
        assert old == new
    # `self_approval allow` written where the default already allowed it is no change
    assert "service.restart" not in {r["tool"] for r in spec["regions"]}
    assert [c["kind"] for c in spec["changes"]] == ["tool-changed"]
    run_diff(SELF_PAIR, "text")
    text = capsys.readouterr().out
    assert 'old: ask (approver role "dba"; grant once ttl 15m; self-approval deny)' in text
    assert 'new: ask (approver role "dba"; grant once ttl 15m; self-approval allow)' in text


def test_self_approval_is_named_last_and_only_where_it_changed() -> None:
    def ask(approver: str, self_approval: str) -> Outcome:
        return Outcome(
            "ask",
            "main#1",
            "a.harness:3:3",
            "demo.main",
            [approver],
            "once ttl 15m",
            self_approval=self_approval,
        )

    def region(old: Outcome, new: Outcome) -> Region:
        return Region(
            "deploy", "policy demo.main", "demo.main", "demo.main", old, new, Call("deploy")
        )

    opened = region(ask('role "sre"', "deny"), ask('role "sre"', "allow"))
    assert opened.change == "ask→ask (self-approval)" and not opened.widened
    assert opened.old.key() != opened.new.key()
    both = region(ask('role "sre"', "deny"), ask('role "dba"', "allow"))
    assert both.change == "ask→ask (approver)"
    text = render_text(_report([opened, both]))
    assert 'old: ask (approver role "sre"; grant once ttl 15m; self-approval deny)' in text
    assert 'new: ask (approver role "dba"; grant once ttl 15m; self-approval allow)' in text
    same = region(ask('role "sre"', "deny"), ask('role "dba"', "deny"))
    assert "self-approval" not in render_text(_report([same]))


def test_the_same_input_gives_the_same_bytes(
    in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the second run answers from the analysis cache: nothing of the solver's work shows
    for fmt in SUFFIX:
        assert _rendered(fmt, capsys) == _rendered(fmt, capsys)


def test_the_golden_pair_shows_each_kind_of_change(
    in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_diff(PAIR, "json")
    report = json.loads(capsys.readouterr().out)
    assert report["version"] == 1 and report["widened"] is True
    changes = {r["change"]: r for spec in report["specs"] for r in spec["regions"]}
    assert set(changes) == {"deny→allow", "ask→allow", "allow→ask", "ask→ask (approver)"}
    assert all(r["verified"] for r in changes.values())
    staging = changes["ask→allow"]
    assert staging["witness"]["args"]["environment"] == "staging"
    assert staging["old"]["origin"].startswith("tests/review/old.harness:")
    assert staging["new"]["origin"].startswith("tests/review/new.harness:")
    kinds = {c["kind"]: c for spec in report["specs"] for c in spec["changes"]}
    assert set(kinds) >= {
        "tool-added",
        "tool-changed",
        "tool-exposed",
        "availability-changed",
        "step-judgement-changed",
    }
    assert kinds["step-judgement-changed"]["subject"] == "ship.stage"
    assert kinds["step-judgement-changed"]["widens"] is True
    assert kinds["availability-changed"]["details"] == [
        "before: always available (asks nothing of the facts)",
        "after: requires `repo.open == true`",
        "no longer available, e.g. with no fact supplied, nothing connected or running",
    ]


# ---------------------------------------------------------------------------------------------
# Renderers over constructed regions


def _region(index: int, old: str, new: str) -> Region:
    def outcome(effect: str, side: str) -> Outcome:
        approvers = ['role "owner"'] if effect == "ask" else []
        return Outcome(
            effect,
            f"main.r{index}{side}",
            f"{side}.harness:{index + 10}:3",
            "demo.main",
            approvers,
            "once ttl 15m" if effect == "ask" else None,
        )

    witness = Call(f"tool.t{index % 4}", {"n": index}, {"role": f"role-{index}"})
    region = Region(
        witness.tool,
        "policy demo.main",
        "demo.main",
        "demo.main",
        outcome(old, "a"),
        outcome(new, "b"),
        witness,
    )
    region.verified = True
    return region


def _report(regions: list[Region]) -> DiffReport:
    comparison = Comparison(regions=regions)
    change = Change("tool-added", "tool.new", "`tool.new` is registered", ("requires `x`",))
    return DiffReport("main", "HEAD", [SpecDiff("demo.harness", "changed", comparison, [change])])


EFFECTS = [
    ("deny", "allow"),
    ("ask", "allow"),
    ("allow", "deny"),
    ("allow", "ask"),
    ("ask", "deny"),
]


@pytest.mark.parametrize("count", [1, DETAILS_OVER + 5])
def test_text_and_markdown_show_every_region(count: int) -> None:
    regions = [_region(i, *EFFECTS[i % len(EFFECTS)]) for i in range(count)]
    report = _report(regions)
    text, markdown = render_text(report), render_markdown(report)
    for region in regions:
        args = f"n: {region.witness.args['n']}"
        role = f'"role": "role-{region.witness.args["n"]}"'
        for rendered in (text, markdown):
            assert f"{region.tool}({args})" in rendered and role in rendered
            assert region.old.rule in rendered and region.new.rule in rendered  # type: ignore[operator]
    assert text.count("WIDENED") == sum(r.widened for r in regions)
    assert ("<details>" in markdown) == (count - sum(r.widened for r in regions) > DETAILS_OVER)
    assert "### Widening: now allowed" in markdown


def test_markdown_counts_each_kind_and_lists_widening_first() -> None:
    regions = [_region(i, *EFFECTS[i % len(EFFECTS)]) for i in range(5)]
    markdown = render_markdown(_report(regions))
    table = markdown[markdown.index("| change | count |") :].split("\n\n", 1)[0]
    assert table.splitlines()[2:] == [
        "| `deny→allow` | 1 |",
        "| `ask→allow` | 1 |",
        "| `allow→deny` | 1 |",
        "| `ask→deny` | 1 |",
        "| `allow→ask` | 1 |",
        "| `tool-added` | 1 |",
    ]
    assert markdown.index("deny→allow —") < markdown.index("allow→deny —")


def test_sarif_places_each_region_at_the_new_rule_or_the_removed_one() -> None:
    regions = [_region(0, "ask", "allow"), _region(1, "allow", "deny")]
    regions[1].new.refused, regions[1].new.rule, regions[1].new.origin = True, None, None
    log = json.loads(render_sarif(_report(regions)))
    results = log["runs"][0]["results"]
    where = {
        r["ruleId"]: r["locations"][0]["physicalLocation"] for r in results if "locations" in r
    }
    assert where["harnessc-diff/widened"]["artifactLocation"]["uri"] == "b.harness"
    assert where["harnessc-diff/widened"]["region"]["startLine"] == 10
    assert where["harnessc-diff/narrowed"]["artifactLocation"]["uri"] == "a.harness"
    assert log["version"] == "2.1.0"
    assert {r["level"] for r in results if r["ruleId"] == "harnessc-diff/widened"} == {"warning"}


def test_json_is_stable_and_versioned() -> None:
    report = _report([_region(0, "ask", "allow")])
    first = json.loads(render_json(report))
    assert first["version"] == 1 and first["widened"] is True
    assert first["counts"] == {"ask→allow": 1, "tool-added": 1}
    assert set(first["specs"][0]) >= {"spec", "status", "regions", "undecided", "changes"}
    assert "queries" not in first["specs"][0] and "cache_hits" not in first["specs"][0]
    assert render_json(report) == render_json(report)


def test_an_undecided_question_is_shown_and_exits_3_unless_never() -> None:
    from harnessc.compiler.analysis.compare import UndecidedRegion
    from harnessc.compiler.review.diff import exit_status

    report = _report([])
    report.specs[0].changes = []
    report.specs[0].comparison.undecided = [
        UndecidedRegion("tool.t1", "policy demo.main", "main.r1", None, "timeout")
    ]
    assert not report.widened and report.undecided == 1
    # not answered: a possible change, never a widening (3), and a change with `changed`
    assert [exit_status(report, f) for f in ("widened", "changed", "never")] == [3, 1, 0]
    line = "`tool.t1` [policy demo.main] (old main.r1, new default): the solver gave no answer"
    assert f"undecided: {line}" in render_text(report)
    assert "### Undecided (1)" in render_markdown(report)
    assert "❔" in render_markdown(report)
    sarif = json.loads(render_sarif(report))
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "harnessc-diff/undecided" and result["level"] == "warning"


def _same_kind(count: int, old_rule: str | None = None) -> list[Region]:
    """Regions of `count` tools that one new DENY decides, each once allowed by its own rule
    (or all by `old_rule`)."""
    regions = []
    for i in range(count):
        line = 100 if old_rule else i + 100
        old = Outcome("allow", old_rule or f"main.allow_{i}", f"a.harness:{line}:3", "demo.main")
        new = Outcome("deny", "main.freeze", "b.harness:9:3", "demo.main", reason="frozen")
        witness = Call(f"tool.t{i:05}", {"n": i}, {"role": "sre"})
        region = Region(
            witness.tool, "policy demo.main", "demo.main", "demo.main", old, new, witness
        )
        region.verified = True
        regions.append(region)
    return regions


def test_markdown_groups_regions_of_one_kind_and_names_every_tool() -> None:
    regions = _same_kind(30, old_rule="main.allow_all")
    markdown = render_markdown(_report(regions))
    assert "- **30 tools** allow→deny — policy `demo.main`" in markdown
    assert markdown.count("witness:") == 1
    assert all(f"`{r.tool}`" in markdown for r in regions)
    assert "cut to fit" not in markdown


def test_a_large_markdown_report_is_cut_to_fit_a_comment_and_says_so() -> None:
    from harnessc.compiler.review.report import MARKDOWN_BUDGET

    regions = _same_kind(6000)  # a new DENY over 6,000 tools, each once allowed its own way
    regions += [_region(1, "ask", "allow")]
    markdown = render_markdown(_report(regions))
    assert len(markdown) <= MARKDOWN_BUDGET
    assert "cut to fit a pull-request comment" in markdown
    assert "- **6000 tools** allow→deny — policy `demo.main`" in markdown
    assert "6000 ways:" in markdown and "and 5990 more" in markdown
    # the widening region is shown whole, first
    assert markdown.index("### Widening") < markdown.index("6000 tools")
    assert "tool.t1(n: 1)" in markdown
    assert render_text(_report(regions)).count("allow→deny  [") == 6000  # text keeps each
