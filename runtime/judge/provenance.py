"""Provenance: the one normaliser and tokenizer, and a session's index of where values appeared.

A session's sources are the user's messages, the results its calls produced, its facts and a
workflow's input (design: docs/runtime.md, "Session-aware policy"). Each source is indexed once,
when it enters: every scalar of a structured value whole, and inside text the identifier-like
tokens (e-mail addresses, URLs and their hosts, domain names, IBAN-like strings, id-like tokens,
numbers with at least 4 digits, quoted strings). Deciding a call then costs one dict lookup per
argument value: the argument is normalised by the same function (`normalize`) and looked up.

>>> index = ProvenanceIndex()
>>> index.add_text("please pay DE89 3704 0044 0532 0130 00 today", Source("user", 3))
>>> index.kinds_of("DE89370400440532013000")
frozenset({'user'})
>>> index.lookup(100) is None            # a short number inside text is not indexed
True
>>> extract("hosts", "see https://Docs.Example.com/a and mail bob@corp.test")
['docs.example.com', 'corp.test']
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ..model.ir import Field, Schema, Type

__all__ = [
    "KIND_BITS",
    "IndexBefore",
    "Origin",
    "ProvenanceIndex",
    "Source",
    "extract",
    "normalize",
    "provenance_holds",
    "tokens",
]

KIND_BITS: dict[str, int] = {"user": 1, "trusted": 2, "untrusted": 4}
"""A source kind as a bit, so an index entry holds its kinds as one small integer."""
_KIND_OF_BIT = {bit: kind for kind, bit in KIND_BITS.items()}

_MIN_NUMBER_DIGITS = 4
_MIN_ID = 6
_MAX_QUOTED = 200

# -- the kinds of token, each a pattern matched both whole (an argument, a scalar) and inside text
_EMAIL = r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}"
_URL = r"[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"
# IBAN-like: 2 capital letters, 2 digits, then 10-30 capitals or digits, in groups of four
# separated by single spaces as people write them, or with no spaces at all
_IBAN = r"[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{10,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)"
_NUMBER = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?"
_ID = r"[A-Za-z0-9][A-Za-z0-9_-]*[A-Za-z0-9]"

_WHOLE = {
    "email": re.compile(_EMAIL),
    "url": re.compile(_URL),
    "iban": re.compile(_IBAN),
    "number": re.compile("-?(?:" + _NUMBER + ")"),
    "host": re.compile(_HOST),
}
_NUMBER_WHOLE = _WHOLE["number"].fullmatch
_EMAIL_WHOLE = _WHOLE["email"].fullmatch
_URL_WHOLE = _WHOLE["url"].fullmatch
_HOST_WHOLE = _WHOLE["host"].fullmatch
_IBAN_WHOLE = _WHOLE["iban"].fullmatch
# one scan over a text: the leftmost token wins, the longer kinds tried first
_SCAN = re.compile(
    r"(?<![\w@.+-])(?:"
    f"(?P<url>{_URL})|(?P<email>{_EMAIL})|(?P<iban>{_IBAN})(?![A-Za-z0-9])|"
    f"(?P<host>{_HOST})(?![\\w-])|(?P<number>{_NUMBER})(?![\\w.]?[0-9A-Za-z_])|"
    f"(?P<id>{_ID})(?![\\w-])"
    r")"
)
_QUOTED = re.compile(r"\"([^\"\n]+)\"|'([^'\n]+)'|`([^`\n]+)`|“([^”\n]+)”|‘([^’\n]+)’")
# what ends a sentence rather than a URL
_URL_TAIL = ".,;:!?)]}'\""


def _nfc(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text.strip()


def _number_text(text: str) -> str | None:
    """Canonical decimal text: `100`, `100.5`; `100.0` and `1,500` read as `100` and `1500`."""
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _url_text(url: str) -> str:
    """A URL with its scheme and host case-folded; the path, query and fragment keep case."""
    scheme, _, rest = url.partition("://")
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    return f"{scheme.lower()}://{rest[:cut].lower()}{rest[cut:]}"


def _host_of_url(url: str) -> str | None:
    rest = url.partition("://")[2]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    host = rest[:cut].rpartition("@")[2].partition(":")[0].lower()
    return host or None


def normalize(value: Any) -> str | None:
    """The key a value is indexed and looked up under, or None for a value that is never
    indexed (absent, a boolean, a list or record, an empty text).

    Text is NFC-normalised and trimmed; a whole e-mail address or host is case-folded; a URL's
    scheme and host are case-folded (its path keeps case); an IBAN-like text loses its spaces;
    a number (or a text that is one) becomes canonical decimal text. Anything else keeps its
    case. Idempotent: `normalize(normalize(v)) == normalize(v)`.

    >>> normalize(" Bob@Example.COM "), normalize(100.0), normalize("1,500.50")
    ('bob@example.com', '100', '1500.5')
    """
    cls = value.__class__
    if cls is str:
        text = _nfc(value)
        if not text:
            return None
        # each kind's pattern runs only when a cheap test of the text allows it
        first = text[0]
        if (first.isdigit() or first == "-") and _NUMBER_WHOLE(text):
            return _number_text(text)
        if "@" in text and _EMAIL_WHOLE(text):
            return text.lower()
        if "://" in text and _URL_WHOLE(text):
            return _url_text(text)
        if len(text) >= 14 and "A" <= first <= "Z" and _IBAN_WHOLE(text):
            return text.replace(" ", "")
        if "." in text and _HOST_WHOLE(text):
            return text.lower()
        return text
    if cls is int:
        return str(value)
    if cls is float:
        return _number_text(repr(value))
    return None


def tokens(text: str) -> Iterator[tuple[str, str]]:
    """The identifier-like tokens inside a text as `(kind, normalised value)`: e-mail
    addresses (and their domains as hosts), URLs (and their hosts), hosts, IBAN-like strings,
    id-like tokens (at least 6 characters with a letter and a digit, or with `-`/`_`),
    numbers of at least 4 digits and quoted strings. Plain words and short numbers are not
    tokens.

    >>> list(tokens("ref chg-1234, 42 items, see www.Example.org"))
    [('id', 'chg-1234'), ('host', 'www.example.org')]
    """
    text = _nfc(text)
    for match in _SCAN.finditer(text):
        kind = match.lastgroup
        raw = match.group()
        if kind == "url":
            raw = raw.rstrip(_URL_TAIL)
            if "://" not in raw or raw.endswith("://"):
                continue
            yield "url", _url_text(raw)
            host = _host_of_url(raw)
            if host:
                yield "host", host
        elif kind == "email":
            yield "email", raw.lower()
            yield "host", raw.rpartition("@")[2].lower()
        elif kind == "iban":
            yield "iban", raw.replace(" ", "")
        elif kind == "host":
            yield "host", raw.lower()
        elif kind == "number":
            number = _number_text(raw)
            if number is not None and sum(c.isdigit() for c in number) >= _MIN_NUMBER_DIGITS:
                yield "number", number
        elif kind == "id" and len(raw) >= _MIN_ID and _id_like(raw):
            yield "id", raw
    for match in _QUOTED.finditer(text):
        inner = next(g for g in match.groups() if g is not None)
        key = normalize(inner)
        if key is not None and len(inner) <= _MAX_QUOTED:
            yield "quoted", key


def _id_like(raw: str) -> bool:
    if "-" in raw or "_" in raw:
        return True
    return any(c.isdigit() for c in raw) and any(c.isalpha() for c in raw)


_EXTRACT_KINDS = {"urls": ("url",), "hosts": ("host",), "emails": ("email",)}


def extract(func: str, text: Any) -> list[str] | None:
    """`urls(text)`, `hosts(text)`, `emails(text)`: the tokens of that kind inside a text,
    normalised, in order of appearance, each once; None when `text` is not a text.

    >>> extract("urls", "go to HTTPS://Evil.test/Pay?x=1.")
    ['https://evil.test/Pay?x=1']
    """
    if value_is_not_text(text):
        return None
    wanted = _EXTRACT_KINDS[func]
    out: dict[str, None] = {}
    for kind, value in tokens(text):
        if kind in wanted:
            out.setdefault(value)
    return list(out)


def value_is_not_text(value: Any) -> bool:
    return value.__class__ is not str


# ---------------------------------------------------------------------------------------------
# The index


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value appeared: the source's kind (`user`, `trusted`, `untrusted`), the event's
    position in the log, the tool whose result it was (None for a user message or a fact) and
    that result's data labels."""

    kind: str
    position: int
    tool: str | None = None
    labels: frozenset[str] = frozenset()


