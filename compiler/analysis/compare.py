"""The semantic comparison of two policies: the regions of calls they decide differently.

Two policies (usually the same policy in two versions of a spec) are compared tool by tool
over ONE symbolic call: both policies' rules that can match the tool are encoded over the same
variables (smt.py), each rule's "R wins" exactly as language.md §6 says (it matches, no
stronger rule matches, no earlier rule of its effect matches), and the default as "no rule
matches" (for a risk table on a tool with operations, one default per risk level of the
call's operation; likewise an ASK whose self-approval follows the risk, one winner per risk
level). A *region* is a pair (old winner, new winner) whose outcomes differ — the
effect, or for an ASK the approvers, the grant or the `expires` as written, or whether the
requester may approve their own call (`self_approval`, else the runtime's default by the
call's risk) — and that some call reaches.
The regions of a tool are found by asking z3 for a call whose outcomes differ, then again with
each region found so far excluded, until there is none (one question per region, plus one).
Each region carries a concrete witness read from the model, re-judged by concrete.py
(`exact`), and decided by the runtime's `PolicyEngine` under both specs (`verified`: the
decision really flips).

What is compared, and what it means:

- A tool whose bucket is identical on both sides — the same rules select it with the same
  effects, conditions and options, the same schema and registry fields the rules read, the
  same default outcome (partition.py's keys) — is skipped without z3 (`tools_skipped`).
  Other tools' answers are cached by a hash of both sides' keys (cache.py), so comparing the
  same pair again solves nothing.
- A tool only in the old spec: its calls are refused by the new runtime as unregistered (a
  deny with no rule); a tool only in the new spec: its calls were refused before. Both are
  compared like any other tool, against that refusal (`tools_added`, `tools_removed`).
- A tool whose input schema changed: the shared call is one both schemas accept (both
  domains hold; a field only one schema has, or types differently, is absent; an enum whose
  values changed takes the values both accept, each one number on both sides); calls only one
  schema accepts are refused by validation on the other side, which is a change of the
  registry, not of policy (`schema_changed` names such tools).
- `compare_specs` compares every policy the two specs both declare, by qualified name
  (subject `policy NAME`). Then each agent (subject `agent NAME`) whose policy changed name —
  added, removed, switched to another policy, or given or losing one — is compared as the
  runtime judges its calls: under its policy, or refused ("the agent has no policy") without
  one, and refused as an agent that does not exist on the side that lacks it. An agent whose
  policy keeps its name is covered by that policy's comparison. So every decision an agent
  can take is covered once. A policy only one side declares and no agent uses decides no
  agent's calls; it is listed (`policies_added`, `policies_removed`), not compared.

Both sides judge one session. Its terms are solved as related values, never independent ones
(smt_session.py): two windows of one count, `all` and `any` over one list, the provenance terms
of one value — each a function of where the value appeared (a user message, or a text output
field of a tool both specs register; sources.py), read with each side's trust and labels. A
term whose meaning the change touches (a tool trusted, labelled or selected differently) is a
different variable on each side, related where the change allows (a selector that selects more
tools counts at least as many calls), and the tools whose rules read it are compared even when
their own buckets are unchanged. The witness carries where each such value appeared
(`Call.sources`) and the old side's reading of those terms (`Found.old_session`); its session
prelude replays exactly that. A region whose witness the runtime does not decide as claimed is
`verified: false`, never a widening (`Region.widened`).

A skill's calls are judged by its parent's policy and its profile together, the strictest
decision winning (runtime/session/calls.py `judge_call`): each of the two is compared as a policy,
and a region of a profile is where a skill's decisions may change (a stricter parent may still
decide those calls as before); the combination is not compared as such.

A question z3 does not answer within its budget (budget.py) is reported in `undecided`, with
its tool, never taken as "no change".
"""

from __future__ import annotations

import functools
import gc
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

from harnessc.runtime import model as m

from .budget import budget_key, query_rlimit
from .cache import AnalysisCache
from .compare_solve import (
    NO_RULE,
    REFUSED_NO_AGENT,
    REFUSED_NO_POLICY,
    Found,
    Side,
    ToolAnswers,
    ToolSide,
    Winner,
    identical,
    same_model,
    solve_tool,
    tool_side,
)
from .comparison import (
    Comparison,
    Outcome,
    Region,
    UndecidedRegion,
    approver_text,
    call_text,
    call_to_dict,
    expires_text,
    grant_text,
    self_approval_text,
)
from .concrete import Call, decide, schema_problems
from .sources import fed_facts

