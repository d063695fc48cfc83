"""A scripted planner for the example applications: it plays tool calls through a generated harness.

There is no model in the examples, so each application lists the calls a model might make and
plays them with `Script.turn`. For every call the transcript shows what the harness did: the
tools exposed this turn (all of them, or ranked with scores and the cut), the decision and why
(rule, spec file:line, reason), the approval asked and who answered it, the result and the
evidence. Every turn states what the script expects; the first turn that behaves otherwise
raises `ScriptError`, and `main` turns it into exit status 1.

This module imports only `harnessc.runtime` (never the compiler): an application embeds the
package `harnessc build` generated, nothing else.

    script = Script(h)
    s = h.session("planner", actor=..., facts=..., session_id=script.session_id("planner"))
    script.turn(s, "Open the change request", "change.create", {...}, expect="allow")
    return script.finish()
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessc.runtime import (
    ApprovalError,
    ApprovalOutcome,
    ApprovalRequest,
    AvailabilityRefusal,
    Decision,
    Execution,
    Exposure,
    Harness,
    PendingCall,
    Refusal,
    Result,
    Session,
)

__all__ = [
    "Answer",
    "Script",
    "ScriptError",
    "Turn",
    "approve",
    "deny",
    "harnessc_command",
    "load_package",
    "main",
]

WIDTH = 100
LABEL = 13  # the width of the label column ("decision", "approval", …)
REPO = Path(__file__).resolve().parent.parent


class ScriptError(AssertionError):
    """A turn did not behave as the script expects."""


@dataclass(frozen=True)
class Answer:
    """How a person answers an ASK in the script: approve, or deny with a reason."""

    by: Mapping[str, Any]
    approve: bool
    says: str | None = None
    reason: str | None = None


def approve(by: Mapping[str, Any], says: str | None = None) -> Answer:
    """The person `by` approves (optionally saying `says`, shown in the transcript)."""
    return Answer(by, True, says)


def deny(by: Mapping[str, Any], reason: str) -> Answer:
    """The person `by` denies, with a reason (recorded as a task fact)."""
    return Answer(by, False, None, reason)


@dataclass
class Turn:
    """One scripted call and everything the harness returned for it."""

    number: int
    tool: str
    tool_call_id: str
    pending: PendingCall | None = None
    refusal: Refusal | None = None
    decision: Decision | None = None
    request: ApprovalRequest | None = None
    outcome: ApprovalOutcome | None = None
    result: Result | None = None
    exposure: Exposure | None = None
    session: Session | None = field(default=None, repr=False)


class Script:
    """Plays scripted turns through a harness and prints the transcript."""

    def __init__(
        self,
        h: Harness,
        *,
        prefix: str,
        out: Callable[[str], None] = print,
        person: Callable[[Turn], tuple[ApprovalOutcome, str]] | None = None,
    ) -> None:
        self.h = h
        self.out = out
        self.person = person
        """Who answers an ASK instead of the scripted answer (`app.py --console`: a person in
        the operations console); it returns what they decided (an edited call included) and
        who they are."""
        self.turns = 0
        self.calls = 0
        # Sessions and calls get readable ids; the run number keeps them unique when a run
        # appends to an event log that earlier runs wrote (one more than the runs it holds).
        earlier = re.compile(rf"{re.escape(prefix)}-(\d+)-")
        self.run = 1 + max(
            (int(m.group(1)) for sid in h.projections.sessions if (m := earlier.match(sid))),
            default=0,
        )
        self.prefix = f"{prefix}-{self.run}"

    # -- ids ---------------------------------------------------------------------------------------

    def session_id(self, name: str) -> str:
        """A deterministic session id for this run (`rem-1-planner`)."""
        return f"{self.prefix}-{name}"

    def next_call_id(self) -> str:
        self.calls += 1
        return f"call-{self.calls:02d}"

    # -- printing ----------------------------------------------------------------------------------

    def title(self, text: str, lines: Sequence[str] = ()) -> None:
        self.out("=" * WIDTH)
        self.out(text)
        for line in lines:
            self.out(line)
        self.out("=" * WIDTH)

    def section(self, text: str, note: str | None = None) -> None:
        self.out("")
        self.out(f"## {text}")
        if note:
            for line in textwrap.wrap(note, WIDTH - 3):
                self.out(f"   {line}")

    def line(self, label: str, text: str = "", *more: str) -> None:
        """A labelled line of the current turn, wrapped; `more` are further lines."""
        first = True
        for chunk in (text, *more):
            wrapped = textwrap.wrap(
                chunk, WIDTH - 3 - LABEL, break_long_words=False, break_on_hyphens=False
            ) or [""]
            for piece in wrapped:
                self.out(f"   {label if first else '':<{LABEL}}{piece}".rstrip())
                first = False

    def note(self, text: str) -> None:
        self.line("", text)

    # -- checks ------------------------------------------------------------------------------------

    def check(self, ok: bool, message: str) -> None:
        """Fail the run (exit 1) with `message` when `ok` is false."""
        if not ok:
            raise ScriptError(f"turn {self.turns}: {message}")

    # -- a turn ------------------------------------------------------------------------------------

    def turn(
        self,
        session: Session,
        says: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        expect: str,
        rule: str | None = None,
        answer: Answer | None = None,
        execution: Execution | None = None,
        packs: Sequence[str] = (),
        replacement: str | None = None,
        expose: bool = True,
        tool_call_id: str | None = None,
    ) -> Turn:
        """Play one call: expose, normalize, decide, ask, answer, invoke, show the evidence.

        `expect` is the decision (`allow`, `ask`, `deny`) or a refusal (`refused:legacy-tool`);
        `rule`, when given, is the winning rule's label; `replacement` the refusal's. An ASK is
        answered by `answer`; without one the call must not run. An ASK that a grant already
        authorises (a `task` grant given earlier) runs without asking again.
        """
        self.turns += 1
        call_id = tool_call_id or self.next_call_id()
        turn = Turn(self.turns, tool, call_id, session=session)
        self.out("")
        self.out(f"[{self.turns}] {says}")
        who = session.agent.name.split(".")[-1]
        if session.skill_name:
            who += f" in skill {session.skill_name.split('.')[-1]}"
        elif session.parent is not None:
            who += " (delegated)"
        self.line("call", f"{who} → {_call_text(tool, args, execution)}   [{call_id}]")
        if expose:
            turn.exposure = session.expose(says, packs=packs)
        result = session.normalize(tool, call_id, args, execution=execution)
        if turn.exposure is not None:
            # by tool id: the model may have used the wire name
            self._show_exposure(turn.exposure, getattr(result, "tool_id", tool))
        if isinstance(result, Refusal):
            turn.refusal = result
            text = f"REFUSED ({result.code}): {result.message}"
            named = result.replacement and f"`{result.replacement}`" in result.message
            more = [f"instead: {result.replacement}"] if result.replacement and not named else []
            if isinstance(result, AvailabilityRefusal):
                more.extend(f"failed: {condition}" for condition, _ in result.conditions)
            self.line("normalize", text, *more)
            self.check(
                expect == f"refused:{result.code}",
                f"`{tool}` was refused ({result.code}: {result.message}), expected {expect}",
            )
            if replacement is not None:
                self.check(
                    result.replacement == replacement,
                    f"the refusal names `{result.replacement}`, expected `{replacement}`",
                )
            return turn
        turn.pending = result
        self.check(not expect.startswith("refused:"), f"`{tool}` was accepted, expected {expect}")
        turn.decision = session.decide(result)
        self._show_decision(turn.decision)
        self.check(
            turn.decision.effect == expect,
            f"`{tool}` was decided {turn.decision.effect.upper()} "
            f"({turn.decision.rule or 'the default'}), expected {expect.upper()}",
        )
        if rule is not None:
            self.check(
                turn.decision.rule == rule,
                f"`{tool}` was decided by `{turn.decision.rule or 'the default'}`, expected "
                f"`{rule}`",
            )
        if turn.decision.effect == "ask":
            _, grant = session.judge(result)
            if grant is not None:
                self.line(
                    "approval",
                    f"not asked again: the {grant.scope} grant {grant.grant_id} given by "
                    f"{grant.by} ({grant.rule}) covers this call",
                )
            else:
                turn.request = session.request_approval(result, turn.decision)
                self._show_request(turn.request)
                if answer is not None:
                    self.answer(turn, answer, invoke=False)
        self._invoke(turn)
        return turn

    def answer(self, turn: Turn, answer: Answer, *, invoke: bool = True) -> ApprovalOutcome:
        """Answer the turn's approval request, then (by default) invoke the call again."""
        assert turn.request is not None and turn.pending is not None
        self.check(turn.outcome is None, f"the request for `{turn.tool}` was already answered")
        if self.person is not None:
            return self._answered_by_person(turn, invoke=invoke)
        who = _who(answer.by)
        if answer.says:
            self.line("person", f"{who}: “{answer.says}”")
        if answer.approve:
            outcome = self.h.approve(turn.request.request_id, by=answer.by)
            grant = outcome.grant
            text = f"APPROVED by {who}"
            if grant is not None:
                text += f": grant {grant.grant_id} ({grant.scope}"
                if grant.scope == "once":
                    bound = f"{grant.tool_id} {grant.tool_call_id} {_short_hash(grant.input_hash)}"
                    text += f", bound to {bound}"
                text += f", until {grant.expires_at:%H:%M:%S})"
            elif outcome.status != "approved":
                text = f"NOT APPROVED ({outcome.status}): {outcome.reason}"
            self.line("answer", text)
            self.check(outcome.status == "approved", f"the approval ended `{outcome.status}`")
        else:
            outcome = self.h.deny(turn.request.request_id, by=answer.by, reason=answer.reason or "")
            self.line("answer", f"DENIED by {who}: {answer.reason}")
        turn.outcome = outcome
        if invoke:
            self._invoke(turn)
        return outcome

    def _answered_by_person(self, turn: Turn, *, invoke: bool) -> ApprovalOutcome:
        """What the person decided (approve, approve with edits, deny), shown; an edited call
        replaces the turn's call, and is the one invoked."""
        assert self.person is not None and turn.pending is not None
        outcome, who = self.person(turn)
        if outcome.status == "approved":
            text = f"APPROVED by {who}"
            grant = outcome.grant
            if grant is not None:
                text += (
                    f": grant {grant.grant_id} ({grant.scope}, until {grant.expires_at:%H:%M:%S})"
                )
            lines = []
            if outcome.call is not None:
                before, after = turn.pending.args, outcome.call.args
                changed = [
                    f"{k}: {json.dumps(before.get(k))} → {json.dumps(after.get(k))}"
                    for k in sorted({*before, *after})
                    if before.get(k) != after.get(k)
                ]
                lines.append("with edits: " + "; ".join(changed))
                lines.append(
                    f"the call {turn.pending.tool_call_id} "
                    f"{_short_hash(turn.pending.input_hash)} is superseded by "
                    f"{_short_hash(outcome.call.input_hash)}: the agent runs the edited call"
                )
                turn.pending = outcome.call
            self.line("answer", text, *lines)
        else:
            self.line("answer", f"{outcome.status.upper()} by {who}: {outcome.reason}")
        turn.outcome = outcome
        if invoke:
            self._invoke(turn)
        return outcome

    def try_answer(self, turn: Turn, answer: Answer) -> ApprovalError | None:
        """An answer the harness must refuse (someone who is not an approver)."""
        assert turn.request is not None
        who = _who(answer.by)
        if answer.says:
            self.line("person", f"{who}: “{answer.says}”")
        try:
            self.h.approve(turn.request.request_id, by=answer.by)
        except ApprovalError as exc:
            self.line("answer", f"REFUSED ({exc.code}): {exc.message}")
            self.check(exc.code == "not-an-approver", f"the approval failed with `{exc.code}`")
            return exc
        self.check(False, f"{who} was able to approve `{turn.tool}`")
        return None

    # -- delegation and skills ---------------------------------------------------------------------

    def delegate(self, session: Session, says: str, goal: str, agent: str) -> Session:
        """The planner delegates `goal` to `agent`: the child session (`rem-1-generic`), its
        surface shown."""
        self.out("")
        self.out(f"[·] {says}")
        child = session.delegate(goal, agent=agent, session_id=self.session_id(_short(agent)))
        if isinstance(child, Refusal):
            raise ScriptError(f"the delegation to `{agent}` was refused: {child.message}")
        self.line("delegate", f"“{goal}” → {child.agent.name} in session {child.id}")
        self.line("surface", ", ".join(child.surface))
        self.check("delegate_task" not in child.surface, "the child's surface has delegate_task")
        self.line("", "no delegate_task on it: delegation is one level deep")
        return child

    def refuse_delegation(self, session: Session, says: str, goal: str) -> Refusal:
        """A delegation the harness must refuse (from a child or a skill session)."""
        self.out("")
        self.out(f"[·] {says}")
        refused = session.delegate(goal)
        if not isinstance(refused, Refusal):
            raise ScriptError(f"session {session.id} delegated, but delegation is one level deep")
        self.line("refused", f"({refused.code}) {refused.message}")
        return refused

    def skill(self, session: Session, says: str, name: str) -> Session:
        """Open a session of the skill `name`: its surface is its private tools."""
        self.out("")
        self.out(f"[·] {says}")
        opened = session.skill(name, session_id=self.session_id(_short(name)))
        if isinstance(opened, Refusal):
            raise ScriptError(f"the skill `{name}` was refused: {opened.message}")
        self.line("skill", f"{name} in session {opened.id}, judged by {', '.join(opened.policies)}")
        self.line("surface", ", ".join(opened.surface))
        return opened

    # -- invoke and evidence -----------------------------------------------------------------------

    def _invoke(self, turn: Turn) -> None:
        session, pending, decision = turn.session, turn.pending, turn.decision
        assert session is not None and pending is not None and decision is not None
        # judged before the call: a `once` grant is spent by the call it authorises
        authorised = decision.effect == "allow" or (
            decision.effect == "ask" and session.judge(pending)[1] is not None
        )
        result = session.invoke(pending)
        turn.result = result
        if result.ran:
            data = json.dumps(_plain(result.data), ensure_ascii=False) if result.data else ""
            self.line("result", f"{result.status.upper()} {data}".rstrip())
        else:
            self.line("result", f"NOT RUN ({result.error_category}): {result.error}")
        if decision.effect == "deny" and decision.instead:
            self.line("instead", decision.instead)
        if authorised:
            self.check(
                result.ran and result.status == "success",
                f"`{turn.tool}` should have run: {result.error or result.status}",
            )
        else:
            self.check(not result.ran, f"`{turn.tool}` ran without authorisation")
        item = next(
            (
                i
                for i in session.evidence().items
                # the call that ran (an edited call shares its tool_call_id with the original)
                if i.tool_call_id == pending.tool_call_id
                and i.input_hash == pending.input_hash
                and i.session_id == session.id
            ),
            None,
        )
        if item is not None:
            self.line("evidence", f"[{item.state}] {item.proves}")

    # -- exposure ----------------------------------------------------------------------------------

    def _show_exposure(self, exposure: Exposure, tool: str) -> None:
        trace = exposure.trace
        exposed = exposure.tools
        where = _position(exposure, tool)
        if trace.rule == "all":
            text = (
                f"all {len(exposed)} available of {trace.public} public tools "
                f"({len(exposed)} ≤ limit {trace.limit}: nothing ranked); {where}"
            )
            self.line("exposure", text)
        else:
            how = f"ranked by {trace.recall} recall, {trace.rerank} rerank"
            top = " · ".join(
                f"{c.tool} {c.score:+.2f}" for c in trace.candidates[:5] if c.score is not None
            )
            lines = [f"top: {top}"]
            if trace.cut is not None and trace.cut.first_excluded is not None:
                lines.append(
                    f"cut: #{trace.cut.limit} {trace.cut.last_exposed} "
                    f"{trace.cut.last_score:+.2f} | first left out: "
                    f"{trace.cut.first_excluded} {trace.cut.first_excluded_score or 0.0:+.2f}"
                )
            lines.extend(f"note: {n}" for n in trace.notes)
            self.line(
                "exposure",
                f"{len(exposed)} of {trace.available} available ({trace.public} public, limit "
                f"{trace.limit}), {how}; {where}",
                *lines,
            )
        if trace.unavailable:
            # the reasons are shown by `show_exposure` and `availability`; here only the names
            self.line("", "unavailable: " + ", ".join(sorted(trace.unavailable)))

    def show_exposure(self, session: Session, query: str, *, packs: Sequence[str] = ()) -> Exposure:
        """An exposure on its own (a planner turn that only looks at its tools)."""
        exposure = session.expose(query, packs=packs)
        self.out("")
        self.out(f"[·] exposure for “{query}”" + (f", packs {', '.join(packs)}" if packs else ""))
        trace = exposure.trace
        if trace.rule == "all":
            self.line(
                "rule",
                f"all: {len(exposure.tools)} available ≤ limit {trace.limit}, nothing ranked",
            )
            self.line("exposed", ", ".join(exposure.tools))
        else:
            self.line(
                "rule",
                f"ranked: {trace.available} available > limit {trace.limit}; recall "
                f"{trace.recall} ({trace.recalled} rows), rerank {trace.rerank}",
                *(f"note: {n}" for n in trace.notes),
            )
            for c in trace.candidates:
                if c.position <= 5 or trace.limit - 1 <= c.position <= trace.limit + 2:
                    mark = "exposed " if c.exposed else "left out"
                    boost = f" (pack boost {c.boost:+.2f})" if c.boost else ""
                    self.line(
                        f"#{c.position}",
                        f"{mark} {c.tool:<32} score {c.score or 0.0:+.3f}  lexical "
                        f"{c.lexical or 0.0:.3f}{boost}",
                    )
                elif c.position == 6:
                    self.line("…")
            if trace.cut is not None:
                self.line(
                    "cut",
                    f"after #{trace.cut.limit} {trace.cut.last_exposed}; first left out "
                    f"{trace.cut.first_excluded}",
                )
        for t, why in sorted(trace.unavailable.items()):
            self.line("unavailable", f"{t}: {why}")
        return exposure

    # -- decisions and approvals -------------------------------------------------------------------

    def _show_decision(self, d: Decision) -> None:
        where = f" ({d.origin.file}:{d.origin.line})" if d.origin is not None else ""
        by = d.rule or ("the risk table (default)" if d.default_used else "no rule")
        text = f"{d.effect.upper()} by {by}{where}"
        more = []
        if d.reason:
            more.append(f"why: {d.reason}")
        more.extend(f"evidence: {e}" for e in d.evidence)
        others = [m for m in d.matched if m != d.rule]
        if others:
            more.append("also matched: " + ", ".join(others))
        self.line("decision", text, *more)

    def _show_request(self, req: ApprovalRequest) -> None:
        approvers = ", ".join(f"{a.kind} {a.value}" for a in req.approvers)
        on_what = ", ".join(f"{k}={v}" for k, v in req.on_what.get("resource", {}).items())
        target = req.on_what.get("target")
        impact = (
            f"effects {', '.join(req.impact.get('effects', []))}; risk {req.impact.get('risk')}"
        )
        lines = [
            f"what: {req.what}",
            f"why: {req.why}",
            "as whom: " + ", ".join(f"{k} {v}" for k, v in req.as_whom.items()),
            f"on what: {on_what or '—'}" + (f"; target {target}" if target else ""),
            f"impact: {impact}",
            f"args: {json.dumps(_plain(req.arguments), ensure_ascii=False)}",
        ]
        if req.execution:
            lines.append(f"execution: {json.dumps(_plain(req.execution), ensure_ascii=False)}")
        lines.append(f"reversibility: {req.reversibility}")
        scope = req.scope
        lines.append(
            f"scope: grant {scope.get('grant')} for {_duration(scope.get('ttl_ms'))}: "
            f"{scope.get('covers')}"
        )
        self.line("approval", f"asked of {approvers}", *lines)

    # -- the end -----------------------------------------------------------------------------------

    def finish(self, sessions: Sequence[Session], store: str) -> int:
        """End the sessions, verify the event log and print the summary; the exit status."""
        for session in sessions:
            session.end()
        verification = self.h.verify()
        self.out("")
        self.out("=" * WIDTH)
        self.out(f"{self.turns} turns behaved as scripted")
        status = "verified" if verification.ok else f"BROKEN at {verification.position}"
        self.out(
            f"event log ({store}): {verification.checked} events, hash chain {status}"
            + (f": {verification.reason}" if verification.reason else "")
        )
        return 0 if verification.ok else 1


