"""The session before a witness call: earlier steps that give its session terms their values.

A witness (policy.py) sets each provenance, quantified and history term its rule reads to a
value (`Call.session`). A generated test can only reach that state by replaying a session: user
messages and earlier calls with results (`SessionStep`, the steps of a `test` block's `before`).
`session_prelude` builds those steps:

- `v from user` → the user said `v`; `v from trusted|untrusted` → an earlier call of a tool of
  that trust (per output field where declared) whose result holds `v` in a string field;
  `v from label L` → that call's result carries `L`; `only` → that kind and no other;
  `from nowhere` → no step holds `v` (and `not … from nowhere` → one that does);
- `all/any x in args.l: x from …` → the same, item by item;
- `any h in hosts(args.t): body` (and `all … = false`; `urls`, `emails` alike) → the text
  `args.t` holds an item for which the body holds (fails), one that also keeps every
  quantifier over the same items that needs all of them one way (with a body `h from …`, a
  sample item, given its sources as above); a list argument with a body that reads only the
  item (`r endswith "@a.test"`) gets such an item added. The call's arguments change
  (`Prelude.args`), and the call replayed is the witness with them;
- `called`/`succeeded(sel when c)` → an earlier call of a selected tool meeting `c`, with a
  result (and, when `c` asks where the call's arguments came from, the user messages or
  results before it that make them so); `count(…) = n` → `n` such calls, this call included
  when it is selected;
  `sum(f of …) = s` → one earlier call whose `f` makes up the rest; `seen(L)` → an earlier
  call of a tool producing `L`.

An earlier call's arguments are solved from `c` (and the amount `f` must add) as a rule's
witness call is (solve.py `a_call_meeting`), else an example call's; a call that would give
another history term of the witness more than it needs (`called(…)` that must be false) gives
way to one that does not.

A step happens now (within every window) unless terms that differ only in their window need
more within a wider window than within a narrower one: the terms are met narrowest window
first, each adding only what the steps so far leave it short of, and a step a wider window
needs is placed between the narrower window and its own (`ago_ms`). The steps are then
replayed here by a small model of the ledger (whole values, whole fields, as the runtime
indexes them at the least) and every term is re-evaluated: a prelude that does not give each
term its value is not returned. When none can be built, `Prelude.missing` says why, and the
case is skipped with that reason: a prelude is never made up.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.judge.history import facts_changed, result_labels
from harnessc.runtime.judge.provenance import (
    Source,
    arg_name,
    extract,
    fields_of,
    keys_at,
    line_totals,
    normalize,
    spec_defaults,
    with_default,
)
from harnessc.runtime.judge.provenance import scalars as _result_scalars
from harnessc.runtime.model.semantics import selects
from pydantic import BaseModel

from .assemble import sample_value
from .budget import query_rlimit
from .concrete import (
    ABSENT,
    Call,
    canonical,
    holds_for,
    read_value,
    session_terms,
    visit_nodes,
)
from .solve import a_call_meeting
from .sources import FACTS, USER, call_of, holding_result, item_of, output_text_paths
from .text import spec_text, term_of, value_text

__all__ = ["Prelude", "session_of", "session_prelude"]

_KINDS = ("untrusted", "user", "trusted")
"""Which source a value that must come from somewhere comes from, in order of preference."""
_TEXT_TYPES = ("string", "url", "path")


@dataclass
class Prelude:
    """The steps before the call (in order), or why none could be built (`missing`)."""

    steps: list[m.SessionStep] = field(default_factory=list)
    missing: str | None = None
    args: dict[str, Any] | None = None
    """The call's arguments when the prelude gave a text of the call the items a quantifier
    over `hosts(…)`, `urls(…)` or `emails(…)` needs: the call to replay has them. None: the
    witness's own."""

    def to_json(self) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json", exclude_defaults=True) for s in self.steps]


class _Missing(Exception):
    """No prelude: the message says why."""


@dataclass
class _Wants:
    """What the prelude must do with one value of the call."""

    need: set[str] = field(default_factory=set)
    forbid: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)
    no_labels: set[str] = field(default_factory=set)
    not_only: set[str] = field(default_factory=set)
    somewhere: bool = False


def session_prelude(spec: m.Spec, call: Call) -> Prelude:
    """The steps that give the witness call's session terms their values (see the module)."""
    if not call.session and not any(call.sources.values()):
        return Prelude()
    builder = _Builder(spec, call)
    try:
        steps = builder.build()
        return Prelude(steps, args=builder.call.args if builder.call is not call else None)
    except _Missing as why:
        return Prelude(missing=str(why))


def session_of(spec: m.Spec, call: Call, steps: Iterable[m.SessionStep]) -> dict[str, Any]:
    """The value of each of the call's session terms after `steps`, as `spec` reads them (the
    prelude's model of the ledger): what the reference evaluator (concrete.py) needs to judge
    a witness on a spec other than the one its prelude was built on."""
    builder = _Builder(spec, call)
    builder.steps = list(steps)
    return {canonical(t): builder.evaluate(t) for t, _ in builder.terms}


