"""The bearer tokens of `harnessc serve`: one per agent (or approver), issued by
`harnessc serve token issue`, stored as their SHA-256 only, revocable while the server runs.

A token names the actor it speaks for (user, role, roles, tenant) and, optionally, the agents
it may open sessions of. The server reads the file again whenever it changes on disk, so a
revocation takes effect at the next request. A token is 32 random bytes: its SHA-256 is as hard
to invert as the token is to guess, so no slow hash is needed (a password would need one).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PREFIX = "hct_"
"""What every token starts with, so a leaked one is recognised by secret scanners."""


class TokensError(ValueError):
    """A tokens file that cannot be read or written, or a name that is not right; the message
    says why."""


@dataclass(frozen=True)
class Token:
    """A token as stored: its name, the SHA-256 of its text, the actor it speaks for, the
    agents it may open sessions of (empty: any), when it was issued and revoked."""

    name: str
    sha256: str
    actor: Mapping[str, Any]
    agents: tuple[str, ...] = ()
    issued_at: str = ""
    revoked_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "actor": dict(self.actor),
            "agents": list(self.agents),
            "issued_at": self.issued_at,
            "revoked_at": self.revoked_at,
        }


def token_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Tokens:
    """The tokens file (JSON): read on first use and again whenever its modification time or
    size changes; written atomically (a temporary file renamed over it, mode 0600)."""

    path: Path
    _by_hash: dict[str, Token] = field(default_factory=dict)
    _stamp: tuple[int, int] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    # -- reading ----------------------------------------------------------------------------

    def all(self) -> list[Token]:
        self._fresh()
        return sorted(self._by_hash.values(), key=lambda t: t.name)

    def verify(self, text: str) -> Token | None:
        """The live token whose text this is, or None (unknown or revoked)."""
        self._fresh()
        digest = token_sha256(text)
        found = self._by_hash.get(digest)
        if found is None or found.revoked_at is not None:
            return None
        # the lookup is by hash; the comparison is constant-time all the same
        return found if hmac.compare_digest(found.sha256, digest) else None

    def _fresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            with self._lock:
                self._by_hash, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        with self._lock:
            self._by_hash = {t.sha256: t for t in _read(self.path)}
            self._stamp = stamp

    # -- writing ----------------------------------------------------------------------------

    def issue(
        self, name: str, actor: Mapping[str, Any], agents: Sequence[str] = ()
    ) -> tuple[str, Token]:
        """A new token (its text, shown once, and what is stored). `name` must be new."""
        if not name or len(name) > 128 or not name.isprintable():
            raise TokensError("a token's name is 1 to 128 printable characters")
        user = actor.get("user")
        if not isinstance(user, str) or not user:
            raise TokensError("a token speaks for a user: give --user")
        tokens = _read(self.path) if self.path.exists() else []
        if any(t.name == name for t in tokens):
            raise TokensError(f"a token named `{name}` exists; revoke it or choose another name")
        text = PREFIX + secrets.token_urlsafe(32)
        token = Token(name, token_sha256(text), dict(actor), tuple(agents), _now())
        self._write([*tokens, token])
        return text, token

    def revoke(self, name: str) -> Token:
        tokens = _read(self.path) if self.path.exists() else []
        for i, t in enumerate(tokens):
            if t.name == name:
                if t.revoked_at is not None:
                    return t
                tokens[i] = Token(t.name, t.sha256, t.actor, t.agents, t.issued_at, _now())
                self._write(tokens)
                return tokens[i]
        raise TokensError(f"no token named `{name}`")

    def _write(self, tokens: list[Token]) -> None:
        text = json.dumps({"tokens": [t.to_dict() for t in tokens]}, indent=2) + "\n"
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError as error:
            raise TokensError(f"cannot write `{self.path}`: {error.strerror}") from None


def _read(path: Path) -> list[Token]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TokensError(f"cannot read `{path}`: {error.strerror}") from None
    except ValueError as error:
        raise TokensError(f"`{path}` is not JSON: {error}") from None
    rows = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise TokensError(f"`{path}` holds no `tokens` list")
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(
                Token(
                    name=str(row["name"]),
                    sha256=str(row["sha256"]),
                    actor=dict(row["actor"]),
                    agents=tuple(str(a) for a in row.get("agents") or ()),
                    issued_at=str(row.get("issued_at") or ""),
                    revoked_at=row.get("revoked_at"),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise TokensError(f"`{path}`: token {i + 1} lacks a name, sha256 or actor") from None
    return out
