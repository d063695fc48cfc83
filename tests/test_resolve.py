"""Name resolution: what a user sees for unknown, duplicate and misplaced names and modules."""

from __future__ import annotations

import os
import random
import re
from functools import partial
from pathlib import Path

import pytest
from harnessc.compiler.modules import std_module_names
from harnessc.compiler.pipeline import LoadedFile, check, load_file
from harnessc.compiler.resolve import Resolution, resolve_program
from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.parser import parse_source
from harnessc.dsl.render_formats import render
from harnessc.dsl.source import Source, Span
from harnessc.dsl.suggest import MAX_WORD, edit_distance, suggest

from .counting import count_calls

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "remediation" / "remediation.harness"
CASES = REPO / "tests" / "diagnostics" / "cases"

TOOLS = """
connection change_platform
tool change.create { summary "Create a change."; effects write; risk medium
                     requires connected(change_platform) }
tool change.get { summary "Read a change."; effects read }
tool production.deploy { summary "Deploy."; effects external; risk high
                         input { environment: enum("staging", "production") } }
"""


def run(tmp_path: Path, files: dict[str, str], *roots: str):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result = check([tmp_path / root for root in roots or ("main.harness",)])
    return result


def only(result, code: str) -> Diagnostic:
    found = [d for d in result.diagnostics if d.code == code]
    assert len(found) == 1, render(result.diagnostics, "plain")
    return found[0]


def codes(result) -> list[str]:
    return sorted(d.code for d in result.diagnostics)


def underlined(diagnostic: Diagnostic) -> str:
    assert diagnostic.primary is not None
    return diagnostic.primary.span.text


def secondary(diagnostic: Diagnostic) -> list[tuple[str, str]]:
    return [(label.span.text, label.message) for label in diagnostic.labels if not label.primary]


# ---------------------------------------------------------------------------------------------
# The shipped specs resolve cleanly


def test_the_example_resolves_without_diagnostics():
    result = check([EXAMPLE])
    # L101, a note: the example's `reject` ends the run on purpose
    assert [d for d in result.diagnostics if d.code != "L101"] == [], render(
        result.diagnostics, "plain"
    )
    resolution = result.resolution
    assert resolution is not None
    names = [m.name for m in resolution.modules]
    # each module comes after the modules it imports; the root comes last
    assert names[-1].endswith("remediation.harness")
    assert {"std/risk.harness", "std/workspace.harness"} <= set(names)
    assert all(binding.used for m in resolution.modules for binding in m.imports)


@pytest.mark.parametrize("module", std_module_names())
def test_every_stdlib_module_resolves_without_diagnostics(module):
    path = REPO / "stdlib" / (module.removeprefix("std.").replace(".", "/") + ".harness")
    result = check([path])
    assert result.diagnostics == [], render(result.diagnostics, "plain")


def test_every_stdlib_module_imports_without_diagnostics(tmp_path):
    imports = "\n".join(f"import {m}" for m in std_module_names())
    # std.risk declares no tools, so a surface cannot expose `std.risk.*` (H322): include it
    globs = ", ".join(f"{m}.*" for m in std_module_names() if m != "std.risk")
    text = f"{imports}\nsurface all {{ expose {globs} }}\n"
    text += "policy p { include std.risk.guardrails }\n"
    result = run(tmp_path, {"main.harness": text})
    assert result.diagnostics == [], render(result.diagnostics, "plain")


# ---------------------------------------------------------------------------------------------
# Unknown names (H201) and names of the wrong kind (H207)


def test_unknown_tool_suggests_the_near_id(tmp_path):
    result = run(
        tmp_path,
        {
            "main.harness": TOOLS + "policy release {\n  allow change.craete when actor.role in "
            '["engineer"]\n}\n'
        },
    )
    d = only(result, "H201")
    assert d.message == "unknown tool `change.craete`"
    assert underlined(d) == "change.craete"
    assert d.primary.message == "not declared in this module or its imports"
    assert d.help == "did you mean `change.create`?"


def test_far_names_get_no_suggestion(tmp_path):
    result = run(tmp_path, {"main.harness": TOOLS + "policy p { allow payroll.run }\n"})
    d = only(result, "H201")
    assert underlined(d) == "payroll.run"
    assert d.help is None