def _text(value: Any) -> str | None:
    """A scalar as a source holds it: text as is, a number as canonical decimal text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return None


def _said_findable(text: str) -> bool:
    """Whether a user message that is exactly `text` surely indexes it: an identifier-like
    token (no space, 6 characters or more) or a number of 4 significant characters or more."""
    if " " in text.strip():
        return False
    digits = text.replace(".", "").replace("-", "").lstrip("0")
    if digits.isdigit():
        return len(digits) >= 4
    return len(text) >= 6


class _Builder:
    def __init__(self, spec: m.Spec, call: Call) -> None:
        self.spec = spec
        self.call = call
        self._defaults: dict[tuple[str, str], tuple[str, Source]] | None = None
        self.terms = [(term_of(k), v) for k, v in call.session.items()]
        self.values: dict[str, tuple[Any, _Wants]] = {}
        self.steps: list[m.SessionStep] = []
        self.quoted = 0  # the texts made for an earlier call's argument to be quoted
        self.solved: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]] | None] = {}
        """The arguments solved for an earlier call of a tool meeting a goal (`candidates`)."""

    # --- what each term asks ------------------------------------------------------------------

    def build(self) -> list[m.SessionStep]:
        self.texts()
        placed = self.placed()
        for term, value in self.terms:  # what the values need first: fillers avoid them
            if isinstance(term, m.Provenance) and term.call is not None:
                continue  # placed once the other terms' calls are (`from_results`)
            if isinstance(term, m.Provenance) and canonical(term.value) in placed:
                continue  # its sources are given (`Call.sources`)
            if isinstance(term, m.Provenance):
                self.provenance(term, self.value(term.value, term), bool(value))
            elif isinstance(term, m.Quantified) and not _of_var(term):
                continue  # the call's items give it its value (`texts`, `check`)
            elif isinstance(term, m.Quantified) and (
                isinstance(term.over, m.Extract) or not self.itemwise(term, placed)
            ):
                self.quantified(term, bool(value))
        for term, value in sorted(
            ((t, v) for t, v in self.terms if isinstance(t, m.History)), key=_window_order
        ):
            self.history(term, value)
        for term, value in self.terms:
            if isinstance(term, m.Provenance) and term.call is not None:
                self.from_results(term, self.value(term.value, term), bool(value))
        for term, value in self.terms:
            if not isinstance(term, m.Provenance | m.Quantified | m.History):
                raise _Missing(
                    f"the witness needs `{spec_text(term)}` = {value_text(value)}, "
                    "which depends on the text of the call; no prelude is built for it"
                )
        for text, (value, wants) in sorted(self.values.items()):
            self.sources(text, value, wants)
        for key, classes in sorted(placed.items()):
            self.given(key, classes)
        self.check()
        return self.steps

    def texts(self) -> None:
        """Give the call the items a quantifier needs when one must exist (`any` true, `all`
        false): a text argument an item of `hosts(args.body)` & co, a list argument
        (`args.to`) an item, for which a body that reads the item (`h == "a.test"`) has the
        quantifier's value, and that keeps each quantifier over the same items that needs all
        of them one way; for a body `h from …`, a sample item whose sources `quantified`
        gives. The witness's items are kept; every quantifier is then evaluated on the
        call's items (`check`)."""
        added: dict[str, list[Any]] = {}
        lists: set[str] = set()
        quantified = [
            (t, bool(v))
            for t, v in self.terms
            if isinstance(t, m.Quantified)
            and (isinstance(t.over, m.Extract) or not (_of_var(t) or session_terms(t.body)))
        ]
        tool = self.spec.tools[self.call.tool]
        for term, wanted in quantified:
            if (term.quantifier == "any") != wanted:
                continue  # every item (if any) has the body's value: checked on the items
            over = term.over
            # the item must also keep each quantifier over the same items that needs every
            # item to have its body's value (`all` true, `any` false)
            every = [
                (t, w)
                for t, w in quantified
                if t.over == over and (t.quantifier == "any") != w and not _of_var(t)
            ]
            of = over.of if isinstance(over, m.Extract) else over
            name = of.parts[0] if isinstance(of, m.Path) and len(of.parts) == 1 else ""
            f = next((g for g in tool.input.fields if g.name == name), None)
            if not (isinstance(of, m.Path) and of.root == "args") or f is None:
                raise _Missing(f"no item is built for `{spec_text(term)}`: it reads no argument")
            kind = f.type.item if isinstance(over, m.Path) else f.type
            if (
                kind is None
                or kind.name != "string"
                or kind.values
                or f.pattern is not None
                or (isinstance(over, m.Extract) and f.min is not None)
                or (isinstance(over, m.Path) and (f.type.name != "list" or f.max is not None))
            ):
                raise _Missing(f"no item of `{spec_text(of)}` is built for `{spec_text(term)}`")
            func = over.func if isinstance(over, m.Extract) else None
            bodies = [term.body, *(t.body for t, _ in every)]
            texts = [_ITEM_SAMPLES[func or ""]] if _of_var(term) else _item_texts(func, bodies)
            item = next(
                (
                    _carrier(func, text)
                    for text in texts
                    if (got := [text] if func is None else extract(func, _carrier(func, text)))
                    is not None
                    and len(got) == 1
                    and (_of_var(term) or self.body_holds(term.body, term.var, got[0]) == wanted)
                    and all(self.body_holds(t.body, t.var, got[0]) == w for t, w in every)
                ),
                None,
            )
            if item is None:
                raise _Missing(
                    f"`{spec_text(term)}` = {value_text(wanted)} needs an item, and no "
                    f"item this builds makes its body {value_text(wanted)}"
                )
            added.setdefault(name, []).append(item)
            if isinstance(over, m.Path):
                lists.add(name)
        if not added:
            return
        args = dict(self.call.args)
        for name, items in added.items():
            have = args.get(name)
            if isinstance(have, list):  # the witness's items, then those added
                args[name] = [*have, *(i for i in dict.fromkeys(items) if i not in have)]
            elif name in lists:
                args[name] = list(dict.fromkeys(items))
            else:  # a text of exactly the items added
                args[name] = " ".join(dict.fromkeys(items))
        self.call = dataclasses.replace(self.call, args=args)

    def placed(self) -> dict[str, list[str]]:
        """The call's values whose sources the witness gives (`Call.sources`), each kept apart
        from the values the prelude picks sources for (their texts are reserved first)."""
        for key in self.call.sources:
            value = self.keyed(key)
            text = _text(value)
            if text is not None:
                self.values.setdefault(text, (value, _Wants()))
        return dict(self.call.sources)

    def keyed(self, key: str) -> Any:
        """The value a key of `Call.sources` names: an argument, or an item of a list one."""
        path, index = item_of(key)
        value = read_value(self.spec, path, self.call)
        if index is None:
            return value
        return value[index] if isinstance(value, list) and index < len(value) else ABSENT

    def itemwise(self, term: m.Quantified, placed: dict[str, list[str]]) -> bool:
        """Whether the witness gives the sources of every item the quantifier ranges over."""
        if not isinstance(term.over, m.Path):
            return False
        items = read_value(self.spec, term.over, self.call)
        if not isinstance(items, list):
            return False
        head = canonical(term.over)  # type: ignore[arg-type]
        return all(f"{head}#{i}" in placed for i in range(len(items)))

    def given(self, key: str, classes: list[str]) -> None:
        """One step for each class of source the witness puts the value in: the user said it,
        or a result of `TOOL` held it in `FIELD` (sources.py)."""
        value = self.keyed(key)
        if not classes or value is ABSENT:
            return
        text = _text(value)
        if text is None:
            raise _Missing(
                f"`{spec_text(item_of(key)[0])}` = {value_text(value)} is not text or a "
                "number, so no source can hold it"
            )
        for cls in classes:
            if cls == FACTS:
                continue  # the witness holds it among its facts
            if cls == USER:
                if not _said_findable(text):
                    raise _Missing(
                        f"the user would have to say {value_text(value)}, which is too short "
                        "to be found inside a message"
                    )
                self.steps.append(m.SessionStep(said=text))
                continue
            call = call_of(cls)
            tool_id, root, path = call if call is not None else (cls, "result", ())
            tool = self.spec.tools.get(tool_id)
            if tool is None:
                raise _Missing(f"no tool `{tool_id}` returns {value_text(value)}")
            if root == "args":  # a call that took it (`on_success add args.X`), no result
                args = _placed(self.args_of(tool), path, text)
                step = m.SessionStep(tool=tool.id, args=args, ago_ms=self.before_windows())
            else:
                result = holding_result(tool, path, text, self.filler)
                step = m.SessionStep(
                    tool=tool.id,
                    args=self.args_of(tool),
                    result=result,
                    ago_ms=self.before_windows(),
                )
            self.steps.append(step)

    def before_windows(self) -> int | None:
        """When a step only a value's source needs happens: before every window the witness
        reads (so only whole-session terms see it), or now when it reads none."""
        windows = [t.window_ms for t, _ in self.terms if isinstance(t, m.History) and t.window_ms]
        return 2 * max(windows) if windows else None

    def value(self, node: m.Value, term: m.Condition) -> Any:
        if not (isinstance(node, m.Path) and node.root == "args"):
            raise _Missing(f"no prelude is built for `{spec_text(term)}`: it reads no argument")
        return read_value(self.spec, node, self.call)

    def wants(self, value: Any, term: m.Condition) -> _Wants:
        text = _text(value)
        if text is None:
            raise _Missing(
                f"`{spec_text(term)}`: the value {value_text(value)} is not text or a number, "
                "so no source can hold it"
            )
        return self.values.setdefault(text, (value, _Wants()))[1]

    def provenance(self, term: m.Provenance, value: Any, wanted: bool) -> None:
        if term.call is not None:
            self.from_results(term, value, wanted)
            return
        if value is ABSENT:
            if wanted:
                raise _Missing(f"`{spec_text(term)}` holds only for a value the call has")
            return
        if isinstance(value, list | dict):
            if wanted != (term.source == "nowhere"):
                raise _Missing(f"`{spec_text(term)}`: a list or record is from nowhere")
            return
        source = term.source
        if self.is_default(term, value) and (
            (wanted and (source == "nowhere" or (term.only and source != "trusted")))
            or (not wanted and source == "trusted" and not term.only)
        ):
            raise _Missing(
                f"`{spec_text(term)}`: {value_text(value)} is the spec's default of the "
                "argument, a source of its own (trusted)"
            )
        w = self.wants(value, term)
        if source == "nowhere":
            if wanted:
                w.forbid.update(_KINDS)
            else:
                w.somewhere = True
        elif source == "label":
            assert term.label is not None
            (w.labels if wanted else w.no_labels).add(term.label)
            w.somewhere = w.somewhere or wanted
        elif wanted:
            w.need.add(source)
            if term.only:
                w.forbid.update(k for k in _KINDS if k != source)
        elif term.only:
            w.not_only.add(source)  # from nowhere, or from another kind as well
        else:
            w.forbid.add(source)

    def from_results(self, term: m.Provenance, value: Any, wanted: bool) -> None:
        """`value from result(SEL …)`: when it must hold and does not yet, an earlier call its
        `succeeded` term counts, whose result holds the value: first the value put in a text
        field of the result (the term's field, else one its `when` does not read, else one it
        does: `when len(ibans(result.text)) == 1` holds of the value alone), the call meeting
        `when` with the sources it needs (`meeting`); else an earlier call found as for
        `succeeded` (`earlier`) with the value put in a field its `when` does not read. When
        it must not hold, nothing is added (`check` tells)."""
        call = term.call
        assert call is not None
        if not wanted or value is ABSENT or self.holds(term, value):
            return
        text = _text(value)
        if text is None or isinstance(value, list | dict):
            raise _Missing(f"`{spec_text(term)}`: only a text or a number is found in a result")
        read = _result_read(call.where)
        ago = self.ago(call)
        for tool in self.selected(call):
            for name in self.holders(term, tool, read):
                base = self.result_of(tool)
                if not isinstance(base, dict):
                    continue
                result = {**base, name: text}
                for candidate, _ in self.candidates(call, tool, None):
                    found = self.meeting(call, tool, dict(candidate), result)
                    if found is None:
                        continue
                    sources, args = found
                    step = m.SessionStep(tool=tool.id, args=args, result=result, ago_ms=ago)
                    self.steps.extend([*sources, step])
                    return
        step = self.earlier(call, ago=ago)
        tool = self.spec.tools[step.tool or ""]
        free = [n for n in self.holders(term, tool, read) if n not in read]
        if not free or not isinstance(step.result, dict):
            raise _Missing(
                f"`{spec_text(term)}`: no text field of `{tool.id}`'s result is free to hold "
                f"{value_text(value)}"
            )
        self.steps.append(step.model_copy(update={"result": {**step.result, free[0]: text}}))

    def holders(self, term: m.Provenance, tool: m.Tool, read: set[str]) -> list[str]:
        """The top-level text fields of a tool's result a `from result…` value may be put in:
        the term's field, or every text field, those its `when` does not read first."""
        fields = _text_fields(tool)
        if term.field is not None:
            at = term.field.parts
            return [at[0]] if len(at) == 1 and at[0] in fields else []
        return sorted(fields, key=lambda name: name in read)

    def quantified(self, term: m.Quantified, wanted: bool) -> None:
        body = term.body
        if not (
            isinstance(body, m.Provenance) and body.value == m.Path(root="var", parts=(term.var,))
        ):
            raise _Missing(
                f"no prelude is built for `{spec_text(term)}`: only a body `{term.var} from …` is"
            )
        over = term.over
        items = self.items(over) if isinstance(over, m.Extract) else self.value(over, term)
        if not isinstance(items, list):
            if not wanted:
                return  # a quantifier over an absent value holds for no session
            raise _Missing(f"`{spec_text(term)}`: the call's value is not a list")
        every = (term.quantifier == "all") == wanted
        if not every and not items:
            raise _Missing(f"`{spec_text(term)}` = {value_text(wanted)} needs an item")
        # `any` holds by its first item, `all` fails by its last: one list can do both
        chosen = items if every else items[:1] if term.quantifier == "any" else items[-1:]
        for item in chosen:
            self.provenance(body, item, wanted)

    def history(self, term: m.History, value: Any) -> None:
        """Add the steps the term is short of, given the steps so far (a narrower window of
        the same term met first), placed within its window and outside every narrower one."""
        ago = self.ago(term)
        if term.func in ("seen", "called", "succeeded"):
            if value and not self.evaluate(term):
                if term.func == "seen":
                    assert term.label is not None
                    step = self.producing(term.label, term)
                else:
                    step = self.earlier(term, ago=ago)
                self.steps.append(step.model_copy(update={"ago_ms": ago}))
            return
        have = self.evaluate(term)
        if term.func == "count":
            n = int(value) - int(have)
            if n < 0:
                raise _Missing(
                    f"`{spec_text(term)}` = {value} is below what this call counts with the "
                    f"earlier steps ({have})"
                )
            for _ in range(n):  # each after the sources `earlier` adds for it
                self.steps.append(self.earlier(term, ago=ago))
            return
        rest = float(value) - float(have)
        if rest != 0:
            self.steps.append(self.earlier(term, amount=rest, ago=ago))

    def ago(self, term: m.History) -> int | None:
        """How long before the call a step this term needs happens: now (None) unless another
        term of the witness differs from it only in a narrower window; then halfway between
        the widest such window and this one's (or twice it, for the whole session)."""
        narrower = [
            t.window_ms
            for t, _ in self.terms
            if isinstance(t, m.History)
            and t.window_ms is not None
            and (term.window_ms is None or t.window_ms < term.window_ms)
            and t.model_copy(update={"window_ms": None})
            == term.model_copy(update={"window_ms": None})
        ]
        if not narrower:
            return None
        inner = max(narrower)
        return inner * 2 if term.window_ms is None else (inner + term.window_ms) // 2

    # --- earlier calls ------------------------------------------------------------------------

    def selected(self, term: m.History) -> list[m.Tool]:
        return [
            self.spec.tools[t]
            for t in sorted(self.spec.tools)
            if any(selects(s, self.spec.tools[t]) for s in term.selectors)
        ]

    def this_counts(self, term: m.History) -> bool:
        tool = self.spec.tools[self.call.tool]
        if not any(selects(s, tool) for s in term.selectors):
            return False
        return term.where is None or holds_for(self.spec, term.where, self.call)

    def amount(self, term: m.History, call: Call, result: Any) -> float:
        f = term.field
        if f is None:
            return 0.0
        if f.root == "result":
            value: Any = result
            for part in f.parts:
                value = value.get(part, ABSENT) if isinstance(value, dict) else ABSENT
        else:
            value = read_value(self.spec, f, call)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else 0.0

    def earlier(
        self, term: m.History, amount: float | None = None, ago: int | None = None
    ) -> m.SessionStep:
        """An earlier call of a selected tool meeting the term's `when`, with a result, made
        `ago` before the call; the sources its `when` needs before it (a user message, a
        result) are added first. Its arguments are solved from `when` (and the amount), else
        an example call's; one that would give another term of the witness more than it
        needs (`spoils`) is taken only when there is no other."""
        spoiling: tuple[list[m.SessionStep], m.SessionStep] | None = None
        for tool in self.selected(term):
            for candidate, returned in self.candidates(term, tool, amount):
                args = dict(candidate)
                base = self.result_of(tool)
                # the values `when` reads, into a record (a shape's result is taken whole)
                result = {**base, **returned} if isinstance(base, dict) else base
                if amount is not None and not self.put_amount(term, tool, args, result, amount):
                    continue
                found = self.meeting(term, tool, args, result)
                if found is None:
                    continue
                sources, args = found
                step = m.SessionStep(tool=tool.id, args=args, result=result, ago_ms=ago)
                if not self.spoils(term, [*sources, step]):
                    self.steps.extend(sources)
                    return step
                spoiling = spoiling or (sources, step)
        if spoiling is not None:
            self.steps.extend(spoiling[0])
            return spoiling[1]
        if amount is not None:
            raise _Missing(
                f"`{spec_text(term)}` needs an earlier call adding {value_text(amount)}, which "
                "no call of a tool it selects can add"
            )
        raise _Missing(
            f"no call of a tool `{spec_text(term)}` selects meets its `when`"
            if term.where is not None
            else f"`{spec_text(term)}` selects no tool an example call can be made of"
        )

    def candidates(
        self, term: m.History, tool: m.Tool, amount: float | None
    ) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
        """The arguments an earlier call of `tool` is tried with, and the values of its result
        `when` reads: a call solved to meet the term's `when` and carry the amount (solve.py,
        as a rule's witness call is found), then the example call's. Either is checked
        concretely (`meeting`), never trusted."""
        goal = term.where
        f = term.field
        if amount is not None and f is not None and f.root == "args":
            whole = amount.is_integer()
            literal = m.Literal(
                value=int(amount) if whole else amount, type="int" if whole else "float"
            )
            equal = m.Compare(op="==", left=f, right=literal)
            goal = equal if goal is None else m.And(items=(goal, equal))
        if goal is not None:
            key = (tool.id, canonical(goal))
            if key not in self.solved:
                found = a_call_meeting(self.spec, tool, goal, query_rlimit())
                self.solved[key] = None if found is None else (found[0].args, found[1])
            solved = self.solved[key]
            if solved is not None:
                yield solved
        yield self.args_of(tool), {}

    def spoils(self, term: m.History, added: Sequence[m.SessionStep]) -> bool:
        """Whether steps added for `term` give another history term of the witness more than
        it needs: a `called`, `succeeded` or `seen` that must be false made true, a `count`
        past its number."""
        others = [(t, v) for t, v in self.terms if isinstance(t, m.History) and t != term]
        saved = self.steps
        self.steps = [*saved, *added]
        try:
            for other, wanted in others:
                got = self.evaluate(other)
                if other.func == "count" and got > wanted:
                    return True
                if other.func in ("called", "succeeded", "seen") and got and not wanted:
                    return True
            return False
        finally:
            self.steps = saved

    def meeting(
        self, term: m.History, tool: m.Tool, args: dict[str, Any], result: Any
    ) -> tuple[list[m.SessionStep], dict[str, Any]] | None:
        """The sources before an earlier call of `tool` and its arguments, so that it meets the
        term's `when` (fewest sources first), or None. A `from` in `when` reads where the
        call's argument came from before it was made (language.md §7.4)."""
        if term.where is None:
            return [], args
        asked = _asked(term.where)
        for size in range(min(len(asked), 3) + 1):
            for chosen in itertools.combinations(asked, size):
                found = self.sourced(tool, dict(args), chosen)
                if found is None:
                    continue
                sources, given = found
                session = self.session_of(term.where, Call(tool.id, given), [*self.steps, *sources])
                if holds_for(self.spec, term.where, Call(tool.id, given, session=session), result):
                    return sources, given
        return None

    def sourced(
        self, tool: m.Tool, args: dict[str, Any], chosen: Sequence[m.Provenance]
    ) -> tuple[list[m.SessionStep], dict[str, Any]] | None:
        """Sources that make each chosen `args.x from K` hold of an earlier call's `args`
        (a text a message can quote takes the place of a sample where the field allows)."""
        sources: list[m.SessionStep] = []
        fields = {f.name: f for f in tool.input.fields}
        for term in chosen:
            assert isinstance(term.value, m.Path)
            f = fields.get(term.value.parts[0]) if len(term.value.parts) == 1 else None
            if f is None:
                return None
            text = _text(args.get(f.name))
            if text is None or not _said_findable(text) or text in self.values:
                if not _any_text(f):
                    return None
                if f.min is not None or f.max is not None:
                    return None
                text = self.quotable(f)
                args[f.name] = text
            if term.source == "user":
                sources.append(m.SessionStep(said=text))
            else:
                try:
                    step, _ = self.holding(term.source, text, set(), set(), text)
                except _Missing:
                    return None
                sources.append(step)
        return sources, args

    def quotable(self, f: m.Field) -> str:
        """A text for an earlier call's argument that a message can quote, and that is no
        value of the call (`path-earlier-1`, or a path or URL ending so)."""
        taken = {_text(v) for v in scalars(self.call.args)} | set(self.values)
        while True:
            self.quoted += 1
            text = f"{f.name}-earlier-{self.quoted}"
            if f.type.name == "path":
                text = f"/workspace/{text}"
            elif f.type.name == "url":
                text = f"https://example.com/{text}"
            if text not in taken:
                return text

    def session_of(
        self, where: m.Condition, call: Call, before: Sequence[m.SessionStep]
    ) -> dict[str, Any]:
        """The provenance `when` reads of an earlier call, from the steps before it."""
        return {
            canonical(t): self.holds(t, read_value(self.spec, t.value, call), before)
            for t in _asked(where, every=True)
        }

    def put_amount(
        self, term: m.History, tool: m.Tool, args: dict[str, Any], result: Any, amount: float
    ) -> bool:
        f = term.field
        if f is None or len(f.parts) != 1:
            return False
        schema = tool.input if f.root == "args" else tool.output
        target = args if f.root == "args" else result
        found = next((g for g in schema.fields if g.name == f.parts[0]), None) if schema else None
        if found is None or not isinstance(target, dict):
            return False
        if found.type.name == "int":
            if not amount.is_integer():
                return False
            target[found.name] = int(amount)
        elif found.type.name == "float":
            target[found.name] = amount
        else:
            return False
        low, high = found.min, found.max
        return (low is None or amount >= low) and (high is None or amount <= high)

    def filler(self, f: m.Field) -> Any:
        """A sample value of a field that no value of the call is (so it is no source of one)."""
        value = sample_value(f, f.type)
        if _text(value) in self.values and _any_text(f):
            value = f"{f.name}-sample"
        return value

    def sample(self, fields: Iterable[m.Field]) -> dict[str, Any]:
        return {f.name: self.filler(f) for f in fields if f.required}

    def result_of(self, tool: m.Tool) -> Any:
        """A sample result: the record of its required fields, or a value of the type an
        `output` is written as (`output list<…>`)."""
        output = tool.output
        if output is not None and output.shape is not None:
            return sample_value(None, output.shape)
        return self.sample(output.fields if output is not None else ())

    def result_labels(self, tool: m.Tool, result: Any) -> set[str]:
        """The labels a result carries, as the runtime says (nested fields too)."""
        return set(result_labels(tool, result))

    def producing(self, label: str, term: m.History) -> m.SessionStep:
        for t in sorted(self.spec.tools):
            tool = self.spec.tools[t]
            fields = tool.output.fields if tool.output is not None else ()
            for extra in (None, *(f for f in fields if label in f.labels)):
                result = self.result_of(tool)
                if extra is not None and isinstance(result, dict):
                    result[extra.name] = self.filler(extra)
                if label in self.result_labels(tool, result):
                    return m.SessionStep(tool=tool.id, args=self.args_of(tool), result=result)
        raise _Missing(f"`{spec_text(term)}`: no tool produces a result labelled `{label}`")

    def args_of(self, tool: m.Tool) -> dict[str, Any]:
        return self.sample(tool.input.fields)

    # --- sources of values --------------------------------------------------------------------

    def sources(self, text: str, value: Any, w: _Wants) -> None:
        need = set(w.need)
        for kind in sorted(w.not_only & need):  # `K` and not `K only`: another kind too
            other = next((k for k in _KINDS if k != kind and k not in w.forbid), None)
            if other is not None:
                need.add(other)
        if need & w.forbid:
            raise _Missing(
                f"the witness needs {value_text(value)} both from and not from "
                f"{' and '.join(sorted(need & w.forbid))}"
            )
        if (w.somewhere or w.labels) and not need:
            # a label comes with a tool's result, never with a user message
            kinds = [k for k in _KINDS if k not in w.forbid and not (w.labels and k == "user")]
            # a kind the value must not come from alone goes last (`not K only`)
            kinds.sort(key=lambda k: k in w.not_only)
            if not kinds:
                raise _Missing(
                    f"the witness needs {value_text(value)} from somewhere, "
                    "and from no kind of source"
                )
            need.add(kinds[0])
        labels_left = set(w.labels)
        for kind in sorted(need):
            if kind == "user":
                if not _said_findable(text):
                    raise _Missing(
                        f"the user would have to say {value_text(value)}, which is too short "
                        "to be found inside a message (name a longer value in the rule, or "
                        "write a `test` with `said`)"
                    )
                self.steps.append(m.SessionStep(said=text))
                continue
            step, labels = self.holding(kind, text, labels_left, w.no_labels, value)
            labels_left -= labels
            self.steps.append(step)
        if labels_left:
            raise _Missing(
                f"no {' or '.join(sorted(need))} tool returns {value_text(value)} "
                f"in a result labelled {', '.join(sorted(labels_left))}"
            )

    def holding(
        self, kind: str, text: str, labels: set[str], no_labels: set[str], value: Any
    ) -> tuple[m.SessionStep, set[str]]:
        """An earlier call of a `kind` tool whose result holds `text` in a text field,
        carrying as many of `labels` as one can and none of `no_labels`."""
        best: tuple[m.SessionStep, set[str]] | None = None
        for t in sorted(self.spec.tools):
            tool = self.spec.tools[t]
            # every place a text can be in its result: through lists, unions, open records
            for path, declared in output_text_paths(tool):
                trust = declared or tool.trust or "untrusted"
                if trust != kind:
                    continue
                result = holding_result(tool, path, text, self.filler)
                carried = self.result_labels(tool, result)
                if carried & no_labels:
                    continue
                step = m.SessionStep(tool=tool.id, args=self.args_of(tool), result=result)
                if best is None or len(carried & labels) > len(best[1] & labels):
                    best = (step, carried)
        if best is None:
            raise _Missing(
                f"no {kind} tool has a text output field to return {value_text(value)} in"
            )
        return best[0], best[1] & labels

    # --- the prelude, replayed ------------------------------------------------------------------

    def check(self) -> None:
        """Replay the steps on a model of the ledger; every term must get its value."""
        for term, wanted in self.terms:
            got = self.evaluate(term)
            if got != wanted and not (isinstance(got, float) and got == wanted):
                raise _Missing(
                    f"the prelude gives `{spec_text(term)}` = {value_text(got)}, and the "
                    f"witness needs {value_text(wanted)}: no session gives every term its value"
                )

    def kinds_of(
        self, value: Any, steps: Sequence[m.SessionStep] | None = None
    ) -> tuple[set[str], set[str]]:
        """The kinds and labels of the sources of a value among `steps` (all the steps)."""
        text = _text(value)
        kinds: set[str] = set()
        labels: set[str] = set()
        if text is None:
            return kinds, labels
        for step in self.steps if steps is None else steps:
            if step.said is not None:
                if step.said == text:
                    kinds.add("user")
                continue
            tool = self.spec.tools[step.tool or ""]
            result = step.result if step.result is not None else {}
            carried = self.result_labels(tool, result)
            # every scalar of the result, at any depth, with its kind, as the runtime indexes it
            trust = "untrusted" if tool.kind == "mcp" else tool.trust or "untrusted"
            fields = fields_of(tool.output) if tool.kind != "mcp" else None
            for scalar, kind in _result_scalars(result, fields, trust):
                if _text(scalar) == text:
                    kinds.add(kind)
                    labels |= carried
            for total, _, kind in line_totals(result, fields, trust):
                if total == text:  # a line's total, composed as the runtime composes it
                    kinds.add(kind)
                    labels |= carried
            # `on_success add`: what the call adds to a fact is a fact value (trusted) too
            added = facts_changed(tool, step.args, result, {})
            if any(_text(scalar) == text for scalar, _ in _result_scalars(added, None, "")):
                kinds.add("trusted")
        for fact in scalars(self.call.facts):
            if _text(fact) == text:
                kinds.add("trusted")
        return kinds, labels

    def is_default(self, term: m.Provenance, value: Any) -> bool:
        """Whether `value` is the spec's default of the call's top-level argument the term
        reads: a source of its own, kind `trusted` (`provenance.with_default`)."""
        name = arg_name(term.value)
        if name is None or value is ABSENT:
            return False
        defaults = self._defaults
        if defaults is None:
            defaults = self._defaults = spec_defaults(self.spec)
        found = with_default(None, defaults, self.call.tool, name, value)
        return found is not None

    def holds(
        self, term: m.Provenance, value: Any, steps: Sequence[m.SessionStep] | None = None
    ) -> bool:
        if term.call is not None:
            return self.results_hold(term, value, steps)
        if value is ABSENT or isinstance(value, list | dict):
            return term.source == "nowhere" and value is not ABSENT
        kinds, labels = self.kinds_of(value, steps)
        if self.is_default(term, value):
            kinds.add("trusted")
        if term.source == "nowhere":
            return not kinds
        if term.source == "label":
            return term.label in labels
        if term.only:
            return kinds == {term.source}
        return term.source in kinds

    def results_hold(
        self, term: m.Provenance, value: Any, steps: Sequence[m.SessionStep] | None = None
    ) -> bool:
        """`value from result(SEL …) [only]` over the steps, as the ledger reads it: the
        value is in the result of a step the `succeeded` term counts (within its window);
        with `only`, it is in no other source (a message, another result, a fact, the
        spec's default)."""
        call = term.call
        assert call is not None
        text = _text(value)
        if value is ABSENT or text is None or isinstance(value, list | dict):
            return False
        steps = self.steps if steps is None else steps
        hit = other = False
        for n, step in enumerate(steps):
            found = self.kinds_of(value, [step])[0]
            if not found:
                continue
            counted = (
                step.tool is not None
                and (call.window_ms is None or step.ago_ms is None or step.ago_ms <= call.window_ms)
                and self.counts(call, step, steps[:n])
                and (
                    term.field is None or normalize(value) in keys_at(step.result, term.field.parts)
                )
            )
            if counted:
                hit = True
                # an `on_success` that adds the value makes it a fact too: another source
                tool = self.spec.tools[step.tool or ""]
                added = facts_changed(tool, step.args, step.result, {})
                other = other or any(
                    _text(scalar) == text for scalar, _ in _result_scalars(added, None, "")
                )
            else:
                other = True
        if term.only:
            facts = any(_text(f) == text for f in scalars(self.call.facts))
            return hit and not other and not facts and not self.is_default(term, value)
        return hit

    def evaluate(self, term: m.Condition) -> Any:
        if isinstance(term, m.Provenance):
            return self.holds(term, read_value(self.spec, term.value, self.call))
        if isinstance(term, m.Quantified):
            items = self.items(term.over)
            if not isinstance(items, list):
                return False  # as the runtime: a quantifier over an absent value holds for none
            found = [self.body_holds(term.body, term.var, item) for item in items]
            return all(found) if term.quantifier == "all" else any(found)
        assert isinstance(term, m.History)
        earlier = [
            (n, s)
            for n, s in enumerate(self.steps)
            if s.tool is not None
            and (term.window_ms is None or s.ago_ms is None or s.ago_ms <= term.window_ms)
        ]
        if term.func == "seen":
            return any(
                term.label in self.result_labels(self.spec.tools[s.tool or ""], _record(s.result))
                for _, s in earlier
            )
        meets = [s for n, s in earlier if self.counts(term, s, self.steps[:n])]
        if term.func in ("called", "succeeded"):
            return bool(meets)
        this = self.this_counts(term)
        if term.func == "count":
            return len(meets) + (1 if this else 0)
        total = sum(self.amount(term, Call(s.tool or "", dict(s.args)), s.result) for s in meets)
        total += self.amount(term, self.call, ABSENT) if this else 0.0
        return int(total) if total.is_integer() else total

    def items(self, over: m.Value) -> Any:
        """What a quantifier ranges over: a list of the call, or the items of one of its
        texts (`hosts(args.body)`), as the witness gives them, else as the runtime finds them."""
        value = read_value(self.spec, over, self.call)
        if isinstance(over, m.Extract) and value is ABSENT:
            found = extract(over.func, read_value(self.spec, over.of, self.call))
            return ABSENT if found is None else found
        return value

    def body_holds(self, body: m.Condition, var: str, item: Any) -> bool:
        """A quantifier's body for one item: provenance of the item, with `and`, `or`, `not`."""
        if isinstance(body, m.And):
            return all(self.body_holds(x, var, item) for x in body.items)
        if isinstance(body, m.Or):
            return any(self.body_holds(x, var, item) for x in body.items)
        if isinstance(body, m.Not):
            return not self.body_holds(body.item, var, item)
        if isinstance(body, m.Provenance) and body.value == m.Path(root="var", parts=(var,)):
            return self.holds(body, item)
        if any(not isinstance(f.term, m.Extract) for f in session_terms(body)):
            raise _Missing(f"no prelude is built for `{spec_text(body)}` inside a quantifier")
        # the item's own text: as the runtime reads it
        return holds_for(self.spec, body, self.call, bound={var: item})

    def counts(self, term: m.History, step: m.SessionStep, before: Sequence[m.SessionStep]) -> bool:
        """Whether an earlier step enters the term: selected, and meeting `when` with the
        provenance of its arguments as the steps before it give it."""
        tool = self.spec.tools[step.tool or ""]
        if not any(selects(s, tool) for s in term.selectors):
            return False
        if term.where is None:
            return True
        call = Call(tool.id, dict(step.args))
        call.session = self.session_of(term.where, call, before)
        return holds_for(self.spec, term.where, call, step.result)


