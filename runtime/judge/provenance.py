"""Provenance: the one normaliser and tokenizer, and a session's index of where values appeared.

A session's sources are the user's messages, the results its calls produced, its facts and a
workflow's input (design: docs/runtime.md, "Session-aware policy"). Each source is indexed once,
when it enters: every scalar of a structured value whole, and inside text the identifier-like
tokens (e-mail addresses, URLs and their hosts, domain names, IBAN-like strings, id-like tokens,
numbers with at least 4 digits, quoted strings). What the user typed is indexed further, as
what a person types names things in prose: every token-bounded span of its words (names, phrases,
an address), every number and amount in the common formats, every date (`spans`). Deciding a call
then costs one or two dict lookups per argument value: the argument is normalised by the same
functions (`normalize`, `span_key`) and looked up.

>>> index = ProvenanceIndex()
>>> index.add_text("please pay DE89 3704 0044 0532 0130 00 today", Source("user", 3))
>>> index.kinds_of("DE89370400440532013000")
frozenset({'user'})
>>> index.lookup(100) is None            # a short number inside text is not indexed
True
>>> extract("hosts", "see https://Docs.Example.com/a and mail bob@corp.test")
['docs.example.com', 'corp.test']
>>> index.add_text("book the Le Marais hotel for 3 nights", Source("user", 4))
>>> index.kinds_of("le  Marais"), index.kinds_of(3), index.kinds_of("Marais hotel for")
(frozenset({'user'}), frozenset({'user'}), frozenset({'user'}))
>>> index.lookup("3 n") is None  # fewer than 3 characters of a word span: no provenance
True
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from ..model.ir import Field, Schema, Spec, Type

__all__ = [
    "EXTRACTIONS",
    "KIND_BITS",
    "IndexBefore",
    "Origin",
    "ProvenanceIndex",
    "Source",
    "arg_name",
    "carried",
    "extract",
    "keys_at",
    "line_totals",
    "normalize",
    "provenance_found",
    "provenance_holds",
    "span_key",
    "spans",
    "spec_defaults",
    "text_keys",
    "tokens",
    "value_keys",
    "with_default",
]

KIND_BITS: dict[str, int] = {"user": 1, "trusted": 2, "untrusted": 4}
"""A source kind as a bit, so an index entry holds its kinds as one small integer."""
_KIND_OF_BIT = {bit: kind for kind, bit in KIND_BITS.items()}
_USER = KIND_BITS["user"]

_MIN_NUMBER_DIGITS = 4
_MIN_ID = 6
_MAX_QUOTED = 200
MIN_SPAN_CHARS = 3
"""A span of the user's words shorter than this (spaces included) carries no provenance."""
MAX_SPAN_WORDS = 12
"""The longest span of the user's words indexed: a name, a title, a street address."""

# -- the kinds of token, each a pattern matched both whole (an argument, a scalar) and inside text
_EMAIL = r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}"
_URL = r"[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"
# IBAN-like: 2 capital letters, 2 digits, then 10-30 capitals or digits, in groups of four
# separated by single spaces as people write them, or with no spaces at all
_IBAN = r"[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{10,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)"
_NUMBER = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?"
_ID = r"[A-Za-z0-9][A-Za-z0-9_-]*[A-Za-z0-9]"
# a link written without its scheme: a host, `/`, and the rest (`www.example.com/x`)
_BARE = _HOST + r"/[^\s<>\"'`]*"
# inside prose, `www.acme.com.They`: a host whose last label is capitalised after a lower-case
# TLD ends at that TLD, where a sentence begins
_SENTENCE_AFTER_HOST = re.compile(r"(?:(?<=[.@])|^)([a-z]{2,})\.[A-Z][a-z]+$")
# and `www.acme.com/notes.Then`: a link's last path segment followed by a capitalised word
_SENTENCE_AFTER_PATH = re.compile(r"(?<=[a-z0-9/])\.[A-Z][a-z]+$")
# an IBAN as a user may type it: in any case, grouped by fours or not (`it60 x054 2811 …`)
_IBAN_TYPED = re.compile(
    r"(?<![\w])[a-z]{2}[0-9]{2}(?:[a-z0-9]{10,30}|(?: [a-z0-9]{4}){2,7}(?: [a-z0-9]{1,4})?)(?!\w)"
)