@pytest.mark.parametrize(
    ("text", "message", "shown", "help"),
    [
        (
            "agent a { surface main }",
            "unknown surface `main`",
            "main",
            "did you mean `mains`?",
        ),
        (
            "agent a { policy relase }",
            "unknown policy `relase`",
            "relase",
            "did you mean `release`?",
        ),
        (
            "policy q { include relese }",
            "unknown policy `relese`",
            "relese",
            "did you mean `release`?",
        ),
        (
            "agent a { delegate plannr }\nagent planner { policy release }",
            "unknown agent `plannr`",
            "plannr",
            "did you mean `planner`?",
        ),
        (
            "skill k { profile relaese }",
            "unknown policy `relaese`",
            "relaese",
            "did you mean `release`?",
        ),
        (
            "skill k { private tool k.t { effects read }\n subagent w { tools k.tt } }",
            "unknown tool `k.tt`",
            "k.tt",
            "did you mean `k.t`?",
        ),
        (
            "tool x { requires connected(change_platfrom) }",
            "unknown connection `change_platfrom`",
            "change_platfrom",
            "did you mean `change_platform`?",
        ),
        (
            "runtime ci\ntool x { requires running(cj) }",
            "unknown runtime `cj`",
            "cj",
            "did you mean `ci`?",
        ),
        (
            "runtime ci_runner\ntool x { dynamic provided_by ci_runer }",
            "unknown runtime or connection `ci_runer`",
            "ci_runer",
            "did you mean `ci_runner`?",
        ),
        (
            "tool x { legacy replaced_by change.creat }",
            "unknown tool `change.creat`",
            "change.creat",
            "did you mean `change.create`?",
        ),
        (
            'test "t" { policy release; call production.deplyo() }',
            "unknown tool `production.deplyo`",
            "production.deplyo",
            "did you mean `production.deploy`?",
        ),
        (
            'policy q { allow change.get when actr.role == "x" }',
            "unknown fact or root `actr.role`",
            "actr.role",
            "did you mean `actor.role`?",
        ),
        (
            "tool x { requires exists(change_platform) }",
            "unknown function `exists`",
            "exists",
            None,
        ),
    ],
)
def test_each_reference_position_expects_one_kind(tmp_path, text, message, shown, help):
    base = TOOLS + "surface mains { expose change.get }\npolicy release { allow change.get }\n"
    result = run(tmp_path, {"main.harness": base + text + "\n"})
    d = only(result, "H201")
    assert (d.message, underlined(d), d.help) == (message, shown, help)


def test_a_name_of_another_kind_says_what_it_is(tmp_path):
    text = TOOLS + "policy remediation { allow change.get }\nagent a { surface remediation }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H207")
    assert d.message == "`remediation` is a policy, not a surface"
    assert underlined(d) == "remediation"
    assert secondary(d) == [("remediation", "declared here as a policy")]


def test_an_mcp_server_where_a_tool_is_expected_points_at_its_tools(tmp_path):
    text = 'mcp scanner { transport stdio "x"; tool scan { effects read } }\n'
    text += "surface s { expose scanner }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H207")
    assert d.message == "`scanner` is an MCP server, not a tool"
    assert d.help == "select the server's tools with `mcp:scanner:*`"


def test_a_risk_table_is_expected_after_default(tmp_path):
    text = "import std.risk\npolicy p { default std.risk.guardrails }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H207")
    assert d.message == "`std.risk.guardrails` is a policy, not a risk table"


def test_module_names_are_reached_by_binding_or_full_path(tmp_path):
    text = """
import std.risk
import std.workspace as ws
policy a { default std.risk.defaults; include risk.guardrails }
policy b { default risk.defaults; include ws.workspace; include std.workspace.workspace }
"""
    result = run(tmp_path, {"main.harness": text})
    assert result.diagnostics == [], render(result.diagnostics, "plain")


def test_a_qualified_typo_suggests_within_the_module(tmp_path):
    text = "import std.risk\npolicy p { default std.risk.defalts }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert d.message == "unknown risk table `std.risk.defalts`"
    assert d.help == "did you mean `std.risk.defaults`?"


def test_a_name_of_an_import_written_without_its_module(tmp_path):
    text = "import std.risk\npolicy p { include guardrails }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert d.help == "did you mean `risk.guardrails`?"


