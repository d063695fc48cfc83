"""Canonical JSON (RFC 8785, JCS) and the input hash that identifies one exact tool invocation.

Two values that mean the same JSON give the same bytes: keys sorted by UTF-16 code units, no
whitespace, numbers written as ECMAScript writes them (`1.0` and `1` are both `1`, `-0` is `0`,
`1e21` is `1e+21`), strings with the minimal JSON escapes and every other character kept as is.
What JSON cannot say is refused with a `CanonicalError` rather than guessed: NaN and the
infinities, keys that are not strings, lone surrogates, values of other types, and integers
outside ±(2**53 - 1) (I-JSON, RFC 7493: beyond that a double no longer tells integers apart, so
two different arguments could hash alike — send such numbers as strings).

>>> canonical_json({"b": [1.0, -0.0, 1e21], "a": "é\\n"})
'{"a":"é\\\\n","b":[1,0,1e+21]}'
>>> input_hash("fs.read", 1, {"path": "a"}) == input_hash("fs.read", 1, {"path": "a"}, {})
True

Values made only of the common types (exact `dict` with ASCII keys, `list`, `tuple`, `str`,
`bool`, `None`, safe integers, and floats that Python and ECMAScript both write positionally) are
written by the C JSON encoder, whose output for them is byte for byte the canonical form; every
other value takes the reference writer below, which also names the location of any refusal.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXECUTION_FIELDS",
    "MAX_SAFE_INTEGER",
    "NO_EXECUTION",
    "CanonicalError",
    "Execution",
    "canonical_bytes",
    "canonical_json",
    "canonicalize_text",
    "execution_json",
    "format_number",
    "input_hash",
    "input_hash_from_json",
    "json_string",
    "jsonable",
    "parse_json",
    "sha256_hex",
]

MAX_SAFE_INTEGER = 2**53 - 1
EXECUTION_FIELDS: tuple[str, ...] = ("command", "cwd", "env", "timeout_ms", "target")
_LONGEST_INTEGER = 309
"""Digits of the largest finite double (1.8e308): a longer integer is no JSON number."""


class CanonicalError(ValueError):
    """A value that has no canonical JSON form; `location` says where (`$.args.items[2]`)."""

    def __init__(self, reason: str, location: str = "$") -> None:
        self.reason = reason
        self.location = location
        super().__init__(f"{reason} at `{location}`")

    def inside(self, step: str) -> CanonicalError:
        return CanonicalError(self.reason, "$" + step + self.location[1:])


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON-like value (dicts, lists, tuples, str, int, float, bool,
    None).

    >>> canonical_json({"z": 1, "a": [True, None, 0.5]})
    '{"a":[true,null,0.5],"z":1}'
    """
    text = _fast(value) if _plain(value) else _serialize(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise CanonicalError("a string contains a lone surrogate") from err
    return text


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data for an event or a checkpoint: mappings with string keys,
    lists (from tuples and sets too), scalars; anything else as its `str`.

    >>> jsonable({"a": (1, None), 2: {"b"}})
    {'a': [1, None], '2': ['b']}
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def json_problem(value: Any) -> str | None:
    """Why `value` has no canonical JSON form (`canonical_json` would raise), or None: the
    check an executor's return value passes before it is recorded.

    >>> json_problem({"a": [1, "b"]}) is None
    True
    >>> json_problem({"a": {1, 2}})
    'a value of type `set` is not JSON at `$.a`'
    """
    try:
        canonical_json(value)
    except CanonicalError as err:
        return str(err)
    except RecursionError:
        return "the value contains itself, or nests too deeply"
    return None


def canonical_bytes(value: Any) -> bytes:
    """`canonical_json(value)` as UTF-8 bytes: what hashes are computed over."""
    try:
        return (_fast(value) if _plain(value) else _serialize(value)).encode("utf-8")
    except UnicodeEncodeError as err:
        raise CanonicalError("a string contains a lone surrogate") from err


def sha256_hex(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `value`.

    >>> sha256_hex({"a": 1}) == sha256_hex({"a": 1.0})
    True
    """
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def canonicalize_text(text: str | bytes) -> str:
    """Parse JSON text and return its canonical form (see `parse_json`).

    >>> canonicalize_text('{ "b" : 2.50, "a" : [ 1E2 ] }')
    '{"a":[100],"b":2.5}'
    """
    return canonical_json(parse_json(text))


def parse_json(text: str | bytes) -> Any:
    """Parse JSON text as JCS reads it: every number is a double (integers within ±(2**53 - 1)
    come back as `int`, larger ones as `float`); duplicate keys and NaN/Infinity are refused.

    >>> parse_json('[1, 2.0, 35092012105990630]')
    [1, 2.0, 3.509201210599063e+16]
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise CanonicalError(f"duplicate key `{key}`")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise CanonicalError(f"`{name}` is not a JSON number")

    def integer(digits: str) -> int | float:
        if len(digits) > _LONGEST_INTEGER:  # no double is finite there: Python's int() refuses
            raise CanonicalError(f"an integer of {len(digits):,} digits is not a JSON number")
        value = int(digits)
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else number(digits)

    def number(digits: str) -> float:
        value = float(digits)
        if not math.isfinite(value):
            raise CanonicalError(f"`{digits[:40]}` is beyond the largest JSON number (a double)")
        return value

    try:
        return json.loads(
            text,
            object_pairs_hook=pairs,
            parse_constant=constant,
            parse_int=integer,
            parse_float=number,
        )
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}"
        raise CanonicalError(f"not JSON: {err.msg} ({where})") from err
    except RecursionError as err:
        raise CanonicalError("not JSON the runtime reads: it nests too deeply") from err


@dataclass(frozen=True)
class Execution:
    """The execution parameters that change what a call does, and so are part of its identity.

    `command` is a string or an argument list, `env` a mapping of strings; fields left `None` are
    not part of the hash, so adding a new optional parameter does not change existing hashes.
    """

    command: str | tuple[str, ...] | None = None
    cwd: str | None = None
    env: Mapping[str, str] | None = field(default=None, hash=False)
    timeout_ms: int | None = None
    target: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in EXECUTION_FIELDS}