# ---------------------------------------------------------------------------------------------
# The command line shared by the example applications


def load_package(package_dir: Path, name: str) -> Any:
    """Import the generated package `name` from the folder `harnessc build -o` wrote."""
    if not (package_dir / name / "__init__.py").is_file():
        raise FileNotFoundError(f"no generated package `{name}` in {package_dir}")
    sys.path.insert(0, str(package_dir))
    return importlib.import_module(name)


def harnessc_command() -> str:
    """The `harnessc` command beside this Python, else on PATH."""
    beside = Path(sys.executable).with_name("harnessc")
    if beside.is_file():
        return str(beside)
    found = shutil.which("harnessc")
    if found is None:
        raise FileNotFoundError("`harnessc` is not installed: run scripts/setup.sh")
    return found


def build(spec: str, package_dir: Path) -> None:
    """Build `spec` (relative to the repository) into `package_dir` with the harnessc command."""
    cmd = [harnessc_command(), "build", spec, "-o", str(package_dir)]
    # run from the repository so that decisions name the spec as `examples/…:LINE`
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(done.returncode)
    print(done.stdout.strip())


def main(
    *,
    example: str,
    spec: str,
    package: str,
    play: Callable[[Any, argparse.Namespace, str], int],
    description: str,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse the command line (`options` adds an application's own), build if asked, load the
    generated package and play the script."""
    default_dir = Path("build") / example
    parser = argparse.ArgumentParser(
        prog=f"examples/{example}/app.py",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "package_dir",
        nargs="?",
        type=Path,
        help=f"the folder `harnessc build -o` wrote (default: {default_dir} in the repository)",
    )
    parser.add_argument(
        "--build", action="store_true", help=f"build {spec} into the folder first (harnessc build)"
    )
    parser.add_argument(
        "--log",
        help="the event log: sqlite:///PATH or memory:// "
        f"(default: a SQLite file beside the package folder, {default_dir}.db)",
    )
    # the name `--log` had before, as harnessc's own commands keep it: hidden, with a warning
    parser.add_argument("--store", dest="log", action=_DeprecatedStore, help=argparse.SUPPRESS)
    parser.add_argument(
        "--embed",
        action="store_true",
        help="rank with the MiniLM query embedder (needs the `embed` extra); lexical otherwise",
    )
    if options is not None:
        options(parser)
    args = parser.parse_args()
    package_dir = args.package_dir if args.package_dir is not None else REPO / default_dir
    package_dir = args.package_dir = package_dir.resolve()
    if args.build:
        build(spec, package_dir)
    try:
        module = load_package(package_dir, package)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(
            f"help: run `python examples/{example}/app.py --build`, or "
            f"`harnessc build {spec} -o {default_dir}` first",
            file=sys.stderr,
        )
        return 2
    store = args.log or "sqlite:///" + str(package_dir.with_suffix(".db"))
    args.store_url = store
    options: dict[str, Any] = {}
    if args.embed:
        from harnessc.runtime.exposure.embedding import load_query_embedder

        options["embedder"] = load_query_embedder()
    else:
        options["embedder"] = None  # lexical ranking: no torch to load for a demo run
    h = module.load(store=store, **options)
    try:
        return play(h, args, _store_name(store))
    except ScriptError as exc:
        print("", flush=True)
        print(f"MISMATCH: {exc}", file=sys.stderr)
        print("the run did not behave as scripted: exit 1", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("", flush=True)
        print(
            "interrupted: the run stopped here; the event log keeps everything recorded so far",
            file=sys.stderr,
        )
        return 130


# ---------------------------------------------------------------------------------------------
# Formatting


def _short(name: str) -> str:
    """A qualified name's last part (`reports.spreadsheet_report` → `spreadsheet_report`)."""
    return name.rsplit(".", 1)[-1]


class _DeprecatedStore(argparse.Action):
    """`--store`, read as `--log` with a warning on standard error."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        sys.stderr.write(f"{parser.prog}: warning: `--store` is deprecated; use `--log`\n")
        setattr(namespace, self.dest, values)


def _store_name(store: str) -> str:
    if store.startswith("sqlite:///"):
        path = Path(store[len("sqlite:///") :])
        try:
            return "SQLite " + str(path.resolve().relative_to(Path.cwd()))
        except ValueError:
            return f"SQLite {path.name}"
    return store


def _who(actor: Mapping[str, Any]) -> str:
    user = actor.get("user")
    role = actor.get("role")
    if user and role:
        return f"{user} ({role})"
    return str(user or f"role {role}")


def _position(exposure: Exposure, tool: str) -> str:
    ids = {c.tool: c for c in exposure.trace.candidates}
    name = tool
    if tool in exposure.tools:
        return f"`{name}` is #{exposure.tools.index(tool) + 1}"
    if tool in ids:
        return (
            f"`{name}` ranked #{ids[tool].position}, not exposed this turn "
            "(ranking is never a permission: the call is still judged)"
        )
    if tool in exposure.trace.unavailable:
        return f"`{name}` is unavailable"
    return f"`{name}` is not exposed"


def _call_text(tool: str, args: Mapping[str, Any] | None, execution: Execution | None) -> str:
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in (args or {}).items())
    text = f"{tool}({shown})"
    if execution is not None:
        parts = {k: v for k, v in execution.as_dict().items() if v is not None}
        text += " with " + ", ".join(f"{k}={v}" for k, v in parts.items())
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _short_hash(value: str | None) -> str:
    return (value or "")[:12] + "…" if value else "—"


def _duration(ms: Any) -> str:
    if not isinstance(ms, int):
        return "?"
    minutes = ms // 60_000
    if minutes % (24 * 60) == 0 and minutes:
        return f"{minutes // (24 * 60)}d"
    if minutes % 60 == 0 and minutes:
        return f"{minutes // 60}h"
    return f"{minutes}m" if minutes else f"{ms // 1000}s"