def test_a_module_that_is_not_imported_is_named(tmp_path):
    text = "policy p { include std.github.github }\nsurface s { expose std.mail.* }\n"
    found = [d for d in run(tmp_path, {"main.harness": text}).diagnostics]
    assert [(d.code, underlined(d), d.help) for d in found] == [
        ("H201", "std.github.github", "`std.github` is not imported here: add `import std.github`"),
        ("H201", "std.mail.*", "add `import std.mail`"),
    ]


def test_tool_ids_are_global_and_written_without_a_module(tmp_path):
    text = "import std.workspace\npolicy p { allow std.workspace.read_open }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert d.help == "tool ids are global: write `read_open`"


def test_private_and_projected_tools_are_global_ids(tmp_path):
    text = """
mcp scanner { transport stdio "x"; tool scan { effects read }
              tool "create-issue" { effects external } }
skill report { private tool report.render { effects write }
               subagent writer { tools report.render, mcp:scanner:tool:scan } }
policy p { allow report.render, mcp:scanner:tool:create-issue, mcp:scanner:* }
"""
    result = run(tmp_path, {"main.harness": text})
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    tools = result.resolution.globals["tool"]
    assert tools["mcp:scanner:tool:create-issue"].tool_kind == "mcp"
    assert tools["report.render"].tool_kind == "private"


# ---------------------------------------------------------------------------------------------
# Paths in conditions


def test_paths_start_with_a_root_or_the_longest_declared_fact(tmp_path):
    text = """
fact workspace.root: path
fact release.freeze.until: string
policy p {
  allow * when args.path within workspace.root and release.freeze.until == "x"
              and tool.risk >= high and args.op in [observe, navigate]
              and resource has tenant.id and not task has stage and call.cwd startswith "/"
}
"""
    result = run(tmp_path, {"main.harness": text})
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    facts = {sym.name for sym in result.resolution.references.values() if sym.kind == "fact"}
    assert facts == {"workspace.root", "release.freeze.until"}


def test_a_declared_fact_with_a_typo_is_suggested(tmp_path):
    text = "fact workspace.root: path\npolicy p { allow * when args.path within workspace.rot }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert (d.message, d.help) == (
        "unknown fact or root `workspace.rot`",
        "did you mean `workspace.root`?",
    )


def test_a_bare_word_on_the_left_of_an_unknown_word_is_reported(tmp_path):
    text = "policy p { allow * when reveiw == approve }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert underlined(d) == "reveiw"


def test_input_is_a_root_only_in_workflows(tmp_path):
    text = "policy p { allow * when input.x == 1 }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert d.message == "unknown fact or root `input.x`"


def test_test_facts_name_declared_facts(tmp_path):
    text = TOOLS + (
        "fact release.freeze: bool\npolicy p { allow change.get }\n"
        'test "t" { policy p; call change.get(); facts { release.frezee: true }; expect allow }\n'
    )
    d = only(run(tmp_path, {"main.harness": text}), "H201")
    assert (underlined(d), d.help) == ("release.frezee", "did you mean `release.freeze`?")


# ---------------------------------------------------------------------------------------------
# Workflows


WORKFLOW = (
    # step values are typed (H404): the steps read the `id` of these tools' outputs
    TOOLS.replace("effects read }", "effects read; output { id: string } }").replace(
        '"production") } }', '"production") }\n                         output { id: string } }'
    )
    + """
policy p { allow change.get }
agent planner { policy p }
workflow w {
  agent planner
  input { service: string }
  step read = call change.get(id: input.service)
  step review = decide "Ship?" after read { options approve, reject }
  step ship = call production.deploy(environment: production, ref: read.id)
              when review == approve {
    on_failure compensate undo
  }
  step verify = call change.get(id: ship.id)
  step drop = call change.get(id: read.id) when review == reject
  step undo = call change.get(id: read.id) compensation
  step wait = gate env.window after review
}
"""
)


