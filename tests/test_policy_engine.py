"""The policy decision engine: the exact meaning of language.md §6, and compiled == reference."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime.judge import policy as policy_module
from harnessc.runtime.judge.conditions import Scope, compile_conditions, evaluate
from harnessc.runtime.judge.policy import (
    NO_RULE_REASON,
    CallContext,
    Decision,
    PolicyEngine,
    naive_decide,
)
from harnessc.runtime.model import (
    And,
    Approver,
    Compare,
    DefaultDecision,
    EnumMember,
    Fact,
    FactCall,
    Field,
    ListValue,
    Literal,
    Not,
    Operation,
    Or,
    Policy,
    RiskEntry,
    RiskTable,
    Rule,
    Schema,
    Selector,
    Spec,
    Tool,
    Type,
)
from harnessc.runtime.model import Path as P
from harnessc.runtime.model.semantics import OPERATORS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .budget import examples


def spec_of(tmp_path: Path, text: str) -> Spec:
    path = tmp_path / "spec.harness"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def decide(spec: Spec, tool: str, policy: str = "p", **parts: Any) -> Decision:
    call = CallContext(tool, **parts)
    compiled = PolicyEngine(spec).decider(policy).decide(call)
    assert compiled == naive_decide(spec, policy, call)
    return compiled


TOOLS = """
tool files.read {
  summary "Read a file."
  effects read
  input { path: path, n: int?, timeout: duration? }
}
"""


def test_absent_values_make_every_comparison_false_not_equal_included(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default allow
          ne: deny files.read when resource.tenant != actor.tenant { reason "other tenant" }
        }
        """,
    )
    # the actor has no tenant: `!=` reads an absent value and is false, so the DENY fails open
    got = decide(spec, "files.read", resource={"tenant": "globex"}, actor={"role": "x"})
    assert (got.effect, got.rule, got.default_used) == ("allow", None, True)
    got = decide(spec, "files.read", resource={"tenant": "globex"}, actor={"tenant": "acme"})
    assert (got.effect, got.rule) == ("deny", "p.ne")
    # JSON null counts as absent too
    got = decide(spec, "files.read", resource={"tenant": "globex"}, actor={"tenant": None})
    assert got.effect == "allow"


def test_has_tests_presence_and_not_equal_fails_closed(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default allow
          closed: deny * when resource has tenant and not actor.tenant == resource.tenant {
            reason "other tenant"
          }
          small: ask files.read when args has n and args.n > 3 { approver role "owner" }
        }
        """,
    )
    assert decide(spec, "files.read", resource={"tenant": "g"}).rule == "p.closed"
    assert decide(spec, "files.read", resource={}).effect == "allow"
    assert decide(spec, "files.read", args={"path": "/a", "n": 4}).rule == "p.small"
    assert decide(spec, "files.read", args={"path": "/a"}).default_used


def test_within_is_segment_containment_and_startswith_a_string_prefix(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default deny { reason "outside" }
          inside: allow files.read when args.path within "/repo"
          prefix: allow files.read when args.path startswith "/repo"
        }
        """,
    )
    assert decide(spec, "files.read", args={"path": "/repository/x"}).matched == ("p.prefix",)
    assert decide(spec, "files.read", args={"path": "/repo/x"}).matched == ("p.inside", "p.prefix")
    assert decide(spec, "files.read", args={"path": "/repo"}).matched == ("p.inside", "p.prefix")
    # normalized before either operator sees it
    got = decide(spec, "files.read", args={"path": "/repo/./a/../../etc/passwd"})
    assert got.matched == () and got.effect == "deny"
    assert decide(spec, "files.read", args={"path": "/repo/a/./../b"}).rule == "p.inside"


