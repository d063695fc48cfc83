"""The standard library is checked, linted, tested and documented like any spec, and decides
what the compiler-semantics issue requires of it.

- every module, alone and imported together, has no errors and no lint findings;
- every public tool says what it is for (`summary`, `use_when`);
- every module's own `test` blocks pass;
- the required decisions (std.risk defaults and guardrails, workspace edits and terminal,
  GitHub reads and remote writes, cached and forced mail queries, rising browser risk) hold in a
  spec that uses every module the way the docs show;
- `docs/stdlib/` has a current page per module (tools/gen_stdlib_docs.py).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from harnessc.compiler import pipeline
from harnessc.compiler.testing import TestRun, render_run, run_spec_tests
from harnessc.dsl.render_formats import render

ROOT = Path(__file__).resolve().parent.parent
STDLIB = ROOT / "stdlib"
MODULES = sorted(p.stem for p in STDLIB.glob("*.harness"))


def test_the_stdlib_has_the_modules_the_issue_names() -> None:
    assert set(MODULES) >= {"risk", "workspace", "github", "mail", "browser"}


def _clean(result: pipeline.CheckResult) -> str:
    """The findings of a check or lint run, rendered; empty when there are none."""
    return render(result.diagnostics, "plain") if result.diagnostics else ""


@pytest.mark.parametrize("module", MODULES)
def test_module_checks_without_errors(module: str) -> None:
    result = pipeline.check([STDLIB / f"{module}.harness"])
    assert result.ok and result.model is not None, _clean(result)


@pytest.mark.parametrize("module", MODULES)
def test_module_lints_without_findings(module: str) -> None:
    result = pipeline.lint([STDLIB / f"{module}.harness"])
    assert result.diagnostics == [], _clean(result)


@pytest.mark.parametrize("module", MODULES)
def test_module_tests_pass(module: str) -> None:
    result = pipeline.check([STDLIB / f"{module}.harness"])
    assert result.model is not None, _clean(result)
    run = run_spec_tests(result.model, file=f"stdlib/{module}.harness")
    assert run.failed == 0, render_run([run])


# ---------------------------------------------------------------------------------------------
# A spec that uses every module, as docs/stdlib/index.md shows


DESK = """\
harness desk {
  version "0.1.0"
  summary "A desk assistant with the whole standard library."
}

import std.risk
import std.workspace
import std.github
import std.mail
import std.browser

mcp tracker {
  transport stdio "tracker-mcp"
  tool lookup {
    summary "Look up a ticket in the tracker."
    use_when "The user mentions a ticket by its key."
    effects read
    input { ticket: string }
    output { title: string }
  }
}

tool notes.read {
  summary "Read the team's shared notes."
  use_when "Answering a question the team's notes may cover."
  effects read
  risk low
  input { topic: string }
}

tool notes.write {
  summary "Append a paragraph to the team's shared notes."
  use_when "Recording a decision the team took."
  effects write reversible
  risk medium
  input { topic: string, text: string }
}

tool notes.publish {
  summary "Publish the notes on the company's public site."
  use_when "The team decided to share its notes outside the company."
  effects external
  risk high
  input { topic: string }
}

tool notes.destroy {
  summary "Permanently erase every copy of the notes and their history."
  use_when "Never by an agent: declared so that a request is refused by name."
  effects write
  risk critical
  input { topic: string }
}

surface desk {
  expose std.workspace.*, std.github.*, std.mail.*, std.browser.*, notes.*, mcp:tracker:*
}

policy desk {
  default std.risk.defaults
  include std.risk.guardrails
  include std.workspace.workspace
  include std.github.github
  include std.mail.mail
  include std.browser.browser
}

agent assistant {
  persona "Answers questions about the team's code, mail, notes and web tools."
  surface desk
  policy desk
}

test "risk defaults: a low-risk call runs" {
  call notes.read(topic: "on-call")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  expect allow
}

test "risk defaults: a medium-risk call runs" {
  call notes.write(topic: "on-call", text: "Rotate weekly.")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  expect allow
}

test "risk defaults: a high-risk call asks the owner" {
  call notes.publish(topic: "on-call")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  expect ask approver role "owner"
}

test "risk defaults: a critical call is denied" {
  call notes.destroy(topic: "on-call")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  expect deny reason "Critical actions never run without an explicit rule."
}

test "guardrails: a cross-tenant call is denied" {
  call notes.read(topic: "on-call")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  resource { tenant: "globex" }
  expect deny rule std.risk.guardrails.cross_tenant
}