def test_workflow_references_resolve(tmp_path):
    result = run(tmp_path, {"main.harness": WORKFLOW})
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    steps = {
        span.text: sym.name
        for span, sym in result.resolution.references.items()
        if sym.kind == "step"
    }
    assert steps == {"read": "read", "read.id": "read", "review": "review", "undo": "undo",
                     "ship.id": "ship"}  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "message", "help"),
    [
        ("after read {", "after raed {", "unknown step `raed`", "did you mean `read`?"),
        ("compensate undo", "compensate udno", "unknown step `udno`", "did you mean `undo`?"),
        (
            "ref: read.id",
            "ref: rread.id",
            "unknown fact or root `rread.id`",
            "did you mean `read.id`?",
        ),
        ("agent planner\n", "agent planer\n", "unknown agent `planer`", "did you mean `planner`?"),
    ],
)
def test_workflow_typos(tmp_path, old, new, message, help):
    d = only(run(tmp_path, {"main.harness": WORKFLOW.replace(old, new)}), "H201")
    assert (d.message, d.help) == (message, help)
    assert d.primary.span.text in message


# ---------------------------------------------------------------------------------------------
# Duplicates (H202) and reserved names (H206)


def test_duplicate_tool_carries_the_first_definition(tmp_path):
    text = TOOLS + 'tool change.create { summary "again"; effects write }\n'
    d = only(run(tmp_path, {"main.harness": text}), "H202")
    assert d.message == "tool `change.create` is declared twice"
    assert underlined(d) == "change.create"
    assert d.primary.span.line == 8
    assert secondary(d) == [("change.create", "first defined here")]
    assert d.labels[1].span.line == 3


def test_tool_ids_are_global_across_modules(tmp_path):
    files = {
        "main.harness": 'import "./other.harness"\ntool read_open { effects read }\n'
        "policy p { allow other_tool }\n",
        "other.harness": "import std.workspace\ntool other_tool { effects read }\n"
        "policy q { include workspace.workspace }\n",
    }
    d = only(run(tmp_path, files), "H202")
    assert d.message == "tool `read_open` is declared twice in this build"
    assert d.primary.span.source.path.endswith("main.harness")
    assert d.labels[1].span.source.path == "std/workspace.harness"


def test_module_scoped_names_may_repeat_across_modules_and_kinds(tmp_path):
    files = {
        "main.harness": 'import "./other.harness"\npolicy p { include other.p }\n'
        "surface p { expose x }\ntool x { effects read }\nconnection x\n",
        "other.harness": "policy p { allow * }\n",
    }
    result = run(tmp_path, files)
    assert result.diagnostics == [], render(result.diagnostics, "plain")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("policy p { allow * }\npolicy p { deny * }", "policy `p` is declared twice"),
        ('test "a" { expect allow }\ntest "a" { expect deny }', "test `a` is declared twice"),
        ("connection c\nconnection c", "connection `c` is declared twice"),
        ("fact app.x: int\nfact app.x: bool", "fact `app.x` is declared twice"),
        (
            "workflow w { step a = gate env.x\n step a = gate env.y }",
            "step `a` is declared twice in workflow `w`",
        ),
        (
            "tool t { operation a { risk low }\n operation a { risk high } }",
            "operation `a` is declared twice in tool `t`",
        ),
        (
            "skill k { subagent a { tools t }\n subagent a { tools t } }\ntool t { effects read }",
            "subagent `a` is declared twice in skill `k`",
        ),
        (
            "policy p { x: allow *\n x: deny * }",
            "rule label `x` is declared twice in policy `p`",
        ),
    ],
)
def test_duplicates_in_each_scope(tmp_path, text, message):
    d = only(run(tmp_path, {"main.harness": text + "\n"}), "H202")
    assert d.message == message
    assert secondary(d)[0][1] == "first defined here"


@pytest.mark.parametrize(
    ("text", "message", "shown"),
    [
        (
            "tool delegate_task { effects read }",
            "`delegate_task` is reserved for the planner's delegation protocol",
            "delegate_task",
        ),
        (
            'agent delegate_task { persona "x" }',
            "`delegate_task` is reserved for the planner's delegation protocol",
            "delegate_task",
        ),
        (
            "tool std.helper { effects read }",
            "the `std.` prefix is reserved for the standard library",
            "std.helper",
        ),
        (
            "fact actor.level: int",
            "a fact may not start with the built-in root `actor`",
            "actor.level",
        ),
        ("fact input.x: int", "a fact may not start with the built-in root `input`", "input.x"),
        (
            'import "./helpers.harness" as std\npolicy p { include std.p }',
            "the name `std` is reserved for the standard library",
            "std",
        ),
    ],
)
def test_reserved_names(tmp_path, text, message, shown):
    files = {"main.harness": text + "\n", "helpers.harness": "policy p { allow * }\n"}
    result = run(tmp_path, files)
    assert codes(result) == ["H206"], render(result.diagnostics, "plain")
    d = result.diagnostics[0]
    assert (d.message, underlined(d)) == (message, shown)