if TYPE_CHECKING:
    from .prelude import Prelude

__all__ = [
    "Comparison",
    "Outcome",
    "Region",
    "UndecidedRegion",
    "call_text",
    "call_to_dict",
    "compare_policies",
    "compare_specs",
    "runtime_call",
    "runtime_outcome",
]

# ---------------------------------------------------------------------------------------------
# Witnesses: re-judged the plain way, then decided by the runtime under both specs


def runtime_outcome(decision: Any) -> tuple[Any, ...]:
    """A runtime `Decision` as an `Outcome.key`: what makes two decisions the same."""
    if decision.effect != "ask":
        return (decision.effect,)
    return (
        decision.effect,
        tuple(approver_text(a) for a in decision.approvers),
        grant_text(decision.grant),
        expires_text(decision.expires_ms),
        self_approval_text(decision.requester_may_approve),
    )


class _Runtime:
    """The runtime's engines of both specs, and calls judged by them.

    A decision reads nothing of the registry but the called tool's entry (the policy's rules
    and default, the tool's view, the facts), so the witnesses of a run are decided by engines
    made over each spec narrowed to the tools they call (`narrow`), made once — what keeps one
    changed rule of a 5,000-tool spec from compiling every tool's decider twice. A witness
    with session state is decided over the whole spec: its history terms select other tools.
    """

    def __init__(self) -> None:
        self.engines: dict[tuple[int, bool], Any] = {}
        self.tools: set[str] = set()
        """The tools the witnesses without session state call (`narrow`)."""

    def narrow(self, tools: Iterable[str]) -> None:
        self.tools = set(tools)
        self.engines = {k: v for k, v in self.engines.items() if k[1]}

    def engine(self, spec: m.Spec, whole: bool) -> Any:
        from harnessc.runtime.judge.policy import PolicyEngine

        found = self.engines.get((id(spec), whole))
        if found is None:
            narrowed = spec
            if not whole:
                tools = {t: spec.tools[t] for t in sorted(self.tools) if t in spec.tools}
                narrowed = spec.model_copy(update={"tools": tools})
            found = self.engines[(id(spec), whole)] = (spec, PolicyEngine(narrowed))
        return found[1]

    def decide(self, side: Side, call: Call, steps: Sequence[m.SessionStep]) -> Any:
        """The runtime's decision of the call on this side (a refusal without a policy)."""
        from harnessc.runtime.judge.policy import Decision

        if side.policy is None:
            return Decision.denied(side.refusal or NO_RULE, policy="", tool_id=call.tool)
        engine = self.engine(side.spec, whole=bool(steps) or call.tool not in self.tools)
        return engine.decide(side.policy.name, runtime_call(side.spec, call, steps))


def runtime_call(spec: m.Spec, call: Call, steps: Sequence[m.SessionStep] = ()) -> Any:
    """The witness as the runtime's `CallContext` (schema defaults filled in as normalize
    does; `steps`, the session before it, replayed into a ledger, and the facts as their
    `on_success` leaves them)."""
    from harnessc.runtime.judge.history import facts_after, prelude_ledger
    from harnessc.runtime.judge.policy import CallContext

    args = dict(call.args)
    tool = spec.tools.get(call.tool)
    if tool is not None:
        for f in tool.input.fields:
            if f.name not in args and f.default is not None:
                args[f.name] = f.default
    execution = dict(call.execution)
    tool_call_id = execution.get("tool_call_id")
    extra: dict[str, Any] = {}
    if steps or call.sources:
        ledger = prelude_ledger(spec, steps, int(time.time() * 1000), call.facts)
        # the session's facts are sources too (trusted), as a session opened with them
        ledger.facts(call.facts, position=0)
        extra["ledger"] = ledger
    return CallContext(
        tool_id=call.tool,
        args=args,
        actor=dict(call.actor),
        resource=dict(call.resource),
        task=dict(call.task),
        env=dict(call.env),
        facts=facts_after(spec, steps, call.facts),
        connected=frozenset(k for k, v in call.connections.items() if v),
        running=frozenset(k for k, v in call.runtimes.items() if v),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        execution=execution,
        **extra,
    )