def _of_var(term: m.Quantified) -> bool:
    """Whether a quantifier's body is the provenance of its item (`x from …`)."""
    body = term.body
    return isinstance(body, m.Provenance) and body.value == m.Path(root="var", parts=(term.var,))


_ITEM_SAMPLES = {
    "hosts": "sample.test",
    "urls": "https://sample.test/",
    "emails": "a@sample.test",
    "ibans": "DE89370400440532013000",
    "params": "item-sample",
    "segments": "item-sample",
    "": "item-sample",
}
"""An item no body names: of an extracted kind, or of a list argument ("")."""


def _carrier(func: str | None, text: str) -> str:
    """The text of the call that holds an item: the item itself, or for what a URL carries a
    URL carrying it (`https://sample.test/?v=…`, `https://sample.test/…`)."""
    if func == "params":
        return "https://sample.test/?v=" + urllib.parse.quote_plus(text)
    if func == "segments":
        return "https://sample.test/" + urllib.parse.quote(text, safe="")
    return text


def _item_texts(func: str | None, bodies: Sequence[m.Condition]) -> list[str]:
    """Texts an item of `func` may be made of: each text the bodies name, alone and with a
    sample around it (`.corp` → `sample.corp`), then a sample no body names."""
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, m.Literal) and isinstance(node.value, str):
            texts.extend((node.value, f"sample{node.value}", f"{node.value}sample"))
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name))
        elif isinstance(node, tuple | list):
            for item in node:
                walk(item)

    walk(bodies)
    return [*dict.fromkeys(texts), _ITEM_SAMPLES[func or ""]]