def test_delegate_task_is_never_a_tool_to_reference(tmp_path):
    result = run(tmp_path, {"main.harness": "surface child { expose delegate_task }\n"})
    assert codes(result) == ["H206"]
    d = result.diagnostics[0]
    assert d.message == "`delegate_task` is the planner's delegation protocol, not a tool"
    assert underlined(d) == "delegate_task"


# ---------------------------------------------------------------------------------------------
# Modules: loading, unknown modules (H203), cycles (H204), bindings (H208), order (H109, H112)


def test_std_import_typo_suggests_the_module(tmp_path):
    text = "import std.rsik\npolicy p { default rsik.defaults }\n"
    result = run(tmp_path, {"main.harness": text})
    assert codes(result) == ["H203"]  # nothing cascades from the missing module
    d = result.diagnostics[0]
    assert d.message == "unknown module `std.rsik`"
    assert underlined(d) == "std.rsik"
    assert d.help == "did you mean `std.risk`?"


def test_a_bare_module_name_suggests_the_std_module(tmp_path):
    d = only(run(tmp_path, {"main.harness": "import workspace\n"}), "H203")
    assert d.help == "did you mean `std.workspace`?"


def test_an_unknown_std_module_lists_the_library(tmp_path):
    d = only(run(tmp_path, {"main.harness": "import std.kubernetes\n"}), "H203")
    assert d.help is None
    assert "`std.risk`" in d.notes[0]


def test_relative_import_of_a_missing_file(tmp_path):
    files = {
        "specs/main.harness": 'import "./scaner.harness"\npolicy p { allow mcp:scanner:* }\n',
        "specs/scanner.harness": 'mcp scanner { transport stdio "x" }\n',
    }
    result = run(tmp_path, files, "specs/main.harness")
    assert codes(result) == ["H203"]
    d = result.diagnostics[0]
    assert d.message == "unknown module `./scaner.harness`"
    assert underlined(d) == '"./scaner.harness"'
    assert d.primary.message.startswith("no file `") and d.primary.message.endswith(
        os.path.join("specs", "scaner.harness`")
    )
    assert d.help == "did you mean `./scanner.harness`?"


def test_importing_a_folder(tmp_path):
    (tmp_path / "lib").mkdir()
    result = run(tmp_path, {"main.harness": 'import "./lib"\n'})
    assert codes(result) == ["H203"]
    assert result.diagnostics[0].primary.message.endswith("lib` is a folder")


@pytest.mark.parametrize(
    "target",
    ["./" + "a" * 300 + ".harness", "./" + "d/" * 3000 + "x.harness"],
    ids=["long-name", "long-path"],
)
def test_an_import_path_too_long_for_the_file_system(tmp_path, target):
    result = run(tmp_path, {"main.harness": f'import "{target}"\nconnection c\n'})
    assert codes(result) == ["H203"]
    d = result.diagnostics[0]
    assert underlined(d) == f'"{target}"'
    assert d.primary.message.endswith(": the path is longer than the file system allows")
    assert len(d.message) < 120  # the caret shows the path; the message shortens it


def test_an_import_path_with_a_nul_character(tmp_path):
    result = run(tmp_path, {"main.harness": 'import "./a\\u0000b.harness"\nconnection c\n'})
    assert codes(result) == ["H203"]
    d = result.diagnostics[0]
    assert underlined(d) == '"./a\\u0000b.harness"'
    assert d.primary.message == "an import path cannot contain a NUL character"


def test_an_imported_file_that_cannot_be_read_is_reported_at_the_import(tmp_path):
    with open(tmp_path / "big.harness", "wb") as big:
        big.truncate(9 * 1024 * 1024)  # sparse: over the limit without writing 9 MiB
    result = run(tmp_path, {"main.harness": 'connection c\nimport "./big.harness"\n'})
    assert "H005" in codes(result)
    d = next(d for d in result.diagnostics if d.code == "H005")
    assert underlined(d) == '"./big.harness"'
    assert (d.primary.span.line, d.primary.message) == (2, "imported here")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_imported_file_without_read_permission(tmp_path):
    locked = tmp_path / "locked.harness"
    locked.write_text("connection d\n", encoding="utf-8")
    locked.chmod(0)
    result = run(tmp_path, {"main.harness": 'import "./locked.harness"\nconnection c\n'})
    d = next(d for d in result.diagnostics if d.code == "H007")
    assert d.message.endswith("permission denied")
    assert underlined(d) == '"./locked.harness"'