def _copy(call: Call) -> Call:
    return Call(**json.loads(json.dumps(asdict(call))))


class _Comparer:
    def __init__(self, cache: AnalysisCache | None, verify: bool) -> None:
        self.cache = cache if cache is not None else AnalysisCache()
        self.verify = verify
        self.runtime = _Runtime()
        self.pending: list[tuple[Region, ToolSide, ToolSide]] = []
        self.rlimit = query_rlimit()
        self.budget = budget_key()

    def compare(
        self, out: Comparison, subject: str, old: Side, new: Side, tool_ids: Iterable[str]
    ) -> None:
        out.subjects.append(subject)
        for tool_id in tool_ids:
            a, b = tool_side(old, tool_id), tool_side(new, tool_id)
            if a.tool is None and b.tool is None:
                continue
            if a.tool is None and tool_id not in out.tools_added:
                out.tools_added.append(tool_id)
            if b.tool is None and tool_id not in out.tools_removed:
                out.tools_removed.append(tool_id)
            if identical(a, b):
                if tool_id not in out.tools_skipped:
                    out.tools_skipped.append(tool_id)
                continue
            if tool_id not in out.tools_compared:
                out.tools_compared.append(tool_id)
            if (
                a.tool is not None
                and b.tool is not None
                and not same_model(a.tool.input, b.tool.input)
                and tool_id not in out.schema_changed
            ):
                out.schema_changed.append(tool_id)
            answers = self.answers(out, a, b)
            names_a = {w.name: w for w in a.winners}
            names_b = {w.name: w for w in b.winners}
            for found in answers.found:
                out.regions.append(
                    self.region(
                        subject, tool_id, a, b, names_a[found.old], names_b[found.new], found
                    )
                )
            for ua, ub, reason in answers.undecided:
                out.undecided.append(
                    UndecidedRegion(
                        tool_id,
                        subject,
                        names_a[ua].outcome.label if ua is not None else None,
                        names_b[ub].outcome.label if ub is not None else None,
                        reason,
                    )
                )

    def answers(self, out: Comparison, a: ToolSide, b: ToolSide) -> ToolAnswers:
        key = f"compare\n{self.budget}\n{a.key}\n{b.key}"
        text = self.cache.read(key)
        if text is not None:
            try:
                found = ToolAnswers.from_json(text)
                out.cache_hits += 1
                return found
            except (ValueError, KeyError, TypeError):
                pass
        solved = solve_tool(a, b, self.rlimit)
        out.queries += solved.queries
        self.cache.write(key, solved.to_json(), keep=not solved.out_of_time)
        return solved

    def region(
        self,
        subject: str,
        tool_id: str,
        a: ToolSide,
        b: ToolSide,
        wa: Winner,
        wb: Winner,
        found: Found,
    ) -> Region:
        call = _copy(found.call)
        call.tool = tool_id
        region = Region(
            tool_id,
            subject,
            a.side.policy.name if a.side.policy is not None else None,
            b.side.policy.name if b.side.policy is not None else None,
            wa.outcome,
            wb.outcome,
            call,
            exact=not found.inexact,
            old_reading=dict(found.old_session),
        )
        for which, side, w in (("old", a, wa), ("new", b, wb)):
            self.rejudge(region, which, side, w, found.old_session if which == "old" else {})
        if self.verify:
            self.pending.append((region, a, b))
        return region

    def finish(self) -> None:
        """Decide every region's witness with the runtime (`run`), with engines made once."""
        pending, self.pending = self.pending, []
        self.runtime.narrow(r.witness.tool for r, _, _ in pending if not r.witness.session)
        for region, a, b in pending:
            self.run(region, a, b)

    @staticmethod
    def rejudge(
        region: Region, which: str, side: ToolSide, w: Winner, reading: dict[str, Any]
    ) -> None:
        """The witness judged the plain way (concrete.py) on one side: its winner must be the
        region's; a call that breaks the side's schema is noted. `reading`: the session terms
        this side reads otherwise than the new one (a tool trusted or labelled differently)."""
        policy = side.side.policy
        if side.tool is None or policy is None:
            return
        bucket = policy.model_copy(update={"rules": tuple(side.rules)})
        call = region.witness
        facts = fed_facts(side.side.spec, call)  # what earlier calls' `on_success` added
        if reading or facts != call.facts:
            call = _copy(call)
            call.session = {**call.session, **reading}
            call.facts = facts
        actual = decide(side.side.spec, bucket, call)
        if actual.rule != w.outcome.rule or actual.effect != w.outcome.effect:
            region.exact = False
            region.notes.append(
                f"re-judged, the {which} side decides the call `{actual.effect}` by "
                f"`{actual.rule or 'the default'}`"
            )
        problems = schema_problems(side.side.spec, region.witness)
        if problems:
            region.exact = False
            region.notes += [f"{which} schema: {p}" for p in problems]

    def run(self, region: Region, a: ToolSide, b: ToolSide) -> None:
        """Decide the witness with the runtime under both specs (`verified`), after each
        session `witness_preludes` gives in turn until one flips the call as the region says."""
        steps: list[m.SessionStep] = []
        if region.witness.session or any(region.witness.sources.values()):
            new_spec = (b if b.tool is not None else a).side.spec
            old_spec = a.side.spec if a.tool is not None else None
            preludes = witness_preludes(old_spec, new_spec, region.witness, region.old_reading)
            prelude = next(preludes)
            if prelude.missing is not None:
                region.notes.append(f"not run: no session gives its state ({prelude.missing})")
                return
            for found in (prelude, *preludes):
                if found.missing is not None:
                    continue
                witness = region.witness
                if found.args is not None:  # a text given the items a quantifier needs
                    witness = _copy(region.witness)
                    witness.args = found.args
                old = runtime_outcome(self.runtime.decide(a.side, witness, found.steps))
                new = runtime_outcome(self.runtime.decide(b.side, witness, found.steps))
                steps, region.witness = found.steps, witness
                if old != new and old == region.old.key() and new == region.new.key():
                    break
        else:
            old = runtime_outcome(self.runtime.decide(a.side, region.witness, steps))
            new = runtime_outcome(self.runtime.decide(b.side, region.witness, steps))
        region.verified = old != new and old == region.old.key() and new == region.new.key()
        if not region.verified:
            region.notes.append(
                f"the runtime decides it {_key_text(old)} under the old spec and "
                f"{_key_text(new)} under the new one"
            )
        elif steps:
            for which, side, w in (("old", a, region.old), ("new", b, region.new)):
                self.reference(region, which, side, w, steps)

    @staticmethod
    def reference(
        region: Region, which: str, side: ToolSide, outcome: Outcome, steps: list[m.SessionStep]
    ) -> None:
        """The reference evaluator (concrete.py) on one side, over the session state the
        prelude's steps give there: it must decide the witness as the region says."""
        from .prelude import session_of

        policy = side.side.policy
        if side.tool is None or policy is None:
            return
        from harnessc.runtime.judge.history import facts_after

        call = _copy(region.witness)
        call.session = session_of(side.side.spec, region.witness, steps)
        call.facts = facts_after(side.side.spec, steps, call.facts)  # what `on_success` added
        actual = decide(side.side.spec, policy, call)
        if actual.effect != outcome.effect or actual.rule != outcome.rule:
            region.verified = False
            region.notes.append(
                f"after its session, the reference evaluator decides it `{actual.effect}` by "
                f"`{actual.rule or 'the default'}` under the {which} spec"
            )


