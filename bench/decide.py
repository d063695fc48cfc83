"""Decision latency: `Decider.decide` against AWS Cedar (`cedarpy`) on the same rules and calls.

    .venv/bin/pip install cedarpy      # bench only: never a harnessc dependency
    .venv/bin/python bench/decide.py [--sizes 50,500,5000] [--calls 20000] [--cedar-calls 300]
                                     [--rounds 3] [--no-cedar]

For each size N a spec of N tools and 1.5 N rules is generated as `.harness` text and compiled
through `harnessc.compiler.pipeline.check`, so the decider sees exactly what an application
loads. Tools `gG.tI` come in groups of ten; every tool takes `path: path`, `env:
enum("staging", "production")` and an optional `n: int`. The policy has `default deny` and:

- N `allow` rules, one per tool: `args.path within "/repo"`, every other one also
  `and actor.role in ["engineer", "sre"]`;
- 0.4 N `ask` rules on single tools: `args.env == "production"` (approver, grant, reason);
- 0.1 N `deny` rules, one per group, glob `gG.*`: `resource.tenant != actor.tenant`.

Calls are drawn once per size (fixed seed): a random tool, a path inside or outside `/repo`
(sometimes with `.`/`..` to normalize), either environment, an optional `n`, an engineer or a
guest, a resource tenant equal or not to the actor's, sometimes absent. Every engine gets the
same calls.

Measured per size, each call timed alone with `perf_counter_ns` (the timer's own cost, measured
first, is subtracted), median and p99 over `--calls` calls cycling through the sample:

- `decide`: `Decider.decide(call)` on a prebuilt `CallContext` (warm decision cache);
- `n+d` (normalize + decide): `ToolNames.resolve`, `normalize.freeze` (schema validation with
  defaults and path normalization, canonical JSON and SHA-256 of tool id, version, arguments and
  execution parameters), the `CallContext` and `decide` (target: under 30 µs). When
  `runtime/judge/normalize.py` is missing it falls back to `CallContext` + `canonical.input_hash` +
  `decide`, and says so under the table;
- its breakdown: `norm` (`ToolNames.resolve` + `normalize.freeze` alone, no decide) and `hash`
  (`canonical.input_hash` of the normalized arguments and execution parameters alone: canonical
  JSON and SHA-256), so a cost that grows with the registry shows where it grows;
- `cedar`: `cedarpy.is_authorized` with the equivalent policy set (below) parsed once into a
  `cedarpy.PolicySet` and the entity graph into `cedarpy.Entities` (cedarpy >= 4.8): Cedar at its
  fastest, paying only request conversion and evaluation;
- `cedar-text`: the same call with the policy text and the call's entities passed each time (the
  classic cedarpy usage, which re-parses every policy per call, so its cost grows with the policy
  count); measured on `--cedar-calls` calls because it is slow at 5,000 tools;
- `ratio`: the Cedar median / the decide median (target: at least 30x at every size).

Every size is compiled first, then the harnessc columns are measured in `--rounds` rounds that
visit the sizes in turn, so a change in the machine's load hits every size alike; each column
reports the round with the lowest median. Under the table, the flatness of each column: its
median at the largest size over its median at the smallest (1.00 is flat).

The Cedar translation. principal `User::"<actor id>"`, action `Action::"call"`, resource
`Tool::"<tool id>"`; each tool entity has a parent `Group::"<gG>"`. The call's arguments, actor
and resource go into the request `context` (`context.args`, `context.actor`,
`context.resource`). A rule's selector becomes the policy scope (`resource == Tool::"…"`, a glob
`resource in Group::"gG"`), its condition a `when` clause:

- `args.path within "/repo"` → `context.args.path == "/repo" || context.args.path like
  "/repo/*"` (the path is normalized before both engines see it, as normalize does);
- `actor.role in ["engineer", "sre"]` → `["engineer", "sre"].contains(context.actor.role)`;
- `resource.tenant != actor.tenant` → `context.resource.tenant != context.actor.tenant`; an
  absent tenant is an evaluation error in Cedar, which skips the policy — the same as our
  absent-value rule (the comparison is false).

Effects: `allow` → `permit`; `deny` → `forbid` annotated `@effect("deny")`; `ask` → `forbid`
annotated `@effect("ask")` (Cedar has no third effect; ASK is a forbid whose annotation says
"until approved"). Cedar answers Allow (some permit, no forbid) or Deny with the ids of the
determining forbids; the bench maps a Deny to DENY if any determining policy is a deny rule,
else ASK if any is an ask rule, else DENY with no rule (the spec's `default deny`). That mapping
is part of the Cedar measurement. Before timing, both engines decide a sample of calls and the
effects must agree.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime.judge.policy import CallContext, Decider, PolicyEngine
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import input_hash
from harnessc.runtime.model.semantics import normalize_path

GROUP = 10


# ---------------------------------------------------------------------------------------------
# The generated spec


def tool_ids(n: int) -> list[str]:
    return [f"g{i // GROUP}.t{i}" for i in range(n)]


def spec_text(
    n: int, risk: Callable[[int], str] = lambda i: "medium", extra: Sequence[str] = ()
) -> str:
    """The spec of N tools (module docstring); `risk` gives tool i's risk, `extra` are rules
    written first in the policy (bench/check_scale.py adds wildcards and risk selectors)."""
    ids = tool_ids(n)
    out = ['harness gen {\n  version "1.0.0"\n  summary "Generated decide benchmark."\n}\n']
    for i, tool_id in enumerate(ids):
        out.append(
            f"tool {tool_id} {{\n"
            f'  summary "Generated tool {tool_id}."\n'
            f"  effects write\n  risk {risk(i)}\n"
            '  input { path: path, env: enum("staging", "production"), n: int? }\n}\n'
        )
    out.append('policy gen {\n  default deny { reason "nothing allows it" }\n')
    out.extend(f"  {rule}\n" for rule in extra)
    for g in range((n + GROUP - 1) // GROUP):
        out.append(
            f"  deny_g{g}: deny g{g}.* when resource.tenant != actor.tenant "
            '{ reason "other tenant" }\n'
        )
    for i, tool_id in enumerate(ids[: n * 4 // 10]):
        out.append(
            f'  ask_{i}: ask {tool_id} when args.env == "production" '
            '{ approver role "owner"; grant once ttl 15m; reason "production" }\n'
        )
    for i, tool_id in enumerate(ids):
        role = ' and actor.role in ["engineer", "sre"]' if i % 2 else ""
        out.append(f'  allow_{i}: allow {tool_id} when args.path within "/repo"{role}\n')
    out.append("}\n")
    return "".join(out)


def compile_spec(n: int) -> Spec:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gen.harness"
        path.write_text(spec_text(n), encoding="utf-8")
        result = check([path])
    if not result.ok or result.model is None:
        sys.exit(f"the generated spec does not compile: {result.diagnostics[:3]}")
    return result.model


def calls(n: int, count: int, seed: int = 7) -> list[CallContext]:
    rng = random.Random(seed)
    ids = tool_ids(n)
    paths = ["/repo/src/a.py", "/repo/./docs/../README.md", "/repository/x", "/etc/passwd", "/repo"]
    out = []
    for _ in range(count):
        args: dict[str, Any] = {
            "path": rng.choice(paths),
            "env": rng.choice(["staging", "production"]),
        }
        if rng.random() < 0.3:
            args["n"] = rng.randint(0, 9)
        actor: dict[str, Any] = {"id": "u1", "role": rng.choice(["engineer", "guest"])}
        if rng.random() < 0.9:
            actor["tenant"] = "acme"
        resource = {"tenant": rng.choice(["acme", "acme", "acme", "globex"])}
        out.append(
            CallContext(rng.choice(ids), args, actor=actor, resource=resource, tool_call_id="c1")
        )
    return out


# ---------------------------------------------------------------------------------------------
# Timing


def timer_cost() -> int:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(20_000):
        t0 = clock()
        samples.append(clock() - t0)
    return int(statistics.median(samples))


def measure(fn: Callable[[Any], Any], items: list[Any], total: int, cost: int) -> list[float]:
    """Per-call latencies in µs, each call timed alone, the timer's cost taken off."""
    clock = time.perf_counter_ns
    for item in items[:200]:
        fn(item)  # warm up
    samples = []
    k = len(items)
    for i in range(total):
        item = items[i % k]
        t0 = clock()
        fn(item)
        samples.append(clock() - t0 - cost)
    return [max(s, 0) / 1000 for s in samples]