NO_EXECUTION = Execution()
"""The parameters of a call that gives none (most calls): one object, compared by identity."""


def input_hash(
    tool_id: str,
    tool_version: int,
    args: Mapping[str, Any],
    execution: Execution | Mapping[str, Any] | None = None,
) -> str:
    """SHA-256 (hex) of the canonical JSON of `{"tool", "version", "args", "execution"}`.

    A grant binds `tool id + tool_call_id + input_hash`, so any change to the arguments, the
    command, cwd, environment, timeout or target makes a new call that is judged again. Unknown
    execution parameters are refused rather than silently left out of the hash.

    >>> a = input_hash("shell.run", 2, {"cmd": "ls"}, {"cwd": "/repo"})
    >>> a == input_hash("shell.run", 2, {"cmd": "ls"}, Execution(cwd="/repo"))
    True
    >>> a == input_hash("shell.run", 2, {"cmd": "ls"}, {"cwd": "/tmp"})
    False
    """
    params = _params(execution)
    if _plain(args):
        try:
            return input_hash_from_json(
                tool_id, tool_version, _fast(args), execution_json(execution)
            )
        except CanonicalError:
            pass  # a lone surrogate, an odd number or version: the reference says where
    document = {"tool": tool_id, "version": tool_version, "args": args, "execution": params}
    return sha256_hex(document)


def _params(execution: Execution | Mapping[str, Any] | None) -> dict[str, Any]:
    """The execution parameters that are set, as a dict; unknown ones refused."""
    if execution is None or execution is NO_EXECUTION:
        return {}
    if isinstance(execution, Execution):
        params: dict[str, Any] = {}
        if execution.command is not None:
            params["command"] = execution.command
        if execution.cwd is not None:
            params["cwd"] = execution.cwd
        if execution.env is not None:
            env = execution.env
            params["env"] = env if type(env) is dict else dict(env)
        if execution.timeout_ms is not None:
            params["timeout_ms"] = execution.timeout_ms
        if execution.target is not None:
            params["target"] = execution.target
        return params
    unknown = sorted(set(execution) - set(EXECUTION_FIELDS))
    if unknown:
        raise CanonicalError(f"unknown execution parameter `{unknown[0]}`", "$.execution")
    return {k: v for k, v in execution.items() if v is not None}


def execution_json(execution: Execution | Mapping[str, Any] | None) -> str:
    """The canonical JSON of the execution parameters that are set (`None` ones are left out).

    >>> execution_json(Execution(timeout_ms=500, cwd="/repo"))
    '{"cwd":"/repo","timeout_ms":500}'
    """
    if execution is None or execution is NO_EXECUTION:
        return "{}"
    cacheable = type(execution) is Execution and _immutable(execution)
    if cacheable:
        text = execution.__dict__.get("_json")
        if text is not None:
            return text  # type: ignore[no-any-return]
    try:
        text = canonical_json(_params(execution))
    except CanonicalError as err:
        raise err.inside(".execution") from None
    if cacheable:
        # an application reuses one Execution for many calls; kept outside the fields, so
        # equality, hashing and `replace` ignore it
        execution.__dict__["_json"] = text
    return text


def _immutable(execution: Execution) -> bool:
    """Whether every parameter is immutable (no env mapping, no list), so its text can be kept."""
    command = execution.command
    return execution.env is None and (
        command is None
        or type(command) is str
        or (type(command) is tuple and all(type(c) is str for c in command))
    )