@dataclass(slots=True)
class Origin:
    """Every source of one normalised value: their kinds as bits, the union of their labels,
    and the sources themselves in the order they entered (for evidence)."""

    mask: int = 0
    labels: frozenset[str] = frozenset()
    sources: list[Source] = field(default_factory=list)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(kind for bit, kind in _KIND_OF_BIT.items() if self.mask & bit)


_NOT_INDEXED = frozenset({"[REDACTED]"})


class ProvenanceIndex:
    """A session's index: normalised value → `Origin`. Sources are added once (`add_text`,
    `add_value`); `lookup` is one `normalize` and one dict lookup."""

    __slots__ = ("_last", "_version", "entries")

    def __init__(self) -> None:
        self.entries: dict[str, Origin] = {}
        # the last value looked up and its answer: a decision testing one argument against
        # several sources normalises it once (cleared whenever a source enters)
        self._version = 0
        self._last: tuple[Any, Origin | None, int] = (None, None, -1)

    def __len__(self) -> int:
        return len(self.entries)

    def _put(self, key: str, source: Source) -> None:
        self._version += 1
        found = self.entries.get(key)
        if found is None:
            found = self.entries[key] = Origin()
        elif found.sources and found.sources[-1] is source:
            return  # the same source names this value twice
        found.mask |= KIND_BITS[source.kind]
        if source.labels and not source.labels <= found.labels:
            found.labels = found.labels | source.labels
        found.sources.append(source)

    def add_text(self, text: str, source: Source) -> None:
        """A text: its whole value and its tokens."""
        key = normalize(text)
        if key is None or key in _NOT_INDEXED:
            return
        self._put(key, source)
        if len(key) >= _MIN_ID or not key.isalnum():
            for _, token in tokens(text):
                self._put(token, source)

    def add_value(
        self,
        value: Any,
        source: Source,
        schema: Schema | Type | None = None,
        trust: Mapping[str, str] | None = None,
    ) -> None:
        """A structured value (a result, a fact): every scalar whole, every text's tokens too.
        With the schema of the value, a `secret` field is skipped and a field's declared
        `trust` replaces the source's kind for the values under it."""
        for scalar, kind in scalars(value, fields_of(schema), source.kind):
            item = source if kind == source.kind else _with_kind(source, kind)
            if scalar.__class__ is str:
                self.add_text(scalar, item)
            else:
                key = normalize(scalar)
                if key is not None:
                    self._put(key, item)

    def lookup(self, value: Any) -> Origin | None:
        """The sources of a value (one normalisation, one dict lookup); None: nowhere."""
        last, version = self._last, self._version
        if last[0] is value and last[2] == version:
            return last[1]
        key = normalize(value)
        found = None if key is None else self.entries.get(key)
        self._last = (value, found, version)
        return found

    def kinds_of(self, value: Any) -> frozenset[str]:
        found = self.lookup(value)
        return frozenset() if found is None else found.kinds


