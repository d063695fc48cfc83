"""A session's ledger: the provenance index and the history aggregates, fed by its events.

`HistoryTerms` is the catalogue of a spec's distinct `History` nodes (keyed by canonical JSON),
built once per spec. A `Ledger` belongs to a session family (a root session and its skill and
delegated children) and is fed the events of their streams in log order (`feed`, `sync`), so a
ledger rebuilt from the log (`Harness.resume`) is the ledger that was lost. Each aggregate is
updated when an event enters; a decision reads it in O(1) (a windowed one first drops the
entries that left its window).

>>> from harnessc.runtime.model import History, Selector, Spec, Tool
>>> spec = Spec(name="s", root_module="s", tools={"t": Tool(id="t", wire_name="t")})
>>> terms = HistoryTerms(spec)
>>> key = terms.intern(History(func="count", selectors=(Selector(kind="id", value="t"),)))
>>> ledger = Ledger(terms)
>>> ledger.requested("a1", "t", {}, position=1, time_ms=0)
>>> ledger.authorised("a1", position=2, time_ms=0)
>>> ledger.now_ms = 10
>>> ledger.number(key)
1
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..log.cut import archived_note
from ..log.events import WORKFLOW_SOURCES
from ..model.ir import (
    Condition,
    FactUpdate,
    History,
    Path,
    SessionStep,
    Spec,
    Tool,
)
from ..model.semantics import value_eq
from ..model.session_terms import history_key, reads_session, session_terms
from .conditions import Scope, evaluate, read_path
from .provenance import (
    Entries,
    IndexBefore,
    Known,
    Origin,
    ProvenanceIndex,
    Source,
    fields_of,
    keys_at,
    normalize,
    value_keys,
)
from .terms import HistoryTerms

if TYPE_CHECKING:
    from ..log.events import Event, NewEvent
    from ..log.store import EventStore

__all__ = [
    "FACTS_UPDATED",
    "USER_SAID",
    "WORKFLOW_INPUT",
    "WORKFLOW_SOURCES",
    "WORKFLOW_STEP_RESULT",
    "HistoryTerms",
    "Ledger",
    "SourcesChain",
    "SourcesUnresolved",
    "apply_fact_changes",
    "fact_changes",
    "facts_after",
    "facts_changed",
    "history_key",
    "prelude_ledger",
    "reads_session",
    "session_terms",
    "time_ms",
]

USER_SAID = "user.said"
"""The event of a user message (`Session.user_said`); its payload holds the text whole."""
FACTS_UPDATED = "facts.updated"
"""The event of changed facts (`Session.update_facts`, `on_success add`)."""
WORKFLOW_INPUT = "workflow.input"
"""A workflow run's input, a source of kind `user`."""
WORKFLOW_STEP_RESULT = "workflow.step_result"
"""An earlier call step's result, recorded in a later step's session: a source of its tool's
trust and labels (one event per result: logs written before `workflow.sources`)."""


