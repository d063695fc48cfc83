"""The ledger's history aggregates, and the compiled conditions and decider agreeing with the
reference interpreter on random conditions with provenance, history, quantifier, length and
extract terms over random sessions."""

from __future__ import annotations

from typing import Any

from harnessc.runtime.judge.conditions import Scope, compile_conditions, evaluate
from harnessc.runtime.judge.history import HistoryTerms, Ledger, history_key, prelude_ledger
from harnessc.runtime.judge.policy import CallContext, PolicyEngine, naive_decide, tool_view
from harnessc.runtime.model import (
    And,
    Compare,
    DefaultDecision,
    Extract,
    FactAdd,
    Field,
    History,
    Length,
    Literal,
    Not,
    Or,
    Path,
    Policy,
    Provenance,
    Quantified,
    Rule,
    Schema,
    Selector,
    SessionStep,
    Spec,
    Tool,
    Type,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_policy_engine import _IDS, _RISK, _conditions, _selectors, _tool

from .budget import examples

# ---------------------------------------------------------------------------------------------
# The aggregates, by hand


def _spec(*extra: Tool) -> Spec:
    fields = Schema(fields=(Field(name="n", type=Type(name="int", optional=True)),))
    out = Schema(fields=(Field(name="v", type=Type(name="string", optional=True)),))
    tools = {
        "del": Tool(id="del", wire_name="del", input=fields, output=out),
        "pay": Tool(id="pay", wire_name="pay", input=fields, output=out, labels=("secret",)),
    }
    tools.update({t.id: t for t in extra})
    return Spec(name="m", root_module="m", tools=tools)


def _sel(tool: str) -> tuple[Selector, ...]:
    return (Selector(kind="id", value=tool, text=tool),)


def _call(ledger: Ledger, n: int, tool: str, args: dict[str, Any], at: int, **end: Any) -> None:
    ledger.requested(f"a{n}", tool, args, position=10 * n, time_ms=at, tool_call_id=f"c{n}")
    ledger.authorised(f"a{n}", position=10 * n + 1, time_ms=at)
    if end:
        ledger.finished(f"a{n}", end["state"], end.get("data"), position=10 * n + 2, time_ms=at + 1)


def test_count_leaves_out_failed_calls_and_sum_reads_the_field() -> None:
    terms = HistoryTerms(_spec())
    count = terms.intern(History(func="count", selectors=_sel("del")))
    total = terms.intern(
        History(func="sum", selectors=_sel("del"), field=Path(root="args", parts=("n",)))
    )
    called = terms.intern(History(func="called", selectors=_sel("del")))
    ok = terms.intern(History(func="succeeded", selectors=_sel("del")))
    ledger = Ledger(terms)
    _call(ledger, 1, "del", {"n": 5}, 0, state="SUCCEEDED", data={"v": "x"})
    _call(ledger, 2, "del", {"n": 7}, 0, state="FAILED")
    _call(ledger, 3, "del", {"n": "x"}, 0)
    _call(ledger, 4, "pay", {"n": 100}, 0)
    assert ledger.number(count) == 2
    assert ledger.number(total) == 5
    assert ledger.holds(called) and ledger.number(called) == 3
    assert ledger.number(ok) == 1
    # the call being decided is never one of its own earlier calls
    assert ledger.number(count, exclude="c1") == 1


def test_a_when_reading_the_result_is_settled_when_the_result_arrives() -> None:
    terms = HistoryTerms(_spec())
    when = Compare(
        op="==", left=Path(root="result", parts=("v",)), right=Literal(value="big", type="string")
    )
    key = terms.intern(History(func="count", selectors=_sel("del"), where=when))
    ledger = Ledger(terms)
    ledger.number(key)  # the aggregate exists before the events: fed incrementally
    _call(ledger, 1, "del", {}, 0)
    assert ledger.number(key) == 0
    ledger.finished("a1", "SUCCEEDED", {"v": "big"}, position=99, time_ms=5)
    _call(ledger, 2, "del", {}, 6, state="SUCCEEDED", data={"v": "small"})
    assert ledger.number(key) == 1


def test_a_when_asking_provenance_reads_the_sources_before_the_earlier_call() -> None:
    """`count(del when args.s from user)`: an earlier call counts when the user had said its
    value before it was made, whether the aggregate was fed along or made afterwards."""
    terms = HistoryTerms(_spec())
    where = Provenance(value=Path(root="args", parts=("s",)), source="user")
    key = terms.intern(History(func="count", selectors=_sel("del"), where=where))
    early, late = Ledger(terms), Ledger(terms)
    early.number(key)
    for ledger in (early, late):
        ledger.said("remove chg-12345", position=1)
        _call(ledger, 1, "del", {"s": "chg-12345"}, 0)  # said before: counts
        _call(ledger, 2, "del", {"s": "chg-67890"}, 0)  # said only afterwards: does not
        ledger.said("and chg-67890", position=25)
        _call(ledger, 3, "del", {"s": "chg-67890"}, 0)  # said before this one: counts
        _call(ledger, 4, "del", {"s": "chg-00000"}, 0, state="SUCCEEDED", data={"v": "x"})
    assert early.number(key) == late.number(key) == 2


def test_windows_and_seen() -> None:
    terms = HistoryTerms(_spec())
    recent = terms.intern(History(func="count", selectors=_sel("del"), window_ms=1000))
    seen = terms.intern(History(func="seen", label="secret", window_ms=1000))
    ledger = Ledger(terms)
    ledger.number(recent), ledger.number(seen)
    _call(ledger, 1, "del", {}, 0)
    _call(ledger, 2, "pay", {}, 500, state="SUCCEEDED", data={"v": "x"})
    _call(ledger, 3, "del", {}, 900)
    ledger.now_ms = 1000
    assert ledger.number(recent) == 2 and ledger.holds(seen)
    ledger.now_ms = 1600
    assert ledger.number(recent) == 1 and not ledger.holds(seen)


@settings(max_examples=examples(150), deadline=None)
@given(st.data())
def test_an_aggregate_made_late_equals_one_fed_all_along(data: st.DataObject) -> None:
    terms = HistoryTerms(_spec())
    nodes = [
        History(func=f, selectors=_sel(t), window_ms=w)
        for f in ("count", "called", "succeeded")
        for t in ("del", "pay")
        for w in (None, 50)
    ] + [History(func="sum", selectors=_sel("del"), field=Path(root="args", parts=("n",)))]
    keys = [terms.intern(n) for n in nodes]
    early, late = Ledger(terms), Ledger(terms)
    for key in keys:
        early.number(key)
    at = 0
    for n in range(data.draw(st.integers(0, 12))):
        at += data.draw(st.integers(0, 30))
        state = data.draw(st.sampled_from([None, "SUCCEEDED", "FAILED", "CANCELLED"]))
        tool = data.draw(st.sampled_from(["del", "pay"]))
        args = {"n": data.draw(st.integers(-3, 3))}
        for ledger in (early, late):
            if state is None:
                _call(ledger, n, tool, args, at)
            else:
                _call(ledger, n, tool, args, at, state=state, data={"v": "x"})
    for ledger in (early, late):
        ledger.now_ms = at
    assert [early.number(k) for k in keys] == [late.number(k) for k in keys]


def test_a_call_that_succeeded_without_a_result_counts_in_a_term_made_after_it() -> None:
    # a tool without `output` succeeds with no data: `succeeded` and a `when` reading `result`
    # hold for it whether the term was fed all along or made once the call had ended
    terms = HistoryTerms(_spec())
    nodes = [
        History(func="succeeded", selectors=_sel("del")),
        History(func="called", selectors=_sel("del")),
    ]
    keys = [terms.intern(n) for n in nodes]
    early, late = Ledger(terms), Ledger(terms)
    for key in keys:
        early.number(key)
    for ledger in (early, late):
        _call(ledger, 1, "del", {}, 0, state="SUCCEEDED", data=None)
    assert [early.number(k) for k in keys] == [late.number(k) for k in keys] == [1, 1]


def test_a_session_of_steps_adds_to_facts_on_success_as_the_runtime_does() -> None:
    # `on_success add args.n to known`: after the step, its value is a fact, so from trusted,
    # in a spec test's or a witness's session as in a session of the runtime
    adds = (FactAdd(value=Path(root="args", parts=("n",)), fact="known"),)
    pay = _spec().tools["pay"].model_copy(update={"on_success": adds})
    spec = _spec().model_copy(update={"tools": {**_spec().tools, "pay": pay}})
    ledger = prelude_ledger(
        spec, [SessionStep(tool="pay", args={"n": "DE89370400440532013000"})], 0
    )
    assert ledger.index.kinds_of("DE89370400440532013000") == frozenset({"trusted"})


# ---------------------------------------------------------------------------------------------
# Compiled == reference, with session terms

_POOL = ["DE89370400440532013000", "bob@corp.test", "https://evil.test/x", "a", "chg-12345", 1500]
_texts = st.lists(
    st.sampled_from([str(v) for v in _POOL] + ["hello", "see"]), min_size=1, max_size=4
).map(" ".join)
_arg_paths = st.sampled_from(
    [Path(root="args", parts=(k,)) for k in ("s", "n", "l")] + [Path(root="args", parts=("q",))]
)
_where = st.one_of(
    st.none(),
    st.just(
        Compare(op=">", left=Path(root="args", parts=("n",)), right=Literal(value=0, type="int"))
    ),
    st.just(
        Compare(
            op="==",
            left=Path(root="result", parts=("v",)),
            right=Literal(value="ok", type="string"),
        )
    ),
    # provenance in `when`: the earlier call's argument as it was when that call was made
    st.deferred(lambda: _provenance(Path(root="args", parts=("s",)))),
    st.deferred(
        lambda: _provenance(Path(root="var", parts=("y",))).map(
            lambda body: Quantified(
                quantifier="any", var="y", over=Path(root="args", parts=("l",)), body=body
            )
        )
    ),
)
_histories = st.one_of(
    st.builds(
        lambda f, s, w, c: History(func=f, selectors=tuple(s), window_ms=w, where=c),
        st.sampled_from(["called", "succeeded", "count"]),
        st.lists(_selectors, min_size=1, max_size=2),
        st.sampled_from([None, 50]),
        _where,
    ),
    st.builds(
        lambda s, fld, w: History(func="sum", selectors=tuple(s), field=fld, window_ms=w),
        st.lists(_selectors, min_size=1, max_size=2),
        st.sampled_from([Path(root="args", parts=("n",)), Path(root="result", parts=("v",))]),
        st.sampled_from([None, 50]),
    ),
    st.builds(
        lambda w: History(func="seen", label="pii", window_ms=w), st.sampled_from([None, 50])
    ),
)


def _provenance(value: Any) -> st.SearchStrategy[Provenance]:
    return st.one_of(
        st.builds(
            lambda s, o: Provenance(value=value, source=s, only=o),
            st.sampled_from(["user", "trusted", "untrusted"]),
            st.booleans(),
        ),
        st.just(Provenance(value=value, source="nowhere")),
        st.just(Provenance(value=value, source="label", label="pii")),
    )


_x = Path(root="var", parts=("x",))
_session_leaves = st.one_of(
    _arg_paths.flatmap(_provenance),
    st.builds(
        lambda q, over, body: Quantified(quantifier=q, var="x", over=over, body=body),
        st.sampled_from(["all", "any"]),
        st.one_of(
            st.just(Path(root="args", parts=("l",))),
            st.sampled_from(["urls", "hosts", "emails"]).map(
                lambda f: Extract(func=f, of=Path(root="args", parts=("s",)))
            ),
        ),
        st.one_of(
            _provenance(_x),
            st.just(Compare(op="endswith", left=_x, right=Literal(value=".test", type="string"))),
        ),
    ),
    st.builds(
        lambda of, op, n: Compare(op=op, left=Length(of=of), right=Literal(value=n, type="int")),
        st.sampled_from([Path(root="args", parts=("l",)), Path(root="args", parts=("s",))]),
        st.sampled_from([">", "<=", "=="]),
        st.integers(0, 3),
    ),
    st.builds(
        lambda h, op, n: Compare(op=op, left=h, right=Literal(value=n, type="int")),
        _histories,
        st.sampled_from([">", ">=", "=="]),
        st.integers(0, 3),
    ),
    _histories,
)
_session_conditions = st.recursive(
    st.one_of(_session_leaves, _conditions),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: And(items=tuple(xs))),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: Or(items=tuple(xs))),
        inner.map(lambda x: Not(item=x)),
    ),
    max_leaves=4,
)