def test_endswith_is_a_string_suffix_of_the_normalized_path(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default allow
          secrets: deny files.read when args.path endswith ".env" { reason "no secrets" }
        }
        """,
    )
    assert decide(spec, "files.read", args={"path": "/repo/.env"}).rule == "p.secrets"
    assert decide(spec, "files.read", args={"path": "/repo/prod.env"}).effect == "deny"
    assert decide(spec, "files.read", args={"path": "/repo/a.env.bak"}).matched == ()
    # normalized first: the suffix is the one the call really reads
    assert decide(spec, "files.read", args={"path": "/repo/.env/../app.py"}).effect == "allow"
    assert decide(spec, "files.read", args={"path": "/repo/x/../.env"}).rule == "p.secrets"
    # absent, or not a string: false, as every comparison
    assert decide(spec, "files.read", args={}).matched == ()


def test_a_path_that_climbs_out_of_its_root_is_refused(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default allow
        }
        """,
    )
    got = decide(spec, "files.read", args={"path": "/repo/../../etc/passwd"})
    assert (got.effect, got.rule, got.default_used) == ("deny", None, False)
    assert got.reason == "the path `/repo/../../etc/passwd` in `args.path` leaves its root"
    assert decide(spec, "files.read", args={"path": "../x"}).effect == "deny"
    assert decide(spec, "files.read", args={"path": "a/../x"}).effect == "allow"


def test_path_facts_are_normalized_before_within(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        fact ws.root: path
        policy p {
          default deny { reason "outside" }
          allow files.read when args.path within ws.root
        }
        """,
    )
    assert decide(spec, "files.read", args={"path": "/w/a"}, facts={"ws.root": "/w/./x/.."})
    assert decide(spec, "files.read", args={"path": "/w/a"}, facts={}).effect == "deny"


RISKS = """
tool t.low { summary "a"; effects read; input { x: int? } }
tool t.medium { summary "b"; effects write; input { x: int? } }
tool t.high { summary "c"; effects external; risk high; input { x: int? } }
tool t.critical { summary "d"; effects external; risk critical; input { x: int? } }
tool browser {
  summary "Drive a browser."
  operation observe { effects read; risk low }
  operation transfer { effects external; risk high }
  input { url: string? }
}
risk_table table {
  low allow
  medium allow
  high ask { approver role "owner"; reason "high" }
  critical deny { reason "critical" }
}
"""


def test_the_risk_table_maps_the_call_risk_when_no_rule_matches(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, RISKS + "policy p { default table }\n")
    assert decide(spec, "t.low").effect == "allow"
    assert decide(spec, "t.medium").effect == "allow"  # a tool without risk that writes
    high = decide(spec, "t.high")
    assert (high.effect, high.approvers, high.reason) == (
        "ask",
        (Approver(kind="role", value="owner"),),
        "high",
    )
    assert high.default_used and high.rule is None and high.origin is not None
    lines = RISKS.splitlines()
    assert (
        high.origin.line == lines.index('  high ask { approver role "owner"; reason "high" }') + 1
    )
    assert decide(spec, "t.critical").reason == "critical"


def test_a_call_risk_is_its_operation_risk(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        RISKS
        + """
        policy p {
          default table
          ext: ask effects has external { approver role "user" }
        }
        policy q {
          default allow
          no_high: deny risk >= high { reason "high" }
        }
        """,
    )
    assert decide(spec, "browser", args={"op": "observe"}).effect == "allow"
    got = decide(spec, "browser", args={"op": "transfer"})
    assert (got.rule, got.approvers[0].value) == ("p.ext", "user")
    # no operation named: the tool reports its highest risk and the union of effects
    assert decide(spec, "browser", args={}).rule == "p.ext"
    assert decide(spec, "browser", args={"op": "nope"}).rule == "p.ext"
    assert decide(spec, "browser", "q", args={"op": "observe"}).effect == "allow"
    assert decide(spec, "browser", "q", args={"op": "transfer"}).rule == "q.no_high"
    assert decide(spec, "t.critical", "q").rule == "q.no_high"
    assert decide(spec, "t.medium", "q").effect == "allow"


def test_deny_beats_ask_beats_allow_whatever_the_order(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default deny { reason "none" }
          a: allow files.read
          k: ask files.read when args.n >= 1 { approver role "owner" }
          d: deny files.read when args.n >= 2 { reason "two" }
        }
        """,
    )
    got = decide(spec, "files.read", args={"path": "/a", "n": 2})
    assert (got.effect, got.rule, got.matched) == ("deny", "p.d", ("p.a", "p.k", "p.d"))
    assert decide(spec, "files.read", args={"path": "/a", "n": 1}).rule == "p.k"
    assert decide(spec, "files.read", args={"path": "/a", "n": 0}).rule == "p.a"