def test_relative_imports_resolve_against_the_importing_file(tmp_path):
    files = {
        "main.harness": 'import "./lib/a.harness"\npolicy p { include a.q }\n',
        "lib/a.harness": 'import "../shared/b.harness" as b\npolicy q { include b.base }\n',
        "shared/b.harness": "tool b_tool { effects read }\npolicy base { allow * }\n",
    }
    result = run(tmp_path, files)
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    assert [Path(m.name).name for m in result.resolution.modules] == [
        "b.harness",
        "a.harness",
        "main.harness",
    ]


def test_a_module_imported_twice_is_loaded_once(tmp_path):
    files = {
        "main.harness": 'import "./a.harness"\nimport "./b.harness"\n'
        "policy p { allow a_tool, b_tool }\n",
        "a.harness": 'import "./c.harness"\ntool a_tool { requires connected(shared) }\n',
        "b.harness": 'import "./sub/../c.harness"\ntool b_tool { requires connected(shared) }\n',
        "c.harness": "connection shared\n",
    }
    loads: list[str] = []

    def counting_load(path, shown_as=None):
        loads.append(os.path.realpath(path))
        return load_file(path, shown_as)

    (tmp_path / "sub").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    root = load_file(tmp_path / "main.harness")
    resolution = resolve_program([root], counting_load)
    assert resolution.diagnostics == [], render(resolution.diagnostics, "plain")
    assert len(loads) == len(set(loads)) == 3
    assert [Path(m.name).name for m in resolution.modules] == [
        "c.harness",
        "a.harness",
        "b.harness",
        "main.harness",
    ]


def test_an_import_cycle_across_three_files_is_drawn_as_a_path(tmp_path):
    files = {
        "a.harness": 'import "./b.harness"\n'
        "tool a_tool { effects read; requires connected(b_conn) }\n",
        "b.harness": 'import "./c.harness"\nconnection b_conn\n'
        "tool b_tool { effects read; requires connected(c_conn) }\n",
        "c.harness": 'import "./a.harness"\nconnection c_conn\npolicy p { allow a_tool }\n',
    }
    result = run(tmp_path, files, "a.harness")
    d = only(result, "H204")
    assert d.message == "import cycle `a.harness → b.harness → c.harness → a.harness`"
    assert underlined(d) == '"./a.harness"'
    assert d.primary.span.source.path.endswith("c.harness")
    assert d.primary.message == "this import closes the cycle"
    assert codes(result) == ["H204"]


def test_a_module_importing_itself_is_a_cycle(tmp_path):
    d = only(run(tmp_path, {"main.harness": 'import "./main.harness"\n'}), "H204")
    assert d.message == "import cycle `main.harness → main.harness`"


def test_two_imports_binding_one_name(tmp_path):
    files = {
        "main.harness": 'import std.risk\nimport "./risk.harness"\n'
        "policy p { include risk.guardrails }\n",
        "risk.harness": "policy extra { allow * }\n",
    }
    result = run(tmp_path, files)
    assert codes(result) == ["H208"]  # no H201 for `risk.guardrails`, no H205 for the import
    d = result.diagnostics[0]
    assert d.message == "two imports bind the name `risk`"
    assert underlined(d) == '"./risk.harness"'
    assert secondary(d) == [("import std.risk", "first bound here")]
    assert d.help == "give one of them another name with `as`"


def test_import_after_a_declaration(tmp_path):
    text = "connection c\nimport std.risk\npolicy p { default risk.defaults }\n"
    d = only(run(tmp_path, {"main.harness": text}), "H109")
    assert d.message == "imports must come before declarations"
    assert underlined(d) == "import std.risk"
    assert secondary(d) == [("connection c", "first declaration here")]