def _session_spec(data: st.DataObject, rules: tuple[Rule, ...] = ()) -> Spec:
    tools = {}
    for tool_id in _IDS:
        tool = _tool(tool_id, data)
        fields = (
            *tool.input.fields,
            Field(name="l", type=Type(name="list", item=Type(name="string"), optional=True)),
        )
        tools[tool_id] = tool.model_copy(
            update={
                "input": Schema(fields=fields),
                "labels": ("pii",) if data.draw(st.booleans()) else (),
                "trust": data.draw(st.sampled_from([None, "trusted"])),
            }
        )
    return Spec(
        name="m",
        root_module="m",
        tools=tools,
        policies={"m.p": Policy(name="m.p", default=DefaultDecision(effect="allow"), rules=rules)},
    )


def _session(data: st.DataObject, terms: HistoryTerms) -> Ledger:
    ledger = Ledger(terms)
    at, pos = 0, 0
    for n in range(data.draw(st.integers(1, 8))):
        at += data.draw(st.integers(0, 40))
        pos += 5
        what = data.draw(st.sampled_from(["said", "call", "facts"]))
        if what == "said":
            ledger.said(data.draw(_texts), position=pos)
        elif what == "facts":
            ledger.facts({"f": data.draw(_texts)}, position=pos)
        else:
            tool = data.draw(st.sampled_from(_IDS))
            args = {
                "n": data.draw(st.integers(-1, 2)),
                "op": data.draw(st.sampled_from(["o1", "o2"])),
                "s": data.draw(st.sampled_from([str(v) for v in _POOL])),
                "l": data.draw(st.lists(st.sampled_from([str(v) for v in _POOL]), max_size=2)),
            }
            ledger.requested(f"a{n}", tool, args, position=pos, time_ms=at, tool_call_id=f"c{n}")
            if data.draw(st.booleans()):
                ledger.authorised(f"a{n}", position=pos + 1, time_ms=at)
            end = data.draw(st.sampled_from([None, "SUCCEEDED", "FAILED", "CANCELLED"]))
            if end is not None:
                v = data.draw(st.sampled_from(["ok", "no", 3, *_POOL]))
                result = {"v": v, "body": data.draw(_texts)}
                ledger.finished(f"a{n}", end, result, position=pos + 2, time_ms=at + 1)
    ledger.now_ms = at + data.draw(st.integers(0, 60))
    return ledger