def _asked(where: m.Condition, every: bool = False) -> list[m.Provenance]:
    """The provenance terms of a `when` about an argument of the earlier call (each once):
    those a source can make hold (`user`, `trusted`, `untrusted`), or `every` one."""
    out: list[m.Provenance] = []
    for found in session_terms(where):
        t = found.term
        if not (isinstance(t, m.Provenance) and isinstance(t.value, m.Path)):
            continue
        if t.value.root != "args" or t in out:
            continue
        if every or t.source in _KINDS:
            out.append(t)
    return out


def _window_order(item: tuple[m.Condition, Any]) -> tuple[str, float]:
    """History terms by what they count, then narrowest window first (the whole session last)."""
    term = item[0]
    assert isinstance(term, m.History)
    family = term.model_copy(update={"window_ms": None}).model_dump_json()
    return family, math.inf if term.window_ms is None else float(term.window_ms)


def _record(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def scalars(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from scalars(v)
    elif isinstance(value, list):
        for v in value:
            yield from scalars(v)
    else:
        yield value


def _placed(args: dict[str, Any], path: Sequence[str], text: str) -> dict[str, Any]:
    """The arguments with `text` at `path` (records down to it where they hold none)."""
    out = dict(args)
    here = out
    for name in path[:-1]:
        inner = here.get(name)
        here[name] = dict(inner) if isinstance(inner, dict) else {}
        here = here[name]
    here[path[-1]] = text
    return out


def _result_read(cond: object) -> set[str]:
    """The top-level fields of `result` a condition reads."""
    found: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, m.Path) and node.root == "result" and node.parts:
            found.add(node.parts[0])
        return isinstance(node, m.Path)

    visit_nodes(cond, visit)
    return found


def _any_text(f: m.Field) -> bool:
    """Whether a field takes any text (a text type without a `pattern`)."""
    return f.type.name in _TEXT_TYPES and f.pattern is None


def _text_fields(tool: m.Tool) -> list[str]:
    """The top-level text fields of a tool's record result that a value can be put in (not
    `secret`, which the index skips)."""
    output = tool.output
    if output is None or output.shape is not None:
        return []
    return [f.name for f in output.fields if _any_text(f) and not f.secret]