def input_hash_from_json(tool_id: str, tool_version: int, args_json: str, execution: str) -> str:
    """`input_hash` given the canonical JSON of the arguments and of the execution parameters
    (`execution_json`): the document's keys `args`, `execution`, `tool`, `version` are already
    in canonical order, so its text is assembled, not serialized again.

    >>> input_hash_from_json("t", 1, '{"a":1}', "{}") == input_hash("t", 1, {"a": 1.0})
    True
    """
    if type(tool_version) is int and -MAX_SAFE_INTEGER <= tool_version <= MAX_SAFE_INTEGER:
        version = str(tool_version)
    else:
        try:
            version = canonical_json(tool_version)
        except CanonicalError as err:
            raise err.inside(".version") from None
    text = (
        '{"args":'
        + args_json
        + ',"execution":'
        + execution
        + ',"tool":'
        + json_string(tool_id)
        + ',"version":'
        + version
        + "}"
    )
    try:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError as err:
        raise CanonicalError("a string contains a lone surrogate") from err


# ---------------------------------------------------------------------------------------------
# Serialization


def _plain(value: Any) -> bool:
    """Whether the C JSON encoder (`_fast`) writes `value` exactly as canonical JSON does:
    strings, booleans, null, safe integers, finite floats whose shortest form is positional and
    not integral, lists, tuples, and exact dicts with ASCII keys (whose code point order is their
    UTF-16 order)."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER  # type: ignore[no-any-return]
    if t is float:
        if value != value or value in (_INF, -_INF):
            return False
        r = repr(value)
        return "e" not in r and not r.endswith(".0")
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or not k.isascii() or not _plain(v):
                return False
        return True
    if t is list or t is tuple:
        return all(_plain(v) for v in value)
    return False


_INF = float("inf")


def _not_plain(value: Any) -> Any:
    raise TypeError(f"a value of type `{type(value).__name__}` is not plain JSON")


if json.encoder.c_make_encoder is not None:  # type: ignore[attr-defined]
    # the encoder json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) builds
    # on every call, built once: markers None (no cycle check: `_plain` has walked the value)
    _c_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_plain, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )

    # positional-only: the same type as the fallback `JSONEncoder(...).encode` below
    def _fast(value: Any, /) -> str:
        return "".join(_c_encode(value, 0))

else:  # pragma: no cover - CPython always has the C encoder
    _fast = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
    ).encode


def _serialize(value: Any) -> str:
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _write(value: Any, out: list[str]) -> None:
    # bool before int: True is an int in Python
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json_string(value))
    elif isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            out.append(str(int(value)))
        else:
            raise CanonicalError(
                "integer outside ±(2**53 - 1) cannot be told apart from its neighbours"
            )
    elif isinstance(value, float):
        out.append(format_number(value))
    elif isinstance(value, Mapping):
        _write_object(value, out)
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            try:
                _write(item, out)
            except CanonicalError as err:
                raise err.inside(f"[{i}]") from None
        out.append("]")
    else:
        raise CanonicalError(f"a value of type `{type(value).__name__}` is not JSON")


def _write_object(value: Mapping[Any, Any], out: list[str]) -> None:
    for key in value:
        if not isinstance(key, str):
            raise CanonicalError(f"object key `{key!r}` is not a string")
    # INVARIANT: JCS orders keys by UTF-16 code units; big-endian UTF-16 bytes compare the same way
    # (code point order differs once a key holds both U+E000..U+FFFF and astral characters).
    keys = sorted(value, key=_utf16) if any(not k.isascii() for k in value) else sorted(value)
    out.append("{")
    for i, key in enumerate(keys):
        if i:
            out.append(",")
        out.append(json_string(key))
        out.append(":")
        try:
            _write(value[key], out)
        except CanonicalError as err:
            raise err.inside(f".{key}") from None
    out.append("}")


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


# json's encoder (what json.dumps uses with ensure_ascii=False) escapes exactly what JCS escapes:
# `"`, `\`, and the C0 controls (\b \t \n \f \r by name, the rest as lowercase \u00xx); DEL and
# everything beyond are kept.
json_string: Callable[[str], str] = json.encoder.encode_basestring
"""One string as canonical JSON (the caller ensures it holds no lone surrogate): json's own C
encoder, called directly (a string is written several times for every event)."""


def format_number(value: float) -> str:
    """A double as ECMAScript's Number.prototype.toString writes it (JCS §3.2.2.3).

    >>> [format_number(x) for x in (1.0, -0.0, 0.1, 1e21, 1e-7, 123456789012345680000.0)]
    ['1', '0', '0.1', '1e+21', '1e-7', '123456789012345680000']
    """
    if math.isnan(value) or math.isinf(value):
        raise CanonicalError(f"`{value}` is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip, choosing the closest when several do:
    # the same digits ECMAScript chooses.
    mantissa, _, exp = repr(abs(float(value))).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    stripped = digits.lstrip("0")
    # n: the decimal point sits n digits after the start of `s` (value = 0.s × 10^n)
    n = len(whole) + (int(exp) if exp else 0) - (len(digits) - len(stripped))
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        text = s + "0" * (n - k)
    elif 0 < n <= 21:
        text = s[:n] + "." + s[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + s
    else:
        e = n - 1
        text = (s if k == 1 else s[0] + "." + s[1:]) + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + text