def _args(data: st.DataObject) -> dict[str, Any]:
    pool = st.sampled_from([*_POOL, "zzz-999999"])
    args = {
        "s": data.draw(st.one_of(pool.map(str), st.none(), _texts)),
        "n": data.draw(st.one_of(st.none(), st.integers(-1, 2), st.just(1500))),
        "l": data.draw(st.one_of(st.none(), st.lists(pool.map(str), max_size=3))),
        "op": data.draw(st.sampled_from([None, "o1", "o2"])),
    }
    return {k: v for k, v in args.items() if v is not None}


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cond=st.one_of(_session_leaves, _session_conditions), data=st.data())
def test_each_compiled_session_condition_agrees_with_the_interpreter(
    cond: Any, data: st.DataObject
) -> None:
    spec = _session_spec(data)
    terms = HistoryTerms(spec)
    fn = compile_conditions({"c": cond}, [], terms)["c"]
    ledger = _session(data, terms) if data.draw(st.booleans()) else None
    for _ in range(2):
        args = _args(data)
        tool_id = data.draw(st.sampled_from(_IDS))
        view = tool_view(spec.tools[tool_id], args.get("op"))
        call = CallContext(
            tool_id, args, ledger=ledger, tool_call_id=data.draw(st.sampled_from(["c1", "new"]))
        )
        scope = Scope(args=args, tool=view, call=call.call, ledger=ledger, terms=terms)
        assert fn(call, args, view, {}) == evaluate(cond, scope)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    rules=st.lists(
        st.tuples(
            st.sampled_from(["allow", "ask", "deny"]),
            st.lists(_selectors, min_size=1, max_size=2),
            st.one_of(st.none(), _session_conditions),
        ),
        max_size=5,
    ),
)
def test_the_compiled_decider_agrees_with_the_reference_on_sessions(
    data: st.DataObject, rules: list
) -> None:
    built = tuple(
        Rule(label=f"p#{n}", policy="m.p", effect=e, selectors=tuple(s), condition=c)
        for n, (e, s, c) in enumerate(rules, 1)
    )
    spec = _session_spec(data, built)
    engine = PolicyEngine(spec)
    decider = engine.decider("p")
    ledger = _session(data, engine.terms)
    for _ in range(3):
        call = CallContext(
            data.draw(st.sampled_from(_IDS)),
            _args(data),
            ledger=ledger,
            tool_call_id=data.draw(st.sampled_from(["c1", "new"])),
        )
        assert decider.decide(call) == naive_decide(spec, "p", call)
        assert decider.decide(call) == naive_decide(spec, "p", call)