def test_a_header_belongs_first_in_the_root_module_only(tmp_path):
    files = {
        "main.harness": 'import "./lib.harness"\nharness main { version "1" }\n'
        "policy p { include lib.q }\n",
        "lib.harness": 'harness lib { version "1" }\npolicy q { allow * }\n',
    }
    result = run(tmp_path, files)
    found = sorted((d.message, underlined(d)) for d in result.diagnostics)
    assert found == [
        ("only the root module may have a `harness` header", "harness lib"),
        ("the `harness` header must come first in the module", "harness main"),
    ]
    assert codes(result) == ["H109", "H109"]


def test_a_second_header(tmp_path):
    text = 'harness a { version "1" }\nharness b { version "2" }\nconnection c\n'
    d = only(run(tmp_path, {"main.harness": text}), "H112")
    assert underlined(d) == "harness b"
    assert secondary(d) == [("harness a", "first header here")]


# ---------------------------------------------------------------------------------------------
# Unused imports (H205)


def test_an_unused_import_is_a_warning(tmp_path):
    text = "import std.risk\nimport std.github\npolicy p { default risk.defaults }\n"
    result = run(tmp_path, {"main.harness": text})
    d = only(result, "H205")
    assert d.severity == "warning"
    assert d.message == "unused import `std.github`"
    assert underlined(d) == "import std.github"
    assert result.ok


@pytest.mark.parametrize(
    "use",
    [
        "surface s { expose std.workspace.* }",
        "surface s { expose workspace.* }",
        "policy p { allow read_open }",
        "policy p { allow * when args.path within workspace.root }",
        "policy p { include std.workspace.workspace }",
        "surface s { expose pack:workspace }",
        "surface s { hide kind:legacy }",
        'test "t" { call write_file(path: "/a", content: "") }',
    ],
)
def test_an_import_is_used_by_any_reference_into_it(tmp_path, use):
    result = run(tmp_path, {"main.harness": f"import std.workspace\n{use}\n"})
    assert result.diagnostics == [], render(result.diagnostics, "plain")


def test_an_id_glob_uses_the_module_declaring_matching_tools(tmp_path):
    ask = '{ approver role "u" }'
    result = run(
        tmp_path, {"main.harness": f"import std.github as gh\npolicy p {{ ask github.* {ask} }}\n"}
    )
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    result = run(
        tmp_path, {"main.harness": f"import std.github as gh\npolicy p {{ ask gitlab.* {ask} }}\n"}
    )
    assert codes(result) == ["H205"]


def test_a_bare_star_does_not_use_every_import(tmp_path):
    result = run(
        tmp_path, {"main.harness": 'import std.mail\npolicy p { deny * { reason "r" } }\n'}
    )
    assert codes(result) == ["H205"]


# ---------------------------------------------------------------------------------------------
# What resolve hands on


def test_resolution_records_references_and_module_globs(in_root):
    result = check([EXAMPLE])
    resolution = result.resolution
    assert isinstance(resolution, Resolution)
    by_text: dict[str, set[str]] = {}
    for span, symbol in resolution.references.items():
        by_text.setdefault(span.text, set()).add(f"{symbol.kind}:{symbol.module.name}")
    assert by_text["std.risk.defaults"] == {"risk_table:std/risk.harness"}
    assert by_text["mcp:scanner:tool:scan"] == {"tool:examples/remediation/scanner.harness"}
    assert by_text["workspace.root"] == {"fact:std/workspace.harness"}
    assert by_text["generic"] == {"agent:examples/remediation/remediation.harness"}
    globs = {span.text: module.module_path for span, module in resolution.module_globs.items()}
    assert globs == {"std.workspace.*": "std.workspace"}
    assert resolution.lookup("tool", "read_open").module.module_path == "std.workspace"
    root = resolution.modules[-1]
    assert resolution.lookup("policy", "remediation", root).node.name.text == "remediation"
    assert set(root.bindings) == {"risk", "std.risk", "workspace", "std.workspace", "scanner"}


# ---------------------------------------------------------------------------------------------
# Did-you-mean and scale


def test_suggestions_are_near_matches_only():
    assert suggest("change.craete", ["change.create", "change.get"]) == "change.create"
    assert suggest("Change.Create", ["change.create"]) == "change.create"
    assert suggest("deploy", ["change.create", "read_open"]) is None
    assert suggest("b", ["a"]) is None
    assert edit_distance("kitten", "sitting") == 3