_runtime_outcome = runtime_outcome  # the name harnessc diff's first version imports


def witness_preludes(
    old: m.Spec | None, new: m.Spec, witness: Call, old_reading: dict[str, Any]
) -> Iterator[Prelude]:
    """The sessions a region's witness is decided after, in the order to try them: the
    prelude of the new spec's reading of its terms; then, when the old side reads some terms
    otherwise (`old_reading`: a label or a trust changed), the prelude of the old side's
    reading on the old spec (an earlier result that carries a label only under the old spec
    makes `seen` true there and false here). The runtime's check and the tests both try
    them in this order."""
    from .prelude import session_prelude

    yield session_prelude(new, witness)
    if old is not None and old_reading:
        reading = _copy(witness)
        reading.session = {**witness.session, **old_reading}
        yield session_prelude(old, reading)


def _key_text(key: tuple[Any, ...]) -> str:
    if len(key) == 1:
        return str(key[0])
    text = f"{key[0]} ({', '.join(key[1]) or 'no approver'}; grant {key[2] or 'default'}"
    text += f"; expires {key[3]}" if key[3] else ""
    return text + f"; self-approval {key[4]})"


# ---------------------------------------------------------------------------------------------
# The entry points


_F = TypeVar("_F", bound=Callable[..., Any])


