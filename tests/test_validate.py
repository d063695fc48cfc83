"""Cross-layer validation: what a user sees for each error of language.md §12 (H320–H333)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from harnessc.compiler.lower import lower_program
from harnessc.compiler.modules import std_module_names
from harnessc.compiler.pipeline import check, load_file
from harnessc.compiler.resolve import resolve_program
from harnessc.compiler.validate import validate_spec
from harnessc.dsl.diagnostics import Diagnostic, Severity
from harnessc.dsl.render_formats import render

from .counting import count_calls

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").glob("*/*.harness"))

DEPLOY = """
connection platform
fact app.root: path
fact app.mode: enum("fast", "slow")
tool deploy {
  summary "Deploy."
  effects external
  risk high
  input {
    environment: enum("staging", "production")
    count: int
    note: string?
    rollout: { state: enum("rolling", "done") }
  }
}
tool notify { summary "Notify."; effects external; input { channel: string } }
"""


def run(tmp_path: Path, text: str, name: str = "main.harness"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return check([path])


def errors(result) -> list[Diagnostic]:
    return [d for d in result.diagnostics if d.severity is Severity.ERROR]


def only(result, code: str) -> Diagnostic:
    found = [d for d in result.diagnostics if d.code == code]
    assert len(found) == 1, render(result.diagnostics, "plain")
    others = [d for d in errors(result) if d.code != code]
    assert others == [], render(others, "plain")
    return found[0]


def underlined(diagnostic: Diagnostic) -> str:
    assert diagnostic.primary is not None
    return diagnostic.primary.span.text


def secondary(diagnostic: Diagnostic) -> list[tuple[str, str]]:
    return [(label.span.text, label.message) for label in diagnostic.labels if not label.primary]


def rule(condition: str, selectors: str = "deploy") -> str:
    return DEPLOY + f"policy p {{\n  allow {selectors} when {condition}\n}}\n"


# ---------------------------------------------------------------------------------------------
# The shipped specs stay clean


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path) -> None:
    result = check([path])
    assert errors(result) == [], render(result.diagnostics, "plain")


@pytest.mark.parametrize("module", std_module_names())
def test_stdlib_validates(module: str) -> None:
    path = REPO / "stdlib" / f"{module.removeprefix('std.')}.harness"
    result = check([path])
    assert errors(result) == [], render(result.diagnostics, "plain")


# ---------------------------------------------------------------------------------------------
# Five layers: surfaces and availability


def test_legacy_tool_on_a_surface_points_at_its_replacement(tmp_path: Path) -> None:
    d = only(
        run(
            tmp_path,
            DEPLOY + "tool old { legacy replaced_by deploy; effects external }\n"
            "surface s { expose deploy, old }\n",
        ),
        "H320",
    )
    assert d.message == "legacy tool `old` cannot be named on a surface"
    assert underlined(d) == "old"
    assert secondary(d) == [("old", "declared as a legacy tool here")]
    assert d.help == "expose its replacement `deploy`"


def test_hiding_a_legacy_tool_by_id_is_an_error_too(tmp_path: Path) -> None:
    d = only(
        run(tmp_path, "import std.workspace\nsurface s { expose read_open; hide read_list }\n"),
        "H320",
    )
    assert underlined(d) == "read_list"
    assert "replacement is `read_open`" in (d.help or "")


@pytest.mark.parametrize(
    ("declaration", "kind", "name"),
    [
        ("tool prim { primitive; effects read }", "primitive tool", "prim"),
        (
            "skill k { private tool render { effects write }; subagent f { tools render } }",
            "skill-private tool",
            "render",
        ),
    ],
)
def test_primitive_and_private_tools_on_a_surface(
    tmp_path: Path, declaration: str, kind: str, name: str
) -> None:
    d = only(run(tmp_path, f"{declaration}\nsurface s {{ expose {name} }}\n"), "H320")
    assert d.message == f"{kind} `{name}` cannot be named on a surface"
    assert underlined(d) == name


def test_mcp_glob_over_an_undeclared_server(tmp_path: Path) -> None:
    text = (
        'mcp scanner { transport stdio "scan"; tool scan { effects read } }\n'
        "surface s { expose mcp:scaner:* }\n"
    )
    d = only(run(tmp_path, text), "H321")
    assert d.message == "MCP server `scaner` is not declared in this build"
    assert underlined(d) == "mcp:scaner:*"
    assert d.help == "did you mean `scanner`?"


def test_a_declared_server_may_be_exposed(tmp_path: Path) -> None:
    text = (
        'mcp scanner { transport stdio "scan"; tool scan { effects read } }\n'
        "surface s { expose mcp:scanner:*, kind:mcp }\n"
    )
    assert errors(run(tmp_path, text)) == []


@pytest.mark.parametrize(
    ("pattern", "help"),
    [
        ("pack:nope", "check the pattern, or remove it"),
        ("dep.*", "check the pattern, or remove it"),
        ("kind:legacy", "legacy tools are never public; select public, dynamic or MCP tools"),
        ("kind:dynamic", "check the pattern, or remove it"),
    ],
)
def test_expose_patterns_that_select_no_public_tool(
    tmp_path: Path, pattern: str, help: str
) -> None:
    text = (
        DEPLOY
        + "tool old { legacy; effects read }\n"
        + f"surface s {{ expose deploy, {pattern} }}\n"
    )
    d = only(run(tmp_path, text), "H322")
    assert d.message == f"`{pattern}` selects no public tool"
    assert underlined(d) == pattern
    assert d.help == help


def test_a_glob_that_matches_only_legacy_tools_says_so(tmp_path: Path) -> None:
    text = "tool old.a { legacy; effects read }\nsurface s { expose old.* }\n"
    d = only(run(tmp_path, text), "H322")
    assert d.notes == ("it matches only tools that are never public: `old.a` (legacy)",)


def test_a_module_glob_over_a_module_without_public_tools(tmp_path: Path) -> None:
    (tmp_path / "lib.harness").write_text("tool hidden { primitive; effects read }\n")
    text = 'import "./lib.harness" as lib\nsurface s { expose lib.* }\n'
    d = only(run(tmp_path, text), "H322")
    assert underlined(d) == "lib.*"


def test_delegate_task_is_never_on_a_surface(tmp_path: Path) -> None:
    d = only(run(tmp_path, DEPLOY + "surface s { expose deploy, delegate_task }\n"), "H206")
    assert underlined(d) == "delegate_task"


@pytest.mark.parametrize(("path", "root"), [("args.note", "args"), ("call.cwd", "call")])
def test_availability_cannot_read_the_call(tmp_path: Path, path: str, root: str) -> None:
    text = DEPLOY.replace(
        'summary "Deploy."', f'summary "Deploy."; requires connected(platform) and {path} == "x"'
    )
    d = only(run(tmp_path, text), "H323")
    assert d.message == (
        f"`requires` reads `{path}`, but availability is decided before any call exists"
    )
    assert underlined(d) == path


def test_availability_reads_facts_actor_and_tool(tmp_path: Path) -> None:
    text = DEPLOY.replace(
        'summary "Deploy."',
        'summary "Deploy."; requires connected(platform) and app.mode == fast '
        'and actor.role == "sre" and tool.risk >= high',
    )
    assert errors(run(tmp_path, text)) == []


# ---------------------------------------------------------------------------------------------
# Conditions


@pytest.mark.parametrize(
    ("condition", "message", "text"),
    [
        ('actor.rol == "x"', "`actor` has no field `rol`", "actor.rol"),
        ("tool.risky >= high", "`tool` has no field `risky`", "tool.risky"),
        ('app.root.x == "y"', "`app.root` is a `path` and has no field `x`", "app.root.x"),
        ("args.count.x == 1", "`args.count` is an `int` and has no field `x`", "args.count.x"),
    ],
)
def test_unknown_fields(tmp_path: Path, condition: str, message: str, text: str) -> None:
    d = only(run(tmp_path, rule(condition)), "H324")
    assert d.message == message
    assert underlined(d) == text


def test_unknown_field_suggests_a_near_one(tmp_path: Path) -> None:
    d = only(run(tmp_path, rule('actor.rol == "x"')), "H324")
    assert d.help == "did you mean `role`?"


@pytest.mark.parametrize(
    ("condition", "message", "text"),
    [
        ('args.count == "3"', "`==` compares an `int` with a string", 'args.count == "3"'),
        ("args.note == 3", "`==` compares a `string` with an `int`", "args.note == 3"),
        ("args.count > 5m", "`>` compares an `int` with a `duration`", "args.count > 5m"),
        ("args.count", "`args.count` is an `int`, not a condition", "args.count"),
        (
            'actor.role in ["a", 3]',
            "`in` compares a `string` with an `int`",
            'actor.role in ["a", 3]',
        ),
    ],
)
def test_incompatible_types(tmp_path: Path, condition: str, message: str, text: str) -> None:
    d = only(run(tmp_path, rule(condition)), "H325")
    assert d.message == message
    assert underlined(d) == text


def test_a_quoted_number_gets_a_help(tmp_path: Path) -> None:
    d = only(run(tmp_path, rule('args.count == "3"')), "H325")
    assert d.help == "write the value without quotes: `3`"


@pytest.mark.parametrize(
    ("condition", "message", "text"),
    [
        ('args.note < "x"', "`<` does not apply to a `string`", "args.note"),
        ("actor.role >= true", "`>=` does not apply to a `string`", "actor.role"),
        (
            'args.count matches "^1"',
            "`matches` needs a string on its left, not an `int`",
            "args.count",
        ),
        (
            "args.count within app.root",
            "`within` needs a path on its left, not an `int`",
            "args.count",
        ),
        (
            'args.count startswith "1"',
            "`startswith` needs a string or a path on its left, not an `int`",
            "args.count",
        ),
        (
            'args.count endswith "1"',
            "`endswith` needs a string or a path on its left, not an `int`",
            "args.count",
        ),
        ('actor.role in "x"', "the right side of `in` is a string, not a list", '"x"'),
        (
            "args.count has x",
            "`has` needs an object, a map or a list on its left, not an `int`",
            "args.count",
        ),
    ],
)
def test_operators_on_values_they_do_not_take(
    tmp_path: Path, condition: str, message: str, text: str
) -> None:
    d = only(run(tmp_path, rule(condition)), "H326")
    assert d.message == message
    assert underlined(d) == text


def test_unknown_argument(tmp_path: Path) -> None:
    d = only(run(tmp_path, rule('args.enviroment == "staging"')), "H327")
    assert d.message == "no tool selected by this rule has an argument `enviroment`"
    assert underlined(d) == "args.enviroment"
    assert d.primary is not None and d.primary.message == "not an argument of `deploy`"
    assert d.help == "did you mean `environment`?"


def test_unknown_argument_in_has_and_in_a_grant(tmp_path: Path) -> None:
    d = only(run(tmp_path, rule("args has notes")), "H327")
    assert underlined(d) == "notes"
    text = DEPLOY + (
        'policy p {\n  ask deploy {\n    approver role "sre"\n'
        '    grant class notify when args.environment == "staging" ttl 1h\n  }\n}\n'
    )
    d = only(run(tmp_path, text), "H327")
    assert d.message == "no tool selected by this grant has an argument `environment`"
    assert d.primary is not None and d.primary.message == "not an argument of `notify`"


def test_a_wildcard_needs_only_some_tool_to_have_the_argument(tmp_path: Path) -> None:
    assert errors(run(tmp_path, rule('args.channel == "ops" and args.count > 1', "*"))) == []
    d = only(run(tmp_path, rule("args.nothing == 1", "*")), "H327")
    assert d.primary is not None and d.primary.message == "no tool has this argument"


def test_argument_types_from_every_selected_tool(tmp_path: Path) -> None:
    # `note` is a string in deploy and an int in other: a string compares with one of them
    text = DEPLOY + "tool other { effects read; input { note: int } }\n"
    text += 'policy p { allow deploy, other when args.note == "x" and args.note == 3 }\n'
    assert errors(run(tmp_path, text)) == []


@pytest.mark.parametrize(
    ("condition", "message", "text", "help"),
    [
        (
            "args.environment == stagng",
            "`stagng` is not a value of `args.environment`",
            "stagng",
            "did you mean `staging`?",
        ),
        (
            'args.environment == "prod"',
            "`prod` is not a value of `args.environment`",
            '"prod"',
            "the values are `staging`, `production`",
        ),
        (
            "args.rollout.state in [rolling, don]",
            "`don` is not a value of `args.rollout.state`",
            "don",
            "did you mean `done`?",
        ),
        ("app.mode == quick", "`quick` is not a value of `app.mode`", "quick", None),
        (
            "args.note == hello",
            "bare name `hello` is compared with a `string`, which has no named values",
            "hello",
            'write it as a string: `"hello"`',
        ),
    ],
)
def test_enum_members(
    tmp_path: Path, condition: str, message: str, text: str, help: str | None
) -> None:
    d = only(run(tmp_path, rule(condition)), "H328")
    assert d.message == message
    assert underlined(d) == text
    if help is not None:
        assert d.help == help


def test_well_typed_conditions_pass(tmp_path: Path) -> None:
    condition = (
        "args.environment == production and args.count <= 30 and tool.risk >= high "
        'and tool.effects has external and actor.roles has "sre" and '
        'actor.role in ["a", "b"] and args.note startswith "x" and resource has state '
        "and resource.cvss >= 7.0 and not app.mode == slow and args has note "
        "and args.rollout.state == rolling and call.timeout < 5m and env.window"
    )
    assert errors(run(tmp_path, rule(condition))) == []


# ---------------------------------------------------------------------------------------------
# Policies


def test_ask_without_approver(tmp_path: Path) -> None:
    d = only(run(tmp_path, DEPLOY + 'policy p { release: ask deploy { reason "r" } }\n'), "H329")
    assert d.message == "`ask` rule `p.release` names no approver"
    assert underlined(d) == "release: ask deploy"


def test_default_ask_and_risk_table_ask_without_approver(tmp_path: Path) -> None:
    d = only(run(tmp_path, DEPLOY + "policy p { default ask }\n"), "H329")
    assert d.message == "`default ask` of policy `p` names no approver"
    assert underlined(d) == "default ask"
    table = 'risk_table t { low allow; medium allow; high ask; critical deny { reason "no" } }\n'
    d = only(run(tmp_path, table), "H329")
    assert d.message == "`high ask` of risk table `t` names no approver"
    assert underlined(d) == "high ask"


def test_deny_without_reason(tmp_path: Path) -> None:
    d = only(run(tmp_path, DEPLOY + "policy p { deny deploy when args.count > 3 }\n"), "H330")
    assert d.message == "`deny` rule in policy `p` gives no reason"
    assert underlined(d) == "deny deploy"
    table = "risk_table t { low allow; medium allow; high allow; critical deny }\n"
    d = only(run(tmp_path, table), "H330")
    assert underlined(d) == "critical deny"


def test_default_deny_has_a_reason_of_its_own(tmp_path: Path) -> None:
    assert errors(run(tmp_path, DEPLOY + "policy p { default deny }\n")) == []


# ---------------------------------------------------------------------------------------------
# Delegation and skills


def test_delegation_chain_names_both_agents(tmp_path: Path) -> None:
    text = (
        "agent planner { delegate generic }\nagent generic { delegate helper }\nagent helper { }\n"
    )
    d = only(run(tmp_path, text), "H331")
    assert d.message == (
        "delegation chain `planner` → `generic` → `helper` is deeper than one level"
    )
    assert underlined(d) == "generic"
    assert secondary(d) == [("helper", "`generic` delegates to here")]


def test_workflow_delegating_to_a_planner(tmp_path: Path) -> None:
    text = (
        "agent planner { delegate generic }\nagent generic { }\n"
        'workflow w { agent planner\n  step go = delegate planner "work" }\n'
    )
    d = only(run(tmp_path, text), "H331")
    assert underlined(d) == "planner"
    assert d.primary is not None and d.primary.span.line == 4


SKILLS = """
tool read_open { summary "Open."; effects read; input { path: path } }
tool read_list { legacy replaced_by read_open; effects read }
skill one {
  profile one_profile
  private tool one.render { effects write }
  subagent writer { tools one.render, read_open }
}
skill two {
  profile two_profile
  private tool two.render { effects write }
  subagent writer { tools two.render }
}
policy one_profile { default deny; allow one.render }
"""


def test_private_tools_inside_their_skill_are_fine(tmp_path: Path) -> None:
    text = SKILLS + "policy two_profile { default deny; allow two.render }\n"
    text += "policy parent { default deny; allow one.render, two.render }\n"
    assert errors(run(tmp_path, text)) == []


def test_private_tool_in_another_skills_profile(tmp_path: Path) -> None:
    text = SKILLS + "policy two_profile { default deny; allow two.render, one.render }\n"
    d = only(run(tmp_path, text), "H332")
    assert d.message == "`one.render` is private to skill `one`"
    assert underlined(d) == "one.render"
    assert d.primary is not None
    assert d.primary.message == "named in policy `two_profile`, the profile of skill `two`"


def test_private_tool_in_another_skills_subagent_and_in_a_workflow(tmp_path: Path) -> None:
    text = SKILLS.replace("tools two.render", "tools two.render, one.render")
    text += "policy two_profile { default deny }\nworkflow w { step r = call one.render() }\n"
    found = [d for d in run(tmp_path, text).diagnostics if d.code == "H332"]
    assert [(underlined(d), d.primary.message) for d in found if d.primary] == [
        ("one.render", "listed by subagent `writer` of skill `two`"),
        ("one.render", "called by workflow `w`"),
    ]


def test_subagent_lists_a_legacy_tool(tmp_path: Path) -> None:
    text = SKILLS.replace("tools two.render", "tools two.render, read_list")
    text += "policy two_profile { default deny }\n"
    d = only(run(tmp_path, text), "H333")
    assert d.message == "subagent `writer` lists legacy tool `read_list`"
    assert underlined(d) == "read_list"
    assert d.help == "list its replacement `read_open`"


# ---------------------------------------------------------------------------------------------
# Grants and scale


def test_a_grant_without_ttl_does_not_parse(tmp_path: Path) -> None:
    text = DEPLOY + 'policy p { ask deploy { approver role "x"; grant once; reason "r" } }\n'
    d = errors(run(tmp_path, text))[0]
    assert d.code == "H101"
    assert d.primary is not None and d.primary.message == "expected `ttl`"


def test_validation_is_linear_in_the_spec(tmp_path: Path) -> None:
    def spec(n: int) -> str:
        parts = []
        for i in range(n):
            parts.append(
                f"tool t{i}.run {{ effects write; packs p{i % 10}; "
                f'input {{ count: int, mode: enum("a", "b") }} }}\n'
            )
        rules = "\n".join(
            f"  allow t{i}.*, pack:p{i % 10}, * when args.count > {i} and args.mode == a"
            for i in range(n)
        )
        return "".join(parts) + f"surface s {{ expose *, pack:p1 }}\npolicy p {{\n{rules}\n}}\n"

    def counted(n: int) -> int:
        path = tmp_path / f"scale{n}.harness"
        path.write_text(spec(n))
        resolution = resolve_program([load_file(path)], load_file)
        model = lower_program(resolution).spec
        assert model is not None
        found, calls = count_calls(partial(validate_spec, model, resolution))
        assert found == [], render(found, "plain")
        return calls

    small, large = counted(200), counted(1600)
    # eight times the spec: about eight times the calls, not the 64 of a quadratic check
    assert large < 10 * small
