"""Operators of the console: who they are, their roles, how they prove it (a scrypt password
hash or a token), the signed session cookie and the CSRF token each form carries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import tomllib
from dataclasses import dataclass
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


def authenticate(operators: dict[str, Operator], name: str, secret: str) -> Operator | None:
    """The operator whose password or token `secret` is, or None."""
    op = operators.get(name)
    if op is None or not secret:
        return None
    if op.password_hash and verify_password(secret, op.password_hash):
        return op
    if op.token_hash and hmac.compare_digest(token_hash(secret), op.token_hash):
        return op
    return None


def session_secret() -> str:
    """The key that signs session cookies: $HARNESSC_CONSOLE_SECRET, or a fresh one per process
    (every login ends when the console restarts)."""
    return os.environ.get(ENV_SECRET) or secrets.token_urlsafe(32)


def new_csrf() -> str:
    return secrets.token_urlsafe(24)