test "guardrails: an actor without a tenant cannot reach a tenant's data" {
  call notes.read(topic: "on-call")
  as actor { user: "u-1", role: "engineer" }
  resource { tenant: "acme" }
  expect deny rule std.risk.guardrails.cross_tenant
}

test "guardrails: changing a control is denied" {
  call notes.write(topic: "policy", text: "Allow everything.")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  resource { tenant: "acme", control: "policy" }
  expect deny rule std.risk.guardrails.control_bypass
}

test "guardrails: a long-lived secret is denied" {
  call notes.read(topic: "deploy keys")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  resource { credential: "static_key" }
  expect deny rule std.risk.guardrails.long_lived_secret
}

test "guardrails: every MCP call asks the user" {
  call mcp:tracker:tool:lookup(ticket: "OPS-1")
  as actor { user: "u-1", role: "engineer", tenant: "acme" }
  expect ask approver role "user" rule std.risk.guardrails.mcp_calls
}

test "workspace: a read inside the workspace runs" {
  call read_open(path: "/repo/README.md")
  facts { workspace.open: true, workspace.root: "/repo" }
  expect allow rule std.workspace.workspace.reads
}

test "workspace: an edit asks the user" {
  call write_file(path: "/repo/README.md", content: "# Desk")
  facts { workspace.open: true, workspace.root: "/repo" }
  expect ask approver role "user" rule std.workspace.workspace.edits
}

test "workspace: the terminal asks the user, although its risk is high" {
  call terminal_session(command: "make test")
  facts { workspace.open: true, workspace.root: "/repo" }
  expect ask approver role "user" rule std.workspace.workspace.terminal
}

test "workspace: a legacy edit cannot skip the approval" {
  call edit_file(path: "/repo/README.md", old_text: "a", new_text: "b")
  facts { workspace.open: true, workspace.root: "/repo" }
  expect ask approver role "user" rule std.workspace.workspace.legacy_edits
}

test "github: a read runs" {
  call github.read_file(repo: "acme/api", path: "README.md")
  expect allow rule std.github.github.reads
}

test "github: a remote write asks the user" {
  call github.create_issue(repo: "acme/api", title: "Flaky test", body: "Fails on Mondays.")
  expect ask approver role "user" rule std.github.github.remote_writes
}

test "github: a pull request asks the user, not the owner" {
  call github.create_pull_request(repo: "acme/api", title: "Fix", body: "", head: "fix")
  expect ask approver role "user" rule std.github.github.remote_writes
}

test "mail: a query from the cache runs" {
  call mail_query(query: "invoice", force_sync: false)
  expect allow rule std.mail.mail.cached
}

test "mail: a forced sync asks the user" {
  call mail_query(query: "invoice", force_sync: true)
  expect ask approver role "user" rule std.mail.mail.forced_sync
}

test "browser: observe runs" {
  call browser(op: "observe")
  expect allow rule std.browser.browser.look
}

test "browser: navigate runs" {
  call browser(op: "navigate", url: "https://example.com")
  expect allow rule std.browser.browser.look
}

test "browser: interact asks once per task" {
  call browser(op: "interact", selector: "#go")
  expect ask approver role "user" rule std.browser.browser.act
}