def time_ms(text: str) -> int | None:
    """An event's recorded time (RFC 3339) in milliseconds since the epoch; None when the
    event has none (a workflow step's buffer, whose events are timed when committed)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------
# Aggregates


class _Entry:
    __slots__ = ("alive", "call", "time", "value")

    def __init__(self, time: int, value: int | float, call: str | None) -> None:
        self.time, self.value, self.call, self.alive = time, value, call, True


class _Aggregate:
    """One term's entries: a running total of the live ones, and for a window the entries in
    time order (those that left the window are dropped when the term is read)."""

    __slots__ = ("by_call", "entries", "total", "window")

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.total: int | float = 0
        self.entries: deque[_Entry] = deque()
        self.by_call: dict[str, _Entry] = {}

    def add(self, entry: _Entry) -> None:
        self.total += entry.value
        if self.window is not None:
            entries = self.entries
            if entries and entry.time < entries[-1].time:  # out of time order: keep it sorted
                at = len(entries)
                while at and entries[at - 1].time > entry.time:
                    at -= 1
                entries.insert(at, entry)
            else:
                entries.append(entry)
        if entry.call is not None:
            self.by_call[entry.call] = entry

    def retime(self, call: str, time: int) -> None:
        """The entry of `call` happened at `time` (taken in hand at the decision's clock, then
        committed): moved to its place in time order. An entry that left the window stays out."""
        entry = self.by_call.get(call)
        if entry is None or entry.time == time:
            return
        entry.time = time
        entries = self.entries
        if self.window is None or not entry.alive:
            return
        at = len(entries) - 1  # taken in hand lately: near the end
        while at >= 0 and entries[at] is not entry:
            at -= 1
        if at < 0:
            return
        del entries[at]
        while at < len(entries) and entries[at].time <= time:
            at += 1
        while at > 0 and entries[at - 1].time > time:
            at -= 1
        entries.insert(at, entry)

    def remove(self, call: str) -> None:
        entry = self.by_call.get(call)
        if entry is not None and entry.alive:
            entry.alive = False
            self.total -= entry.value

    def read(self, now: int, exclude: str | None) -> int | float:
        if self.window is not None:
            start = now - self.window
            entries = self.entries
            while entries and entries[0].time < start:
                old = entries.popleft()
                if old.alive:
                    old.alive = False
                    self.total -= old.value
        total = self.total
        if exclude is not None:
            own = self.by_call.get(exclude)
            if own is not None and own.alive:
                total -= own.value
        return total


@dataclass(slots=True)
class _Call:
    """A call of the family as the ledger knows it."""

    action_id: str
    tool_id: str
    tool_call_id: str | None
    args: Mapping[str, Any]
    position: int = 0
    """Where the call was requested: its arguments' provenance is the index's before it."""
    authorised: tuple[int, int] | None = None  # (position, time)
    result: Any = None
    result_at: tuple[int, int] | None = None
    """When the call ended (position, time), with its result or without one."""
    succeeded: bool = False
    ended: bool = False
    fed: set[str] = field(default_factory=set)


# ---------------------------------------------------------------------------------------------
# The ledger


class Ledger:
    """A session family's provenance index and history aggregates.

    Fed in log order, either event by event (`feed`, `sync`) or through the typed methods the
    events map to (`said`, `facts`, `requested`, `authorised`, `finished`). `now_ms` is the
    decision's clock reading, set by `sync` (windows are measured against it).
    """

    in_hand = True
    """Whether `sync` takes the events handed over (`hold`) from the objects in hand; False
    commits and reads them instead (the path before, kept to compare decisions with)."""

    sources: SourcesChain | None = None
    """What resolves a workflow step's `workflow.sources` that refers to an earlier step's:
    set by whoever feeds the ledger from a log (`sync` sets it from its store)."""

    def __init__(self, terms: HistoryTerms) -> None:
        self.terms = terms
        self.index = ProvenanceIndex()
        self.index.defaults = terms.defaults
        self.now_ms = 0
        self._aggs: dict[str, _Aggregate] = {}
        self._calls: dict[str, _Call] = {}
        self._order: list[_Call] = []
        self._results: list[tuple[int, int, frozenset[str]]] = []  # (position, time, labels)
        # the index keys of each fact's value, by (stream, fact): what a change withdraws
        self._fact_keys: dict[tuple[str, str], set[str]] = {}
        self._fact_values: dict[tuple[str, str], Any] = {}  # each fact's value, by stream
        self._cursor: dict[str, int] = {}
        self._time: tuple[str, int | None] = ("", None)  # the last event time read, in ms
        self._lock = threading.RLock()
        # what `sync` takes from the events this process holds back, handed over (`hold`)
        self._generation: int | None = None  # the store's, when the family's streams were read
        self._handed: list[NewEvent] = []  # handed over (`hold`), not yet taken
        self._unhanded = False  # an event was deferred that only the log can give
        self._held: deque[NewEvent] = deque()  # taken in hand, not seen committed, in order
        self._done: set[int] = set()  # positions past a cursor taken already, from in hand
        self._seq: dict[str, int] = {}  # each stream's seq at its cursor
        # the held decisions taken in hand with the positions their commit checks (`hold`)
        self._checks: deque[tuple[NewEvent, dict[str, int]]] = deque()

    @classmethod
    def from_steps(
        cls,
        terms: HistoryTerms,
        steps: Iterable[SessionStep],
        now_ms: int,
        facts: Mapping[str, Any] | None = None,
    ) -> Ledger:
        """A ledger for a spec test's session (`SpecTest.before`), in written order: a user
        message, or an earlier call that was authorised and succeeded with its result
        (`ago_ms` before `now_ms`, else at `now_ms`), whose `on_success` adds to the session's
        `facts` (`facts_changed`). Event positions are 1, 2, …; the ledger's clock is `now_ms`.

        >>> from harnessc.runtime.model import SessionStep, Spec
        >>> ledger = Ledger.from_steps(HistoryTerms(Spec(name="s", root_module="s")),
        ...     [SessionStep(said="pay DE89370400440532013000")], 0)
        >>> ledger.index.kinds_of("DE89370400440532013000")
        frozenset({'user'})
        """
        ledger = cls(terms)
        position = 0
        facts = dict(facts or {})
        for n, step in enumerate(steps, 1):
            position += 1
            if step.said is not None:
                ledger.said(step.said, position=position)
                continue
            if step.tool is None:
                continue
            at = now_ms - (step.ago_ms or 0)
            action = f"earlier-{n}"
            tool = terms.spec.tools.get(step.tool)
            args = _with_defaults(tool, step.args)
            ledger.requested(
                action, step.tool, args, position=position, time_ms=at, tool_call_id=action
            )
            ledger.authorised(action, position=position, time_ms=at)
            ledger.finished(action, "SUCCEEDED", step.result, position=position, time_ms=at)
            added = facts_changed(tool, args, step.result, facts) if tool else {}
            if added:  # `on_success add`: the facts change, as the runtime records it
                facts.update(added)
                ledger.facts(added, position=position)
        ledger.now_ms = now_ms
        return ledger

    # -- streams and the log ------------------------------------------------------------------

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(self._cursor)

    def positions(self) -> dict[str, int]:
        """What a decision judged on, for `EventStore.append_many(unmoved=…)` (committed only
        if nothing came after): each stream's position up to which the ledger took every
        committed event (`sync` leaves it at the stream's last event, read or taken from this
        process's commits), and no later than what the oldest held decision in hand was
        checked on (`hold(…, unmoved=…)`): a decision that counted it stands or falls with
        it. Events in hand and not committed are not in it: the commit that writes them
        numbers them after the check, as this process's own."""
        with self._lock:
            found = dict(self._cursor)
            checks = self._checks
            while checks and checks[0][0].stored is not None:
                checks.popleft()  # committed: the log holds it, and it passed its check
            if checks:  # the oldest: each later one was checked on it, at most
                for stream, at in checks[0][1].items():
                    if at < found.get(stream, at + 1):
                        found[stream] = at
            return found

    def add_stream(self, stream: str) -> None:
        """Share this ledger with another session of the family (its events are read next)."""
        with self._lock:
            if stream not in self._cursor:
                self._cursor[stream] = 0
                self._seq[stream] = 0
                self._generation = None

    def hold(self, events: Sequence[NewEvent], unmoved: Mapping[str, int] | None = None) -> None:
        """Events of the family that this process defers (`EventStore.defer`: a call normalized,
        or decided and not yet run), handed over as they are made: the next `sync` takes them
        from these objects, not from the log. A move that makes a call known (REQUESTED) or
        lets it run (AUTHORIZED) changes no source and is taken in hand, committed or not, and
        so is what the ledger takes nothing from (a decision, VALIDATED); any other event the
        ledger takes (a call's end, say) makes that `sync` commit what is held and read it,
        as it reads every event nobody handed over. `unmoved`: the events are a decision
        held with that check (`EventStore.defer_unmoved`), which `positions` keeps until it
        is committed; refused, the ledger starts again (`restart`)."""
        with self._lock:
            if unmoved is not None and events and self.in_hand:
                self._checks.append((events[0], dict(unmoved)))
            for event in events:
                kind = event.type
                if kind == "action.transition":
                    if event.payload.get("to") in _ENDS:
                        self._unhanded = True
                elif kind in _FED:
                    self._unhanded = True
                self._handed.append(event)

    def sync(self, store: EventStore, now_ms: int | None = None) -> None:
        """Bring the ledger up to date with the family's events, in log order.

        The events handed over (`hold`) are taken from the objects in hand: a call requested
        is known (at a position past every committed event, until its commit gives it its
        own) and a call authorised enters `count`, `sum` and `called` at `now_ms` (then at
        its commit's time), so a decision needs no commit and no read for them. Once a held
        event is committed it takes its position and time from `NewEvent.stored`, read from
        nowhere. The log is read only when the store's `generation` moved since the last
        look (a commit of this process, or another writer's that `changed_elsewhere` noticed:
        the session's catch-up asks it before every decision), and then only when a stream of
        the family holds an event the ledger has not taken (`EventStore.last_seq`, against
        the seq of the last event taken in each). A held event that its commit left out (a
        move another process made first) drops everything: the family's events are committed
        and read again from the start. With `in_hand` False (the path before events were
        handed over, kept for comparison) everything held is committed and read."""
        with self._lock:
            if self.sources is None:  # a workflow step's session has its own (`seed_sources`)
                self.sources = SourcesChain.of(store)
            if now_ms is not None:
                self.now_ms = now_ms
            handed, self._handed = self._handed, []
            taken: set[int] = set()  # the positions of handed events accounted before the read
            if self._unhanded or not self.in_hand:
                self._unhanded = False
                store.flush()  # nothing is held from here on: a handed event is stored
                if not self.in_hand:
                    handed = []
            generation = store.generation
            if generation != self._generation:
                # something was committed: what was in hand takes its place (the generation
                # first: a commit after it is looked at next time)
                self._generation = generation
                if self._held and not self._settle_held(store.held()):
                    self._restart()
                    store.flush()
                    handed = []
                for event in handed:
                    stored = event.stored
                    if stored is not None and self._account(stored):
                        taken.add(stored.position)
                if not self._known(store):
                    self._read(store)
            for event in handed:
                self._take(event, taken)

    def settle(self, store: EventStore) -> None:
        """`sync` now when the events just handed over were committed with what was held (a
        store numbers deferred events in batches: `MemoryStore.DEFERRED_MAX`): the call
        that paid for the numbering takes its events' places too, and the next decision
        finds nothing to settle. Nothing else: a store that numbered nothing is left alone."""
        if self.in_hand and store.generation != self._generation:
            self.sync(store)

    def _known(self, store: EventStore) -> bool:
        """Whether every event of the family's streams is taken: each stream's last seq, as
        the store knows it without reading, is the last the ledger took."""
        seqs = self._seq
        return all(store.last_seq(stream) == seqs.get(stream, 0) for stream in self._cursor)

    def _read(self, store: EventStore) -> None:
        """Read the family's streams past their cursors, in log order."""
        found: list[Event] = []
        for stream, after in self._cursor.items():
            found.extend(store.read(stream, after=after, flush=False))
        found.sort(key=lambda e: e.position)
        cursor, done, seqs = self._cursor, self._done, self._seq
        for event in found:
            pos = event.position
            kind = event.type
            if (  # what `feed` skips, skipped here: most of what a read finds
                pos in done
                or kind not in _FED
                or (
                    kind == "action.transition"
                    and not any(m in event.payload_json for m in _MOVES_FED)
                )
            ):
                if pos > cursor[event.stream]:
                    cursor[event.stream] = pos
                    seqs[event.stream] = event.seq
                    done.discard(pos)
                continue
            self.feed(event)

    def _account(self, stored: Event) -> bool:
        """Count a handed event as taken, committed as `stored`: the stream's cursor moves
        past it when every earlier event of the stream is taken, else a read skips it. False
        when a read took it already (parsed: nothing more to take)."""
        stream, pos = stored.stream, stored.position
        if pos <= self._cursor.get(stream, 0) or pos in self._done:
            return False
        if stored.seq == self._seq.get(stream, 0) + 1:
            self._seq[stream] = stored.seq
            self._cursor[stream] = pos
        else:
            self._done.add(pos)
        return True

    def _call_move(self, p: Mapping[str, Any], to: object, action: str, pos: int, at: int) -> bool:
        """Take a move that makes a call known (REQUESTED) or lets it run (AUTHORIZED), from
        an event in hand or one read from the log alike; False for any other move."""
        if to == "REQUESTED":
            args = p.get("args")
            self.requested(
                action,
                str(p.get("tool_id")),
                # a call's frozen arguments (a mappingproxy) or a read event's dict: told apart
                # without the ABC check, which costs more than the rest of the move
                args if args.__class__ in _MAPPINGS or isinstance(args, Mapping) else {},
                position=pos,
                time_ms=at,
                tool_call_id=p.get("tool_call_id"),
            )
        elif to == "AUTHORIZED":
            self.authorised(action, position=pos, time_ms=at)
        else:
            return False
        return True

    def _take(self, event: NewEvent, taken: set[int]) -> None:
        """Take a handed event from the object in hand: where its commit put it (`taken`: the
        positions accounted before the read), or not committed yet, ahead of every committed
        event (kept to account for once committed, `_settle_held`)."""
        stored = event.stored
        if stored is None:
            self._held.append(event)
            pos, at = _AHEAD, self.now_ms
        else:
            pos = stored.position
            if pos not in taken and not self._account(stored):
                return  # committed while `sync` read: read with the others
            if stored.time != self._time[0]:
                self._time = (stored.time, time_ms(stored.time))
            timed = self._time[1]
            at = self.now_ms if timed is None else timed
        if event.type != "action.transition":
            return
        p = event.payload
        action = p.get("action_id")
        to = p.get("to")
        if not isinstance(action, str):
            return
        self._call_move(p, to, action, pos, at)

    def _settle_held(self, held: list[NewEvent]) -> bool:
        """The events taken in hand that were committed since, at their position and time;
        False when one was left out of its commit (neither committed nor held any more)."""
        mine, cursor, seqs, done = self._held, self._cursor, self._seq, self._done
        while mine:
            event = mine[0]
            stored = event.stored
            if stored is None:
                # a commit takes every held event: the first one not committed is still held
                # (and so is every later one), unless its commit left it out
                return any(e is event for e in held)
            mine.popleft()
            # `_account`, written out: this loop runs for every event a commit numbered
            stream, pos = stored.stream, stored.position
            if pos <= cursor.get(stream, 0) or pos in done:
                continue  # read already
            if stored.seq == seqs.get(stream, 0) + 1:
                seqs[stream] = stored.seq
                cursor[stream] = pos
            else:
                done.add(pos)
            if event.type == "action.transition" and event.payload.get("to") in _TAKEN:
                self._settle(event, stored)
        return True

    def _settle(self, event: NewEvent, stored: Event) -> None:
        """A move taken in hand, committed as `stored`: its call takes the position (and,
        authorised, the time) the log gives."""
        p = event.payload
        to = p.get("to")
        if to not in ("REQUESTED", "AUTHORIZED"):
            return
        call = self._calls.get(p["action_id"])
        if call is None:
            return
        pos = stored.position
        if to == "REQUESTED":
            if call.position >= _AHEAD:
                call.position = pos
            return
        if call.authorised is None or call.authorised[0] < _AHEAD:
            return
        if stored.time != self._time[0]:
            self._time = (stored.time, time_ms(stored.time))
        at = self._time[1]
        at = call.authorised[1] if at is None else at
        call.authorised = (pos, at)
        for key in call.fed:
            agg = self._aggs.get(key)
            if agg is not None:
                agg.retime(call.action_id, at)

    def restart(self) -> None:
        """Forget everything and read the family's events from the log at the next `sync`: a
        decision taken in hand was refused by the log (`HistoryMoved`: another process wrote
        to the family first), so its AUTHORIZED counts no more and the others' events do."""
        with self._lock:
            self._restart()

    def _restart(self) -> None:
        """Forget everything and read the family's events again from the start."""
        self.index = ProvenanceIndex()
        self.index.defaults = self.terms.defaults
        self._aggs.clear()
        self._calls.clear()
        self._order.clear()
        self._results.clear()
        self._fact_keys.clear()
        self._fact_values.clear()
        self._cursor = dict.fromkeys(self._cursor, 0)
        self._seq = dict.fromkeys(self._cursor, 0)
        self._held, self._done, self._handed = deque(), set(), []
        self._checks = deque()
        self._generation, self._unhanded = None, True

    def rebind(self, terms: HistoryTerms) -> None:
        """Judge under another spec (`Harness.load`): everything is forgotten and read again
        from the log at the next `sync`, since a tool's trust, labels and output schema (what
        the index holds) may have changed with it."""
        with self._lock:
            if terms is not self.terms:
                self.terms = terms
                self._restart()

    def feed(self, event: Event) -> None:
        """Take one stored event of the family into the ledger."""
        with self._lock:
            if event.position <= self._cursor.get(event.stream, 0):
                return
            self._cursor[event.stream] = event.position
            self._seq[event.stream] = getattr(event, "seq", 0)  # a reader's row has none
            if self._done and event.position in self._done:
                self._done.discard(event.position)  # taken from the event in hand
                return
            kind = event.type
            if kind not in _FED:
                return
            # VALIDATED, RUNNING …: not parsed, since a move is in its canonical text (a
            # reader's row has no text, only the payload)
            text = getattr(event, "payload_json", None)
            if (
                kind == "action.transition"
                and text is not None
                and not any(m in text for m in _MOVES_FED)
            ):
                return
            p = event.payload
            if event.time != self._time[0]:  # the events of one commit share their time
                self._time = (event.time, time_ms(event.time))
            at = self._time[1]
            if at is None:
                at = self.now_ms  # not yet timed: it happens now
            pos = event.position
            if kind == "action.transition":
                to = p.get("to")
                action = p.get("action_id")
                if not isinstance(action, str):
                    return
                if not self._call_move(p, to, action, pos, at) and to in _ENDS:
                    result = p.get("result")
                    data = result.get("data") if isinstance(result, Mapping) else None
                    self.finished(action, to, data, position=pos, time_ms=at)
            elif kind == USER_SAID:
                self.said(p.get("text"), position=pos, values=p.get("values"))
            elif kind == WORKFLOW_INPUT:
                self.workflow_input(p.get("input"), position=pos)
            elif kind == WORKFLOW_STEP_RESULT:
                tool = p.get("tool")
                if isinstance(tool, str):
                    self.result(tool, p.get("data"), position=pos, time_ms=at)
            elif kind == WORKFLOW_SOURCES:
                if "after" in p:  # only what changed since an earlier step's: resolve it
                    p = self._resolve(p, event.stream)
                if "input" in p:
                    self.workflow_input(p.get("input"), position=pos)
                results = p.get("results")
                for found in results if isinstance(results, list) else ():
                    tool = found.get("tool") if isinstance(found, Mapping) else None
                    if isinstance(tool, str):
                        self.result(tool, found.get("data"), position=pos, time_ms=at)
            elif kind == "session.started":
                facts = p.get("facts")
                if isinstance(facts, Mapping):
                    self.facts(facts.get("values"), position=pos, stream=event.stream)
            elif kind == FACTS_UPDATED:
                if "changes" in p:  # what an `on_success` changed, not the facts whole
                    self.fact_changes(p.get("changes"), position=pos, stream=event.stream)
                else:
                    self.facts(p.get("values"), position=pos, stream=event.stream)

    def _resolve(self, payload: Mapping[str, Any], stream: str) -> dict[str, Any]:
        """A `workflow.sources` that refers to an earlier step's (`after`), whole: read from
        the log through `sources`. Without a log to read, or with the earlier step's missing
        from it, the step's sources cannot be known: refused, never read as fewer."""
        if self.sources is None:
            raise SourcesUnresolved("a workflow step's sources refer to a log this ledger lacks")
        return self.sources.resolve(payload, stream)

    # -- what enters ----------------------------------------------------------------------------

    def said(self, text: Any, *, position: int, values: Any = None) -> None:
        """A user message: its whole text, its tokens and its spans, and the values the
        application extracted from it, of kind `user`."""
        if isinstance(text, str):
            self.index.add_text(text, Source("user", position))
        if values is not None:
            self.index.add_value(values, Source("user", position))

    def workflow_input(self, value: Any, *, position: int) -> None:
        """A workflow run's input, of kind `user`."""
        self.index.add_value(value, Source("user", position))

    def facts(self, values: Any, *, position: int, stream: str = "") -> None:
        """Fact values (when a session opens, when they change), of kind `trusted`, each
        source naming its fact. A value that left a fact of the stream's session (`on_success
        remove`, `Session.update_facts`) is no longer a source as that fact from this event on,
        for the whole family (whose sessions share this index): what the fact's former value
        put in the index and its new value does not is withdrawn (`ProvenanceIndex.retract`);
        another source of the value still counts."""
        if not isinstance(values, Mapping):
            return
        for name, value in values.items():
            keys = value_keys(value)
            before = self._fact_keys.get((stream, name))
            self._fact_keys[(stream, name)] = keys
            self._fact_values[(stream, name)] = value
            if before is not None:
                gone = before - keys
                if gone:
                    self.index.retract(gone, _of_fact(name), position)
            self.index.add_value(value, Source("trusted", position, fact=name))

    def fact_changes(self, changes: Any, *, position: int, stream: str = "") -> None:
        """`facts` of what an `on_success` changed (`fact_changes`, a `facts.updated` event's
        `changes`): an added value enters the index alone, as that fact's (the fact's other
        values are there already); a removal withdraws what the fact's new value no longer
        holds, as `facts` does."""
        if not isinstance(changes, list):
            return
        for change in changes:
            if not isinstance(change, Mapping) or not isinstance(change.get("fact"), str):
                continue
            name, key = change["fact"], (stream, change["fact"])
            current = {name: self._fact_values[key]} if key in self._fact_values else {}
            value = apply_fact_changes(current, [change]).get(name)
            if value is None:
                continue
            if change.get("op") == "remove":
                self.facts({name: value}, position=position, stream=stream)
                continue
            added = change.get("values")
            self._fact_values[key] = value
            self._fact_keys[key] = self._fact_keys.get(key, set()) | value_keys(added)
            self.index.add_value(added, Source("trusted", position, fact=name))

    def requested(
        self,
        action_id: str,
        tool_id: str,
        args: Mapping[str, Any],
        *,
        position: int,
        time_ms: int,
        tool_call_id: str | None = None,
    ) -> None:
        known = self._calls.get(action_id)
        if known is not None and known.position >= _AHEAD:
            known.position = position  # taken in hand, read once committed
            return
        call = _Call(action_id, tool_id, tool_call_id, args, position)
        self._calls[action_id] = call
        self._order.append(call)

    def authorised(self, action_id: str, *, position: int, time_ms: int) -> None:
        call = self._calls.get(action_id)
        if call is None:
            return
        if call.authorised is not None:
            if call.authorised[0] >= _AHEAD and position < _AHEAD:  # taken in hand before
                call.authorised = (position, time_ms)
                for key in call.fed:
                    agg = self._aggs.get(key)
                    if agg is not None:
                        agg.retime(action_id, time_ms)
            return
        call.authorised = (position, time_ms)
        for key in self.terms.feeding(call.tool_id):
            agg = self._aggs.get(key)
            if agg is not None and not self.terms.settles_on_result(key):
                self._enter(key, agg, call, time_ms)

    def finished(
        self, action_id: str, state: str, data: Any, *, position: int, time_ms: int
    ) -> None:
        """A call ended: SUCCEEDED (its result enters as a source), FAILED or CANCELLED (it
        leaves `count` and `sum`)."""
        call = self._calls.get(action_id)
        if call is None or call.ended:
            return
        call.ended = True
        call.succeeded = state == "SUCCEEDED"
        # a term made later replays the call from here, data or none (a tool without output)
        call.result_at = (position, time_ms)
        if data is not None:
            call.result = data
            self.result(call.tool_id, data, position=position, time_ms=time_ms, call=call.action_id)
        for key in self.terms.feeding(call.tool_id):
            found = self._aggs.get(key)
            if found is None:
                continue
            agg = found
            node = self.terms.nodes[key]
            if self.terms.settles_on_result(key):
                if call.succeeded or (node.func == "called" and call.authorised is not None):
                    self._enter(key, agg, call, time_ms)
            elif not call.succeeded and node.func in ("count", "sum"):
                agg.remove(call.action_id)

    def result(
        self, tool_id: str, data: Any, *, position: int, time_ms: int, call: str | None = None
    ) -> None:
        """A result a tool produced: a source of the tool's trust (per field where declared),
        carrying the tool's labels and those of its fields present in it (`seen`), and naming
        the call that produced it (`call`, its action id; None for a workflow step's)."""
        tool = self.terms.spec.tools.get(tool_id)
        labels = result_labels(tool, data)
        trust = (tool.trust if tool is not None else None) or "untrusted"
        fields = tool.output if tool is not None else None
        if tool is not None and tool.kind == "mcp":
            # an external MCP server's result is untrusted whatever the spec says of it
            trust, fields = "untrusted", None
        self.index.add_value(data, Source(trust, position, tool_id, labels, call=call), fields)
        if labels:
            self._results.append((position, time_ms, labels))
            for key, seen in self._aggs.items():
                node = self.terms.nodes[key]
                if node.func == "seen" and node.label in labels:
                    seen.add(_Entry(time_ms, 1, None))

    # -- aggregates -------------------------------------------------------------------------

    def _enter(self, key: str, agg: _Aggregate, call: _Call, at: int) -> None:
        if key in call.fed:
            return
        node = self.terms.nodes[key]
        value = _contribution(self.terms, key, node, call, self.index)
        if value is None:
            return
        call.fed.add(key)
        agg.add(_Entry(at, value, call.action_id))
        if call.tool_call_id is not None:
            agg.by_call[call.tool_call_id] = agg.by_call[call.action_id]

    def _aggregate(self, key: str) -> _Aggregate:
        agg = self._aggs.get(key)
        if agg is None:
            with self._lock:
                node = self.terms.nodes.get(key)
                if node is None:  # a term compiled under another catalogue of the spec
                    node = History.model_validate_json(key)
                    self.terms.intern(node)
                agg = _Aggregate(node.window_ms)
                # replay what the ledger already holds (a term new to this ledger)
                if node.func == "seen":
                    for _, at, labels in self._results:
                        if node.label in labels:
                            agg.add(_Entry(at, 1, None))
                else:
                    settle = self.terms.settles_on_result(key)
                    feeding = set(self.terms.tools_fed(key))
                    for call in self._order:
                        if call.tool_id not in feeding:
                            continue
                        call.fed.discard(key)
                        if settle:
                            if call.result_at is not None and (
                                call.succeeded
                                or (node.func == "called" and call.authorised is not None)
                            ):
                                self._enter(key, agg, call, call.result_at[1])
                        elif call.authorised is not None:
                            self._enter(key, agg, call, call.authorised[1])
                            if call.ended and not call.succeeded and node.func in ("count", "sum"):
                                agg.remove(call.action_id)
                    if agg.window is not None:
                        agg.entries = deque(sorted(agg.entries, key=lambda e: e.time))
                self._aggs[key] = agg
        return agg

    def number(self, key: str, exclude: str | None = None) -> int | float:
        """`count`/`sum` over the earlier calls (the call `exclude` left out), or for
        `called`/`succeeded`/`seen` how many entries hold."""
        with self._lock:  # a read drops expired entries: one reader or feeder at a time
            return self._aggregate(key).read(self.now_ms, exclude)

    def holds(self, key: str, exclude: str | None = None) -> bool:
        with self._lock:
            return self._aggregate(key).read(self.now_ms, exclude) > 0

    def from_results(
        self,
        key: str,
        found: Origin | None,
        only: bool = False,
        field: tuple[str, ...] = (),
        value: Any = None,
    ) -> bool:
        """`value from result[.FIELD](sel …) [only]`: some source of the value (`found`, what
        the index gave for it) is the result of an earlier call the `succeeded` term `key`
        counts now — of a selected tool, within its window, meeting its `when` — holding the
        value at `field` when one is given (`value`: the value, whose normalised key is
        looked for there); with `only`, every source is one."""
        if found is None:
            return False
        with self._lock:
            return bool(self._results_of(key, found, field, value, only))

    def results_of(
        self, key: str, found: Origin | None, field: tuple[str, ...] = (), value: Any = None
    ) -> list[Source]:
        """For evidence: the sources of a value that are results of calls the `succeeded`
        term `key` counts (`from_results`), in the order they entered."""
        if found is None:
            return []
        with self._lock:
            return self._results_of(key, found, field, value, False)

    def _results_of(
        self, key: str, found: Origin, field: tuple[str, ...], value: Any, only: bool
    ) -> list[Source]:
        agg = self._aggregate(key)
        agg.read(self.now_ms, None)  # drop what left the window
        by_call = agg.by_call
        wanted = normalize(value) if field else None
        out: list[Source] = []
        for source in found.sources:
            entry = by_call.get(source.call) if source.call is not None else None
            if entry is not None and entry.alive and field:
                call = self._calls.get(source.call or "")
                if call is None or wanted not in keys_at(call.result, field):
                    entry = None
            if entry is not None and entry.alive:
                out.append(source)
            elif only:
                return []
        return out

    def entries_of(self, key: str, exclude: str | None = None) -> list[tuple[int, str]]:
        """For evidence: (position, tool id) of the live entries of a call term."""
        agg = self._aggregate(key)
        agg.read(self.now_ms, None)
        out = []
        for call in self._order:
            entry = agg.by_call.get(call.action_id)
            if entry is not None and entry.alive and call.tool_call_id != exclude:
                pos = call.authorised[0] if call.authorised else 0
                out.append((pos, call.tool_id))
        return out


class SourcesUnresolved(RuntimeError):
    """A workflow step's sources refer to an earlier step's that the log does not hold."""


class SourcesChain:
    """Resolves a `workflow.sources` that holds only what changed since an earlier step of the
    run (`after`: that step's stream; `dropped`: the results gone since) into the whole: the
    run's input and every earlier call step's result, as the step's policy saw them. Each
    earlier step's whole is kept (the last few streams), so the steps of a run read in order
    resolve in one read. Logs written before hold the whole in each event: nothing to
    resolve. One per store in a process (`of`), shared by the sessions of a run's steps: each
    step's whole is there for the next."""

    KEEP = 256
    """The wholes kept, the most recently used: a few for each run under way."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._whole: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, store: EventStore) -> SourcesChain:
        """The store's chain in this process."""
        with _CHAINS_LOCK:
            try:
                found = _CHAINS.get(store)
                if found is None:
                    found = _CHAINS[store] = cls(store)
            except TypeError:  # a store that takes no weak reference
                found = cls(store)
            return found

    def resolve(self, payload: Mapping[str, Any], stream: str | None = None) -> dict[str, Any]:
        """`payload` (a step's `workflow.sources`), whole; kept as the whole of `stream`
        (or the whole kept for it: what the step that wrote it knew, `keep`)."""
        if stream is not None:
            with self._lock:
                known = self._whole.get(stream)
            if known is not None:
                return known
        base = self.whole(str(payload.get("after")))
        out = _apply(base, payload)
        if stream is not None:
            with self._lock:
                self._keep(stream, out)
        return out

    def whole(self, stream: str) -> dict[str, Any]:
        """The whole sources of the step on `stream`."""
        chain: list[tuple[str, Mapping[str, Any]]] = []
        at: str | None = stream
        base: dict[str, Any] = {}
        while at is not None:
            with self._lock:
                known = self._whole.pop(at, None)
                if known is not None:
                    self._whole[at] = known  # the most recently used last
            if known is not None:
                base = known
                break
            found = self._read(at)
            if found is None:
                raise SourcesUnresolved(_missing(self.store, at))
            chain.append((at, found))
            after = found.get("after")
            at = str(after) if after is not None else None
        for name, found in reversed(chain):
            base = _apply(base, found)
            with self._lock:
                self._keep(name, base)
        return base

    def _read(self, stream: str) -> Mapping[str, Any] | None:
        for flush in (False, True):  # committed (the run's step before), else held here
            for event in self.store.read(stream, flush=flush):
                if event.type == WORKFLOW_SOURCES:
                    return event.payload
        return None

    def keep(self, stream: str, whole: dict[str, Any]) -> None:
        """The whole sources of the step on `stream`, known without reading the log."""
        with self._lock:
            self._keep(stream, whole)

    def _keep(self, stream: str, whole: dict[str, Any]) -> None:
        self._whole.pop(stream, None)
        if len(self._whole) >= self.KEEP:
            self._whole.pop(next(iter(self._whole)))
        self._whole[stream] = whole


def _missing(store: Any, stream: str) -> str:
    """Why the sources of the step on `stream` cannot be read: not in the log, and, in a log
    a compaction cut (one written before compactions kept what their steps refer to), where
    they went and how to read them."""
    said = f"the sources of `{stream}` are not in the log"
    try:
        note = archived_note(store)
    except Exception:  # a store that keeps no cut (a step's buffer): nothing more to say
        note = None
    return said if note is None else f"{said}; {note}: `--archive FILE` reads it too"


_CHAINS: weakref.WeakKeyDictionary[Any, SourcesChain] = weakref.WeakKeyDictionary()
_CHAINS_LOCK = threading.Lock()


def _apply(base: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """`payload`'s sources over the whole `base`: its results replace those of their step,
    its `dropped` steps are gone, its `input` (the first step's) replaces the run's."""
    if "after" not in payload:
        return {k: v for k, v in payload.items() if k in ("input", "results")}
    gone = set(payload.get("dropped") or ())
    results = {
        r.get("step"): r
        for r in (base.get("results") or ())
        if isinstance(r, Mapping) and r.get("step") not in gone
    }
    for r in payload.get("results") or ():
        if isinstance(r, Mapping):
            results[r.get("step")] = r
    out: dict[str, Any] = {}
    if "input" in base:
        out["input"] = base["input"]
    out["results"] = [results[k] for k in sorted(results, key=str)]
    return out


_FED = frozenset(
    {
        "action.transition",
        USER_SAID,
        WORKFLOW_INPUT,
        WORKFLOW_STEP_RESULT,
        WORKFLOW_SOURCES,
        "session.started",
        FACTS_UPDATED,
    }
)


_MOVES_FED = tuple(
    f'"to":"{m}"' for m in ("REQUESTED", "AUTHORIZED", "SUCCEEDED", "FAILED", "CANCELLED")
)
"""How the moves `feed` takes appear in a transition's canonical text: a transition whose text
holds none of them is none of them (one that holds one elsewhere is parsed and checked)."""


_ENDS = ("SUCCEEDED", "FAILED", "CANCELLED")
_TAKEN = ("REQUESTED", "AUTHORIZED")
"""The moves the ledger takes in hand (`Ledger.hold`)."""

_AHEAD = 1 << 62
"""The position of a call's event taken in hand before its commit: past every committed event,
as it will be (a held event is committed after everything committed before it)."""

_MAPPINGS = (dict, MappingProxyType)
"""The classes a call's arguments have in an event: a read event's, a call's frozen ones."""


def _of_fact(fact: str) -> Callable[[Source], bool]:
    """Whether a source is a value of `fact`."""
    return lambda s: s.fact == fact


def fact_changes(
    tool: Tool, args: Mapping[str, Any], data: Any, facts: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The `on_success` updates of a call that succeeded with `args` and result `data`, as
    the changes a `facts.updated` event records (`{"fact", "op": "add"|"remove", "values"}`,
    in written order): what `apply_fact_changes` makes of the facts `facts`. `when` must hold
    of the call's `args` and `result`; `each` takes every element of a list (through `item`
    when given); a path the call does not hold, or a removal of what the fact does not hold,
    changes nothing. The one reading of `on_success`: the runtime (`apply_on_success`), a
    spec test's earlier calls (`facts_after`, `Ledger.from_steps`) and the analysis use it,
    through `facts_changed` where they want the facts' new values."""
    changes: list[dict[str, Any]] = []
    scope: Scope | None = None
    current: dict[tuple[str, str | None], list[Any]] = {}
    for update in tool.on_success:
        if update.when is not None:
            if scope is None:
                scope = Scope(args=args, result=_result(data))
            if not evaluate(update.when, scope):
                continue
        found = _of_call(update.value, args, data)
        if found is None:
            continue
        key: str | None = None
        if update.key is not None:  # `to FACT[KEY]`: the entry under a text of the call
            key = _of_call(update.key, args, data)
            if key.__class__ is not str:
                continue
        values = _elements(update, found)
        if not values:
            continue
        where = (update.fact, key)
        items = current.get(where)
        if items is None:
            held = facts.get(update.fact)
            if key is not None:
                held = held.get(key) if isinstance(held, Mapping) else None
            items = list(held) if isinstance(held, list | tuple) else []
        if update.op == "remove":
            kept = [i for i in items if not any(value_eq(i, v) for v in values)]
            if len(kept) == len(items):
                continue  # nothing to remove: the fact is as it was
            current[where] = kept
        else:
            current[where] = [*items, *values]
        change = {"fact": update.fact, "op": update.op, "values": values}
        if key is not None:
            change["key"] = key
        changes.append(change)
    return changes


def _of_call(path: Path, args: Mapping[str, Any], data: Any) -> Any:
    """The value of the call at `args.*` or `result.*` (None when it has none)."""
    found: Any = args if path.root == "args" else data
    for part in path.parts:
        found = found.get(part) if isinstance(found, Mapping) else None
    return found


def apply_fact_changes(
    facts: Mapping[str, Any], changes: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The new values of the facts `changes` (`fact_changes`, a `facts.updated` event's)
    changes, from their values in `facts`, the changes applied in order: `add` appends the
    values; `remove` drops every item equal to one of them (`value_eq`, as `in` compares).
    A change with a `key` changes that entry of a map fact (an entry left empty stays, empty).

    >>> apply_fact_changes({"payees": ["DE1", "FR2", "DE1"]},
    ...     [{"fact": "payees", "op": "remove", "values": ["DE1"]},
    ...      {"fact": "payees", "op": "add", "values": ["IT3"]}])
    {'payees': ['FR2', 'IT3']}
    >>> apply_fact_changes({"by_account": {"a1": ["DE1"]}},
    ...     [{"fact": "by_account", "op": "add", "values": ["IT3"], "key": "a2"}])
    {'by_account': {'a1': ['DE1'], 'a2': ['IT3']}}
    """
    changed: dict[str, Any] = {}
    for change in changes:
        name, values, key = change.get("fact"), change.get("values"), change.get("key")
        if not isinstance(name, str) or not isinstance(values, list | tuple):
            continue
        current = changed.get(name, facts.get(name))
        if key is not None:
            if not isinstance(key, str):
                continue
            entries = dict(current) if isinstance(current, Mapping) else {}
            current = entries.get(key)
        items = list(current) if isinstance(current, list | tuple) else []
        if change.get("op") == "remove":
            items = [i for i in items if not any(value_eq(i, v) for v in values)]
        else:
            items.extend(values)
        if key is not None:
            entries[key] = items
            changed[name] = entries
        else:
            changed[name] = items
    return changed


def facts_changed(
    tool: Tool, args: Mapping[str, Any], data: Any, facts: Mapping[str, Any]
) -> dict[str, Any]:
    """The `on_success` updates of a call (`fact_changes`) as each list fact they change, by
    name, with its new items (from its items in `facts`).

    >>> from harnessc.runtime.model import FactUpdate, Path, Tool
    >>> drop = FactUpdate(value=Path(root="args", parts=("iban",)), fact="payees", op="remove")
    >>> tool = Tool(id="payee.remove", wire_name="payee_remove", on_success=(drop,))
    >>> facts_changed(tool, {"iban": "DE1"}, None, {"payees": ["DE1", "FR2", "DE1"]})
    {'payees': ['FR2']}
    """
    return apply_fact_changes(facts, fact_changes(tool, args, data, facts))


def _elements(update: FactUpdate, found: Any) -> list[Any]:
    """The values an update adds or removes: the value found, or with `each` every element of
    the list found (read through `item`; an element without it gives nothing)."""
    if update.each is None:
        return [found]
    if not isinstance(found, list | tuple):
        return []
    if update.item is None:
        return [e for e in found if e is not None]
    out = []
    for element in found:
        value = read_path(update.item, Scope(vars={update.each: element}))
        if value is not None:
            out.append(value)
    return out


def _contribution(
    terms: HistoryTerms, key: str, node: History, call: _Call, index: ProvenanceIndex
) -> int | float | None:
    """What an earlier call adds to a term (1, or its field for `sum`), or None when the term
    does not take it (not selected, `when` does not hold, the field is not a number). A `from`
    in `when` reads the call's arguments as they were when it was made: the sources that
    entered the session before it."""
    tool = terms.spec.tools.get(call.tool_id)
    if tool is None:
        return None
    op = call.args.get("op")
    # the view computed once per tool and operation: a call is judged on it too
    view = terms.view(tool.id, op if isinstance(op, str) and op in tool.operations else None)
    if not terms.selects(key, view):
        return None
    if node.where is None and node.func != "sum":
        return 1
    scope = Scope(
        args=call.args,
        tool=view,
        result=_result(call.result),
        sources=IndexBefore(index, call.position),
    )
    if node.where is not None and not evaluate(node.where, scope):
        return None
    if node.func != "sum":
        return 1
    if node.field is None:
        return None
    value = read_path(node.field, scope)
    if value.__class__ not in (int, float):
        return None
    return value


def _with_defaults(tool: Tool | None, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """An earlier call's arguments as the runtime records them: the schema's defaults of the
    arguments left out filled in, as normalization does."""
    schema = tool.input if tool is not None else None
    missing = [
        f
        for f in (schema.fields if schema is not None else ())
        if f.default is not None and args.get(f.name) is None
    ]
    if not missing:
        return args
    return {**args, **{f.name: f.default for f in missing}}


def _result(value: Any) -> Any:
    """An earlier call's result as a condition reads it: its data whatever its shape (a record,
    or a list or scalar of an `output` written as a type); a call without data, an empty record."""
    return {} if value is None else value


def result_labels(tool: Tool | None, data: Any) -> frozenset[str]:
    """The data labels a result carries: its tool's, plus those of its fields present in it."""
    if tool is None:
        return frozenset()
    labels = set(tool.labels)
    top = fields_of(tool.output)
    if top is not None and data is not None:
        # the listed fields as provenance reads them (`fields_of`: through lists, maps, unions)
        stack: list[tuple[Any, Known]] = [(data, top)]
        while stack:
            value, known = stack.pop()
            if isinstance(value, list):
                stack.extend((v, known) for v in value)
            elif isinstance(value, Mapping) and isinstance(known, Entries):
                stack.extend((v, known.inner) for v in value.values())
            elif isinstance(value, Mapping) and isinstance(known, dict):
                for fld in known.values():
                    inner = value.get(fld.name)
                    if inner is not None:
                        labels.update(fld.labels)
                        stack.append((inner, fields_of(fld.type)))
    return frozenset(labels)


def condition_terms(conditions: Iterable[Condition | None]) -> list[History]:
    return [t for c in conditions for t in session_terms(c) if isinstance(t, History)]


def facts_after(
    spec: Spec, steps: Iterable[SessionStep], facts: Mapping[str, Any]
) -> dict[str, Any]:
    """The session's facts after its earlier steps (`SpecTest.before`): `facts` with what
    each earlier call's `on_success` changed, in order (`facts_changed`), as the runtime holds
    them when the next call is decided.

    >>> from harnessc.runtime.model import SessionStep, Spec
    >>> facts_after(Spec(name="s", root_module="s"), [SessionStep(said="hi")], {"a": [1]})
    {'a': [1]}
    """
    out = dict(facts)
    for step in steps:
        tool = spec.tools.get(step.tool) if step.said is None and step.tool is not None else None
        if tool is not None:
            out.update(facts_changed(tool, _with_defaults(tool, step.args), step.result, out))
    return out


def prelude_ledger(
    spec: Spec,
    steps: Iterable[SessionStep],
    now_ms: int,
    facts: Mapping[str, Any] | None = None,
) -> Ledger:
    """The ledger of a session before its call, from a spec test's or a generated case's
    earlier steps (`SpecTest.before`): `Ledger.from_steps` over the spec's history terms,
    the session opened with `facts` (the facts the call reads are `facts_after` the steps).

    >>> from harnessc.runtime.model import SessionStep, Spec
    >>> spec = Spec(name="s", root_module="s")
    >>> prelude_ledger(spec, [SessionStep(said="pay DE89370400440532013000")], 0).now_ms
    0
    """
    return Ledger.from_steps(HistoryTerms(spec), steps, now_ms, facts)
