"""How the console shows a call's values: the exact text, with nothing hidden and nothing added.

An operator approves an exact call, so they must read exactly that call. JSON is written as
text (`&&` stays `&&`; only HTML escaping, which the browser undoes, is applied), and what a
reader could not see or would misread is made visible: control characters, bidirectional
overrides and isolates, zero-width and other format characters, line and paragraph separators,
spaces other than the plain one, and lone surrogates are written as their JSON escapes
(`\\u202e`), marked with the character's name; leading and trailing spaces of a string are
marked. The same escapes, unmarked, fill the edit box, so its text reads back as the very same
value (`json.loads(exact_json(v)) == v`).

>>> print(exact_json({"cmd": "a && b\\u202e"}))
{
  "cmd": "a && b\\u202e"
}
>>> print(shown_json({"cmd": "ls "}, indent=None))
{"cmd": "ls<mark class="blank" title="a trailing space"> </mark>"}
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from markupsafe import Markup, escape

__all__ = ["exact_json", "shown_json", "ticks"]

# what json.dumps(ensure_ascii=False) leaves as it is and a reader could not see or would
# misread: C1 controls and DEL, format characters (bidi controls, zero-width), separators of
# lines and paragraphs, spaces other than U+0020, and lone surrogates
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Co", "Cn"})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ESCAPE = re.compile(r"\\u([0-9a-f]{4})")


def _hidden(ch: str) -> bool:
    return ch != " " and unicodedata.category(ch) in _HIDDEN_CATEGORIES


def _escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # JSON escapes a character past the BMP as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _escaped(text: str) -> str:
    return "".join(_escape(ch) if _hidden(ch) else ch for ch in text)


def exact_json(value: Any, indent: int | None = 2) -> str:
    """`value` as JSON text, characters as they are except the hidden ones, escaped: what the
    edit box holds."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _STRING.sub(lambda literal: _escaped(literal.group(0)), text)


def _name(code: int) -> str:
    ch = chr(code)
    if ch in "\n\r\t":
        return {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}[ch]
    if 0xD800 <= code <= 0xDFFF:
        return f"U+{code:04X}, half of a surrogate pair alone: no character"
    return f"U+{code:04X} {unicodedata.name(ch, 'unnamed character')}"


_TOKEN = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a surrogate pair
    r"|\\u[0-9a-fA-F]{4}|\\.|[^\\]+"
)


def _blank(count: int, where: str) -> Markup:
    words = f"a {where} space" if count == 1 else f"{count} {where} spaces"
    return Markup('<mark class="blank" title="{}">{}</mark>').format(words, " " * count)


def _code(token: str) -> int | None:
    """The code point a `\\uXXXX` escape (or a pair of them) stands for, else None."""
    if not token.startswith("\\u"):
        return None
    if len(token) == 12:
        high, low = int(token[2:6], 16), int(token[8:12], 16)
        return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    return int(token[2:], 16)


def _marked_body(body: str) -> Markup:
    """The inside of a JSON string literal as HTML: the escapes of hidden characters and the
    blanks at either end marked."""
    lead = len(body) - len(body.lstrip(" "))
    trail = len(body) - len(body.rstrip(" ")) if body.strip(" ") else 0
    parts: list[Markup] = [_blank(lead, "leading")] if lead else []
    for token in _TOKEN.findall(body[lead : len(body) - trail]):
        code = _code(token)
        if code is not None and (code < 0x20 or _hidden(chr(code))):
            title = _name(code)
            parts.append(Markup('<mark class="hidden" title="{}">{}</mark>').format(title, token))
        else:
            parts.append(escape(token))
    if trail:
        parts.append(_blank(trail, "trailing"))
    return Markup("").join(parts)


def shown_json(value: Any, indent: int | None = 2) -> Markup:
    """`value` as HTML for a `<pre>`: the exact JSON text, hidden characters and the blanks at
    the ends of strings marked."""
    text = exact_json(value, indent)
    out: list[Markup] = []
    last = 0
    for match in _STRING.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(Markup('"{}"').format(_marked_body(match.group(0)[1:-1])))
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


_TICKED = re.compile(r"`([^`]+)`")


def ticks(text: str) -> Markup:
    """A sentence of the runtime's (a gate's question, a reason), its `quoted` names as code."""
    escaped = str(escape(text))
    return Markup(_TICKED.sub(r"<code>\1</code>", escaped))