_WHOLE = {
    "email": re.compile(_EMAIL),
    "url": re.compile(_URL),
    "iban": re.compile(_IBAN),
    "number": re.compile("-?(?:" + _NUMBER + ")"),
    "host": re.compile(_HOST),
    "bare": re.compile(_BARE),
}
_NUMBER_WHOLE = _WHOLE["number"].fullmatch
_EMAIL_WHOLE = _WHOLE["email"].fullmatch
_URL_WHOLE = _WHOLE["url"].fullmatch
_HOST_WHOLE = _WHOLE["host"].fullmatch
_IBAN_WHOLE = _WHOLE["iban"].fullmatch
_BARE_WHOLE = _WHOLE["bare"].fullmatch
# one scan over a text: the leftmost token wins, the longer kinds tried first
_SCAN = re.compile(
    r"(?<![\w@.+-])(?:"
    f"(?P<url>{_URL})|(?P<email>{_EMAIL})|(?P<iban>{_IBAN})(?![A-Za-z0-9])|"
    f"(?P<host>{_HOST})(?:(?P<path>/[^\\s<>\"'`]*)|(?![\\w-]))|"
    f"(?P<number>{_NUMBER})(?![\\w.]?[0-9A-Za-z_])|"
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
        if "." in text:
            if _HOST_WHOLE(text):
                return text.lower()
            if "/" in text and _BARE_WHOLE(text):
                host, _, rest = text.partition("/")
                return f"{host.lower()}/{rest}"
        return text
    if cls is int:
        return str(value)
    if cls is float:
        return _number_text(repr(value))
    return None


def tokens(text: str) -> Iterator[tuple[str, str]]:
    """The identifier-like tokens inside a text as `(kind, normalised value)`: e-mail
    addresses (and their domains as hosts), URLs (and their hosts, and as `carried` the tokens
    of the values they carry), hosts, IBAN-like strings,
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
            raw = _sentence_cut(raw.rstrip(_URL_TAIL))
            if "://" not in raw or raw.endswith("://"):
                continue
            yield "url", _url_text(raw)
            host = _host_of_url(raw)
            if host:
                yield "host", host
            yield from _carried_tokens(raw)
        elif kind == "email":
            raw = _SENTENCE_AFTER_HOST.sub(r"\1", raw)
            yield "email", raw.lower()
            yield "host", raw.rpartition("@")[2].lower()
        elif kind == "iban":
            yield "iban", raw.replace(" ", "")
        elif kind == "host" or kind == "path":  # a host, or a link without its scheme
            host = match.group("host")
            if kind == "path":
                path = _SENTENCE_AFTER_PATH.sub("", match.group("path").rstrip(_URL_TAIL))
                yield "url", f"{host.lower()}{path}"
                yield from _carried_tokens(path)
            else:
                host = _SENTENCE_AFTER_HOST.sub(r"\1", host)
            yield "host", host.lower()
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


def _carried_tokens(url: str) -> Iterator[tuple[str, str]]:
    """The tokens of what a URL carries (`carried`), each of kind `carried`: a value a link of
    a source holds in its query or path (`?d=ann@c.test`, `/orders/ORD-7731`) appeared in that
    source. Extraction (`hosts(…)` & co) does not read them: they are not the text's own."""
    for read in (_query_values, _path_segments):
        for value in read(url):
            # a plain word or a short value holds no token: not scanned
            if len(value) >= _MIN_NUMBER_DIGITS and not value.isalpha():
                for _, token in tokens(value):
                    yield "carried", token


def _sentence_cut(url: str) -> str:
    """A URL found in prose without the sentence run into its end (`https://a.test/x.Then`,
    `https://a.test.Then`): its last path segment's, or its host's when it has no path."""
    rest = url.partition("://")[2]
    if "/" in rest:
        return _SENTENCE_AFTER_PATH.sub("", url)
    return _SENTENCE_AFTER_HOST.sub(r"\1", url)


def _id_like(raw: str) -> bool:
    if "-" in raw or "_" in raw:
        return True
    return any(c.isdigit() for c in raw) and any(c.isalpha() for c in raw)


# -- what the user typed: spans of words, numbers and amounts, dates -----------------------------

# a word: letters and digits, joined inside by an apostrophe, `.`, `-`, `&` or `/` (`o'neil`,
# `st.-denis`, `2026-03-03`, `www.example.com/x`); whatever else stands between words separates
_WORD = re.compile(r"\w+(?:['’.&/-]\w+)*")
# a number as people write it: digits, perhaps grouped by `,` or `.` and with a decimal part
_AMOUNT = re.compile(r"(?<![\w.,])\d(?:[\d.,]*\d)?(?![\w]|[.,]\d)")
_US_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_EU_NUMBER = re.compile(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d+(?:,\d+)?")
_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?P<{}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{}>\d{{1,2}})(?:st|nd|rd|th)?"
_DATES = re.compile(
    r"(?<!\w)(?:"
    r"(?P<a>\d{1,2})[/.](?P<b>\d{1,2})[/.](?P<y1>\d{4})"  # 3/4/2026: both readings
    rf"|{_DAY.format('d2')}(?: of)? {_MONTH.format('m2')},? (?P<y2>\d{{4}})"  # 3 march 2026
    rf"|{_MONTH.format('m3')} {_DAY.format('d3')},? (?P<y3>\d{{4}})"  # march 3, 2026
    r")(?!\w)"
)


def _folded(text: str) -> str:
    """The one normalisation of the user's words: NFKC, case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def _readings(raw: str) -> set[str]:
    """The numbers a written number may be, as canonical decimal text: `1,250.50` and
    `1.250,50` are both 1250.5; `1.250` is 1.25 or 1250 (both readings are the user's)."""
    out = set()
    if _US_NUMBER.fullmatch(raw):
        out.add(_number_text(raw.replace(",", "")))
    if _EU_NUMBER.fullmatch(raw):
        out.add(_number_text(raw.replace(".", "").replace(",", ".")))
    return {f"#{n}" for n in out if n is not None}


def _iso(year: str, month: int | str, day: int | str) -> str | None:
    try:
        return date(int(year), int(month), int(day)).isoformat()
    except ValueError:
        return None


def spans(text: str) -> Iterator[str]:
    """The keys of what a user message names, besides its tokens: every span of 1 to
    `MAX_SPAN_WORDS` consecutive words of at least `MIN_SPAN_CHARS` characters (words
    case-folded, NFKC, joined by one space, the punctuation between them dropped), every number
    in any common format (`#` and its canonical decimal text, each reading of an ambiguous one)
    and every date written with its year (`2026-03-03`, each reading of `3/4/2026`).

    >>> found = set(spans("Invite Dora Ng, 3/4/2026"))
    >>> sorted(k for k in found if k[0] in "#2" or k.startswith("dora"))
    ['#2026', '#3', '#4', '2026-03-04', '2026-04-03', 'dora', 'dora ng', 'dora ng 3/4/2026']
    """
    folded = _folded(text)
    words = _WORD.findall(folded)
    for i in range(len(words)):
        span = ""
        for word in words[i : i + MAX_SPAN_WORDS]:
            span = f"{span} {word}" if span else word
            if len(span) >= MIN_SPAN_CHARS:
                yield span
    for match in _AMOUNT.finditer(folded):
        yield from _readings(match.group())
    for match in _IBAN_TYPED.finditer(folded):  # an IBAN typed in lower case, as one key
        yield match.group().replace(" ", "")
    for match in _DATES.finditer(folded):
        g = match.groupdict()
        if g["y1"] is not None:
            for day, month in ((g["a"], g["b"]), (g["b"], g["a"])):
                iso = _iso(g["y1"], month, day)
                if iso is not None:
                    yield iso
        else:
            n = "2" if g["y2"] is not None else "3"
            iso = _iso(g["y" + n], _MONTHS[g["m" + n]], g["d" + n])
            if iso is not None:
                yield iso


def span_key(value: Any) -> str | None:
    """The key an argument is looked up under among the spans of the user's messages: a
    number (or a text that is one) as `#` and its canonical decimal text, any other text as
    its words (as `spans` writes them); None for what carries no such provenance (fewer than
    `MIN_SPAN_CHARS` characters, more than `MAX_SPAN_WORDS` words, not a text or number).

    >>> span_key("  Le   Marais! "), span_key(1250.0), span_key("1,250"), span_key("ab")
    ('le marais', '#1250', '#1250', None)
    """
    key = normalize(value)
    return None if key is None else _span_key(value, key)


def _span_key(value: Any, key: str) -> str | None:
    """`span_key` of a value whose `normalize` is `key`."""
    cls = value.__class__
    if cls is int or cls is float:
        return f"#{key}"
    if key.isascii():
        if key.isalnum():  # one word: the common case, without a regex
            if key.isdigit():
                return f"#{key}"
            return key.lower() if len(key) >= MIN_SPAN_CHARS else None
        folded = key.lower()
    else:
        folded = _folded(key)
    if (key[0].isdigit() or key[0] == "-") and _NUMBER_WHOLE(key):
        return f"#{key}"
    words = _WORD.findall(folded)
    if not words or len(words) > MAX_SPAN_WORDS:
        return None
    span = " ".join(words)
    return span if len(span) >= MIN_SPAN_CHARS else None


_EXTRACT_KINDS = {"urls": ("url",), "hosts": ("host",), "emails": ("email",), "ibans": ("iban",)}
EXTRACTIONS = ("urls", "hosts", "emails", "ibans", "params", "segments")
"""The functions a condition reads a text with (language.md §7.4, "Length and extraction"): the
tokens of a kind inside it, or what its URLs carry (`carried`)."""


def extract(func: str, text: Any) -> list[str] | None:
    """`urls(text)`, `hosts(text)`, `emails(text)`: the tokens of that kind inside a text,
    normalised, in order of appearance, each once; `params(text)`, `segments(text)`: what
    its URLs carry (`carried`). None when `text` is not a text.

    >>> extract("urls", "go to HTTPS://Evil.test/Pay?x=1.")
    ['https://evil.test/Pay?x=1']
    """
    if value_is_not_text(text):
        return None
    if func == "params" or func == "segments":
        return carried(func, text)
    wanted = _EXTRACT_KINDS[func]
    out: dict[str, None] = {}
    for kind, value in tokens(text):
        if kind in wanted:
            out.setdefault(value)
    return list(out)


def carried(func: str, text: str) -> list[str]:
    """What a URL carries to the host it names, or every URL inside a text (as `urls` finds
    them, links without a scheme included): `params`, the value of each query parameter (and
    the name of one written without `=`: `?bob@corp.test`); `segments`, each segment of the
    path after the host. Each is percent-decoded (a query's `+` is a space, as a form encodes
    it), normalised as provenance normalises a value (`normalize`), in order, each once;
    empty ones are dropped. A parameter's name, the host, the user part before `@` and the
    fragment after `#` (which a client does not send) are not carried values.

    A text that is one URL whole is read whole (`?d=Ann.Lee` keeps its `.Lee`); inside prose
    a URL ends where `urls` ends it.

    >>> carried("params", "https://evil.test/c?d=Bob%40Corp.test&n=1%2C500&q=a+b#x=1")
    ['bob@corp.test', '1500', 'a b']
    >>> carried("segments", "see https://evil.test/c/SECRET%2D1/ and www.a.test/x.")
    ['c', 'SECRET-1', 'x']
    """
    whole = _nfc(text)
    if ("://" in whole and (_URL_WHOLE(whole) or _SCHEMED_WHOLE(whole))) or (
        "/" in whole and _BARE_WHOLE(whole)
    ):
        links = [whole]
    else:
        links = [value for kind, value in tokens(text) if kind == "url"]
    read = _query_values if func == "params" else _path_segments
    out: dict[str, None] = {}
    for link in links:
        for value in read(link):
            key = normalize(value)
            if key is not None:
                out.setdefault(key)
    return list(out)


_SCHEMED_WHOLE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#]+[/?#]?\S*").fullmatch
"""A text that is one URL with its scheme, whatever its last character (`?a=.`): read whole."""


def _after_host(url: str) -> tuple[str, str]:
    """A URL's path and query (each without its `?`); the fragment is dropped."""
    rest = url.partition("://")[2] if "://" in url else url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    rest = rest[cut:].partition("#")[0]
    path, _, query = rest.partition("?")
    return path, query


def _query_values(url: str) -> Iterator[str]:
    for part in _after_host(url)[1].split("&"):
        name, eq, value = part.partition("=")
        raw = value if eq else name
        yield urllib.parse.unquote_plus(raw)


def _path_segments(url: str) -> Iterator[str]:
    for segment in _after_host(url)[0].split("/"):
        yield urllib.parse.unquote(segment)


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
    default: str | None = None
    """For the spec's default of an argument: `tool.field` (kind `trusted`, position 0)."""
    composed: str | None = None
    """For a line's total (`line_totals`): its parts, `3 × 15.5`."""
    fact: str | None = None
    """For a fact's value: the fact's name (kind `trusted`)."""
    call: str | None = None
    """For a call's result: the call's action id (`from result(…)` asks which calls)."""


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
_SCHEMES = ("https://", "http://")


class ProvenanceIndex:
    """A session's index: normalised value → `Origin`, and the spans of the user's messages
    (`spans`) → `Origin`. Sources are added once (`add_text`, `add_value`);
    `lookup` is one `normalize` and one dict lookup, and one `span_key` and one more lookup
    once the user has said something."""

    __slots__ = ("_last", "_version", "defaults", "entries", "retracted", "said")

    def __init__(self) -> None:
        self.entries: dict[str, Origin] = {}
        self.said: dict[str, Origin] = {}
        self.retracted: dict[str, list[tuple[Source, int]]] = {}
        """Sources withdrawn (`retract`: a value removed from a fact), by key, each with the
        position of the event that withdrew it: the index before that event still has them."""
        self.defaults: dict[tuple[str, str], tuple[str, Source]] = {}
        """(tool id, argument) → the default's key and its source (`spec_defaults`)."""
        # the last value looked up and its answer: a decision testing one argument against
        # several sources normalises it once (cleared whenever a source enters)
        self._version = 0
        self._last: tuple[Any, Origin | None, int] = (None, None, -1)

    def __len__(self) -> int:
        return len(self.entries) + len(self.said)

    def _put(self, key: str, source: Source, into: dict[str, Origin] | None = None) -> None:
        self._version += 1
        entries = self.entries if into is None else into
        found = entries.get(key)
        if found is None:
            found = entries[key] = Origin()
        elif found.sources and found.sources[-1] is source:
            return  # the same source names this value twice
        found.mask |= KIND_BITS[source.kind]
        if source.labels and not source.labels <= found.labels:
            found.labels = found.labels | source.labels
        found.sources.append(source)

    def add_text(self, text: str, source: Source) -> None:
        """A text: its whole value and its tokens; a text of kind `user` its spans too."""
        found = text_keys(text)
        if not found:
            return
        for key in found:
            self._put(key, source)
        if source.kind == "user":
            for span in spans(text):
                self._put(span, source, self.said)

    def add_value(
        self,
        value: Any,
        source: Source,
        schema: Schema | Type | None = None,
        trust: Mapping[str, str] | None = None,
    ) -> None:
        """A structured value (a result, a fact): every scalar whole, every text's tokens too
        (and a text of kind `user` its spans; a number of kind `user` its span key). With the
        schema of the value, a `secret` field is skipped and a field's declared `trust`
        replaces the source's kind for the values under it."""
        for scalar, kind in scalars(value, fields_of(schema), source.kind):
            item = source if kind == source.kind else _with_kind(source, kind)
            if scalar.__class__ is str:
                self.add_text(scalar, item)
            else:
                key = normalize(scalar)
                if key is not None:
                    self._put(key, item)
                    if kind == "user":
                        self._put(f"#{key}", item, self.said)
        if source.kind != "user":
            for total, parts, kind in line_totals(value, fields_of(schema), source.kind):
                self._put(
                    total,
                    Source(
                        kind,
                        source.position,
                        source.tool,
                        source.labels,
                        None,
                        parts,
                        call=source.call,
                    ),
                )

    def retract(self, keys: Iterable[str], gone: Callable[[Source], bool], position: int) -> None:
        """Withdraw the sources `gone` selects from the values of `keys` (a value removed from
        a fact, at the event `position`): `lookup` no longer finds them, nor cites them as
        evidence, and a value left with no source is found nowhere; `IndexBefore` an event up
        to `position` still does.

        >>> index = ProvenanceIndex()
        >>> index.add_value(["DE89370400440532013000"], Source("trusted", 2, fact="payees"))
        >>> index.retract(value_keys(["DE89370400440532013000"]), lambda s: True, 5)
        >>> index.lookup("DE89370400440532013000") is None
        True
        >>> IndexBefore(index, 4).lookup("DE89370400440532013000").kinds
        frozenset({'trusted'})
        """
        for key in keys:
            found = self.entries.get(key)
            if found is None:
                continue
            out = [s for s in found.sources if gone(s)]
            if not out:
                continue
            self._version += 1
            self.retracted.setdefault(key, []).extend((s, position) for s in out)
            kept = [s for s in found.sources if not gone(s)]
            if kept:
                self.entries[key] = _origin(kept)
            else:
                del self.entries[key]

    def lookup(self, value: Any) -> Origin | None:
        """The sources of a value: its normalised whole value among every source's values and
        tokens, and its span key among the user's spans (the union of both)."""
        last, version = self._last, self._version
        if last[0] is value and last[2] == version:
            return last[1]
        key = normalize(value)
        found = None if key is None else self.entries.get(key)
        if key is not None and key[:4] == "http":
            # a link written without its scheme is found as `https://…` and `http://…` too (as
            # a model completes it), from its one key
            rest = key.partition("://")[2] if key.startswith(_SCHEMES) else ""
            bare = self.entries.get(rest) if rest and _BARE_WHOLE(rest) else None
            if bare is not None:
                found = bare if found is None else _union(found, bare)
        # the user's spans, unless the value was found in what the user said already (a span
        # is of kind `user` and carries no label: it would change nothing the policy reads)
        if self.said and key is not None and (found is None or not found.mask & _USER):
            span = _span_key(value, key)
            typed = None if span is None else self.said.get(span)
            if typed is not None:
                found = typed if found is None else _union(found, typed)
        self._last = (value, found, version)
        return found

    def kinds_of(self, value: Any) -> frozenset[str]:
        found = self.lookup(value)
        return frozenset() if found is None else found.kinds

    def lookup_arg(self, tool_id: str | None, name: str, value: Any) -> Origin | None:
        """The sources of the top-level argument `name` of a call of `tool_id`: `lookup`, and
        the spec's default of that argument when the value is it.

        >>> index = ProvenanceIndex()
        >>> index.defaults = {("s", "limit"): ("10", Source("trusted", 0, default="s.limit"))}
        >>> index.add_text("10", Source("untrusted", 4, "web.fetch"))
        >>> sorted(index.lookup_arg("s", "limit", 10).kinds)
        ['trusted', 'untrusted']
        >>> index.lookup_arg("s", "page", 10).kinds
        frozenset({'untrusted'})
        """
        return with_default(self.lookup(value), self.defaults, tool_id, name, value)


def text_keys(text: str) -> list[str]:
    """The keys a text enters the index under (`add_text`): its whole normalised value, and
    its tokens when it is long enough or more than letters and digits; none for a text that
    is not indexed."""
    key = normalize(text)
    if key is None or key in _NOT_INDEXED:
        return []
    if len(key) >= _MIN_ID or not key.isalnum():
        return [key, *(token for _, token in tokens(text))]
    return [key]


def keys_at(value: Any, parts: tuple[str, ...]) -> set[str]:
    """The keys of what a JSON value holds at a field path (`("sender",)`, through lists: each
    element's), as `add_value` puts them in the index: each scalar whole, a text's tokens too.

    >>> sorted(keys_at({"from": "Ann <ann@x.test>", "body": "pay DE89"}, ("from",)))
    ['Ann <ann@x.test>', 'ann@x.test', 'x.test']
    """
    found = [value]
    for part in parts:
        step: list[Any] = []
        for item in found:
            if isinstance(item, Mapping):
                if part in item:
                    step.append(item[part])
            elif isinstance(item, list | tuple):
                step.extend(i[part] for i in item if isinstance(i, Mapping) and part in i)
        found = step
    out: set[str] = set()
    for item in found:
        out |= _scalar_keys(item)
    return out


def value_keys(value: Any) -> set[str]:
    """The keys a structured value without a schema enters the index under (`add_value` of a
    fact's value): what `retract` withdraws when the value leaves the fact."""
    out = _scalar_keys(value)
    out.update(total for total, _, _ in line_totals(value, None, "trusted"))
    return out


def _scalar_keys(value: Any) -> set[str]:
    """The keys of every scalar inside a JSON value: each whole, a text's tokens too."""
    out: set[str] = set()
    for scalar, _ in scalars(value, None, "trusted"):
        if scalar.__class__ is str:
            out.update(text_keys(scalar))
        else:
            key = normalize(scalar)
            if key is not None:
                out.add(key)
    return out


def _origin(sources: list[Source]) -> Origin:
    mask = 0
    labels: frozenset[str] = frozenset()
    for source in sources:
        mask |= KIND_BITS[source.kind]
        labels |= source.labels
    return Origin(mask, labels, sources)


def _union(a: Origin, b: Origin) -> Origin:
    """The sources of a value found both whole and as a span of the user's words."""
    if b.mask | a.mask == a.mask and all(s in a.sources for s in b.sources):
        return a
    known = set(map(id, a.sources))
    merged = a.sources + [s for s in b.sources if id(s) not in known]
    merged.sort(key=lambda s: s.position)
    return Origin(a.mask | b.mask, a.labels | b.labels, merged)


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

    def lookup_arg(self, tool_id: str | None, name: str, value: Any) -> Origin | None:
        """As `ProvenanceIndex.lookup_arg`: the spec's defaults came before every event."""
        found = self.lookup(value)
        return with_default(found, self.index.defaults, tool_id, name, value)

    def lookup(self, value: Any) -> Origin | None:
        found = self.index.lookup(value)
        before = self.position
        back = self._withdrawn(value) if self.index.retracted else None
        if back:  # a fact's value it still held before this event
            sources = sorted([*(found.sources if found else ()), *back], key=_position)
            found = _origin(sources)
        if found is None:
            return None
        if all(s.position < before for s in found.sources):
            return found
        kept = [s for s in found.sources if s.position < before]
        if not kept:
            return None
        return _origin(kept)

    def _withdrawn(self, value: Any) -> list[Source]:
        """The sources of the value withdrawn after this event, that it still had before."""
        key = normalize(value)
        found = self.index.retracted.get(key) if key is not None else None
        before = self.position
        return [s for s, until in found or () if s.position < before <= until]


def _position(source: Source) -> int:
    return source.position


ProvenanceView = ProvenanceIndex | IndexBefore
"""What a `from` reads: a session's index, or the index as it was before an event."""


# ---------------------------------------------------------------------------------------------
# The spec's defaults: a source of their own (language.md §7.4, "The spec's defaults")


def default_key(value: Any) -> str | None:
    """How a default and an argument are compared: `normalize`, and a boolean as itself (a
    boolean is never indexed, but a default `true` is still the spec's)."""
    if value is True or value is False:
        return "\x00true" if value else "\x00false"
    return normalize(value)


def spec_defaults(spec: Spec) -> dict[tuple[str, str], tuple[str, Source]]:
    """Every scalar default of a tool's top-level input field, by (tool id, field): its key
    and its source (`trusted`, position 0, `default` naming `tool.field`)."""
    out: dict[tuple[str, str], tuple[str, Source]] = {}
    for tool in spec.tools.values():
        schema = tool.input
        for fld in schema.fields if schema is not None else ():
            if fld.default is None or isinstance(fld.default, list | dict):
                continue
            key = default_key(fld.default)
            if key is not None:
                name = f"{tool.id}.{fld.name}"
                out[(tool.id, fld.name)] = (key, Source("trusted", 0, default=name))
    return out


def with_default(
    found: Origin | None,
    defaults: Mapping[tuple[str, str], tuple[str, Source]],
    tool_id: str | None,
    name: str,
    value: Any,
) -> Origin | None:
    """`found`, with the spec's default of argument `name` of `tool_id` as a first source
    when `value` is that default."""
    if not defaults or tool_id is None or value is None:
        return found
    entry = defaults.get((tool_id, name))
    if entry is None or default_key(value) != entry[0]:
        return found
    source = entry[1]
    if found is None:
        return Origin(KIND_BITS["trusted"], frozenset(), [source])
    return Origin(found.mask | KIND_BITS["trusted"], found.labels, [source, *found.sources])


def arg_name(node: object) -> str | None:
    """The argument a provenance term reads when it is a top-level one (`args.limit`)."""
    root = getattr(node, "root", None)
    parts: tuple[str, ...] = getattr(node, "parts", ())
    if root != "args" or len(parts) != 1:
        return None
    return parts[0]


def _with_kind(source: Source, kind: str) -> Source:
    return Source(kind, source.position, source.tool, source.labels, call=source.call)


@dataclass(frozen=True, slots=True)
class Entries:
    """The shape of a map's entries (`map<{ … }>`): each value of the map has `inner`."""

    inner: Known


Known = dict[str, Field] | Entries | None
"""What the walk knows of a value: the listed fields of its records (by name), the shape of a
map's entries, or nothing (a scalar, `any`, an undeclared output). A list is transparent: its
items have the shape of the list."""


def fields_of(schema: Schema | Type | None) -> Known:
    """What a value of `schema` holds that a schema lists: the fields of its records, by
    name, through lists and unions (`Type.records`), or the shape of a map's entries; None
    when it lists none (a scalar, a map of scalars, `any`, no schema)."""
    if schema is None:
        return None
    if isinstance(schema, Schema):
        if schema.shape is None:
            return {f.name: f for f in schema.fields} or None
        schema = schema.shape
    while schema.name == "list" and schema.item is not None:
        schema = schema.item
    if schema.name == "map" and schema.item is not None:
        inner = fields_of(schema.item)
        return Entries(inner) if inner is not None else None
    fields = schema.records() if schema.name in ("object", "union") else None
    return {f.name: f for f in fields} if fields else None


def _under(fld: Field | None, known: Known, here: str, kind: str) -> tuple[Known, str]:
    """What is known of the value under key `fld` of a record whose listed fields are
    `known`, and its source kind, at kind `here`; `kind` is the source's own (the tool's).

    A listed field: its own shape, its declared trust or else `here`. An unlisted key of a
    listed record (the unlisted part of an open record) and everything inside an `any` carry
    the source's own kind: a field's trust speaks for listed fields only (language.md §5.5).
    With no listed fields (an undeclared output) the value stays at `here`."""
    if fld is None:
        return None, here if known is None else kind
    type_ = fld.type
    while type_.name in ("list", "map") and type_.item is not None:
        type_ = type_.item
    if type_.name == "any":
        return None, kind
    inner = fields_of(fld.type) if type_.name in ("object", "union") else None
    return inner, fld.trust or here


def scalars(value: Any, fields: Known, kind: str) -> Iterable[tuple[Any, str]]:
    """Every scalar inside a JSON value with its source kind, leaving out secret fields."""
    stack: list[tuple[Any, Known, str]] = [(value, fields, kind)]
    while stack:
        item, known, here = stack.pop()
        if isinstance(item, Mapping) and isinstance(known, Entries):
            stack.extend((inner, known.inner, here) for inner in item.values())
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                fld = known.get(key) if isinstance(known, dict) else None
                if fld is not None and fld.secret:
                    continue
                stack.append((inner, *_under(fld, known, here, kind)))
        elif isinstance(item, list | tuple):
            for inner in item:
                stack.append((inner, known, here))
        elif item is not None and item.__class__ is not bool:
            yield item, here


MAX_FACTORS = 8
"""A record's numbers a line's total is composed of: the first 8."""
_COUNT = range(2, 1001)


def line_totals(value: Any, fields: Known, kind: str) -> Iterator[tuple[str, str, str]]:
    """Inside every record of a JSON value, the product of a count (an `int` from 2 to 1000)
    and another number of the same record whose field is of the same source kind, as
    (normalised product, `count × number`, kind) — language.md §7.4, "A line's total". Secret
    fields are left out, as `scalars` leaves them.

    >>> [t for t, _, _ in line_totals({"items": [{"price": 15.5, "qty": 3}]}, None, "trusted")]
    ['46.5']
    """
    stack: list[tuple[Any, Known, str]] = [(value, fields, kind)]
    while stack:
        item, known, here = stack.pop()
        if isinstance(known, Entries) and isinstance(item, Mapping):
            stack.extend((inner, known.inner, here) for inner in item.values())
        elif item.__class__ is dict or isinstance(item, Mapping):
            numbers: list[tuple[int | float, str]] = []
            counts = False
            for key, inner in item.items():
                cls = inner.__class__
                if cls is str or inner is None or cls is bool:
                    continue  # most of a result: nothing to compose, nothing to descend into
                fld = known.get(key) if isinstance(known, dict) else None
                if fld is not None and fld.secret:
                    continue
                inner_fields, inner_kind = _under(fld, known, here, kind)
                if cls is int or cls is float:
                    if len(numbers) < MAX_FACTORS:
                        numbers.append((inner, inner_kind))
                        counts = counts or (cls is int and inner in _COUNT)
                elif cls is dict or cls is list or isinstance(inner, Mapping | list | tuple):
                    stack.append((inner, inner_fields, inner_kind))
            if not counts or len(numbers) < 2:
                continue
            done: set[tuple[int, int]] = set()
            for i, (count, count_kind) in enumerate(numbers):
                if count.__class__ is not int or count not in _COUNT:
                    continue
                for j, (other, other_kind) in enumerate(numbers):
                    if i == j or other_kind != count_kind or (min(i, j), max(i, j)) in done:
                        continue
                    done.add((min(i, j), max(i, j)))
                    total = _number_text(str(Decimal(count) * Decimal(repr(other))))
                    if total is not None:
                        yield total, f"{count} × {_number_text(repr(other))}", count_kind
        elif item.__class__ is list or isinstance(item, list | tuple):
            for inner in item:
                cls = inner.__class__
                if cls is dict or cls is list or isinstance(inner, Mapping | tuple):
                    stack.append((inner, known, here))


# ---------------------------------------------------------------------------------------------
# The meaning of `value from source [only]`, shared by the interpreter and the compiled code


def provenance_found(
    index: ProvenanceView, value: Any, arg: tuple[str | None, str] | None = None
) -> Origin | None:
    """The sources of a value `from` reads: `lookup`, or for a top-level argument
    (`arg`: its tool id and name) `lookup_arg`, whose default is a source too."""
    if arg is None:
        return index.lookup(value)
    return index.lookup_arg(arg[0], arg[1], value)


def provenance_holds(
    index: ProvenanceView | None,
    value: Any,
    source: str,
    label: str | None,
    only: bool,
    arg: tuple[str | None, str] | None = None,
) -> bool:
    """`value from source [only]` (language.md, "Session-aware policy"): an absent value
    satisfies none of the forms; a list is looked up as a whole, so it is from nowhere. `arg`:
    the (tool id, name) of the top-level argument the value is, whose default is a source.

    >>> provenance_holds(None, "x", "nowhere", None, False)
    True
    """
    if value is None:
        return False
    found = None if index is None else provenance_found(index, value, arg)
    if source == "nowhere":
        return found is None
    if found is None:
        return False
    if source == "label":
        return label in found.labels
    bit = KIND_BITS[source]
    return found.mask == bit if only else bool(found.mask & bit)
