"""Property: for random pairs of policies over a finite domain of calls, every region's witness
flips under the runtime, and every call that flips is covered by a reported region (same
tool, same old and new winner) — checked against brute force over every call. Half the pairs
also change the tool's schema (an enum value added first), compared over the calls both
schemas accept."""

from __future__ import annotations

from typing import Any

from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.compare import Region, compare_policies, runtime_call
from harnessc.compiler.analysis.concrete import Call
from harnessc.runtime import model as m
from harnessc.runtime.judge.policy import CallContext, Decision, PolicyEngine
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .budget import examples
from .test_analysis import E_VALUES, N_VALUES, _small_spec, conditions

ROLES = ("dev", "sre")
GRANTS = (None, m.Grant(scope="once", ttl_ms=60_000), m.Grant(scope="task", ttl_ms=60_000))

rule_parts = st.tuples(
    st.sampled_from(["allow", "ask", "deny"]),
    st.none() | conditions,
    st.sampled_from(ROLES),
    st.sampled_from(range(len(GRANTS))),
)
defaults = st.sampled_from(["deny", "allow", "ask"])
policies = st.tuples(defaults, st.lists(rule_parts, max_size=4))


def _spec(default: str, parts: list[tuple[str, Any, str, int]]) -> m.Spec:
    """test_analysis's small spec, with each ASK's approver and grant and the default drawn."""
    spec = _small_spec([(effect, cond) for effect, cond, _, _ in parts])
    policy = spec.policies["s.p"]
    rules = tuple(
        rule.model_copy(
            update={
                "approvers": (m.Approver(kind="role", value=role),) if rule.effect == "ask" else (),
                "grant": GRANTS[grant] if rule.effect == "ask" else None,
            }
        )
        for rule, (_, _, role, grant) in zip(policy.rules, parts, strict=True)
    )
    approvers = (m.Approver(kind="role", value="owner"),) if default == "ask" else ()
    chosen = m.DefaultDecision(effect=default, approvers=approvers)  # type: ignore[arg-type]
    policies = {"s.p": policy.model_copy(update={"rules": rules, "default": chosen})}
    return spec.model_copy(update={"policies": policies})


def _with_enum(spec: m.Spec, values: tuple[str, ...]) -> m.Spec:
    tool = spec.tools["t"]
    fields = tuple(
        f.model_copy(update={"type": f.type.model_copy(update={"values": values})})
        if f.name == "e"
        else f
        for f in tool.input.fields
    )
    tool = tool.model_copy(update={"input": tool.input.model_copy(update={"fields": fields})})
    return spec.model_copy(update={"tools": {"t": tool}})


def _key(d: Decision) -> tuple[Any, ...]:
    if d.effect != "ask":
        return (d.effect,)
    return (d.effect, tuple(a.value for a in d.approvers), d.grant)


CALLS = [Call(tool="t", args={"n": n, "e": e}) for n in N_VALUES for e in E_VALUES]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies, policies, st.booleans(), st.booleans())
def test_regions_agree_with_brute_force(
    old_parts: Any, new_parts: Any, mutate: bool, extended: bool
) -> None:
    if mutate:  # a pair that differs by one rule, as in a pull request
        default, rules = old_parts
        new_parts = (default, [*rules[:1], *new_parts[1][:1], *rules[2:]])
    old, new = _spec(*old_parts), _spec(*new_parts)
    if extended:  # the new schema's enum gains a first value: every other one moves
        new = _with_enum(new, ("z", *E_VALUES))
    comparison = compare_policies(old, "p", new, "p", cache=AnalysisCache(on_disk=False))
    assert comparison.undecided == []
    for region in comparison.regions:
        assert region.verified, region.notes
        assert region.exact, region.notes
    covered = {(r.tool, r.old.rule, r.new.rule) for r in comparison.regions}
    old_engine, new_engine = PolicyEngine(old), PolicyEngine(new)
    flipped = set()
    for call in CALLS:
        ctx: CallContext = runtime_call(old, call)
        a, b = old_engine.decide("p", ctx), new_engine.decide("p", ctx)
        if _key(a) != _key(b):
            flipped.add((call.tool, a.rule, b.rule))
    event(f"regions: {min(len(covered), 3)}")
    assert flipped == covered
    if old_parts == new_parts and not extended:
        assert comparison.regions == [] and comparison.queries == 0


def test_region_winners_name_the_rules_that_decide(tmp_path: Any) -> None:
    old = _spec("deny", [("allow", None, "dev", 0)])
    new = _spec("deny", [("ask", None, "dev", 1)])
    [region] = compare_policies(old, "p", new, "p", cache=AnalysisCache(on_disk=False)).regions
    assert isinstance(region, Region)
    assert (region.old.rule, region.new.rule, region.change) == ("p#1", "p#1", "allow→ask")
    assert region.new.grant == "once ttl 1m"
