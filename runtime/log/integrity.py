"""What a verification of the event log can prove beyond its own chain: checkpoints of its head
kept elsewhere, and the optional HMAC key that makes the chain unforgeable.

A plain chain proves internal consistency only: whoever can write the log file can remove its
newest events or rewrite it from any event on and recompute every hash. Two things close that:

- a `Checkpoint` (`position` and `hash` of the head, from `store.checkpoint()` or
  `harnessc log head`) kept outside the log: `verify(anchor=checkpoint)` then finds a log that
  lost events (it ends before the checkpoint) or was rewritten up to it (the hash differs);
- a `LogKey` (from `HARNESSC_LOG_KEY` or the file named by `HARNESSC_LOG_KEY_FILE`, never the
  spec): each appended event also stores `mac`, an HMAC-SHA256 of its hash, so a rewritten chain
  fails verification with the key even when every plain hash was recomputed. A checkpoint taken
  with the key carries a `tag`, an HMAC of its position and hash, so the checkpoint cannot be
  forged either.

>>> key = LogKey(b"k" * 32)
>>> c = Checkpoint.at(3, "ab" * 32, key)
>>> Checkpoint.parse(c.to_text()) == c
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LOG_KEY_ENV",
    "LOG_KEY_FILE_ENV",
    "Checkpoint",
    "CheckpointError",
    "LogKey",
    "LogKeyError",
]

LOG_KEY_ENV = "HARNESSC_LOG_KEY"
LOG_KEY_FILE_ENV = "HARNESSC_LOG_KEY_FILE"
MIN_KEY_BYTES = 32
_PREFIX = "harnessc-log"
_HEX = frozenset("0123456789abcdef")


class LogKeyError(ValueError):
    """A log key that cannot be used: too short, both variables set, an unreadable key file."""


class CheckpointError(ValueError):
    """Text that is not a checkpoint."""


class LogKey:
    """The secret that keys the event log's MACs (HMAC-SHA256), at least 32 bytes.

    Generate one with `openssl rand -hex 32` and keep it where the application's other secrets
    are; whoever holds it can forge the log, so it never goes into a spec or the log itself.
    """

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes) or len(secret) < MIN_KEY_BYTES:
            raise LogKeyError(f"a log key needs at least {MIN_KEY_BYTES} bytes")
        self._secret = secret

    def __repr__(self) -> str:
        return "LogKey(…)"  # never the secret

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LogKey:
        """The key in a file (one trailing line break ignored)."""
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise LogKeyError(f"cannot read the log key file `{path}`: {error.strerror}") from None
        return cls(data.rstrip(b"\r\n"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LogKey | None:
        """`HARNESSC_LOG_KEY` (the key as text) or `HARNESSC_LOG_KEY_FILE` (a file holding
        it), or None when neither is set."""
        env = os.environ if environ is None else environ
        text, file = env.get(LOG_KEY_ENV) or None, env.get(LOG_KEY_FILE_ENV) or None
        if text is not None and file is not None:
            raise LogKeyError(f"set {LOG_KEY_ENV} or {LOG_KEY_FILE_ENV}, not both")
        if file is not None:
            return cls.from_file(file)
        return cls(text.encode("utf-8")) if text is not None else None

    def event_mac(self, event_hash: str) -> str:
        """The MAC stored with an event: it covers the event's hash, hence the whole chain up
        to it."""
        return self._mac("event", event_hash)

    def checkpoint_tag(self, position: int, head_hash: str) -> str:
        return self._mac("checkpoint", f"{position}:{head_hash}")

    def _mac(self, purpose: str, text: str) -> str:
        # the purpose keeps an event's MAC from serving as a checkpoint's tag and back
        message = f"{_PREFIX}:{purpose}:{text}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """The head of the log at one moment, to keep outside it: `harnessc-log:POSITION:HASH`,
    with `:TAG` when it was taken with the log key.

    >>> Checkpoint.parse("harnessc-log:0:" + "0" * 64).position
    0
    """

    position: int
    hash: str
    tag: str | None = None

    @classmethod
    def at(cls, position: int, head_hash: str, key: LogKey | None) -> Checkpoint:
        tag = key.checkpoint_tag(position, head_hash) if key is not None else None
        return cls(position, head_hash, tag)

    def to_text(self) -> str:
        text = f"{_PREFIX}:{self.position}:{self.hash}"
        return f"{text}:{self.tag}" if self.tag is not None else text

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "hash": self.hash, "tag": self.tag}

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """A checkpoint from its text form or its JSON object (as `harnessc log head` prints
        them)."""
        text = text.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                raise CheckpointError("the checkpoint is not valid JSON") from None
            if not isinstance(value, dict) or set(value) - {"position", "hash", "tag"}:
                raise CheckpointError("a checkpoint object has `position`, `hash` and `tag`")
            return cls._checked(value.get("position"), value.get("hash"), value.get("tag"))
        parts = text.split(":")
        if parts[0] != _PREFIX or len(parts) not in (3, 4):
            raise CheckpointError(f"a checkpoint reads `{_PREFIX}:POSITION:HASH` or `…:HASH:TAG`")
        position = int(parts[1]) if parts[1].isdigit() and parts[1].isascii() else None
        return cls._checked(position, parts[2], parts[3] if len(parts) == 4 else None)

    @classmethod
    def of(cls, anchor: Checkpoint | tuple[int, str] | str) -> Checkpoint:
        """An anchor as `verify` accepts it: a checkpoint, its text, or `store.head()`."""
        if isinstance(anchor, Checkpoint):
            return anchor
        if isinstance(anchor, str):
            return cls.parse(anchor)
        position, head_hash = anchor
        return cls._checked(position, head_hash, None)

    @classmethod
    def _checked(cls, position: object, head_hash: object, tag: object) -> Checkpoint:
        if type(position) is not int or position < 0:
            raise CheckpointError("a checkpoint's position is a whole number")
        for name, value in (("hash", head_hash), ("tag", tag)):
            if value is None and name == "tag":
                continue
            if not (isinstance(value, str) and len(value) == 64 and set(value) <= _HEX):
                raise CheckpointError(f"a checkpoint's {name} is 64 lowercase hex digits")
        assert isinstance(head_hash, str) and (tag is None or isinstance(tag, str))
        return cls(position, head_hash, tag)