class IndexBefore:
    """A session's index as it was before the event at `position`: the provenance of an
    earlier call's arguments as they were when that call was made (a history term's `when`
    reads them so). Only the sources that entered before `position` count.

    >>> index = ProvenanceIndex()
    >>> index.add_text("pay DE89370400440532013000", Source("user", 3))
    >>> index.add_text("DE89370400440532013000", Source("untrusted", 9, "mail.read"))
    >>> IndexBefore(index, 5).lookup("DE89370400440532013000").kinds
    frozenset({'user'})
    >>> IndexBefore(index, 3).lookup("DE89370400440532013000") is None
    True
    """

    __slots__ = ("index", "position")

    def __init__(self, index: ProvenanceIndex, position: int) -> None:
        self.index = index
        self.position = position

    def lookup(self, value: Any) -> Origin | None:
        found = self.index.lookup(value)
        if found is None:
            return None
        before = self.position
        if all(s.position < before for s in found.sources):
            return found
        kept = [s for s in found.sources if s.position < before]
        if not kept:
            return None
        mask = 0
        labels: frozenset[str] = frozenset()
        for source in kept:
            mask |= KIND_BITS[source.kind]
            labels |= source.labels
        return Origin(mask, labels, kept)


ProvenanceView = ProvenanceIndex | IndexBefore
"""What a `from` reads: a session's index, or the index as it was before an event."""


def _with_kind(source: Source, kind: str) -> Source:
    return Source(kind, source.position, source.tool, source.labels)


def fields_of(schema: Schema | Type | None) -> dict[str, Field] | None:
    if schema is None:
        return None
    fields = schema.fields
    return {f.name: f for f in fields} if fields else None


def scalars(value: Any, fields: dict[str, Field] | None, kind: str) -> Iterable[tuple[Any, str]]:
    """Every scalar inside a JSON value with its source kind, leaving out secret fields."""
    stack: list[tuple[Any, dict[str, Field] | None, str]] = [(value, fields, kind)]
    while stack:
        item, known, here = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                fld = known.get(key) if known is not None else None
                if fld is None:
                    stack.append((inner, None, here))
                    continue
                if fld.secret:
                    continue
                stack.append((inner, _inner_fields(fld.type), fld.trust or here))
        elif isinstance(item, list | tuple):
            for inner in item:
                stack.append((inner, known, here))
        elif item is not None and item.__class__ is not bool:
            yield item, here


def _inner_fields(type_: Type) -> dict[str, Field] | None:
    while type_.name in ("list", "map") and type_.item is not None:
        type_ = type_.item
    return fields_of(type_) if type_.name == "object" else None


# ---------------------------------------------------------------------------------------------
# The meaning of `value from source [only]`, shared by the interpreter and the compiled code


def provenance_holds(
    index: ProvenanceView | None, value: Any, source: str, label: str | None, only: bool
) -> bool:
    """`value from source [only]` (language.md, "Session-aware policy"): an absent value
    satisfies none of the forms; a list is looked up as a whole, so it is from nowhere.

    >>> provenance_holds(None, "x", "nowhere", None, False)
    True
    """
    if value is None:
        return False
    found = None if index is None else index.lookup(value)
    if source == "nowhere":
        return found is None
    if found is None:
        return False
    if source == "label":
        return label in found.labels
    bit = KIND_BITS[source]
    return found.mask == bit if only else bool(found.mask & bit)