def _collector_paused(fn: _F) -> _F:
    """Run `fn` with the cyclic garbage collector off, as the compiler's pipeline runs: a
    comparison makes many small objects beside two whole specs, which the collector's full
    passes would rescan again and again (a third of the time at 5,000 tools)."""

    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return paused  # type: ignore[return-value]


def _policy(spec: m.Spec, policy: m.Policy | str | None) -> m.Policy | None:
    if policy is None or isinstance(policy, m.Policy):
        return policy
    found = spec.policy(policy)
    if found is None:
        raise KeyError(f"the spec declares no policy `{policy}`")
    return found


@_collector_paused
def compare_policies(
    old_spec: m.Spec,
    old_policy: m.Policy | str | None,
    new_spec: m.Spec,
    new_policy: m.Policy | str | None,
    tools: Iterable[str] | None = None,
    *,
    subject: str | None = None,
    cache: AnalysisCache | None = None,
    verify: bool = True,
) -> Comparison:
    """The regions of calls that `old_policy` under `old_spec` and `new_policy` under
    `new_spec` decide differently (module docstring).

    A policy is a `Policy` or a name; None means no policy judges: every call is refused
    ("no rule allows this call"). `tools`: the tool ids to compare (default: every tool
    either spec registers). `verify=False` skips deciding witnesses with the runtime.
    """
    started = time.perf_counter()
    a, b = _policy(old_spec, old_policy), _policy(new_spec, new_policy)
    if subject is None:
        names = {p.name for p in (a, b) if p is not None}
        subject = "policy " + " → ".join(sorted(names)) if names else "no policy"
    out = Comparison()
    ids = sorted(set(old_spec.tools) | set(new_spec.tools)) if tools is None else list(tools)
    comparer = _Comparer(cache, verify)
    comparer.compare(
        out,
        subject,
        Side(old_spec, a, None if a is not None else NO_RULE),
        Side(new_spec, b, None if b is not None else NO_RULE),
        ids,
    )
    comparer.finish()
    out.seconds = time.perf_counter() - started
    return out


def _agent_side(spec: m.Spec, name: str) -> Side:
    agent = spec.agents.get(name)
    if agent is None:
        return Side(spec, None, REFUSED_NO_AGENT.format(agent=name))
    if not agent.policy:
        return Side(spec, None, REFUSED_NO_POLICY.format(agent=name))
    return Side(spec, spec.policy(agent.policy), REFUSED_NO_POLICY.format(agent=name))


@_collector_paused
def compare_specs(
    old_spec: m.Spec,
    new_spec: m.Spec,
    *,
    cache: AnalysisCache | None = None,
    verify: bool = True,
) -> Comparison:
    """Every policy both specs declare, and every agent whose policy changed (module
    docstring): the regions of calls decided differently, over every tool either registers."""
    started = time.perf_counter()
    out = Comparison()
    comparer = _Comparer(cache, verify)
    ids = sorted(set(old_spec.tools) | set(new_spec.tools))
    for name in sorted(set(old_spec.policies) & set(new_spec.policies)):
        comparer.compare(
            out,
            f"policy {name}",
            Side(old_spec, old_spec.policies[name]),
            Side(new_spec, new_spec.policies[name]),
            ids,
        )
    out.policies_added = sorted(set(new_spec.policies) - set(old_spec.policies))
    out.policies_removed = sorted(set(old_spec.policies) - set(new_spec.policies))
    for name in sorted(set(old_spec.agents) | set(new_spec.agents)):
        a, b = _agent_side(old_spec, name), _agent_side(new_spec, name)
        same_policy = (
            a.policy is not None and b.policy is not None and a.policy.name == b.policy.name
        )
        if same_policy or (a.policy is None and b.policy is None and a.refusal == b.refusal):
            continue  # covered by the policy's comparison, or refused alike
        comparer.compare(out, f"agent {name}", a, b, ids)
    comparer.finish()
    out.seconds = time.perf_counter() - started
    return out