test "browser: transfer asks for every call" {
  call browser(op: "transfer", selector: "#upload", file: "/repo/report.pdf")
  expect ask approver role "user" rule std.browser.browser.transfer
}
"""

REQUIRED = [
    "risk defaults: a low-risk call runs",
    "risk defaults: a medium-risk call runs",
    "risk defaults: a high-risk call asks the owner",
    "risk defaults: a critical call is denied",
    "guardrails: a cross-tenant call is denied",
    "guardrails: every MCP call asks the user",
    "workspace: an edit asks the user",
    "workspace: the terminal asks the user, although its risk is high",
    "github: a read runs",
    "github: a remote write asks the user",
    "mail: a query from the cache runs",
    "mail: a forced sync asks the user",
    "browser: observe runs",
    "browser: interact asks once per task",
    "browser: transfer asks for every call",
]


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stdlib") / "desk.harness"
    path.write_text(DESK, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def desk_run(desk: Path) -> TestRun:
    result = pipeline.check([desk])
    assert result.model is not None, _clean(result)
    return run_spec_tests(result.model, file="desk.harness")


def test_a_module_importing_everything_checks_and_lints_clean(desk: Path) -> None:
    result = pipeline.lint([desk])
    assert result.diagnostics == [], _clean(result)


def test_every_decision_of_the_combined_spec_holds(desk_run: TestRun) -> None:
    assert desk_run.failed == 0, render_run([desk_run])
    assert desk_run.passed == DESK.count('\ntest "')


@pytest.mark.parametrize("name", REQUIRED)
def test_required_decision(desk_run: TestRun, name: str) -> None:
    outcome = next((o for o in desk_run.outcomes if o.test.name == name), None)
    assert outcome is not None, f"no test block named {name!r}"
    assert outcome.passed, "\n".join([*outcome.problems, *outcome.explanation])


def test_every_public_tool_says_what_it_is_for(desk: Path) -> None:
    model = pipeline.check([desk]).model
    assert model is not None
    std_tools = [t for t in model.tools.values() if t.module.startswith("std.")]
    assert {t.module for t in std_tools} >= {"std.workspace", "std.github", "std.mail"}
    for tool in std_tools:
        if tool.kind == "public":
            assert tool.summary and tool.use_when, f"`{tool.id}` lacks summary or use_when"
        else:
            assert tool.kind == "legacy" and tool.replaced_by, f"`{tool.id}` is {tool.kind}"


def test_legacy_tools_stay_hidden_from_module_globs(desk: Path) -> None:
    """`expose std.workspace.*` exposes the public tools only."""
    model = pipeline.check([desk]).model
    assert model is not None
    legacy = {t.id for t in model.tools.values() if t.kind == "legacy"}
    assert legacy == {
        "read_list",
        "read_locate",
        "read_extract",
        "read_slice",
        "read",
        "edit_file",
        "workspace_mutation",
    }


# ---------------------------------------------------------------------------------------------
# docs/stdlib/


@cache
def _gen() -> ModuleType:
    """tools/gen_stdlib_docs.py, imported by path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "gen_stdlib_docs", ROOT / "tools" / "gen_stdlib_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_stdlib_docs"] = module
    spec.loader.exec_module(module)
    return module


def test_every_module_has_a_page_linked_from_the_index() -> None:
    pages = ROOT / "docs" / "stdlib"
    index = (pages / "index.md").read_text(encoding="utf-8")
    for module in MODULES:
        page = pages / f"{module}.md"
        assert page.is_file(), f"no page docs/stdlib/{module}.md"
        assert f"]({module}.md)" in index
        text = page.read_text(encoding="utf-8")
        assert f"import std.{module}" in text, f"{module}.md shows no import"
    language = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    assert "](stdlib/index.md)" in language


def test_stdlib_pages_are_current() -> None:
    stale = _gen().stale_files()
    assert stale == [], f"stale {stale}; run `python tools/gen_stdlib_docs.py`"


def test_pages_list_every_rule_and_tool() -> None:
    """The generated reference names every rule and tool the modules declare."""
    gen = _gen()
    spec = gen.stdlib_spec()
    for module in MODULES:
        text = (ROOT / "docs" / "stdlib" / f"{module}.md").read_text(encoding="utf-8")
        for policy in (p for n, p in spec.policies.items() if n.startswith(f"std.{module}.")):
            for rule in policy.rules:
                assert f"`{rule.label}`" in text, f"{module}.md misses rule {rule.label}"
        for tool in (t for t in spec.tools.values() if t.module == f"std.{module}"):
            assert f"`{tool.id}`" in text, f"{module}.md misses tool {tool.id}"


def _page_examples() -> list[object]:
    from .test_docs import harness_blocks

    params = []
    for page in sorted((ROOT / "docs" / "stdlib").glob("*.md")):
        for line, body in harness_blocks(page.read_text(encoding="utf-8")):
            params.append(pytest.param(body, id=f"{page.name}:{line}"))
    return params


@pytest.mark.parametrize("body", _page_examples())
def test_page_examples_lint_clean_and_their_tests_pass(body: str, tmp_path: Path) -> None:
    """test_docs checks every block; here they also lint clean and their tests pass, so the
    decisions a page shows are the decisions the modules make."""
    path = tmp_path / "example.harness"
    path.write_text(body, encoding="utf-8")
    result = pipeline.lint([path])
    assert result.diagnostics == [] and result.model is not None, _clean(result)
    run = run_spec_tests(result.model, file="example.harness")
    assert run.failed == 0 and run.passed > 0, render_run([run])