def test_history_keys_are_canonical() -> None:
    a = History(func="count", selectors=_sel("del"), window_ms=10)
    b = History(window_ms=10, selectors=_sel("del"), func="count")
    assert history_key(a) == history_key(b)
    assert _RISK  # the shared strategies are the policy engine's


def test_every_provenance_form_compiles_to_the_interpreters_answer() -> None:
    spec = _spec()
    terms = HistoryTerms(spec)
    ledger = Ledger(terms)
    iban = "DE89370400440532013000"
    ledger.said(f"pay {iban}", position=1)
    _call(ledger, 1, "pay", {}, 0, state="SUCCEEDED", data={"v": f"to {iban} or bob@x.test"})
    ledger.facts({"f": "trusted-id-77"}, position=40)
    forms = [
        Provenance(value=Path(root="args", parts=("s",)), source=k, only=o)
        for k in ("user", "trusted", "untrusted")
        for o in (False, True)
    ] + [
        Provenance(value=Path(root="args", parts=("s",)), source="nowhere"),
        Provenance(value=Path(root="args", parts=("s",)), source="label", label="secret"),
    ]
    answers = set()
    for value in (iban, "bob@x.test", "trusted-id-77", "other", None, [iban]):
        args = {} if value is None else {"s": value}
        call = CallContext("del", args, ledger=ledger)
        view = tool_view(spec.tools["del"])
        for form in forms:
            fn = compile_conditions({"c": form}, [], terms)["c"]
            want = evaluate(form, Scope(args=args, tool=view, ledger=ledger, terms=terms))
            assert fn(call, args, view, {}) == want, (value, form)
            answers.add(
                (value if not isinstance(value, list) else "list", form.source, form.only, want)
            )
    assert (iban, "user", True, False) in answers and (iban, "user", False, True) in answers
    assert ("bob@x.test", "untrusted", True, True) in answers
    assert ("trusted-id-77", "trusted", True, True) in answers
    assert ("list", "nowhere", False, True) in answers and (
        None,
        "nowhere",
        False,
        False,
    ) in answers


def test_evidence_names_the_sources_of_a_value_a_negated_term_refused() -> None:
    spec = _spec()
    s_path = Path(root="args", parts=("s",))
    rule = Rule(
        label="p.r",
        policy="m.p",
        effect="deny",
        selectors=_sel("del"),
        condition=Not(item=Provenance(value=s_path, source="user")),
    )
    spec = spec.model_copy(update={"policies": {"m.p": Policy(name="m.p", rules=(rule,))}})
    engine = PolicyEngine(spec)
    ledger = Ledger(engine.terms)
    _call(ledger, 1, "pay", {}, 0, state="SUCCEEDED", data={"v": "ref-424242"})
    for s in ("ref-424242", "made-up-1"):
        call = CallContext("del", {"s": s}, ledger=ledger, tool_call_id="x")
        decision = engine.decider("p").decide(call)
        assert decision == naive_decide(spec, "p", call)
        assert decision.rule == "p.r" and len(decision.evidence) == 1
    assert engine.decider("p").decide(
        CallContext("del", {"s": "ref-424242"}, ledger=ledger)
    ).evidence == (
        "`args.s` appears only in the result of `pay` (untrusted, labels secret), event #12",
    )