def test_the_winner_is_the_first_matching_rule_of_the_strongest_effect(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy p {
          default allow
          first: deny files.read when args.n > 1 { reason "first"; instead "smaller" }
          second: deny * { reason "second" }
        }
        """,
    )
    got = decide(spec, "files.read", args={"path": "/a", "n": 5})
    assert (got.rule, got.reason, got.instead) == ("p.first", "first", "smaller")
    assert got.matched == ("p.first", "p.second")
    assert decide(spec, "files.read", args={"path": "/a", "n": 0}).reason == "second"


def test_includes_are_expanded_in_place(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS
        + """
        policy inner {
          inner_deny: deny files.read { reason "inner" }
        }
        policy p {
          default allow
          before: deny files.read when args.n > 1 { reason "before" }
          include inner
          after: deny files.read { reason "after" }
        }
        policy q {
          default allow
          include inner
          before: deny files.read { reason "q" }
        }
        """,
    )
    got = decide(spec, "files.read", args={"path": "/a", "n": 2})
    assert got.matched == ("p.before", "inner.inner_deny", "p.after")
    assert got.rule == "p.before"
    assert decide(spec, "files.read", args={"path": "/a"}).rule == "inner.inner_deny"
    assert decide(spec, "files.read", "q").rule == "inner.inner_deny"


def test_a_policy_without_default_denies_what_no_rule_allows(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, TOOLS + "policy p { allow files.read when args.n == 1 }\n")
    got = decide(spec, "files.read", args={"path": "/a"})
    assert (got.effect, got.reason, got.default_used) == ("deny", NO_RULE_REASON, True)


def test_roles_always_contain_role_and_enum_members_and_facts(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        RISKS
        + """
        connection crm
        runtime runner
        fact freeze: bool
        policy p {
          default deny { reason "no" }
          sre: allow t.low when actor.roles has "sre"
          op: allow browser when args.op == observe and connected(crm)
          run: allow t.medium when running(runner) and not freeze == true
          slow: allow t.high when call.timeout <= 10m and tool.risk >= high
        }
        """,
    )
    assert decide(spec, "t.low", actor={"role": "sre"}).effect == "allow"
    assert decide(spec, "t.low", actor={"role": "dev", "roles": ["sre"]}).effect == "allow"
    assert decide(spec, "t.low", actor={"role": "dev"}).effect == "deny"
    crm = frozenset({"crm"})
    assert decide(spec, "browser", args={"op": "observe"}, connected=crm).effect == "allow"
    assert decide(spec, "browser", args={"op": "observe"}).effect == "deny"
    assert decide(spec, "t.medium", running=frozenset({"runner"})).effect == "allow"
    running = frozenset({"runner"})
    assert decide(spec, "t.medium", running=running, facts={"freeze": True}).effect == "deny"
    assert decide(spec, "t.high", execution={"timeout": "5m"}).effect == "allow"
    assert decide(spec, "t.high", execution={"timeout": "1h"}).effect == "deny"


def test_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, TOOLS + "policy p { default allow }\n")
    got = decide(spec, "files.write")
    assert got.effect == "deny" and got.reason == "`files.write` is not a registered tool"


def test_a_bool_never_equals_a_number(tmp_path: Path) -> None:
    spec = spec_of(
        tmp_path,
        TOOLS + 'policy p { default deny { reason "no" }\nallow files.read when args.n == 1 }\n',
    )
    assert decide(spec, "files.read", args={"path": "/a", "n": 1}).effect == "allow"
    assert decide(spec, "files.read", args={"path": "/a", "n": True}).effect == "deny"


# ---------------------------------------------------------------------------------------------
# Compiled == reference, on random rule sets and calls

_IDS = ("a.x", "a.y", "b.z", "c")
_RISK = ("low", "medium", "high", "critical")
_EFFECTS = ("read", "write", "external")


def _tool(tool_id: str, data: st.DataObject) -> Tool:
    ops: dict[str, Operation] = {}
    if data.draw(st.booleans()):
        for name in ("o1", "o2"):
            ops[name] = Operation(
                name=name,
                risk=data.draw(st.sampled_from(_RISK)),
                effects=tuple(sorted(data.draw(st.sets(st.sampled_from(_EFFECTS))))),
            )
    effects = (
        tuple(sorted({e for o in ops.values() for e in o.effects}))
        if ops
        else tuple(sorted(data.draw(st.sets(st.sampled_from(_EFFECTS)))))
    )
    risk = (
        max((o.risk for o in ops.values()), key=_RISK.index)
        if ops
        else data.draw(st.sampled_from(_RISK))
    )
    fields = [
        Field(name="n", type=Type(name="int", optional=True)),
        Field(name="s", type=Type(name="string", optional=True)),
        Field(name="p", type=Type(name=data.draw(st.sampled_from(["path", "string"])))),
    ]
    return Tool(
        id=tool_id,
        wire_name=tool_id.replace(".", "_"),
        kind=data.draw(st.sampled_from(["public", "mcp", "dynamic"])),
        packs=tuple(data.draw(st.sets(st.sampled_from(["k1", "k2"])))),
        effects=effects,  # type: ignore[arg-type]
        risk=risk,  # type: ignore[arg-type]
        operations=ops,
        input=Schema(fields=tuple(fields)),
    )


_selectors = st.one_of(
    st.sampled_from(_IDS).map(lambda v: Selector(kind="id", value=v, text=v)),
    st.sampled_from(["a.", "b", ""]).map(lambda v: Selector(kind="glob", value=v, text=v + "*")),
    st.just(Selector(kind="all", text="*")),
    st.just(Selector(kind="module", value="m", tools=("a.x", "c"), text="m.*")),
    st.sampled_from(["k1", "k2"]).map(lambda v: Selector(kind="pack", value=v)),
    st.sampled_from(["public", "mcp"]).map(lambda v: Selector(kind="kind", value=v)),
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.sampled_from(_RISK)).map(
        lambda t: Selector(kind="risk", op=t[0], value=t[1])
    ),
    st.sampled_from(_EFFECTS).map(lambda v: Selector(kind="effects", value=v)),
)

_paths = st.sampled_from(
    [
        P(root="args", parts=("n",)),
        P(root="args", parts=("s",)),
        P(root="args", parts=("p",)),
        P(root="args", parts=("op",)),
        P(root="actor", parts=("role",)),
        P(root="actor", parts=("roles",)),
        P(root="actor", parts=("tenant",)),
        P(root="resource", parts=("tenant",)),
        P(root="tool", parts=("risk",)),
        P(root="tool", parts=("effects",)),
        P(root="fact", parts=("root",)),
        P(root="call", parts=("timeout",)),
    ]
)
scalars = st.one_of(
    st.integers(-2, 3),
    st.sampled_from(["a", "b", "sre", "/r", "/r/x", "/rx", "o1", "high"]),
    st.booleans(),
)
_consts = st.one_of(
    scalars.map(
        lambda v: Literal(
            value=v,
            type="bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string",
        )
    ),
    st.sampled_from(["low", "high", "external", "o2", "tenant"]).map(lambda n: EnumMember(name=n)),
    st.integers(0, 120_000).map(lambda ms: Literal(value=ms, type="duration")),
    st.lists(scalars, max_size=3).map(
        lambda xs: ListValue(
            items=tuple(
                Literal(
                    value=x,
                    type="bool"
                    if isinstance(x, bool)
                    else "int"
                    if isinstance(x, int)
                    else "string",
                )
                for x in xs
            )
        )
    ),
)
_operands = st.one_of(
    _paths, _consts, st.sampled_from(["crm", "x"]).map(lambda n: FactCall(func="connected", name=n))
)
_ops = st.sampled_from(list(OPERATORS))
_compares = st.builds(
    lambda op, lhs, rhs: Compare(op=op, left=lhs, right=rhs), _ops, _operands, _operands
)
_conditions = st.recursive(
    st.one_of(
        _compares,
        _paths,
        st.sampled_from(["crm"]).map(lambda n: FactCall(func="connected", name=n)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: And(items=tuple(xs))),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: Or(items=tuple(xs))),
        inner.map(lambda x: Not(item=x)),
    ),
    max_leaves=5,
)
_rules = st.lists(
    st.tuples(
        st.sampled_from(["allow", "ask", "deny"]),
        st.lists(_selectors, min_size=1, max_size=2),
        st.one_of(st.none(), _conditions),
    ),
    max_size=8,
)
_values = st.one_of(st.none(), scalars, st.sampled_from(["/r/../x", "/r/./y", "/../z", "10m"]))


def random_spec(data: st.DataObject, rules: list) -> Spec:
    """A spec of the random tools and `rules` (drawn from `_rules`), under policy `p`."""
    tools = {i: _tool(i, data) for i in _IDS}
    default = data.draw(
        st.sampled_from([None, DefaultDecision(effect="allow"), DefaultDecision(table="m.t")])
    )
    built = tuple(
        Rule(label=f"p#{n}", policy="m.p", effect=e, selectors=tuple(s), condition=c)
        for n, (e, s, c) in enumerate(rules, 1)
    )
    spec = Spec(
        name="m",
        root_module="m",
        tools=tools,
        facts={"root": Fact(name="root", type=Type(name="path"))},
        policies={"m.p": Policy(name="m.p", default=default, rules=built)},
        risk_tables={
            "m.t": RiskTable(
                name="m.t",
                entries={
                    "low": RiskEntry(effect="allow"),
                    "high": RiskEntry(effect="ask", reason="h"),
                    "critical": RiskEntry(effect="deny"),
                },
            )
        },
    )
    return spec


def random_call(data: st.DataObject, tools: tuple[str, ...] = (*_IDS, "zz")) -> CallContext:
    """A random call to one of `tools` (`zz` is not registered) over the paths `_rules` read."""
    args = {k: v for k in ("n", "s", "p", "op") if (v := data.draw(_values)) is not None}
    if data.draw(st.booleans()):
        args["op"] = data.draw(st.sampled_from(["o1", "o2"]))
    return CallContext(
        data.draw(st.sampled_from(tools)),
        args,
        actor={k: v for k in ("role", "roles", "tenant") if (v := data.draw(_values))},
        resource={"tenant": data.draw(_values)},
        facts={"root": data.draw(_values)},
        connected=frozenset(data.draw(st.sets(st.sampled_from(["crm", "x"])))),
        execution={"timeout": data.draw(_values)},
    )


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), rules=_rules)
def test_the_compiled_decider_agrees_with_the_reference(data: st.DataObject, rules: list) -> None:
    spec = random_spec(data, rules)
    decider = PolicyEngine(spec).decider("p")
    for _ in range(4):
        call = random_call(data)
        assert decider.decide(call) == naive_decide(spec, "p", call)
        # a second call hits the decision cache and must answer the same
        assert decider.decide(call) == naive_decide(spec, "p", call)


def test_roles_read_as_a_list_even_when_only_role_is_given() -> None:
    spec = Spec(
        name="m",
        root_module="m",
        tools={"c": Tool(id="c", wire_name="c")},
        policies={
            "m.p": Policy(
                name="m.p",
                default=DefaultDecision(effect="deny"),
                rules=(
                    Rule(
                        label="p.r",
                        policy="m.p",
                        effect="allow",
                        selectors=(Selector(kind="id", value="c"),),
                        condition=Compare(
                            op="in",
                            left=Literal(value="sre", type="string"),
                            right=P(root="actor", parts=("roles",)),
                        ),
                    ),
                ),
            )
        },
    )
    assert decide(spec, "c", actor={"role": "sre"}).effect == "allow"


@pytest.mark.parametrize("text", ["__import__('os')", "'; import os; '", "\\x00"])
def test_spec_text_never_becomes_code(text: str) -> None:
    cond = Compare(
        op="==", left=P(root="args", parts=(text,)), right=Literal(value=text, type="string")
    )
    rule = Rule(
        label="p.r", policy="m.p", effect="allow", selectors=(Selector(kind="all"),), condition=cond
    )
    spec = Spec(
        name="m",
        root_module="m",
        tools={"c": Tool(id="c", wire_name="c")},
        policies={"m.p": Policy(name="m.p", rules=(rule,))},
    )
    assert decide(spec, "c", args={text: text}).effect == "allow"
    assert decide(spec, "c", args={text: "x"}).effect == "deny"


@settings(max_examples=examples(1500), deadline=None)
@given(cond=_conditions, data=st.data())
def test_each_compiled_condition_agrees_with_the_interpreter(
    cond: Any, data: st.DataObject
) -> None:
    fn = compile_conditions({"c": cond}, ["root"])["c"]
    for _ in range(3):
        args = {k: v for k in ("n", "s", "p", "op") if (v := data.draw(_values)) is not None}
        actor = {k: v for k in ("role", "roles", "tenant") if (v := data.draw(_values))}
        call = CallContext(
            "c",
            args,
            actor=actor,
            resource={"tenant": data.draw(_values)},
            facts={"root": data.draw(_values)},
            connected=frozenset(data.draw(st.sets(st.sampled_from(["crm", "x"])))),
            execution={"timeout": data.draw(_values)},
        )
        view = {
            "risk": data.draw(st.sampled_from(_RISK)),
            "effects": tuple(data.draw(st.sets(st.sampled_from(_EFFECTS)))),
        }
        scope = Scope(
            args=args,
            actor=actor,
            resource=call.resource,
            tool=view,
            call=call.call,
            facts=call.facts,
            connected=call.connected,
            path_facts=frozenset({"root"}),
        )
        assert fn(call, args, view, call.facts) == evaluate(cond, scope)


def test_a_tool_is_compiled_on_its_first_decision_and_decides_as_if_eager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading compiles nothing; a decision compiles its tool's function only; the decisions
    are those of a decider that compiled every tool first."""
    spec = spec_of(
        tmp_path,
        """
        tool a { summary "A" effects read input { path: path, n: int? } }
        tool b { summary "B" effects write input { path: path } }
        tool c { summary "C" effects write risk high }
        policy p {
          ra: allow a when args.path within "/repo" and args.n <= 3
          rb: ask b when args.path startswith "/tmp" { approver role "owner" }
          rc: deny * when actor.role == "guest" { reason "no guests" }
          default deny
        }
        """,
    )
    calls = [
        CallContext("a", {"path": "/repo/x", "n": 2}),
        CallContext("a", {"path": "/etc", "n": 2}, actor={"role": "guest"}),
        CallContext("b", {"path": "/tmp/y"}),
        CallContext("c", {}),
        CallContext("zz", {}),
    ]
    compiled: list[str] = []
    real_compile = compile

    def spy(source: str, *rest: Any, **kw: Any) -> Any:
        compiled.append(source)
        return real_compile(source, *rest, **kw)

    monkeypatch.setattr(policy_module, "compile", spy, raising=False)
    lazy = PolicyEngine(spec).decider("p")
    assert lazy.compiled("zz") is None
    assert compiled == []
    first = lazy.decide(calls[2])
    assert len(compiled) == 1  # b's function only
    eager = PolicyEngine(spec).decider("p")
    eager.compile_all()
    assert [lazy.decide(c) for c in calls] == [eager.decide(c) for c in calls]
    assert first == eager.decide(calls[2])
    # a decider asked for its code before any decision compiles in the registry's order, as
    # the docs of a build show it (after decisions, the names follow the order of first calls)
    fresh = PolicyEngine(spec).decider("p")
    assert dict(fresh.constants) == dict(eager.constants)
    assert [fresh.source(t) for t in "abc"] == [eager.source(t) for t in "abc"]
