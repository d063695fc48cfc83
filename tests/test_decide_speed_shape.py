"""The compiled decider: spec text never becomes code, and the work of one decision does not
grow with the registry (bench/decide.py measures the time; this pins the shape)."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime.judge import policy as policy_mod
from harnessc.runtime.judge.policy import CallContext, PolicyEngine, naive_decide
from harnessc.runtime.model import (
    Compare,
    DefaultDecision,
    Fact,
    Field,
    Literal,
    Operation,
    Policy,
    Rule,
    Schema,
    Selector,
    Spec,
    Tool,
    Type,
)
from harnessc.runtime.model import Path as P

HOSTILE = [
    "\n    import os\n",
    "'); __import__('os').system('true') #",
    '"""',
    "{_k0} _d0 x.args",
    "a\\x00b\u2028c",
]


def hostile_spec(text: str) -> Spec:
    """Every place a spec can hold text: tool id, argument names, literals, regexes, fact
    names, labels, reasons, `instead`, operation names, selectors."""
    tool = Tool(
        id=text,
        wire_name="t",
        input=Schema(
            fields=(
                Field(name=text, type=Type(name="path")),
                Field(name="op", type=Type(name="enum", values=(text, "plain"))),
                Field(name="s", type=Type(name="string", optional=True)),
            )
        ),
        operations={
            text: Operation(name=text, risk="critical", effects=("write",)),
            "plain": Operation(name="plain", risk="low", effects=("read",)),
        },
        risk="critical",
        effects=("read", "write"),
    )
    rules = (
        Rule(
            label=text,
            policy="m.p",
            effect="deny",
            selectors=(Selector(kind="glob", value=text[:3]),),
            condition=Compare(
                op="matches",
                left=P(root="args", parts=("s",)),
                right=Literal(value=re.escape(text), type="string"),
            ),
            reason=text,
            instead=text,
        ),
        Rule(
            label="m.ask",
            policy="m.p",
            effect="ask",
            selectors=(Selector(kind="risk", op=">=", value="high"),),
            condition=Compare(
                op="==",
                left=P(root="fact", parts=(text,)),
                right=Literal(value=text, type="string"),
            ),
            reason=text,
        ),
        Rule(
            label="m.allow",
            policy="m.p",
            effect="allow",
            selectors=(Selector(kind="id", value=text),),
            condition=Compare(
                op="within",
                left=P(root="args", parts=(text,)),
                right=Literal(value="/" + text.strip().replace("/", ""), type="string"),
            ),
        ),
    )
    return Spec(
        name="m",
        root_module="m",
        tools={text: tool},
        facts={text: Fact(name=text, type=Type(name="string"))},
        policies={"m.p": Policy(name="m.p", default=DefaultDecision(effect="deny"), rules=rules)},
    )


@pytest.mark.parametrize("text", HOSTILE)
def test_spec_text_never_enters_the_generated_source(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources: list[str] = []
    real_compile = compile

    def spy(source: str, *rest: Any, **kw: Any) -> Any:
        sources.append(source)
        return real_compile(source, *rest, **kw)

    monkeypatch.setattr(policy_mod, "compile", spy, raising=False)
    spec = hostile_spec(text)
    decider = PolicyEngine(spec).decider("p")
    decider.compile_all()  # a tool's function is compiled on its first decision otherwise
    assert sources, "the decider compiles generated code"
    for source in sources:
        assert text not in source
        assert text.strip() not in source
        assert re.escape(text) not in source
    inside = "/" + text.strip().replace("/", "") + "/x"
    calls = [
        CallContext(text, {text: inside, "op": "plain"}),
        CallContext(text, {text: inside, "op": text, "s": text}),
        CallContext(text, {text: inside, "op": text}, facts={text: text}),
        CallContext(text, {text: "/../" + text, "op": "plain"}),
    ]
    effects = []
    for call in calls:
        got = decider.decide(call)
        assert got == naive_decide(spec, "p", call)
        effects.append(got.effect)
    assert effects == ["allow", "deny", "ask", "deny"]
    assert decider.decide(calls[1]).reason == text


def generated(tmp_path: Path, n: int) -> Spec:
    tools = "".join(
        f'tool g{i // 10}.t{i} {{\n  summary "Tool {i}."\n  effects write\n  risk medium\n'
        '  input { path: path, env: enum("staging", "production"), n: int? }\n}\n'
        for i in range(n)
    )
    rules = "".join(
        f'  deny g{g}.* when resource.tenant != actor.tenant {{ reason "other tenant" }}\n'
        for g in range(n // 10)
    )
    rules += "".join(
        f'  ask g{i // 10}.t{i} when args.env == "production" {{ approver role "o"; '
        "grant once ttl 15m }\n"
        for i in range(n * 4 // 10)
    )
    rules += "".join(f'  allow g{i // 10}.t{i} when args.path within "/repo"\n' for i in range(n))
    path = tmp_path / f"gen{n}.harness"
    text = (
        f'harness gen {{\n  version "1.0.0"\n}}\n{tools}policy gen {{\n  default deny\n{rules}}}\n'
    )
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    return result.model


def count_calls(fn: Callable[[], Any]) -> int:
    """Python and C function calls made while `fn` runs."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def test_the_work_of_a_decision_does_not_grow_with_the_registry(tmp_path: Path) -> None:
    small, large = generated(tmp_path, 20), generated(tmp_path, 400)
    call = {
        "args": {"path": "/repo/src/a.py", "env": "production"},
        "actor": {"tenant": "acme"},
        "resource": {"tenant": "acme"},
    }
    counts = []
    for spec in (small, large):
        decider = PolicyEngine(spec).decider("gen")
        ctx = CallContext("g0.t3", **call)
        first = decider.decide(ctx)
        assert first == naive_decide(spec, "gen", ctx)
        assert (first.effect, len(first.matched)) == ("ask", 2)  # the ask and the allow
        counts.append(count_calls(lambda d=decider, c=ctx: d.decide(c)))  # type: ignore[misc]
    assert counts[0] == counts[1]
    # the tool's function, one path check, a few dict reads: no loop over rules or tools
    assert counts[0] <= 14
