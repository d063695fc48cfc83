"""Operators of the console: who they are, their roles, how they prove it (a scrypt password
hash or a token), the logins the server holds (the signed cookie carries only a login's id, so
logging out ends it for good), the throttle on failed logins, and the CSRF token each form
carries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
import tomllib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

APPROVER = "approver"
"""The console role that may approve, deny and decide; every operator may read."""

ENV_OPERATORS = "HARNESSC_CONSOLE_OPERATORS"
ENV_SECRET = "HARNESSC_CONSOLE_SECRET"
_N, _R, _P = 2**14, 8, 1


class OperatorsError(ValueError):
    """An operators file or variable that cannot be read; the message says why."""


@dataclass(frozen=True)
class Operator:
    name: str
    roles: tuple[str, ...]
    password_hash: str | None = None
    token_hash: str | None = None

    @property
    def actor(self) -> dict[str, Any]:
        """The operator as the runtime's approver check sees them."""
        return {"user": self.name, "roles": list(self.roles)}

    def may(self, role: str) -> bool:
        return role in self.roles


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """`scrypt$N$r$p$SALT$HASH` (base64): what an operators file stores for a password.

    >>> verify_password("s3cret", hash_password("s3cret"))
    True
    """
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${_N}${_R}${_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        got = hashlib.scrypt(
            password.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(base64.b64decode(digest)),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, base64.b64decode(digest))


def token_hash(token: str) -> str:
    """The sha256 of a bearer token, as an operators file stores it (`token_sha256`)."""
    return hashlib.sha256(token.encode()).hexdigest()


def load_operators(path: str | None) -> dict[str, Operator]:
    """Operators from a TOML or JSON file (`[[operators]]` / `{"operators": [...]}` with
    `name`, `roles`, and `password_hash` or `token_sha256`), else from the JSON in
    $HARNESSC_CONSOLE_OPERATORS."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise OperatorsError(f"cannot read the operators file `{path}`: {error}") from error
        try:
            data: Any = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
            raise OperatorsError(f"the operators file `{path}` is not valid: {error}") from error
        where = path
    else:
        text = os.environ.get(ENV_OPERATORS, "")
        if not text:
            raise OperatorsError(f"no operators: pass --operators FILE or set ${ENV_OPERATORS}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise OperatorsError(f"${ENV_OPERATORS} is not valid JSON: {error}") from error
        where = f"${ENV_OPERATORS}"
    rows = data.get("operators") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise OperatorsError(f"{where}: expected a non-empty list `operators`")
    out: dict[str, Operator] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise OperatorsError(f"{where}: operator #{i + 1} has no string `name`")
        roles = row.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise OperatorsError(f"{where}: `roles` of `{row['name']}` must be a list of strings")
        pw, tok = row.get("password_hash"), row.get("token_sha256")
        if not (isinstance(pw, str) and pw.startswith("scrypt$")) and not isinstance(tok, str):
            raise OperatorsError(
                f"{where}: `{row['name']}` needs `password_hash` (scrypt$…, from "
                "`harnessc console --hash-password`) or `token_sha256`"
            )
        out[row["name"]] = Operator(row["name"], tuple(roles), pw, tok)
    return out


@cache
def _dummy_hash() -> str:
    return hash_password(secrets.token_urlsafe(16))


def authenticate(operators: dict[str, Operator], name: str, secret: str) -> Operator | None:
    """The operator whose password or token `secret` is, or None.

    Every attempt costs one scrypt, whoever it names: an unknown name, or an operator with a
    token only, is checked against a dummy hash, so the time of an answer does not tell which
    names exist."""
    op = operators.get(name)
    stored = op.password_hash if op is not None and op.password_hash else _dummy_hash()
    password_ok = verify_password(secret, stored) and op is not None and bool(op.password_hash)
    if op is None or not secret:
        return None
    if password_ok:
        return op
    if op.token_hash and hmac.compare_digest(token_hash(secret), op.token_hash):
        return op
    return None


class Logins:
    """The logins the server holds: the session cookie carries a login's id, and only an id
    still held here is a login. Logging out ends it at once, for every copy of the cookie;
    a login lasts `ttl_s` (the cookie's own lifetime) at most.

    Held in memory: a restart ends every login, and two console processes do not share them."""

    def __init__(self, ttl_s: float = 8 * 3600, clock: Callable[[], float] = time.monotonic):
        self.ttl_s, self._clock = ttl_s, clock
        self._held: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def open(self, operator: str) -> str:
        """A new login of `operator`: its id, for the cookie."""
        login_id = secrets.token_urlsafe(24)
        with self._lock:
            now = self._clock()
            self._held = {k: v for k, v in self._held.items() if v[1] > now}
            self._held[login_id] = (operator, now + self.ttl_s)
        return login_id

    def operator(self, login_id: object) -> str | None:
        """The operator of a login still held, or None."""
        if not isinstance(login_id, str):
            return None
        with self._lock:
            held = self._held.get(login_id)
            if held is None:
                return None
            if held[1] <= self._clock():
                del self._held[login_id]
                return None
            return held[0]

    def close(self, login_id: object) -> None:
        if isinstance(login_id, str):
            with self._lock:
                self._held.pop(login_id, None)


class LoginThrottle:
    """Failed logins per name and per address: after `free` failures within `window_s`, each
    further attempt under that name or from that address waits 2**(failures - free) seconds
    after the last failure (at most `cap_s`) and is answered 429 meanwhile. Failures age out
    of the window, so no one is locked out for good (which would let anyone lock operators
    out by failing under their names)."""

    def __init__(
        self,
        *,
        free: int = 5,
        window_s: float = 15 * 60,
        cap_s: float = 15 * 60,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free, self.window_s, self.cap_s, self._clock = free, window_s, cap_s, clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.get(key)
        if failures is None:
            return deque()
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[key]
        return failures

    def wait_s(self, keys: Iterable[str]) -> float:
        """Seconds before an attempt under these keys is heard (0: now)."""
        with self._lock:
            now = self._clock()
            waits = [0.0]
            for key in keys:
                failures = self._recent(key, now)
                if len(failures) >= self.free:
                    delay = min(self.cap_s, 2.0 ** (len(failures) - self.free))
                    waits.append(failures[-1] + delay - now)
            return max(waits)

    def failed(self, keys: Iterable[str]) -> None:
        with self._lock:
            now = self._clock()
            for key in keys:
                self._recent(key, now)
                self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)


def session_secret() -> str:
    """The key that signs session cookies: $HARNESSC_CONSOLE_SECRET, or a fresh one per process
    (every login ends when the console restarts)."""
    return os.environ.get(ENV_SECRET) or secrets.token_urlsafe(32)


def new_csrf() -> str:
    return secrets.token_urlsafe(24)