def median_p99(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def normalize_and_decide(
    decider: Decider, spec: Spec
) -> tuple[str, Callable[[Any], Any], Callable[[Any], Any] | None, Callable[[Any], Any] | None]:
    """What an application pays per call before an effect: the name resolved, the arguments
    validated and frozen with their input hash (`runtime/judge/normalize.py`), the policy's view of
    the call built, and `decide`. Without normalize.py: `CallContext` + `input_hash` + decide."""
    tools = spec.tools
    try:
        from harnessc.runtime.judge.normalize import ToolNames, Validator, freeze
    except ImportError:

        def hashed(c: CallContext) -> Any:
            call = CallContext(
                c.tool_id, c.args, actor=c.actor, resource=c.resource, tool_call_id=c.tool_call_id
            )
            input_hash(c.tool_id, tools[c.tool_id].version, c.args, {"cwd": "/repo"})
            return decider.decide(call)

        what = "CallContext + canonical.input_hash + decide (no runtime/judge/normalize.py)"
        return what, hashed, None, None

    from harnessc.runtime.model.canonical import Execution

    names = ToolNames(spec)
    validators = {t.id: Validator(t.input) for t in tools.values()}
    execution = Execution(cwd="/repo", timeout_ms=30_000)
    params = {"cwd": "/repo", "timeout": 30_000}
    empty: dict[str, Any] = {}
    none: frozenset[str] = frozenset()

    def normalize_only(c: CallContext) -> Any:
        tool, refusal = names.resolve(c.tool_id)
        if tool is None:
            return refusal
        return freeze(tool, validators[tool.id], "call-1", c.args, execution)

    def hash_only(c: CallContext) -> Any:
        # `c.args` are normalized already (see `main`): canonical JSON + SHA-256 alone
        tool = tools[c.tool_id]
        return input_hash(tool.id, tool.version, c.args, execution)

    def normalized(c: CallContext) -> Any:
        tool, refusal = names.resolve(c.tool_id)
        if tool is None:
            return refusal
        pending = freeze(tool, validators[tool.id], "call-1", c.args, execution)
        if not pending:
            return pending
        call = CallContext(
            pending.tool_id,
            pending.args,
            c.actor,
            c.resource,
            empty,
            empty,
            empty,
            none,
            none,
            pending.tool_call_id,  # type: ignore[union-attr]
            params,
        )
        return decider.decide(call)

    what = "ToolNames.resolve + normalize.freeze (schema, canonical JSON, SHA-256) + decide"
    return what, normalized, normalize_only, hash_only


# ---------------------------------------------------------------------------------------------
# Cedar


def cedar_policies(n: int) -> tuple[str, dict[str, str]]:
    """The Cedar policy set and each policy id's effect (`deny`, `ask`, `allow`)."""
    ids = tool_ids(n)
    out: list[str] = []
    effects: dict[str, str] = {}

    def add(pid: str, effect: str, scope: str, when: str) -> None:
        # Cedar names policies `policy0`, `policy1`, … in text order (the `@id` is for people)
        effects[f"policy{len(out)}"] = effect
        head = "permit" if effect == "allow" else f'@effect("{effect}")\nforbid'
        out.append(
            f'@id("{pid}")\n{head} (principal, action == Action::"call", {scope})\n'
            f"when {{ {when} }};\n"
        )

    for g in range((n + GROUP - 1) // GROUP):
        add(
            f"deny_g{g}",
            "deny",
            f'resource in Group::"g{g}"',
            "context.resource.tenant != context.actor.tenant",
        )
    for i, tool_id in enumerate(ids[: n * 4 // 10]):
        add(f"ask_{i}", "ask", f'resource == Tool::"{tool_id}"', 'context.args.env == "production"')
    for i, tool_id in enumerate(ids):
        when = 'context.args.path == "/repo" || context.args.path like "/repo/*"'
        if i % 2:
            when = f'({when}) && ["engineer", "sre"].contains(context.actor.role)'
        add(f"allow_{i}", "allow", f'resource == Tool::"{tool_id}"', when)
    return "\n".join(out), effects


def cedar_entities(n: int) -> list[dict[str, Any]]:
    groups = [
        {"uid": {"type": "Group", "id": f"g{g}"}, "attrs": {}, "parents": []}
        for g in range((n + GROUP - 1) // GROUP)
    ]
    tools = [
        {
            "uid": {"type": "Tool", "id": tool_id},
            "attrs": {},
            "parents": [{"type": "Group", "id": tool_id.split(".")[0]}],
        }
        for tool_id in tool_ids(n)
    ]
    users = [{"uid": {"type": "User", "id": "u1"}, "attrs": {}, "parents": []}]
    return groups + tools + users


def cedar_decider(n: int, parsed: bool = True) -> Callable[[CallContext], str]:
    """Cedar on the same calls: with `parsed`, a `PolicySet` and `Entities` parsed once (the
    fastest way to use cedarpy); without, policy text and entity list passed on every call."""
    import json

    import cedarpy

    text, effects = cedar_policies(n)
    entity_list = cedar_entities(n)
    policies: Any = cedarpy.PolicySet.from_str(text) if parsed else text
    entities: Any = cedarpy.Entities.from_json_str(json.dumps(entity_list)) if parsed else None
    is_authorized = cedarpy.is_authorized

    def run(c: CallContext) -> str:
        args = dict(c.args)  # paths normalized first, as normalize does for both engines
        args["path"] = normalize_path(args["path"])
        if entities is None:  # only this call's tool and its group: the resource's ancestors
            group = c.tool_id.split(".")[0]
            graph: Any = [
                {"uid": {"type": "Group", "id": group}, "attrs": {}, "parents": []},
                {
                    "uid": {"type": "Tool", "id": c.tool_id},
                    "attrs": {},
                    "parents": [{"type": "Group", "id": group}],
                },
            ]
        else:
            graph = entities
        request = {
            "principal": {"type": "User", "id": c.actor.get("id", "anonymous")},
            "action": {"type": "Action", "id": "call"},
            "resource": {"type": "Tool", "id": c.tool_id},
            "context": {"args": args, "actor": dict(c.actor), "resource": dict(c.resource)},
        }
        result = is_authorized(request, policies, graph)
        if result.allowed:
            return "allow"
        reasons = {effects.get(r) for r in result.diagnostics.reasons}
        return "deny" if "deny" in reasons or "ask" not in reasons else "ask"

    return run


# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Session-aware policy: provenance and history terms against the same policy without them
#
#     .venv/bin/python bench/decide.py --session [--calls 20000] [--rounds 3]
#
# The spec is built as IR (runtime/model/ir.py): 50 tools, among them `mail.read` (untrusted
# results), `payments.send` and `files.delete`. The base policy judges payments by amount and
# role; the session policy has the same rules plus `args.iban from untrusted only` (deny),
# `args.iban from nowhere` (deny), `sum(args.amount of payments.send within 24h) >= 30000`
# (ask) and `count(files.delete within 10m) > 5` (ask). Each is measured over a session of 0,
# 100 and 1,000 earlier calls (every other one a mail whose body names IBANs), and over 1,000
# earlier calls whose results total about 10 MB. `decide` includes the evidence a decision
# carries when a session term decided it. The bar is the `shape` column: the same seven rules
# with each session term replaced by an ordinary test of the call, so the ratio is what the
# session terms themselves cost (at most 2x, flat in the session's length).


def _session_spec() -> Spec:
    from harnessc.runtime.model import (
        Compare,
        DefaultDecision,
        Fact,
        Field,
        History,
        ListValue,
        Literal,
        Policy,
        Provenance,
        Rule,
        Schema,
        Selector,
        Tool,
        Type,
    )
    from harnessc.runtime.model import (
        Path as P,
    )

    def sel(tool: str) -> tuple[Selector, ...]:
        return (Selector(kind="id", value=tool, text=tool),)

    def field(name: str, type_: str) -> Field:
        return Field(name=name, type=Type(name=type_, optional=True))  # type: ignore[arg-type]

    def lit(value: Any) -> Literal:
        return Literal(value=value, type="int" if isinstance(value, int) else "string")

    amount, iban = P(root="args", parts=("amount",)), P(root="args", parts=("iban",))
    tools = {f"misc.t{i}": Tool(id=f"misc.t{i}", wire_name=f"misc_t{i}") for i in range(47)}
    tools["mail.read"] = Tool(
        id="mail.read",
        wire_name="mail_read",
        input=Schema(fields=(field("id", "string"),)),
        output=Schema(fields=(field("sender", "string"), field("body", "string"))),
    )
    tools["payments.send"] = Tool(
        id="payments.send",
        wire_name="payments_send",
        input=Schema(fields=(field("iban", "string"), field("amount", "int"))),
    )
    tools["files.delete"] = Tool(
        id="files.delete", wire_name="files_delete", input=Schema(fields=(field("p", "string"),))
    )
    roles = Compare(
        op="in",
        left=P(root="actor", parts=("role",)),
        right=ListValue(items=(lit("finance"), lit("sre"))),
    )
    base = (
        Rule(
            label="p.big",
            policy="b.p",
            effect="deny",
            selectors=sel("payments.send"),
            condition=Compare(op=">", left=amount, right=lit(50_000)),
        ),
        Rule(
            label="p.mid",
            policy="b.p",
            effect="ask",
            selectors=sel("payments.send"),
            condition=Compare(op=">", left=amount, right=lit(10_000)),
        ),
        Rule(
            label="p.ok",
            policy="b.p",
            effect="allow",
            selectors=(*sel("payments.send"), *sel("files.delete"), *sel("mail.read")),
            condition=roles,
        ),
    )
    session = (
        Rule(
            label="p.injected",
            policy="b.s",
            effect="deny",
            selectors=sel("payments.send"),
            condition=Provenance(value=iban, source="untrusted", only=True),
        ),
        Rule(
            label="p.made_up",
            policy="b.s",
            effect="deny",
            selectors=sel("payments.send"),
            condition=Provenance(value=iban, source="nowhere"),
        ),
        Rule(
            label="p.daily",
            policy="b.s",
            effect="ask",
            selectors=sel("payments.send"),
            condition=Compare(
                op=">=",
                left=History(
                    func="sum", selectors=sel("payments.send"), field=amount, window_ms=86_400_000
                ),
                right=lit(30_000),
            ),
        ),
        Rule(
            label="p.burst",
            policy="b.s",
            effect="ask",
            selectors=sel("files.delete"),
            condition=Compare(
                op=">",
                left=History(func="count", selectors=sel("files.delete"), window_ms=600_000),
                right=lit(5),
            ),
        ),
        *(r.model_copy(update={"policy": "b.s"}) for r in base),
    )
    # the same seven rules with each session term replaced by an ordinary test of the call
    # (a fact lookup, a prefix, a comparison): what a decision costs without session state
    p_path = P(root="args", parts=("p",))
    plain_tests = {
        "p.injected": Compare(op="in", left=iban, right=P(root="fact", parts=("blocked",))),
        "p.made_up": Compare(op="startswith", left=iban, right=lit("FR")),
        "p.daily": Compare(op=">=", left=amount, right=lit(30_000)),
        "p.burst": Compare(op="startswith", left=p_path, right=lit("/danger/")),
    }
    shape = tuple(
        r.model_copy(update={"policy": "b.q", "condition": plain_tests.get(r.label, r.condition)})
        for r in session
    )
    return Spec(
        name="b",
        root_module="b",
        tools=tools,
        facts={"blocked": Fact(name="blocked", type=Type(name="list", item=Type(name="string")))},
        policies={
            "b.p": Policy(name="b.p", default=DefaultDecision(effect="deny"), rules=base),
            "b.s": Policy(name="b.s", default=DefaultDecision(effect="deny"), rules=session),
            "b.q": Policy(name="b.q", default=DefaultDecision(effect="deny"), rules=shape),
        },
    )


_IBANS = [f"DE{10 + i % 89:02d}{370400440532013000 + i * 7919:018d}" for i in range(400)]


def _session_ledger(engine: PolicyEngine, earlier: int, result_bytes: int, now_ms: int) -> Any:
    from harnessc.runtime.judge.history import Ledger

    ledger = Ledger(engine.terms)
    rng = random.Random(11)
    ledger.said(f"please pay {_IBANS[0]} and {_IBANS[1]} this week", position=1)
    pos = 1
    filler = "lorem ipsum dolor sit amet ref-{:06d} "
    for n in range(earlier):
        pos += 3
        at = now_ms - (earlier - n) * 60_000  # one call a minute, the last a minute ago
        if n % 2 == 0:
            body = f"invoice {n}: pay {_IBANS[2 + n % 300]} by friday. "
            if result_bytes:
                body += "".join(filler.format(i) for i in range(result_bytes // 38))
            tool, args, data = "mail.read", {"id": f"m{n}"}, {"sender": "x@y.test", "body": body}
        elif n % 4 == 1:
            tool, args, data = (
                "payments.send",
                {"iban": _IBANS[0], "amount": rng.randint(1, 9)},
                {},
            )
        else:
            tool, args, data = "files.delete", {"p": f"/tmp/{n}"}, {}
        ledger.requested(f"a{n}", tool, args, position=pos, time_ms=at, tool_call_id=f"c{n}")
        ledger.authorised(f"a{n}", position=pos + 1, time_ms=at)
        ledger.finished(f"a{n}", "SUCCEEDED", data, position=pos + 2, time_ms=at)
    ledger.now_ms = now_ms
    return ledger


def _session_calls(ledger: Any, count: int) -> list[CallContext]:
    rng = random.Random(5)
    out = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.7:
            source = rng.random()
            iban = (
                _IBANS[0]
                if source < 0.5  # the user said it
                else _IBANS[2 + rng.randrange(300)]
                if source < 0.8  # only a mail did
                else f"FR76{rng.randrange(10**20):020d}"  # made up
            )
            args: dict[str, Any] = {"iban": iban, "amount": rng.choice([50, 2000, 20_000, 60_000])}
            tool = "payments.send"
        else:
            tool, args = "files.delete", {"p": f"/tmp/x{i}"}
        out.append(
            CallContext(
                tool,
                args,
                actor={"role": rng.choice(["finance", "guest"])},
                tool_call_id=f"new-{i}",
                ledger=ledger,
            )
        )
    return out


def session_main(opts: argparse.Namespace, cost: int) -> None:
    import os

    spec = _session_spec()
    engine = PolicyEngine(spec)
    base, session = engine.decider("b.p"), engine.decider("b.s")
    shape = engine.decider("b.q")
    blocked = {"blocked": _IBANS[2:5]}
    now = 1_800_000_000_000
    setups = []
    for label, earlier, size in (
        ("0 calls", 0, 0),
        ("100 calls", 100, 0),
        ("1,000 calls", 1000, 0),
        ("1,000 calls, ~10 MB", 1000, 20_000),
    ):
        t0 = time.perf_counter()
        ledger = _session_ledger(engine, earlier, size, now)
        built = time.perf_counter() - t0
        sample = _session_calls(ledger, opts.sample)
        plain = [
            CallContext(
                c.tool_id, c.args, actor=c.actor, tool_call_id=c.tool_call_id, facts=blocked
            )
            for c in sample
        ]
        setups.append((label, ledger, built, sample, plain))
    best: dict[tuple[str, str], tuple[float, float]] = {}
    for _ in range(max(opts.rounds, 1)):
        for label, _ledger, _built, sample, plain in setups:
            for name, fn, items in (
                ("base", base.decide, plain),
                ("shape", shape.decide, plain),
                ("session", session.decide, sample),
            ):
                found = median_p99(measure(fn, items, opts.calls, cost))
                if (label, name) not in best or found[0] < best[label, name][0]:
                    best[label, name] = found
    head = (
        f"{'earlier session':>20} | {'index keys':>10}{'built s':>8} | {'base med':>8}"
        f" | {'shape med':>9}{'p99':>7} | {'session med':>11}{'p99':>7} | {'/shape':>6}"
        f" {'/base':>6}"
    )
    print(head + "\n" + "-" * len(head))
    for label, ledger, built, _sample, _plain in setups:
        b, q, s = best[label, "base"], best[label, "shape"], best[label, "session"]
        print(
            f"{label:>20} | {len(ledger.index):>10,}{built:>8.2f} | {b[0]:>8.2f}"
            f" | {q[0]:>9.2f}{q[1]:>7.2f} | {s[0]:>11.2f}{s[1]:>7.2f} | {s[0] / q[0]:>6.2f}"
            f" {s[0] / b[0]:>6.2f}"
        )
    lo, hi = setups[0][0], setups[-1][0]
    print(
        "\nall times in µs (medians of the best round). base: the three rules without session "
        "terms;\nshape: the seven rules of the session policy, each session term replaced by an "
        "ordinary test\nof the call (a fact lookup, a prefix, a comparison); /shape and /base: "
        "the session median\nover theirs"
    )
    print(
        f"flatness of the session column, {hi} / {lo}: "
        f"{best[hi, 'session'][0] / best[lo, 'session'][0]:.2f}"
    )
    print(f"load average: {Path('/proc/loadavg').read_text().strip()} ({os.cpu_count()} cpus)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--cedar-calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the sizes")
    parser.add_argument("--sample", type=int, default=1000, help="distinct calls per size")
    parser.add_argument("--agree", type=int, default=200, help="calls checked for agreement")
    parser.add_argument("--no-cedar", action="store_true", help="measure harnessc only")
    parser.add_argument(
        "--session", action="store_true", help="session-aware terms against the same policy"
    )
    opts = parser.parse_args()
    if opts.session:
        session_main(opts, timer_cost())
        return
    try:
        import cedarpy  # noqa: F401

        have_cedar = not opts.no_cedar
    except ImportError:
        have_cedar = False
        print(
            "cedarpy is not installed: Cedar is skipped. To compare, run\n"
            "    .venv/bin/pip install cedarpy   # bench only, not a harnessc dependency\n"
        )
    cost = timer_cost()
    print(
        f"timer cost {cost} ns per reading, subtracted; {opts.calls:,} calls per column, "
        f"best of {opts.rounds} rounds"
    )
    sizes = [int(x) for x in opts.sizes.split(",")]
    setups = []
    for n in sizes:
        spec = compile_spec(n)
        decider = PolicyEngine(spec).decider("gen")
        sample = calls(n, opts.sample)
        what, pipeline, normalize_only, hash_only = normalize_and_decide(decider, spec)
        columns: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
            "decide": (decider.decide, sample),
            "n+d": (pipeline, sample),
        }
        if normalize_only is not None and hash_only is not None:
            frozen = [normalize_only(c) for c in sample]
            normalized = [
                CallContext(f.tool_id, dict(f.args), tool_call_id="call-1") for f in frozen if f
            ]
            columns["norm"] = (normalize_only, sample)
            columns["hash"] = (hash_only, normalized)
        setups.append((n, spec, decider, sample, columns))
    # INVARIANT: rounds visit every size in turn, so a load change hits every size alike
    best: dict[tuple[int, str], tuple[float, float]] = {}
    for _ in range(max(opts.rounds, 1)):
        for n, _spec, _decider, _sample, columns in setups:
            for name, (fn, items) in columns.items():
                found = median_p99(measure(fn, items, opts.calls, cost))
                if (n, name) not in best or found[0] < best[n, name][0]:
                    best[n, name] = found
    head = (
        f"{'tools':>6}{'rules':>7} | {'decide med':>10}{'p99':>7} | {'n+d med':>8}{'p99':>7} | "
        f"{'norm':>6}{'hash':>6} | "
        f"{'cedar med':>9}{'p99':>8}{'ratio':>7} | {'cedar-text med':>14}{'p99':>9}{'ratio':>8}"
    )
    print(head + "\n" + "-" * len(head))
    for n, spec, decider, sample, _columns in setups:
        rules = len(spec.policy("gen").rules)  # type: ignore[union-attr]
        dec, both = best[n, "decide"], best[n, "n+d"]
        parts = "".join(
            f"{best[n, name][0]:>6.2f}" if (n, name) in best else f"{'-':>6}"
            for name in ("norm", "hash")
        )
        row = (
            f"{n:>6}{rules:>7} | {dec[0]:>10.2f}{dec[1]:>7.2f} | {both[0]:>8.2f}{both[1]:>7.2f} | "
            f"{parts} | "
        )
        if have_cedar:
            for parsed in (True, False):
                cedar = cedar_decider(n, parsed)
                for c in sample[: opts.agree if parsed else min(opts.agree, 30)]:
                    ours, theirs = decider.decide(c).effect, cedar(c)
                    if ours != theirs:
                        sys.exit(f"engines disagree on {c}: harnessc {ours}, cedar {theirs}")
                calls_n = opts.calls if parsed else opts.cedar_calls
                ced = median_p99(measure(cedar, sample, calls_n, cost))
                width = (9, 8, 6) if parsed else (14, 9, 7)
                row += (
                    f"{ced[0]:>{width[0]}.1f}{ced[1]:>{width[1]}.1f}"
                    f"{ced[0] / dec[0]:>{width[2]}.0f}x" + (" | " if parsed else "")
                )
        else:
            row += "skipped"
        print(row, flush=True)
    print("\nall times in µs (medians of the best round); ratio = cedar median / decide median")
    print(f"n+d = {what}")
    print("norm = ToolNames.resolve + normalize.freeze; hash = canonical.input_hash alone")
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        flat = ", ".join(
            f"{name} {best[hi, name][0] / best[lo, name][0]:.2f}"
            for name in ("decide", "n+d", "norm", "hash")
            if (lo, name) in best and best[lo, name][0] > 0
        )
        print(f"flatness, median at {hi:,} tools / at {lo:,} tools: {flat}")


if __name__ == "__main__":
    main()