def test_a_word_longer_than_any_plausible_name_gets_no_suggestion():
    # the search's cost is bounded by the word's length: a huge bad name stays cheap to report
    long = "a" * MAX_WORD
    assert suggest(long + "b", [long]) is None
    assert suggest(long[1:] + "b", [long]) == long


def _big_module(n: int) -> LoadedFile:
    """A spec of n tools and n rules, built as a syntax tree so the test times resolve alone."""
    source = Source("big.harness", "x" * 64)
    span = Span(source, 0, 1)
    items: list[object] = [s.Connection(s.Name("c", span=span), span=span)]
    rules = []
    for i in range(n):
        tool_id = f"svc{i % 100}.t{i}"
        requires = s.Requires(
            s.FuncCall(s.Name("connected", span=span), (s.Path("c", span=span),), span=span),
            span=span,
        )
        items.append(
            s.Tool(s.Name(tool_id, span=Span(source, 0, 2 + i % 50)), (requires,), span=span)
        )
        cond = s.And(
            (
                s.Compare(s.Path("actor.role", span=span), "==", s.Str(("x",), span=span)),
                s.Compare(s.Path("args.op", span=span), "==", s.Path("observe", span=span)),
            ),
            span=span,
        )
        rules.append(
            s.Rule(None, "allow", (s.Pattern(tool_id, span=Span(source, 1, 2 + i % 60)),), cond)
        )
    items.append(s.Policy(s.Name("p", span=span), tuple(rules), span=span))
    module = s.Module(tuple(items), span=span)
    return LoadedFile(Path("big.harness"), source, module, ())


def test_resolve_scales_to_ten_thousand_tools_and_rules():
    small, big = _big_module(1_000), _big_module(10_000)
    counts = []
    for spec in (small, big):
        resolution, calls = count_calls(partial(resolve_program, [spec], load_file))
        assert resolution.diagnostics == []
        counts.append(calls)
    # linear: ten times the spec makes about ten times the calls (quadratic: a hundred times)
    assert counts[1] < 12 * counts[0]


def test_mangled_specs_give_diagnostics_never_a_traceback():
    """Random edits of the shipped specs: resolve reports, it never raises."""
    texts = [EXAMPLE.read_text(encoding="utf-8")] + [
        p.read_text(encoding="utf-8") for p in sorted((REPO / "stdlib").glob("*.harness"))
    ]
    words = sorted({w for text in texts for w in re.findall(r"[A-Za-z_][\w.:*-]*", text)})
    rng = random.Random(2026)
    for _ in range(300):
        tokens = re.split(r"(\s+)", rng.choice(texts))
        for _ in range(rng.randint(1, 6)):
            j = rng.randrange(len(tokens))
            roll = rng.random()
            if roll < 0.4:
                tokens[j] = rng.choice(words)
            elif roll < 0.6:
                tokens[j] = ""
            else:
                tokens[j] += " " + rng.choice(words)
        source = Source(str(EXAMPLE.parent / "mangled.harness"), "".join(tokens))
        parsed = parse_source(source)
        root = LoadedFile(EXAMPLE.parent / "mangled.harness", source, parsed.module, ())
        resolution = resolve_program([root], load_file)
        assert all(isinstance(d, Diagnostic) for d in resolution.diagnostics)


@pytest.mark.parametrize(
    "where",
    [
        "surface s {\n  expose {ref}\n}\n",
        "policy p {\n  default deny\n  allow {ref}\n}\n",
        'test "t" {\n  policy p\n  call {ref}(target: "x")\n  expect deny\n}\n'
        "policy p {\n  default deny\n}\n",
    ],
    ids=["surface", "rule", "test call"],
)
def test_an_undeclared_mcp_server_in_a_full_id_is_reported_as_in_a_pattern(
    tmp_path: Path, where: str
) -> None:
    """`mcp:scanner:tool:scan` and `mcp:scanner:*` name the same missing thing: the server."""
    full = only(
        run(tmp_path, {"main.harness": where.replace("{ref}", "mcp:scanner:tool:scan")}), "H321"
    )
    assert underlined(full) == "mcp:scanner:tool:scan"
    glob = only(run(tmp_path, {"main.harness": "surface s {\n  expose mcp:scanner:*\n}\n"}), "H321")
    assert (full.message, full.help) == (glob.message, glob.help)
    assert full.help == "declare it with `mcp NAME { … }`, or import the module that does"
